// integrity::format against the kernel: the first 64 KiB (superblock and
// journal head) of what format writes equal what integritysetup 2.6.1 and
// Debian 12's kernel wrote for the same parameters and salt
// (tests/golden/integrity/CASE.head.gz); the tags of zeros that replace the
// wipe pass equal TagHash's for every hash, and, with ZeroTags' fast path,
// for every sector.
#include "paths.hpp"
#include "golden_files.hpp"
#include "test_util.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/integrity/format.hpp>
#include <blkcrypt/integrity/geometry.hpp>
#include <blkcrypt/integrity/journal.hpp>
#include <blkcrypt/integrity/superblock.hpp>
#include <blkcrypt/integrity/tag_hash.hpp>

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>

using namespace blkcrypt;
using namespace blkcrypt::integrity;
using testutil::registry;

namespace {

const std::string kGolden = std::string(testutil::kSourceDir) + "/tests/golden/integrity/";

struct GoldenCase {
    const char* name;
    const char* hash;
    uint16_t tag = 0;  // 0: the digest size
    uint32_t sector = 512;
    char mode = 'J';
    uint32_t interleave = kDefaultInterleaveSectors;
    uint32_t journal_sectors = 0;
    bool fix_hmac = true;
};

// record.sh's CASES, as integritysetup's options set the table.
// (--integrity-legacy-padding does not reach 2.6.1's format: fix_padding stays.)
const GoldenCase kCases[] = {
    {"crc32c-default", "crc32c"},
    {"sha256-odd", "sha256"},
    {"hmac-sha256", "hmac(sha256)"},
    {"sector4096", "crc32c", 0, 4096},
    {"bitmap", "crc32c", 0, 512, 'B'},
    {"nojournal", "crc32c", 0, 512, 'D'},
    {"interleave4096", "crc32c", 0, 512, 'J', 4096},
    {"meta-device", "crc32c"},
    {"journal-size", "crc32", 8, 512, 'J', kDefaultInterleaveSectors, 2048},
    {"legacy-flags", "crc32c", 0, 512, 'J', kDefaultInterleaveSectors, 0, false},
    {"legacy-bitmap", "crc32c", 0, 512, 'B', kDefaultInterleaveSectors, 0, false},
    {"legacy-meta", "crc32c", 0, 512, 'J', kDefaultInterleaveSectors, 0, false},
};

const uint8_t kHmacKey[] = "0123456789abcdef0123456789ABCDEF";  // record.sh's /tmp/key

FormatOptions options_for(const GoldenCase& c, const std::array<uint8_t, kSaltSize>& salt) {
    FormatOptions o;
    o.internal_hash = c.hash;
    if (std::string(c.hash).starts_with("hmac")) o.key = ConstBytes(kHmacKey, 32);
    o.params.tag_size = c.tag;
    o.params.sector_size = c.sector;
    o.params.mode = c.mode;
    o.params.interleave_sectors = c.interleave;
    o.params.journal_sectors = c.journal_sectors;
    o.params.fix_hmac = c.fix_hmac;
    o.params.salt = salt;
    o.random_salt = false;
    return o;
}

}  // namespace

