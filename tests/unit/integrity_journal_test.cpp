// The dm-integrity journal against the kernel: tests/golden/integrity/ holds
// the first 64 KiB Debian 12's kernel wrote when integritysetup formatted
// each case (CASE.head.gz: the superblock and the start of the journal);
// tests/golden/integrity-journal/ an image the kernel left with committed
// journal sections after a power-off, and the bytes its replay gave.
#include "paths.hpp"
#include "golden_files.hpp"
#include "test_util.hpp"
#include "torn_store.hpp"

#include <blkcrypt/integrity/device.hpp>
#include <blkcrypt/integrity/geometry.hpp>
#include <blkcrypt/integrity/journal.hpp>
#include <blkcrypt/integrity/superblock.hpp>
#include <blkcrypt/integrity/tag_hash.hpp>
#include <blkcrypt/shash.hpp>

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>

using testutil::decompress;
using testutil::read_info;
using namespace blkcrypt;
using namespace blkcrypt::integrity;
using testutil::read_file;

namespace {

const std::string kGolden = std::string(testutil::kSourceDir) + "/tests/golden/integrity/";

// The devices a recorded case ran on: integritysetup's DEVICE holds the
// superblock and journal; --data-device the data.
Devices devices_of(const std::map<std::string, std::string>& info) {
    Devices d;
    if (info.count("data_device_bytes")) {
        d.meta_sectors = std::stoull(info.at("backing_sectors"));
        d.data_sectors = std::stoull(info.at("data_device_bytes")) / 512;
    } else {
        d.data_sectors = std::stoull(info.at("backing_sectors"));
    }
    return d;
}

const char* const kFormatCases[] = {"crc32c-default", "sha256-odd",     "hmac-sha256",   "sector4096",  "bitmap",
                                    "nojournal",      "interleave4096", "meta-device",   "journal-size",
                                    "legacy-flags",   "legacy-bitmap",  "legacy-meta",   "recalculate"};

}  // namespace

TEST_CASE("integrity journal: commit ids are the kernel's", "[integrity][journal]") {
    CHECK(commit_id(0, 0, 0) == 0x1111111111111111ull);
    CHECK(commit_id(0, 175, 1) == (0x2222222222222222ull ^ 175));
    CHECK(commit_id(3, 9, 3) == (0x4444444444444444ull ^ (uint64_t(3) << 32) ^ 9));
}

TEST_CASE("integrity journal: a formatted journal equals what the kernel wrote", "[integrity][journal][golden]") {
    for (const char* name : kFormatCases) {
        INFO(name);
        const auto head = decompress("gzip", kGolden + name + ".head.gz");
        REQUIRE(head.size() == 65536);
        const auto info = read_info(kGolden + std::string(name) + ".info");
        const Devices dev = devices_of(info);
        auto sb = decode_superblock(head);
        REQUIRE(sb.ok());
        auto g = open_geometry(*sb, dev);
        REQUIRE(g.ok());

        // The superblock area, then our journal, on a zeroed device as the
        // sparse file the kernel formatted.
        const uint64_t meta_bytes = (dev.meta_sectors ? *dev.meta_sectors : dev.data_sectors) * 512;
        MemoryStore meta(std::size_t(std::min<uint64_t>(meta_bytes, journal_offset(*g) + journal_bytes(*g) + 65536)));
        REQUIRE(meta.write(0, encode_superblock(*sb)) == Status::Ok);
        REQUIRE(init_journal(meta, *sb, *g).ok());

        // The whole head: where the journal is shorter than 64 KiB, the
        // zeros after it too.
        const std::vector<uint8_t> ours(meta.data().begin(), meta.data().begin() + 65536);
        std::size_t first_diff = 0;
        while (first_diff < head.size() && ours[first_diff] == head[first_diff]) ++first_diff;
        INFO("first difference at byte " << first_diff);
        CHECK(first_diff == head.size());
        // And the test sees something: a journal starts at 4 KiB with the
        // first entry's "unused" mark.
        CHECK(head[4096 + 4] == 0xFF);
    }
}

namespace {

const std::string kCrashed = std::string(testutil::kSourceDir) + "/tests/golden/integrity-journal/";

std::string sha256_hex(ConstBytes b) {
    auto h = Shash::alloc(testutil::registry(), "sha256");
    REQUIRE(h.ok());
    std::vector<uint8_t> d(32);
    REQUIRE(h->digest(b, d) == Status::Ok);
    return testutil::hex(d);
}

// What the mapping shows: every provided sector from its data offset.
std::vector<uint8_t> mapping(const std::vector<uint8_t>& img, const Geometry& g) {
    std::vector<uint8_t> out(g.provided_data_sectors * 512);
    for (uint64_t s = 0; s < g.provided_data_sectors; ++s)
        std::memcpy(out.data() + s * 512, img.data() + g.data_offset(s), 512);
    return out;
}

// record.sh's block for a seed: 256 lines "SSS-LLLL-integr\n".
std::vector<uint8_t> seeded_block(int seed) {
    std::string s;
    char line[32];
    for (int n = 0; n < 256; ++n) {
        std::snprintf(line, sizeof line, "%03d-%04d-integr\n", seed, n);
        s += line;
    }
    return {s.begin(), s.end()};
}

std::string hash_name(const std::string& format_options) {
    const auto at = format_options.find("-I ");
    REQUIRE(at != std::string::npos);
    return format_options.substr(at + 3, format_options.find(' ', at + 3) - (at + 3));
}

}  // namespace

