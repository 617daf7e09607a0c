// dm-verity: geometry, superblock, table lines, tree format/verify against
// veritysetup's golden trees, tamper detection, and the read path policies.
#include "test_util.hpp"
#include "verity_util.hpp"

#include <blkcrypt/verity/superblock.hpp>
#include <blkcrypt/verity/table.hpp>
#include <blkcrypt/verity/target.hpp>
#include <blkcrypt/verity/tree.hpp>

#include <catch2/catch.hpp>

#include <random>
#include <thread>

using namespace blkcrypt;
using namespace blkcrypt::verity;
using namespace verity_test;
using dm::MemoryStore;

namespace {

using testutil::registry;

struct Image {
    VerityParams p;
    std::shared_ptr<MemoryStore> data, hash;
    FormatResult r;
};

Image make_image(const VerityParams& p, std::vector<uint8_t> data, TreeOptions opts = {}) {
    Image img{p, std::make_shared<MemoryStore>(data.size()), nullptr, {}};
    img.data->data() = std::move(data);
    auto g = plan_tree(registry(), p);
    REQUIRE(g.ok());
    img.hash = std::make_shared<MemoryStore>(g->hash_device_size(p));
    auto r = format_tree(registry(), p, *img.data, *img.hash, opts);
    if (!r) FAIL(r.error().message);
    img.r = std::move(*r);
    return img;
}

VerityTable table_for(const Image& img) {
    return make_verity_table(img.p, img.r.geometry, img.r.root_hash, "data", "hash");
}

}  // namespace

TEST_CASE("verity geometry follows veritysetup's layout", "[verity]") {
    VerityParams p;
    p.data_blocks = 256;
    auto g = compute_geometry(p, 32);
    REQUIRE(g.ok());
    CHECK(g->hashes_per_block == 128);
    CHECK(g->hash_start_block == 1);  // the superblock takes block 0
    REQUIRE(g->levels() == 2);
    CHECK(g->level_blocks == std::vector<uint64_t>{2, 1});
    CHECK(g->level_start == std::vector<uint64_t>{2, 1});  // top level stored first
    CHECK(g->hash_device_size(p) == 4 * 4096);

    p.data_blocks = 1;
    g = compute_geometry(p, 32);
    CHECK(g->levels() == 0);
    p.hash_type = 1;
    p.hash_block_size = 512;
    p.data_blocks = 17;
    g = compute_geometry(p, 20);  // sha1: 32-byte slots in format 1, 16 per 512-byte block
    CHECK(g->slot_size == 32);
    CHECK(g->hashes_per_block == 16);
    CHECK(g->level_blocks == std::vector<uint64_t>{2, 1});

    p.data_block_size = 3000;
    CHECK_FALSE(compute_geometry(p, 32).ok());
    p.data_block_size = 4096;
    p.salt.resize(257);
    CHECK_FALSE(compute_geometry(p, 32).ok());
    p.salt.clear();
    p.hash_offset = 100;
    CHECK_FALSE(compute_geometry(p, 32).ok());
}

TEST_CASE("verity superblock round trip and malformed fields", "[verity]") {
    VerityParams p;
    p.hash_name = "SHA512";
    p.data_blocks = 12345;
    p.salt = {1, 2, 3};
    p.uuid[0] = 0xab;
    auto sb = encode_superblock(p);
    REQUIRE(sb.ok());
    auto back = decode_superblock(*sb);
    REQUIRE(back.ok());
    CHECK(back->hash_name == "sha512");  // lower-cased like veritysetup
    CHECK(back->data_blocks == 12345);
    CHECK(back->salt == p.salt);
    CHECK(back->uuid == p.uuid);

    auto broken = [&](std::size_t off, uint8_t v, const char* what) {
        auto copy = *sb;
        copy[off] = v;
        auto r = decode_superblock(copy);
        REQUIRE_FALSE(r.ok());
        CHECK(r.status() == Status::Corrupt);
        CHECK_THAT(r.error().message, Catch::Contains(what));
    };
    broken(0, 'X', "magic");
    broken(8, 2, "version");
    broken(12, 7, "hash type");
    broken(65, 0x13, "data block size");    // 4096 -> 0x1310
    broken(69, 0x01, "hash block size");    // 4096 -> 0x0110
    broken(81, 0x02, "salt size");          // 515 bytes
    auto no_nul = *sb;
    std::fill(no_nul.begin() + 32, no_nul.begin() + 64, 'a');
    CHECK_THAT(decode_superblock(no_nul).error().message, Catch::Contains("not terminated"));
    CHECK_FALSE(decode_superblock(ConstBytes(*sb).first(100)).ok());
    p.hash_name = std::string(32, 'x');
    CHECK_FALSE(encode_superblock(p).ok());
}