TEST_CASE("integrity format: superblock and journal head equal the kernel's", "[integrity][format][golden]") {
    for (const auto& c : kCases) {
        DYNAMIC_SECTION(c.name) {
            const auto info = testutil::read_info(kGolden + c.name + ".info");
            const auto head = testutil::decompress("gzip", kGolden + std::string(c.name) + ".head.gz");
            REQUIRE(head.size() == 65536);
            std::array<uint8_t, kSaltSize> salt{};
            std::memcpy(salt.data(), head.data() + 48, kSaltSize);
            MemoryStore image(std::stoull(info.at("size_bytes")));
            std::optional<MemoryStore> data;
            if (info.count("data_device_bytes")) data.emplace(std::stoull(info.at("data_device_bytes")));
            // Whatever the device held before: format zeroes what it must.
            std::fill(image.data().begin(), image.data().end(), 0x5a);
            auto o = options_for(c, salt);
            o.compute_tags = false;  // --no-wipe, as record.sh formatted
            auto f = format(registry(), image, data ? &*data : nullptr, o);
            REQUIRE(f);
            std::size_t first_diff = 0;
            while (first_diff < head.size() && image.data()[first_diff] == head[first_diff]) ++first_diff;
            INFO("first difference at byte " << first_diff);
            // Past the journal the kernel's device held zeros; ours the 0x5a
            // fill (--no-wipe touches neither tags nor data).
            const uint64_t journal_end = f->geometry.initial_sectors * kSectorSize;
            CHECK(first_diff >= std::min<uint64_t>(journal_end, head.size()));
            CHECK(f->superblock.provided_data_sectors == std::stoull(info.at("provided_sectors")));
        }
    }
}

TEST_CASE("integrity format: the tags of zeros equal TagHash's", "[integrity][format]") {
    struct Alg {
        const char* name;
        uint16_t tag;
        uint32_t sector;
        bool salted;
        bool expect_linear;
    };
    const Alg algs[] = {
        {"crc32c", 4, 512, true, true},   {"crc32c", 4, 4096, false, true}, {"crc32", 4, 512, true, true},
        {"crc32c", 8, 512, true, true},   {"crc32c", 2, 1024, true, true},  {"crc32", 8, 2048, false, true},
        {"sha256", 32, 512, true, false}, {"sha1", 16, 4096, true, false},  {"hmac(sha256)", 32, 512, true, false},
    };
    std::mt19937_64 rng(24);
    for (const auto& a : algs) {
        DYNAMIC_SECTION(a.name << " tag " << a.tag << " sector " << a.sector << (a.salted ? " salted" : "")) {
            Superblock sb;
            sb.tag_size = a.tag;
            sb.log2_sectors_per_block = static_cast<uint8_t>(__builtin_ctz(a.sector / 512));
            if (a.salted) {
                sb.flags = kFlagFixedHmac;
                for (auto& b : sb.salt) b = static_cast<uint8_t>(rng());
            }
            std::vector<uint8_t> key;
            if (std::string(a.name).starts_with("hmac")) key.assign(32, 0x42);
            auto th = TagHash::create(registry(), a.name, key, sb);
            REQUIRE(th);
            auto z = ZeroTags::create(*th);
            REQUIRE(z);
            CHECK(z->linear() == a.expect_linear);
            const uint64_t spb = a.sector / 512;
            for (int i = 0; i < 40; ++i) {
                uint64_t sector = (i < 8 ? uint64_t(i) * 1000003 : rng() >> (i % 40)) / spb * spb;
                const std::size_t blocks = 17;
                if (sector > UINT64_MAX - blocks * spb) sector -= blocks * spb;
                std::vector<uint8_t> zeros(blocks * a.sector), want(blocks * a.tag), got(blocks * a.tag);
                REQUIRE(th->compute(sector, zeros, want) == Status::Ok);
                REQUIRE(z->fill(sector, got) == Status::Ok);
                INFO("sector " << sector);
                CHECK(testutil::hex(got) == testutil::hex(want));
            }
        }
    }
}