TEST_CASE("integrity journal: the kernel's crashed images replay to the kernel's bytes", "[integrity][journal][golden]") {
    for (const char* name : {"one-section", "wrap", "sha256-4k"}) {
        INFO(name);
        const auto info = read_info(kCrashed + name + ".info");
        REQUIRE(info.at("open J rc") == "0");
        auto img = decompress("xz", kCrashed + name + ".crashed.img.xz");
        REQUIRE(img.size() == 4194304);
        CHECK(sha256_hex(img) == info.at("raw_crashed"));
        auto sb = decode_superblock(img);
        REQUIRE(sb.ok());
        Devices dev;
        dev.data_sectors = img.size() / 512;
        auto g = open_geometry(*sb, dev);
        REQUIRE(g.ok());
        REQUIRE(g->provided_data_sectors == std::stoull(info.at("provided_sectors")));
        // Before: the data area holds what mode R shows (no replay).
        CHECK(sha256_hex(mapping(img, *g)) == info.at("mapping_before_replay"));

        auto hash = TagHash::create(testutil::registry(), kernel_hash_name(hash_name(info.at("format_options"))), {}, *sb);
        REQUIRE(hash.ok());
        MemoryStore store(img.size());
        store.data() = img;
        ReplayOptions opts;
        opts.tag_hash = &*hash;
        auto j = Journal::read(store, *sb, *g, opts);
        REQUIRE(j.ok());
        CHECK_FALSE(j->empty());
        CHECK(j->whole_sections() == g->journal_sections);
        auto r = j->apply(store, store, store);
        REQUIRE(r.ok());
        CHECK_FALSE(r->reinitialised);  // J mode, whole journal: the kernel writes no journal
        // After: the kernel's mapping and its raw disk, byte for byte.
        CHECK(sha256_hex(mapping(store.data(), *g)) == info.at("mapping_after_replay"));
        CHECK(sha256_hex(store.data()) == info.at("raw_after_replay"));
        // And the last write of each block is there.
        std::map<uint64_t, int> last;
        std::istringstream ws(info.at("writes"));
        std::string w;
        while (ws >> w) last[std::stoull(w.substr(0, w.find(':')))] = std::stoi(w.substr(w.find(':') + 1));
        const auto m = mapping(store.data(), *g);
        for (const auto& [seek, seed] : last) {
            INFO("block " << seek);
            const auto want = seeded_block(seed);
            CHECK(std::equal(want.begin(), want.end(), m.begin() + seek * 4096));
        }
    }
}

namespace {

// A small formatted image (no kernel): superblock, clean journal of
// `sections` sections, every block's tag valid for zeros.
struct Small {
    Superblock sb;
    Geometry g;
    std::optional<TagHash> hash;
    std::vector<uint8_t> img;
    uint32_t bs = 0;

    Small(uint32_t sections, uint32_t sector_size = 512, uint16_t tag = 4, const char* alg = "crc32c") {
        FormatParams p;
        p.tag_size = tag;
        p.sector_size = sector_size;
        p.salt.fill(0x5A);
        Devices dev;
        dev.data_sectors = 4096;  // 2 MiB
        // The section size for these parameters, then that many sections.
        {
            p.journal_sectors = 1;
            auto probe = format_superblock(p, dev);
            REQUIRE(probe.ok());
            auto pg = open_geometry(*probe, dev);
            REQUIRE(pg.ok());
            p.journal_sectors = sections * pg->journal_section_sectors;
        }
        auto s = format_superblock(p, dev);
        REQUIRE(s.ok());
        sb = *s;
        auto gg = open_geometry(sb, dev);
        REQUIRE(gg.ok());
        g = *gg;
        REQUIRE(g.journal_sections == sections);
        auto h = TagHash::create(testutil::registry(), alg, {}, sb);
        REQUIRE(h.ok());
        hash.emplace(std::move(*h));
        bs = sb.sector_size();
        MemoryStore m(dev.data_sectors * 512);
        REQUIRE(m.write(0, encode_superblock(sb)) == Status::Ok);
        REQUIRE(init_journal(m, sb, g).ok());
        std::vector<uint8_t> zero(bs), t(g.tag_size);
        for (uint64_t x = 0; x < g.provided_data_sectors; x += bs / 512) {
            REQUIRE(hash->compute(x, zero, t) == Status::Ok);
            REQUIRE(m.write(g.tag_offset(x), t) == Status::Ok);
        }
        img = m.data();
    }
    uint64_t blocks() const { return g.provided_data_sectors / (bs / 512); }
    std::vector<uint8_t> tags_of(uint64_t first_block, ConstBytes data) const {
        std::vector<uint8_t> t(data.size() / bs * g.tag_size);
        REQUIRE(hash->compute(first_block * (bs / 512), data, t) == Status::Ok);
        return t;
    }
    // The mapping's blocks and whether every tag matches its block.
    std::vector<uint8_t> read_all(const std::vector<uint8_t>& image, uint64_t* bad_tag) const {
        std::vector<uint8_t> out(blocks() * bs), tag(g.tag_size);
        *bad_tag = UINT64_MAX;
        for (uint64_t b = 0; b < blocks(); ++b) {
            const uint64_t s = b * (bs / 512);
            for (uint32_t x = 0; x < bs / 512; ++x)
                std::memcpy(out.data() + b * bs + x * 512, image.data() + g.data_offset(s + x), 512);
            REQUIRE(hash->compute(s, ConstBytes(out.data() + b * bs, bs), tag) == Status::Ok);
            if (*bad_tag == UINT64_MAX && !std::equal(tag.begin(), tag.end(), image.begin() + g.tag_offset(s))) *bad_tag = b;
        }
        return out;
    }
};

struct Write {
    uint64_t block, count;
    int seed;
};

}  // namespace