TEST_CASE("verity table lines parse and print as dmsetup shows them", "[verity]") {
    const std::string line =
        "0 2048 verity 1 /dev/sda /dev/sdb 4096 4096 256 1 sha256 "
        "2c874c3c92f9e3dd55c59a2ad0558f13e147abe2ff3a64bb2172430fbdd6f189 0a0b 3 ignore_zero_blocks "
        "check_at_most_once ignore_corruption";
    auto t = parse_verity_line(line);
    REQUIRE(t.ok());
    CHECK(t->params.data_blocks == 256);
    CHECK(t->hash_start_block == 1);
    CHECK(t->params.salt == std::vector<uint8_t>{0x0a, 0x0b});
    CHECK(t->ignore_zero_blocks);
    CHECK(t->check_at_most_once);
    CHECK(t->on_corruption == CorruptionMode::Ignore);
    CHECK(t->line() ==
          "0 2048 verity 1 /dev/sda /dev/sdb 4096 4096 256 1 sha256 "
          "2c874c3c92f9e3dd55c59a2ad0558f13e147abe2ff3a64bb2172430fbdd6f189 0a0b 3 ignore_corruption "
          "ignore_zero_blocks check_at_most_once");
    const char* bad[] = {
        "0 8 verity 1 a b 4096 4096 1 1 sha256 00",                      // too few words
        "0 8 verity 2 a b 4096 4096 1 1 sha256 00 -",                    // version
        "0 8 verity 1 a b 4000 4096 1 1 sha256 00 -",                    // block size
        "0 8 verity 1 a b 4096 4096 1 1 sha256 0g -",                    // digest
        "0 8 verity 1 a b 4096 4096 1 1 sha256 00 -- ",                  // salt
        "0 8 verity 1 a b 4096 4096 1 1 sha256 00 - 2 ignore_corruption",  // count
        "0 8 verity 1 a b 4096 4096 1 1 sha256 00 - 1 frobnicate",
        "0 8 verity 1 a b 4096 4096 1 1 sha256 00 - 2 fec_roots 2",
        "0 16 verity 1 a b 4096 4096 1 1 sha256 00 -",                   // longer than the tree
        "0 8 crypt 1 a b 4096 4096 1 1 sha256 00 -",
    };
    for (const char* b : bad) {
        INFO(b);
        CHECK_FALSE(parse_verity_line(b).ok());
    }
}

TEST_CASE("verity format equals veritysetup's golden trees, sync and async", "[verity][golden]") {
    for (const auto& c : golden_cases()) {
        INFO(c.name << ": " << c.args);
        const auto data = ctr_data(registry(), c.data_size, c.iv);
        const auto p = params_from_args(c.args, c.data_size);
        for (int variant = 0; variant < 3; ++variant) {
            TreeOptions o;
            o.threads = variant == 0 ? 1 : 3;
            VerityParams pv = p;
            if (variant == 2) {  // an async driver through ahash requests
                pv.hash_name = "cryptd(" + p.hash_name + ")";
                o.mode = HashMode::Async;
            }
            auto img = make_image(pv, data, o);
            CHECK(hex(img.r.root_hash) == c.root);
            // The superblock records the algorithm, not the cryptd wrapper.
            CHECK(img.r.params.hash_name == p.hash_name);
            CHECK(img.hash->size() == c.hash_size);
            CHECK(sha256_hex(img.hash->data()) == c.hash_sha256);
            auto rep = verify_tree(registry(), pv, img.r.root_hash, *img.data, *img.hash, o);
            REQUIRE(rep.ok());
            CHECK(rep->ok());
        }
    }
}