TEST_CASE("integrity format: every tag of a formatted image checks, the data reads as zeros",
          "[integrity][format]") {
    for (bool meta : {false, true}) {
        DYNAMIC_SECTION((meta ? "metadata device" : "interleaved")) {
            MemoryStore image(meta ? 2 << 20 : 24 << 20);
            std::optional<MemoryStore> data;
            if (meta) data.emplace(8 << 20);
            std::fill(image.data().begin(), image.data().end(), 0x77);  // old content everywhere
            if (data) std::fill(data->data().begin(), data->data().end(), 0x77);
            FormatOptions o;
            o.params.interleave_sectors = 8192;  // several areas
            o.threads = 2;
            uint64_t last = 0;
            o.progress = [&](uint64_t done, uint64_t) {
                last = done;
                return true;
            };
            auto f = format(registry(), image, data ? &*data : nullptr, o);
            REQUIRE(f);
            CHECK(f->linear_tags);
            const Geometry& g = f->geometry;
            CHECK(last == g.provided_data_sectors * kSectorSize);
            auto th = TagHash::create(registry(), "crc32c", {}, f->superblock);
            REQUIRE(th);
            MemoryStore& ds = data ? *data : image;
            std::vector<uint8_t> block(512), tag(4), want(4);
            for (uint64_t s = 0; s < g.provided_data_sectors; ++s) {
                REQUIRE(ds.read(g.data_offset(s), block) == Status::Ok);
                REQUIRE(image.read(g.tag_offset(s), tag) == Status::Ok);
                REQUIRE(th->compute(s, block, want) == Status::Ok);
                if (tag != want || std::any_of(block.begin(), block.end(), [](uint8_t b) { return b != 0; })) {
                    FAIL("sector " << s << " does not check");
                }
            }
            CHECK(decode_superblock(image.data())->provided_data_sectors == g.provided_data_sectors);
        }
    }
}

TEST_CASE("integrity format: refusals", "[integrity][format]") {
    MemoryStore image(16 << 20);
    FormatOptions o;
    o.journal_mac = "hmac(sha256)";  // no key
    CHECK(!format(registry(), image, nullptr, o));
    o.journal_mac = "no-such-mac";
    CHECK(format(registry(), image, nullptr, o).status() == Status::NotFound);
    o = {};
    o.internal_hash = "no-such-hash";
    CHECK(format(registry(), image, nullptr, o).status() == Status::NotFound);
    o = {};
    o.internal_hash = "hmac(sha256)";  // no key
    CHECK(!format(registry(), image, nullptr, o));
    MemoryStore tiny(8192);
    CHECK(format(registry(), tiny, nullptr, {}).status() == Status::Invalid);
    // The two random salts differ.
    MemoryStore a(1 << 20), b(1 << 20);
    REQUIRE(format(registry(), a, nullptr, {}));
    REQUIRE(format(registry(), b, nullptr, {}));
    CHECK(decode_superblock(a.data())->salt != decode_superblock(b.data())->salt);
}

namespace {

std::string read_line(const std::string& path) {
    std::ifstream f(path);
    REQUIRE(f);
    std::string line;
    std::getline(f, line);
    return line;
}

}  // namespace