TEST_CASE("integrity journal: a kill at any write of J-mode writes replays to old or new with valid tags",
          "[integrity][journal][crash]") {
    auto sector_size = GENERATE(512u, 4096u);
    INFO("block size " << sector_size);
    Small base(3, sector_size);
    const uint32_t E = base.g.journal_section_entries;
    // Writes of one entry, of several sections, of the whole journal (it
    // wraps and the commit sequence moves on), over each other.
    const std::vector<Write> writes = {
        {0, 10, 1}, {5, E + 20, 2}, {3, 1, 3}, {100, 3 * E - 7, 4}, {0, 3, 5}, {E - 2, 2 * E, 6}, {7, 1, 7}};
    std::mt19937 rng(99);
    std::vector<std::vector<uint8_t>> payload;
    for (const auto& w : writes) payload.push_back(testutil::random_bytes(rng, w.count * base.bs));
    // The expected mapping after each write (states[0]: all zeros).
    std::vector<std::vector<uint8_t>> states(1, std::vector<uint8_t>(base.blocks() * base.bs, 0));
    for (std::size_t k = 0; k < writes.size(); ++k) {
        states.push_back(states.back());
        std::memcpy(states.back().data() + writes[k].block * base.bs, payload[k].data(), payload[k].size());
    }

    auto start_at = [&](BackingStore& s) {
        auto j = Journal::read(s, base.sb, base.g, ReplayOptions{'J', &*base.hash, nullptr});
        REQUIRE(j.ok());
        return j->next();
    };
    // Without a crash: how many writes the sequence makes.
    int total = 0;
    {
        testutil::TornStore s(base.img, 0);
        JournalWriter w(s, s, s, base.sb, base.g, start_at(s));
        for (std::size_t k = 0; k < writes.size(); ++k) {
            auto t = base.tags_of(writes[k].block, payload[k]);
            REQUIRE(w.write(writes[k].block * base.bs, payload[k], t).ok());
        }
        total = s.writes();
        uint64_t bad = 0;
        CHECK(base.read_all(s.image(), &bad) == states.back());
        CHECK(bad == UINT64_MAX);
    }
    REQUIRE(total > int(writes.size()) * 3);

    struct Tear {
        std::size_t keep;
        testutil::TornStore::Tear how;
    };
    const Tear tears[] = {{testutil::TornStore::kHalfBytes, testutil::TornStore::Tear::Prefix},
                          {0, testutil::TornStore::Tear::Prefix},
                          {1, testutil::TornStore::Tear::Prefix},
                          {1, testutil::TornStore::Tear::Suffix},
                          {9, testutil::TornStore::Tear::Suffix}};
    int replayed_something = 0;
    for (int cut : testutil::crash_points(total)) {
        for (const auto& tear : tears) {
            INFO("crash in write " << cut << " keeping " << tear.keep << (tear.how == testutil::TornStore::Tear::Suffix ? " (tail)" : ""));
            testutil::TornStore s(base.img, cut, tear.keep, tear.how);
            std::size_t failed = writes.size();
            {
                JournalWriter w(s, s, s, base.sb, base.g, start_at(s));
                for (std::size_t k = 0; k < writes.size(); ++k) {
                    auto t = base.tags_of(writes[k].block, payload[k]);
                    if (!w.write(writes[k].block * base.bs, payload[k], t).ok()) {
                        failed = k;
                        break;
                    }
                }
            }
            REQUIRE(failed < writes.size());
            // The image as the kill left it, replayed as the kernel would.
            MemoryStore after(s.image().size());
            after.data() = s.image();
            auto j = Journal::read(after, base.sb, base.g, ReplayOptions{'J', &*base.hash, nullptr});
            REQUIRE(j.ok());
            if (!j->blocks().empty()) ++replayed_something;
            auto r = j->apply(after, after, after);
            REQUIRE(r.ok());
            uint64_t bad = 0;
            const auto got = base.read_all(after.data(), &bad);
            CHECK(bad == UINT64_MAX);
            const auto& old_state = states[failed];
            const auto& new_state = states[failed + 1];
            uint64_t wrong = UINT64_MAX;
            for (uint64_t b = 0; b < base.blocks() && wrong == UINT64_MAX; ++b) {
                const auto at = got.begin() + b * base.bs;
                if (!std::equal(at, at + base.bs, old_state.begin() + b * base.bs) &&
                    !std::equal(at, at + base.bs, new_state.begin() + b * base.bs))
                    wrong = b;
            }
            INFO("write " << failed << " was in progress");
            CHECK(wrong == UINT64_MAX);

            // Writing on from where the replay left the journal: the rest of
            // the writes land, and a second replay changes nothing.
            {
                JournalWriter w(after, after, after, base.sb, base.g, r->next);
                for (std::size_t k = failed; k < writes.size(); ++k) {
                    auto t = base.tags_of(writes[k].block, payload[k]);
                    REQUIRE(w.write(writes[k].block * base.bs, payload[k], t).ok());
                }
            }
            auto j2 = Journal::read(after, base.sb, base.g, ReplayOptions{'J', &*base.hash, nullptr});
            REQUIRE(j2.ok());
            REQUIRE(j2->apply(after, after, after).ok());
            CHECK(base.read_all(after.data(), &bad) == states.back());
            CHECK(bad == UINT64_MAX);
        }
    }
    CHECK(replayed_something > 0);
}

