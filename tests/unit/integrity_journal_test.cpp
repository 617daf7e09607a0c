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

#include <catch2/catch.hpp>

#include <cstdio>
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
