// The dm-integrity journal against the kernel: tests/golden/integrity/ holds
// the first 64 KiB Debian 12's kernel wrote when integritysetup formatted
// each case (CASE.head.gz: the superblock and the start of the journal);
// tests/golden/integrity-journal/ an image the kernel left with committed
// journal sections after a power-off, and the bytes its replay gave.
#include "test_util.hpp"
#include "torn_store.hpp"

#include <blkcrypt/integrity/geometry.hpp>
#include <blkcrypt/integrity/journal.hpp>
#include <blkcrypt/integrity/superblock.hpp>
#include <blkcrypt/integrity/tag_hash.hpp>
#include <blkcrypt/shash.hpp>

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

using namespace blkcrypt;
using namespace blkcrypt::integrity;
using testutil::read_file;

namespace {

const std::string kGolden = std::string(BLKCRYPT_SOURCE_DIR) + "/tests/golden/integrity/";

// A compressed golden through its tool (gzip -dc, xz -dc).
std::vector<uint8_t> decompress(const std::string& tool, const std::string& path) {
    std::vector<uint8_t> out;
    FILE* p = ::popen((tool + " -dc '" + path + "'").c_str(), "r");
    REQUIRE(p);
    uint8_t buf[65536];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.insert(out.end(), buf, buf + n);
    REQUIRE(::pclose(p) == 0);
    return out;
}

std::map<std::string, std::string> read_info(const std::string& path) {
    std::ifstream f(path);
    REQUIRE(f);
    std::map<std::string, std::string> kv;
    std::string line;
    while (std::getline(f, line)) {
        if (line.empty() || line[0] == '#') continue;
        const auto eq = line.find('=');
        if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return kv;
}

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

const std::string kCrashed = std::string(BLKCRYPT_SOURCE_DIR) + "/tests/golden/integrity-journal/";

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