TEST_CASE("integrity journal: a kill at any write of batched J-mode writes replays to a version since the last commit",
          "[integrity][journal][crash]") {
    auto sector_size = GENERATE(512u, 4096u);
    INFO("block size " << sector_size);
    Small base(3, sector_size);
    const uint32_t E = base.g.journal_section_entries;
    // Batches of writes (added, then one commit), overlapping each other
    // inside a batch and across batches; the second batch wraps the
    // journal, the third is more than a journal's worth (it commits when
    // full, then at the end).
    const std::vector<std::vector<Write>> batches = {
        {{0, 10, 1}, {5, 7, 2}, {3, 1, 3}, {40, E + 3, 4}},
        {{2, 2, 5}, {100, E - 1, 6}, {101, 4, 7}, {0, 3, 8}},
        {{7, 3 * E + 5, 9}, {9, 2, 10}}};
    std::mt19937 rng(7);
    // versions[b]: the image's mapping after each write of batch b - 1 and
    // b (a kill during batch b's commit may show any of them per block).
    std::vector<std::vector<uint8_t>> states(1, std::vector<uint8_t>(base.blocks() * base.bs, 0));
    std::vector<std::size_t> batch_start;  // index in states of each batch's start
    std::vector<std::vector<std::vector<uint8_t>>> payload;
    for (const auto& batch : batches) {
        batch_start.push_back(states.size() - 1);
        payload.emplace_back();
        for (const auto& w : batch) {
            payload.back().push_back(testutil::random_bytes(rng, w.count * base.bs));
            states.push_back(states.back());
            std::memcpy(states.back().data() + w.block * base.bs, payload.back().back().data(), payload.back().back().size());
        }
    }
    batch_start.push_back(states.size() - 1);

    auto start_at = [&](BackingStore& s) {
        auto j = Journal::read(s, base.sb, base.g, ReplayOptions{'J', &*base.hash, nullptr});
        REQUIRE(j.ok());
        return j->next();
    };
    // Runs the batches; the index of the batch whose add or commit failed.
    auto run = [&](BackingStore& s, JournalPosition at, std::size_t from) {
        JournalWriter w(s, s, s, base.sb, base.g, at);
        for (std::size_t b = from; b < batches.size(); ++b) {
            for (std::size_t k = 0; k < batches[b].size(); ++k) {
                auto t = base.tags_of(batches[b][k].block, payload[b][k]);
                if (!w.add(batches[b][k].block * base.bs, payload[b][k], t).ok()) return b;
            }
            if (!w.commit().ok()) return b;
        }
        return batches.size();
    };
    int total = 0;
    {
        testutil::TornStore s(base.img, 0);
        // Adding alone writes nothing; the commit writes the journal once
        // per commit (the third batch: twice), not once per write (which
        // takes 12 here: a journal, a data and a tag write each). The
        // write-back goes out from the journal's buffer, one data write per
        // run of blocks within a section.
        JournalWriter w(s, s, s, base.sb, base.g, start_at(s));
        for (std::size_t k = 0; k < batches[0].size(); ++k)
            REQUIRE(w.add(batches[0][k].block * base.bs, payload[0][k], base.tags_of(batches[0][k].block, payload[0][k])).ok());
        CHECK(s.writes() == 0);
        REQUIRE(w.commit().ok());
        CHECK(s.writes() < 11);
    }
    {
        testutil::TornStore s(base.img, 0);
        REQUIRE(run(s, start_at(s), 0) == batches.size());
        total = s.writes();
        uint64_t bad = 0;
        CHECK(base.read_all(s.image(), &bad) == states.back());
        CHECK(bad == UINT64_MAX);
    }
    REQUIRE(total > 6);

    const std::pair<std::size_t, testutil::TornStore::Tear> tears[] = {
        {testutil::TornStore::kHalfBytes, testutil::TornStore::Tear::Prefix},
        {0, testutil::TornStore::Tear::Prefix},
        {1, testutil::TornStore::Tear::Suffix}};
    int replayed_something = 0;
    for (int cut : testutil::crash_points(total)) {
        for (const auto& [keep, how] : tears) {
            INFO("crash in write " << cut << " keeping " << keep << (how == testutil::TornStore::Tear::Suffix ? " (tail)" : ""));
            testutil::TornStore s(base.img, cut, keep, how);
            const std::size_t failed = run(s, start_at(s), 0);
            REQUIRE(failed < batches.size());
            MemoryStore after(s.image().size());
            after.data() = s.image();
            auto j = Journal::read(after, base.sb, base.g, ReplayOptions{'J', &*base.hash, nullptr});
            REQUIRE(j.ok());
            if (!j->blocks().empty()) ++replayed_something;
            auto r = j->apply(after, after, after);
            REQUIRE(r.ok());
            uint64_t bad = 0;
            const auto got = base.read_all(after.data(), &bad);
            CHECK(bad == UINT64_MAX);
            // Every block as one of the writes since the last completed
            // commit left it (or as that commit left it).
            uint64_t wrong = UINT64_MAX;
            for (uint64_t b = 0; b < base.blocks() && wrong == UINT64_MAX; ++b) {
                const auto at = got.begin() + b * base.bs;
                bool ok = false;
                for (std::size_t v = batch_start[failed]; v <= batch_start[failed + 1] && !ok; ++v)
                    ok = std::equal(at, at + base.bs, states[v].begin() + b * base.bs);
                if (!ok) wrong = b;
            }
            INFO("batch " << failed << " was in progress");
            CHECK(wrong == UINT64_MAX);
            // Writing on from where the replay left the journal.
            REQUIRE(run(after, r->next, failed) == batches.size());
            auto j2 = Journal::read(after, base.sb, base.g, ReplayOptions{'J', &*base.hash, nullptr});
            REQUIRE(j2.ok());
            REQUIRE(j2->apply(after, after, after).ok());
            CHECK(base.read_all(after.data(), &bad) == states.back());
            CHECK(bad == UINT64_MAX);
        }
    }
    CHECK(replayed_something > 0);
}

TEST_CASE("integrity journal: the writer's clean close leaves what the kernel's suspend leaves", "[integrity][journal]") {
    Small base(3);
    MemoryStore s(base.img.size());
    s.data() = base.img;
    auto j = Journal::read(s, base.sb, base.g, ReplayOptions{'J', &*base.hash, nullptr});
    REQUIRE(j.ok());
    CHECK(j->empty());
    CHECK(j->next().section == 0);
    CHECK(j->next().commit_seq == 1);  // a formatted journal is sequence 0: the first commit is 1
    JournalWriter w(s, s, s, base.sb, base.g, j->next());
    std::vector<uint8_t> d(base.bs * 4, 0xAB);
    REQUIRE(w.write(0, d, base.tags_of(0, d)).ok());
    CHECK(w.position().section == 1);
    REQUIRE(w.close().ok());
    // Sections 1.. in sequence 1, section 0 in sequence 2, every entry unused.
    auto j2 = Journal::read(s, base.sb, base.g, ReplayOptions{'J', &*base.hash, nullptr});
    REQUIRE(j2.ok());
    CHECK(j2->empty());
    CHECK(j2->blocks().empty());
    CHECK(j2->next().section == 1);
    CHECK(j2->next().commit_seq == 2);
    const uint8_t* sec0 = s.data().data() + journal_offset(base.g);
    uint64_t id = 0;
    std::memcpy(&id, sec0 + 504, 8);
    CHECK(id == commit_id(0, 0, 2));
}