TEST_CASE("verity verify and the read path name every flipped byte's block", "[verity][tamper]") {
    std::mt19937_64 rng(42);
    struct Shape { const char* hash; uint32_t dbs, hbs, type; std::size_t size; };
    const Shape shapes[] = {{"sha256", 512, 512, 1, 160 * 1024},   // 4 levels
                            {"sha1", 1024, 4096, 0, 96 * 1024},
                            {"sha512", 4096, 1024, 1, 64 * 1024}};
    for (const auto& s : shapes) {
        VerityParams p;
        p.hash_name = s.hash;
        p.data_block_size = s.dbs;
        p.hash_block_size = s.hbs;
        p.hash_type = s.type;
        p.data_blocks = s.size / s.dbs;
        p.salt = {9, 8, 7};
        auto img = make_image(p, ctr_data(registry(), s.size, "00000000000000000000000000000042"));
        const auto& g = img.r.geometry;
        const uint64_t tree_begin = g.hash_start_block * s.hbs;
        const uint64_t tree_end = g.hash_device_size(p);
        const auto hb_is_top = [&](uint64_t off) { return off / s.hbs == g.level_start.back(); };
        for (int i = 0; i < 120; ++i) {
            const bool in_data = i % 2 == 0;
            auto& bytes = in_data ? img.data->data() : img.hash->data();
            const uint64_t off = in_data ? rng() % s.size : tree_begin + rng() % (tree_end - tree_begin);
            const uint8_t mask = static_cast<uint8_t>(1u << (rng() % 8));
            INFO(s.hash << (in_data ? " data" : " hash") << " byte " << off);
            bytes[off] ^= mask;
            auto rep = verify_tree(registry(), p, img.r.root_hash, *img.data, *img.hash);
            REQUIRE(rep.ok());
            REQUIRE(rep->corruptions.size() == 1);
            const auto& c = rep->corruptions[0];
            if (in_data) {
                CHECK(c.kind == Corruption::DataBlock);
                CHECK(c.block == off / s.dbs);
            } else {
                const uint64_t hb = off / s.hbs;
                CHECK(c.block == hb);
                // The top block too: it no longer matches its children (veritysetup: exit 2).
                CHECK(c.kind == Corruption::HashBlock);
            }
            // The read path refuses every block whose check involves the flip.
            auto t = VerityTarget::create(registry(), table_for(img), img.data, img.hash);
            REQUIRE(t.ok());
            std::vector<uint8_t> buf(s.dbs);
            const uint64_t victim = in_data ? off / s.dbs : 0;
            if (in_data || hb_is_top(off)) {
                CHECK((*t)->read(victim * s.dbs, buf) == Status::Corrupt);
                CHECK((*t)->status_char() == 'C');
            }
            bytes[off] ^= mask;
        }
        auto rep = verify_tree(registry(), p, img.r.root_hash, *img.data, *img.hash);
        CHECK(rep->ok());
        // An intact tree under a wrong root hash: only the root is named.
        auto wrong = img.r.root_hash;
        wrong[0] ^= 1;
        rep = verify_tree(registry(), p, wrong, *img.data, *img.hash);
        REQUIRE(rep.ok());
        REQUIRE(rep->corruptions.size() == 1);
        CHECK(rep->corruptions[0].kind == Corruption::RootHash);
        // A nonzero byte in the top block's unused tail is a corrupt hash block.
        const uint64_t top = g.level_start.back() * s.hbs;
        img.hash->data()[top + s.hbs - 1] ^= 0x80;
        rep = verify_tree(registry(), p, img.r.root_hash, *img.data, *img.hash);
        REQUIRE(rep.ok());
        REQUIRE(rep->corruptions.size() == 1);
        CHECK(rep->corruptions[0].kind == Corruption::HashBlock);
        CHECK(rep->corruptions[0].block == g.level_start.back());
        img.hash->data()[top + s.hbs - 1] ^= 0x80;
    }
}