// tests/golden/integrity-data/: images integritysetup formatted WITH its wipe
// pass on the kernel (every tag that of a zero block), then a few pages
// written. Formatting the same sizes with the same parameters and salt
// gives the same superblock, and the kernel's tag for every block it left
// zero.
TEST_CASE("integrity format: the tags of zeros equal the kernel's wiped tag areas", "[integrity][format][golden]") {
    const std::string dir = std::string(testutil::kSourceDir) + "/tests/golden/integrity-data/";
    const char* cases[] = {"crc32c", "crc32", "sha1-4k", "sha256", "hmac-sha256", "sector4096",
                           "interleave256", "meta", "bitmap", "direct"};
    for (const char* name : cases) {
        DYNAMIC_SECTION(name) {
            const std::string table = read_line(dir + name + ".table");
            const bool meta = table.find(" meta_device") != std::string::npos;
            // With a metadata device, .img is the data and .meta holds the rest.
            const auto kdata = testutil::decompress("xz", dir + name + ".img.xz");
            const auto kmeta = meta ? testutil::decompress("xz", dir + name + ".meta.xz") : kdata;
            auto ksb = decode_superblock(kmeta);
            REQUIRE(ksb);
            FormatOptions o;
            const auto h = table.find("internal_hash:");
            REQUIRE(h != std::string::npos);
            std::string alg = table.substr(h + 14);
            alg = alg.substr(0, alg.find_first_of(" :\n"));
            if (alg == "hmac(sha256)") o.key = ConstBytes(kHmacKey, 32);
            o.internal_hash = alg;
            o.params.tag_size = ksb->tag_size;
            o.params.sector_size = ksb->sector_size();
            if (!meta) o.params.interleave_sectors = 1u << ksb->log2_interleave_sectors;
            o.params.mode = table.find(" B ") != std::string::npos ? 'B' : 'J';
            o.params.salt = ksb->salt;
            o.random_salt = false;
            MemoryStore image(kmeta.size());
            std::optional<MemoryStore> data;
            if (meta) data.emplace(kdata.size());
            auto f = format(registry(), image, data ? &*data : nullptr, o);
            REQUIRE(f);
            CHECK(f->superblock.provided_data_sectors == ksb->provided_data_sectors);
            CHECK(f->superblock.journal_sections == ksb->journal_sections);
            CHECK(f->superblock.salt == ksb->salt);
            CHECK(f->superblock.flags == (ksb->flags & ~kFlagDirtyBitmap));
            const Geometry& g = f->geometry;
            const uint32_t bs = ksb->sector_size(), ts = ksb->tag_size;
            uint64_t compared = 0, written = 0;
            for (uint64_t s = 0; s < g.provided_data_sectors; s += bs / 512) {
                const uint8_t* block = kdata.data() + g.data_offset(s);
                if (std::any_of(block, block + bs, [](uint8_t b) { return b != 0; })) {
                    ++written;  // the kernel wrote data here: its own tag
                    continue;
                }
                const uint64_t at = g.tag_offset(s);
                if (std::memcmp(kmeta.data() + at, image.data().data() + at, ts) != 0)
                    FAIL("sector " << s << ": our tag differs from the kernel's");
                ++compared;
            }
            INFO(compared << " tags compared, " << written << " blocks written by the kernel skipped");
            CHECK(compared > 100);
            CHECK(written > 0);
        }
    }
}

// A journal MAC: the flag, the salt, the superblock's MAC (sb_mac, which
// the kernel checks on every load: tests/golden/integrity-format/journal-mac
// opened there) and a clean journal whose sections carry their MACs.
TEST_CASE("integrity format: a journal MAC", "[integrity][format]") {
    for (bool fix_hmac : {true, false}) {
        DYNAMIC_SECTION((fix_hmac ? "fix_hmac" : "legacy hmac")) {
            MemoryStore image(16 << 20);
            FormatOptions o;
            o.journal_mac = "hmac(sha256)";
            o.journal_mac_key = ConstBytes(kHmacKey, 32);
            o.params.fix_hmac = fix_hmac;
            auto f = format(registry(), image, nullptr, o);
            REQUIRE(f);
            const Superblock& sb = f->superblock;
            CHECK(sb.has(kFlagJournalMac));
            CHECK(sb.has(kFlagFixedHmac) == fix_hmac);
            CHECK(f->geometry.journal_entries_per_sector == 496 / 24);  // the MAC's 8 bytes out of every sector
            auto mac = JournalMac::create(registry(), "hmac(sha256)", ConstBytes(kHmacKey, 32), sb);
            REQUIRE(mac);
            const auto area = ConstBytes(image.data()).first(512);
            if (fix_hmac) {
                CHECK((*mac)->check_superblock(area).value());
                std::vector<uint8_t> bad(area.begin(), area.end());
                bad[511] ^= 1;
                CHECK(!(*mac)->check_superblock(bad).value());
            } else {
                CHECK(std::all_of(area.begin() + 64, area.end(), [](uint8_t b) { return b == 0; }));
            }
            const auto& g = f->geometry;
            for (uint32_t sec = 0; sec < g.journal_sections; ++sec) {
                const auto bytes = ConstBytes(image.data()).subspan(
                    journal_offset(g) + uint64_t(sec) * g.journal_section_sectors * 512,
                    std::size_t(g.journal_section_sectors) * 512);
                CHECK((*mac)->check(g, sec, bytes).value());
            }
        }
    }
}