TEST_CASE("integrity journal: what makes the kernel fail the device is refused by name", "[integrity][journal]") {
    Small base(2);
    MemoryStore s(base.img.size());
    s.data() = base.img;
    auto pos = Journal::read(s, base.sb, base.g, {})->next();
    JournalWriter w(s, s, s, base.sb, base.g, pos);
    std::vector<uint8_t> d(base.bs * 3, 0x11);
    REQUIRE(w.write(base.bs * 8, d, base.tags_of(8, d)).ok());
    const std::vector<uint8_t> good = s.data();
    const uint64_t jo = journal_offset(base.g);
    ReplayOptions opts{'J', &*base.hash, nullptr};
    auto parse = [&](const std::vector<uint8_t>& img) {
        std::vector<uint8_t> bytes(img.begin() + jo, img.begin() + jo + journal_bytes(base.g));
        return Journal::parse(std::move(bytes), base.sb, base.g, opts);
    };
    {
        auto j = parse(good);
        REQUIRE(j.ok());
        CHECK(j->blocks().size() == 3);
    }
    SECTION("a commit id of no sequence") {
        auto img = good;
        img[jo + 9 * 512 + 507] ^= 1;
        auto j = parse(img);
        REQUIRE_FALSE(j.ok());
        CHECK(j.status() == Status::Corrupt);
        CHECK_THAT(j.error().message, Catch::Contains("section 0 sector 9") && Catch::Contains("journal commit id"));
    }
    SECTION("a journal byte of a block: its tag no longer matches") {
        auto img = good;
        img[jo + 9 * 512 + 100] ^= 1;  // entry 1's data
        auto j = parse(img);
        REQUIRE_FALSE(j.ok());
        CHECK_THAT(j.error().message, Catch::Contains("tag of sector 9") && Catch::Contains("tag mismatch when replaying journal"));
        // Without the internal hash (tags from dm-crypt above) it replays.
        opts.tag_hash = nullptr;
        CHECK(parse(img).ok());
    }
    SECTION("an entry's sector inside a block") {
        Small b4(2, 4096);
        MemoryStore s4(b4.img.size());
        s4.data() = b4.img;
        JournalWriter w4(s4, s4, s4, b4.sb, b4.g, Journal::read(s4, b4.sb, b4.g, {})->next());
        std::vector<uint8_t> d4(4096, 0x22);
        REQUIRE(w4.write(0, d4, b4.tags_of(0, d4)).ok());
        const uint64_t jo4 = journal_offset(b4.g);
        s4.data()[jo4] = 3;  // entry 0's sector: 3
        auto j = Journal::read(s4, b4.sb, b4.g, {});
        REQUIRE_FALSE(j.ok());
        CHECK_THAT(j.error().message, Catch::Contains("invalid sector in journal"));
    }
    SECTION("a torn commit (one sector still old) is not replayed and the journal is rewritten") {
        auto img = good;
        // Section 0's sector 12 back in the formatted sequence 0.
        uint64_t id = commit_id(0, 12, 0);
        std::memcpy(img.data() + jo + 12 * 512 + 504, &id, 8);
        auto j = parse(img);
        REQUIRE(j.ok());
        CHECK(j->blocks().empty());
        CHECK(j->needs_reinit());
    }
    SECTION("a sector past the device is dropped, as the kernel drops it") {
        auto img = good;
        const uint64_t far = base.g.provided_data_sectors + 8;
        std::memcpy(img.data() + jo + 2 * 512, &far, 8);  // entry 2
        // Its entry sector changed: with the internal hash the other two
        // still replay.
        auto j = parse(img);
        REQUIRE(j.ok());
        CHECK(j->blocks().size() == 2);
    }
}

TEST_CASE("integrity journal: the target replays on open, and read-only opens show the replay untouched",
          "[integrity][journal][golden]") {
    const std::string name = "wrap";
    const auto info = read_info(kCrashed + name + ".info");
    const auto img = decompress("xz", kCrashed + name + ".crashed.img.xz");
    OpenOptions o;
    o.internal_hash = "crc32c";
    SECTION("read-only: the mapping the kernel shows, the image unchanged") {
        o.read_only = true;
        auto store = std::make_shared<MemoryStore>(img.size());
        store->data() = img;
        auto t = IntegrityTarget::open(testutil::registry(), store, nullptr, o);
        REQUIRE(t.ok());
        std::vector<uint8_t> all((*t)->size());
        REQUIRE((*t)->read_checked(0, all).ok());
        CHECK(sha256_hex(all) == info.at("mapping_after_replay"));
        CHECK(sha256_hex(store->data()) == info.at("raw_crashed"));
    }
    SECTION("writable: the replay writes what the kernel's writes") {
        auto store = std::make_shared<MemoryStore>(img.size());
        store->data() = img;
        {
            auto t = IntegrityTarget::open(testutil::registry(), store, nullptr, o);
            REQUIRE(t.ok());
            CHECK(sha256_hex(store->data()) == info.at("raw_after_replay"));
            std::vector<uint8_t> all((*t)->size());
            REQUIRE((*t)->read_checked(0, all).ok());
            CHECK(sha256_hex(all) == info.at("mapping_after_replay"));
        }
        CHECK(sha256_hex(store->data()) == info.at("raw_after_replay"));  // nothing written, nothing to close
    }
    SECTION("mode R: no replay, the old data") {
        o.mode = 'R';
        auto store = std::make_shared<MemoryStore>(img.size());
        store->data() = img;
        auto t = IntegrityTarget::open(testutil::registry(), store, nullptr, o);
        REQUIRE(t.ok());
        std::vector<uint8_t> all((*t)->size());
        REQUIRE((*t)->read_checked(0, all).ok());
        CHECK(sha256_hex(all) == info.at("mapping_before_replay"));
    }
}