TEST_CASE("verity read path: whole reads, policies, small cache, threads, async", "[verity][target]") {
    VerityParams p;
    p.data_block_size = 4096;
    p.hash_block_size = 512;  // 3 levels over 200 blocks
    p.data_blocks = 200;
    p.salt = {1};
    auto data = ctr_data(registry(), 200 * 4096, "000000000000000000000000000000aa");
    std::fill(data.begin() + 10 * 4096, data.begin() + 20 * 4096, 0);  // zero blocks 10..19
    auto img = make_image(p, data);
    const auto original = img.data->data();

    SECTION("a clean image reads back whole, from 4 threads, with a 2-block cache, sync and async") {
        for (HashMode mode : {HashMode::Sync, HashMode::Async}) {
            auto table = table_for(img);
            if (mode == HashMode::Async) table.params.hash_name = "cryptd(sha256)";
            VerityTargetOptions o;
            o.cache_blocks = 2;
            o.mode = mode;
            auto t = VerityTarget::create(registry(), table, img.data, img.hash, o);
            REQUIRE(t.ok());
            std::vector<uint8_t> out(original.size());
            std::vector<std::thread> threads;
            std::atomic<int> bad{0};
            for (int k = 0; k < 4; ++k)
                threads.emplace_back([&, k] {
                    for (uint64_t b = k; b < 200; b += 4)
                        if ((*t)->read(b * 4096, Bytes(out).subspan(b * 4096, 4096)) != Status::Ok) ++bad;
                });
            for (auto& th : threads) th.join();
            CHECK(bad == 0);
            CHECK(out == original);
            CHECK((*t)->status_char() == 'V');
            CHECK((*t)->stats().data_blocks_verified == 200);
            std::vector<uint8_t> all(original.size());
            CHECK((*t)->read(0, all) == Status::Ok);  // one multi-block read
            CHECK(all == original);
        }
    }
    SECTION("misaligned and out-of-range reads are refused") {
        auto t = VerityTarget::create(registry(), table_for(img), img.data, img.hash);
        std::vector<uint8_t> buf(4096);
        CHECK((*t)->read(100, buf) == Status::Invalid);
        CHECK((*t)->read(200 * 4096, buf) == Status::IoError);
    }
    SECTION("ignore_corruption logs and returns the data") {
        img.data->data()[5 * 4096 + 7] ^= 1;
        auto table = table_for(img);
        table.on_corruption = CorruptionMode::Ignore;
        std::vector<Corruption> seen;
        VerityTargetOptions o;
        o.log = [&](const Corruption& c) { seen.push_back(c); };
        auto t = VerityTarget::create(registry(), table, img.data, img.hash, o);
        std::vector<uint8_t> buf(4096);
        CHECK((*t)->read(5 * 4096, buf) == Status::Ok);
        CHECK(buf[7] == (original[5 * 4096 + 7] ^ 1));
        REQUIRE(seen.size() == 1);
        CHECK(seen[0].block == 5);
        CHECK((*t)->status_char() == 'C');
    }
    SECTION("ignore_zero_blocks returns zeros for zero-hash blocks without checking them") {
        img.data->data()[12 * 4096] = 0xff;  // a zero block, now corrupt
        auto table = table_for(img);
        std::vector<uint8_t> buf(4096, 0x55);
        auto strict = VerityTarget::create(registry(), table, img.data, img.hash);
        CHECK((*strict)->read(12 * 4096, buf) == Status::Corrupt);
        table.ignore_zero_blocks = true;
        auto t = VerityTarget::create(registry(), table, img.data, img.hash);
        CHECK((*t)->read(12 * 4096, buf) == Status::Ok);
        CHECK(buf == std::vector<uint8_t>(4096, 0));
        CHECK((*t)->stats().zero_blocks_skipped == 1);
    }
    SECTION("check_at_most_once verifies a block on its first read only") {
        auto table = table_for(img);
        table.check_at_most_once = true;
        auto t = VerityTarget::create(registry(), table, img.data, img.hash);
        std::vector<uint8_t> buf(4096);
        CHECK((*t)->read(30 * 4096, buf) == Status::Ok);
        img.data->data()[30 * 4096] ^= 1;
        CHECK((*t)->read(30 * 4096, buf) == Status::Ok);  // not checked again
        CHECK((*t)->read(31 * 4096, buf) == Status::Ok);
        table.check_at_most_once = false;
        auto fresh = VerityTarget::create(registry(), table, img.data, img.hash);
        CHECK((*fresh)->read(30 * 4096, buf) == Status::Corrupt);
    }
    SECTION("a wrong root hash fails every read") {
        auto table = table_for(img);
        table.root_hash[0] ^= 1;
        auto t = VerityTarget::create(registry(), table, img.data, img.hash);
        std::vector<uint8_t> buf(4096);
        CHECK((*t)->read(0, buf) == Status::Corrupt);
    }
    SECTION("bad set-ups are refused") {
        auto table = table_for(img);
        table.root_hash.pop_back();
        CHECK_FALSE(VerityTarget::create(registry(), table, img.data, img.hash).ok());
        table = table_for(img);
        table.params.hash_name = "hmac(sha256)";
        CHECK_FALSE(VerityTarget::create(registry(), table, img.data, img.hash).ok());
        table.params.hash_name = "nosuchhash";
        CHECK_FALSE(VerityTarget::create(registry(), table, img.data, img.hash).ok());
        auto small = std::make_shared<MemoryStore>(1000);
        CHECK_FALSE(VerityTarget::create(registry(), table_for(img), img.data, small).ok());
    }
}

TEST_CASE("format refuses short devices and overlapping in-file trees", "[verity]") {
    VerityParams p;
    p.data_blocks = 4;
    MemoryStore data(3 * 4096), hash(4 * 4096);
    auto r = format_tree(registry(), p, data, hash);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("data device"));
    MemoryStore data4(4 * 4096), tiny(4096);
    CHECK_THAT(format_tree(registry(), p, data4, tiny).error().message, Catch::Contains("hash device"));
    MemoryStore same(16 * 4096);
    p.hash_offset = 4096;
    CHECK_THAT(format_tree(registry(), p, same, same).error().message, Catch::Contains("overlaps"));
    p.hash_offset = 4 * 4096;
    CHECK(format_tree(registry(), p, same, same).ok());
}