TEST_CASE("integrity journal: J-mode writes of the target go through the journal", "[integrity][journal]") {
    Small base(3);
    auto store = std::make_shared<MemoryStore>(base.img.size());
    store->data() = base.img;
    OpenOptions o;
    o.internal_hash = "crc32c";
    std::vector<uint8_t> d(base.bs * 5);
    for (std::size_t i = 0; i < d.size(); ++i) d[i] = uint8_t(i * 7 + 1);
    {
        auto t = IntegrityTarget::open(testutil::registry(), store, nullptr, o);
        REQUIRE(t.ok());
        const auto image_before = store->data();
        REQUIRE((*t)->write_hashed(base.bs * 2, d).ok());
        // Batched as the kernel batches: nothing on the device yet, but a
        // read sees the write (from the pending journal entries).
        CHECK(store->data() == image_before);
        {
            std::vector<uint8_t> got(d.size());
            REQUIRE((*t)->read_checked(base.bs * 2, got).ok());
            CHECK(got == d);
            std::vector<uint8_t> one(base.bs), tag((*t)->tag_size());
            REQUIRE((*t)->read(base.bs * 3, one, tag).ok());
            std::vector<uint8_t> want_tag(tag.size());
            REQUIRE(base.hash->compute(3 * (base.bs / 512), one, want_tag) == Status::Ok);
            CHECK(tag == want_tag);
        }
        // The flush commits: section 0, sequence 1, and written back.
        REQUIRE((*t)->flush().ok());
        const auto j = Journal::read(*store, base.sb, base.g, ReplayOptions{'J', &*base.hash, nullptr});
        REQUIRE(j.ok());
        REQUIRE(j->blocks().size() == 5);
        CHECK(j->blocks()[0].sector == 2);
        CHECK(j->blocks()[0].section == 0);
        uint64_t id = 0;
        std::memcpy(&id, store->data().data() + journal_offset(base.g) + 504, 8);
        CHECK(id == commit_id(0, 0, 1));
        uint64_t bad = 0;
        const auto all = base.read_all(store->data(), &bad);
        CHECK(bad == UINT64_MAX);
        CHECK(std::equal(d.begin(), d.end(), all.begin() + 2 * base.bs));
        REQUIRE((*t)->close().ok());
    }
    // Closed: the journal clean again (section 0 in sequence 2, the rest in 1).
    const auto j = Journal::read(*store, base.sb, base.g, ReplayOptions{'J', &*base.hash, nullptr});
    REQUIRE(j.ok());
    CHECK(j->empty());
    CHECK(j->next().section == 1);
    // D mode writes straight, leaving the journal as it is.
    o.mode = 'D';
    {
        auto t = IntegrityTarget::open(testutil::registry(), store, nullptr, o);
        REQUIRE(t.ok());
        const auto before = std::vector<uint8_t>(store->data().begin() + journal_offset(base.g),
                                                 store->data().begin() + journal_offset(base.g) + journal_bytes(base.g));
        REQUIRE((*t)->write_hashed(0, d).ok());
        CHECK(std::equal(before.begin(), before.end(), store->data().begin() + journal_offset(base.g)));
    }
}

namespace {

// Images our writer leaves when killed, for the kernel to open
// (tests/golden/integrity-journal/record-ours.sh). A 4 MiB integritysetup
// default (crc32c, fix_padding, fix_hmac) with a 3-section journal; four
// J-mode writes, the last killed: "ours-committed" after its journal
// commit (the kernel must replay it), "ours-torn" inside the commit (the
// kernel must not, and rewrites the journal); "ours-bad-id" a clean
// journal with one commit id changed (the kernel fails the device).
struct Exported {
    std::vector<uint8_t> image;
    std::vector<uint8_t> mapping_expected;  // what the kernel's mapping must show
};

std::vector<Write> export_writes() { return {{0, 10, 1}, {5, 196, 2}, {3, 1, 3}, {100, 301, 4}}; }

std::map<std::string, Exported> exported_images() {
    FormatParams p;
    p.salt.fill(0x3C);
    p.journal_sectors = 3 * 176;
    Devices dev;
    dev.data_sectors = 8192;
    auto sb = format_superblock(p, dev);
    REQUIRE(sb.ok());
    auto g = open_geometry(*sb, dev);
    REQUIRE(g.ok());
    REQUIRE(g->journal_sections == 3);
    auto hash = TagHash::create(testutil::registry(), "crc32c", {}, *sb);
    REQUIRE(hash.ok());
    MemoryStore m(dev.data_sectors * 512);
    REQUIRE(m.write(0, encode_superblock(*sb)) == Status::Ok);
    REQUIRE(init_journal(m, *sb, *g).ok());
    std::vector<uint8_t> zero(512), t(4);
    for (uint64_t s = 0; s < g->provided_data_sectors; ++s) {
        REQUIRE(hash->compute(s, zero, t) == Status::Ok);
        REQUIRE(m.write(g->tag_offset(s), t) == Status::Ok);
    }
    const auto formatted = m.data();
    const auto ws = export_writes();
    // Text that differs in every line, block and write, yet compresses (the
    // images are committed).
    std::vector<std::vector<uint8_t>> payload;
    for (std::size_t k = 0; k < ws.size(); ++k) {
        std::string text;
        char line[32];
        for (uint64_t b = 0; b < ws[k].count; ++b)
            for (int l = 0; l < 32; ++l) {
                std::snprintf(line, sizeof line, "w%02d-b%06llu-%03d\n", int(k), (unsigned long long)(ws[k].block + b), l);
                text += line;
            }
        payload.emplace_back(text.begin(), text.end());
        REQUIRE(payload.back().size() == ws[k].count * 512);
    }
    std::vector<std::vector<uint8_t>> states(1, std::vector<uint8_t>(g->provided_data_sectors * 512, 0));
    for (std::size_t k = 0; k < ws.size(); ++k) {
        states.push_back(states.back());
        std::memcpy(states.back().data() + ws[k].block * 512, payload[k].data(), payload[k].size());
    }
    // Runs the writes on a store that dies in write `cut` keeping `keep`
    // sectors of it.
    auto run = [&](int cut, std::size_t keep) {
        testutil::TornStore s(formatted, cut, keep);
        auto j = Journal::read(s, *sb, *g, {});
        REQUIRE(j.ok());
        JournalWriter w(s, s, s, *sb, *g, j->next());
        for (std::size_t k = 0; k < ws.size(); ++k) {
            std::vector<uint8_t> tags(ws[k].count * 4);
            REQUIRE(hash->compute(ws[k].block, payload[k], tags) == Status::Ok);
            if (!w.write(ws[k].block * 512, payload[k], tags).ok()) break;
        }
        return std::make_pair(s.image(), s.write_sizes());
    };
    // Without a kill: where the last write's journal commit is.
    const auto sizes = run(0, 0).second;
    int commit = 0, count = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i)
        if (sizes[i] == 2 * 176 * 512 && ++count == 2) commit = int(i) + 1;  // the second two-section commit: write 4's
    REQUIRE(commit > 0);
    std::map<std::string, Exported> out;
    out["ours-committed"] = {run(commit + 1, 0).first, states[4]};  // killed at its first data write
    out["ours-torn"] = {run(commit, 100).first, states[3]};         // killed 100 sectors into its commit
    auto bad = formatted;
    bad[journal_offset(*g) + 176 * 512 + 40 * 512 + 504] ^= 0x80;  // section 1, sector 40
    out["ours-bad-id"] = {bad, states[0]};
    return out;
}

}  // namespace

// Writes the images for record-ours.sh: BLKCRYPT_EXPORT=DIR blkcrypt_tests "[.journal-export]".
TEST_CASE("integrity journal: export images for the kernel", "[.journal-export]") {
    const char* dir = std::getenv("BLKCRYPT_EXPORT");
    REQUIRE(dir);
    for (const auto& [name, e] : exported_images()) {
        std::ofstream f(std::string(dir) + "/" + name + ".img", std::ios::binary);
        f.write(reinterpret_cast<const char*>(e.image.data()), std::streamsize(e.image.size()));
        REQUIRE(f.good());
    }
}

TEST_CASE("integrity journal: images our writer left when killed open in the kernel as our replay opens them",
          "[integrity][journal][golden]") {
    const auto images = exported_images();
    for (const char* name : {"ours-committed", "ours-torn"}) {
        INFO(name);
        const auto info = read_info(kCrashed + name + ".info");
        const auto& e = images.at(name);
        // The committed image is the one this build makes.
        CHECK(sha256_hex(decompress("xz", kCrashed + name + ".img.xz")) == sha256_hex(e.image));
        CHECK(sha256_hex(e.image) == info.at("raw_before"));
        REQUIRE(info.at("open rc") == "0");
        REQUIRE(info.at("read rc") == "0");
        auto sb = decode_superblock(e.image);
        REQUIRE(sb.ok());
        Devices dev;
        dev.data_sectors = e.image.size() / 512;
        auto g = open_geometry(*sb, dev);
        REQUIRE(g.ok());
        auto hash = TagHash::create(testutil::registry(), "crc32c", {}, *sb);
        REQUIRE(hash.ok());
        MemoryStore s(e.image.size());
        s.data() = e.image;
        auto r = replay_journal(s, s, s, *sb, *g, ReplayOptions{'J', &*hash, nullptr});
        REQUIRE(r.ok());
        CHECK(sha256_hex(mapping(s.data(), *g)) == info.at("mapping_after_replay"));
        CHECK(sha256_hex(e.mapping_expected) == info.at("mapping_after_replay"));
        CHECK(sha256_hex(s.data()) == info.at("raw_after_replay"));
        CHECK(r->reinitialised == (std::string(name) == "ours-torn"));
        CHECK(info.count("dmesg_error") == 0);
    }
    {
        const auto info = read_info(kCrashed + std::string("ours-bad-id.info"));
        const auto& e = images.at("ours-bad-id");
        CHECK(sha256_hex(e.image) == info.at("raw_before"));
        // The kernel opens it, then fails every read.
        CHECK(info.at("read rc") != "0");
        CHECK_THAT(info.at("dmesg_error"), Catch::Contains("journal commit id"));
        auto sb = decode_superblock(e.image);
        Devices dev;
        dev.data_sectors = e.image.size() / 512;
        auto g = open_geometry(*sb, dev);
        REQUIRE(g.ok());
        MemoryStore s(e.image.size());
        s.data() = e.image;
        auto r = replay_journal(s, s, s, *sb, *g, {});
        REQUIRE_FALSE(r.ok());
        CHECK(r.status() == Status::Corrupt);
        CHECK_THAT(r.error().message, Catch::Contains("section 1 sector 40"));
    }
}

TEST_CASE("integrity journal: the journal MAC and superblock MAC equal the kernel's", "[integrity][journal][golden]") {
    for (const char* name : {"mac-fixhmac", "mac-legacy"}) {
        INFO(name);
        const auto info = read_info(kCrashed + name + ".info");
        REQUIRE(info.at("format rc") == "0");
        std::vector<uint8_t> key(32);
        for (int i = 0; i < 32; ++i) key[i] = uint8_t(i);
        REQUIRE(sha256_hex(key) == info.at("key_sha256"));
        const auto head = decompress("gzip", kCrashed + name + ".head.gz");
        REQUIRE(head.size() == 65536);
        auto sb = decode_superblock(head);
        REQUIRE(sb.ok());
        REQUIRE(sb->has(kFlagJournalMac));
        const bool fixed = std::string(name) == "mac-fixhmac";
        CHECK(sb->has(kFlagFixedHmac) == fixed);
        Devices dev;
        dev.data_sectors = 8192;
        auto g = open_geometry(*sb, dev);
        REQUIRE(g.ok());
        auto mac = JournalMac::create(testutil::registry(), "hmac(sha256)", key, *sb);
        REQUIRE(mac.ok());

        // The superblock: its MAC (with fix_hmac) over its first 480 bytes.
        auto area = encode_superblock(*sb);
        if (fixed) {
            REQUIRE((*mac)->write_superblock(area).ok());
            auto ok = (*mac)->check_superblock(head);
            REQUIRE(ok.ok());
            CHECK(*ok);
        }
        CHECK(std::equal(area.begin(), area.end(), head.begin()));
        // The clean journal with a MAC in every metadata sector.
        MemoryStore meta(journal_offset(*g) + journal_bytes(*g));
        REQUIRE(meta.write(0, area) == Status::Ok);
        REQUIRE(init_journal(meta, *sb, *g, mac->get()).ok());
        const std::size_t n = std::min<std::size_t>(65536, meta.size());
        std::size_t first_diff = 0;
        while (first_diff < n && meta.data()[first_diff] == head[first_diff]) ++first_diff;
        INFO("first difference at byte " << first_diff);
        CHECK(first_diff == n);
        // Without the key, a journal with a MAC cannot be written.
        CHECK(init_journal(meta, *sb, *g).status() == Status::Unsupported);

        // The kernel's committed sections, MACs checked, replay to its bytes.
        auto img = decompress("xz", kCrashed + name + ".crashed.img.xz");
        CHECK(sha256_hex(img) == info.at("raw_crashed"));
        auto hash = TagHash::create(testutil::registry(), "crc32c", {}, *sb);
        REQUIRE(hash.ok());
        MemoryStore s(img.size());
        s.data() = img;
        ReplayOptions opts{'J', &*hash, mac->get()};
        auto j = Journal::read(s, *sb, *g, opts);
        REQUIRE(j.ok());
        // The second write's page (sectors 96..103: busybox dd went through
        // the page cache) in the section the first one was written back from.
        REQUIRE(j->blocks().size() == 8);
        CHECK(j->blocks()[0].sector == 96);
        REQUIRE(j->apply(s, s, s).ok());
        CHECK(sha256_hex(mapping(s.data(), *g)) == info.at("mapping_after_replay"));
        CHECK(sha256_hex(mapping(s.data(), *g)) == info.at("mapping_written"));
        // A section MAC byte flipped: the kernel's "journal mac" failure.
        img[journal_offset(*g) + 3 * 512 + 497] ^= 1;
        MemoryStore t(img.size());
        t.data() = img;
        auto bad = Journal::read(t, *sb, *g, opts);
        REQUIRE_FALSE(bad.ok());
        CHECK_THAT(bad.error().message, Catch::Contains("journal mac"));
        // Without the MAC's key the journal is not read.
        CHECK(Journal::read(t, *sb, *g, ReplayOptions{'J', &*hash, nullptr}).status() == Status::Invalid);
    }
}

TEST_CASE("integrity journal: the target with a journal MAC", "[integrity][journal][golden]") {
    const auto info = read_info(kCrashed + "mac-fixhmac.info");
    const auto img = decompress("xz", kCrashed + "mac-fixhmac.crashed.img.xz");
    std::vector<uint8_t> key(32);
    for (int i = 0; i < 32; ++i) key[i] = uint8_t(i);
    OpenOptions o;
    o.internal_hash = "crc32c";
    o.journal_mac = "hmac(sha256)";
    o.journal_mac_key = SecureBuffer(key);
    auto store = std::make_shared<MemoryStore>(img.size());
    store->data() = img;
    {
        auto t = IntegrityTarget::open(testutil::registry(), store, nullptr, o);
        REQUIRE(t.ok());
        std::vector<uint8_t> all((*t)->size());
        REQUIRE((*t)->read_checked(0, all).ok());
        CHECK(sha256_hex(all) == info.at("mapping_after_replay"));
        // A J-mode write: its section carries the MAC, the replay checks it.
        std::vector<uint8_t> d(4096, 0x5C);
        REQUIRE((*t)->write_hashed(8 * 512, d).ok());
        auto sb = decode_superblock(store->data());
        auto g = open_geometry(*sb, Devices{store->size() / 512, 0, std::nullopt, kDefaultBufferSectors});
        REQUIRE(g.ok());
        auto mac = JournalMac::create(testutil::registry(), "hmac(sha256)", key, *sb);
        auto hash = TagHash::create(testutil::registry(), "crc32c", {}, *sb);
        auto j = Journal::read(*store, *sb, *g, ReplayOptions{'J', &*hash, mac->get()});
        REQUIRE(j.ok());
        CHECK(j->blocks().size() == 8);
        REQUIRE((*t)->close().ok());
    }
    SECTION("without the MAC, or with another key, it is refused") {
        OpenOptions none;
        none.internal_hash = "crc32c";
        auto t = IntegrityTarget::open(testutil::registry(), store, nullptr, none);
        REQUIRE_FALSE(t.ok());
        CHECK_THAT(t.error().message, Catch::Contains("Journal mac mismatch"));
        key[0] ^= 1;
        o.journal_mac_key = SecureBuffer(key);
        auto w = IntegrityTarget::open(testutil::registry(), store, nullptr, o);
        REQUIRE_FALSE(w.ok());
        CHECK(w.status() == Status::Corrupt);
        CHECK_THAT(w.error().message, Catch::Contains("superblock's MAC"));
    }
}
