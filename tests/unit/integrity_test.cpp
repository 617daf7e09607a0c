// dm-integrity superblock and geometry against the real kernel and
// integritysetup: tests/golden/integrity/ holds superblocks that Debian 12's
// integritysetup 2.6.1 formatted on its 6.1 kernel, its dump text and the
// size of the mapping the kernel then opened (record.sh there recorded them
// in ../shared/oracle). Also cryptsetup's tests/integrity-compat-test size
// checksums, which pin provided_data_sectors without a kernel.
#include "paths.hpp"
#include "golden_files.hpp"
#include "test_util.hpp"

#include <blkcrypt/containers/container.hpp>
#include <blkcrypt/integrity/geometry.hpp>
#include <blkcrypt/integrity/superblock.hpp>
#include <blkcrypt/shash.hpp>

#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

using namespace blkcrypt;
using namespace blkcrypt::integrity;
using testutil::hex;
using testutil::read_file;
using testutil::registry;

namespace {

const std::string kGolden = std::string(testutil::kSourceDir) + "/tests/golden/integrity/";

uint64_t number(const std::map<std::string, std::string>& kv, const std::string& key) {
    const auto it = kv.find(key);
    REQUIRE(it != kv.end());
    return std::stoull(it->second);
}

// A `word:N` argument of the kernel's table line, or 0.
uint64_t table_arg(const std::string& table, const std::string& word) {
    const auto at = table.find(" " + word + ":");
    if (at == std::string::npos) return 0;
    return std::stoull(table.substr(at + word.size() + 2));
}

// The device the dump names (the guest's /dev/vdX): its first line.
std::string dumped_device(const std::string& dump) {
    const std::string lead = "Info for integrity device ";
    REQUIRE(dump.rfind(lead, 0) == 0);
    const auto end = dump.find(".\n");
    REQUIRE(end != std::string::npos);
    return dump.substr(lead.size(), end - lead.size());
}

// What each recorded case asked integritysetup for (record.sh's CASES).
struct Case {
    const char* name;
    FormatParams params;
};

FormatParams params(uint16_t tag, uint32_t sector = 512) {
    FormatParams p;
    p.tag_size = tag;
    p.sector_size = sector;
    return p;
}

std::vector<Case> recorded_cases() {
    std::vector<Case> c;
    c.push_back({"crc32c-default", params(4)});
    c.push_back({"sha256-odd", params(32)});
    c.push_back({"hmac-sha256", params(32)});
    c.push_back({"sector4096", params(4, 4096)});
    c.push_back({"bitmap", params(4)});
    c.push_back({"nojournal", params(4)});
    auto il = params(4);
    il.interleave_sectors = 4096;
    c.push_back({"interleave4096", il});
    c.push_back({"meta-device", params(4)});
    auto js = params(8);
    js.journal_sectors = 1048576 / 512;
    c.push_back({"journal-size", js});
    auto legacy = params(4);
    legacy.fix_hmac = false;  // --integrity-legacy-hmac: no salt, version 4
    c.push_back({"legacy-flags", legacy});
    auto legacy_b = legacy;
    legacy_b.mode = 'B';
    c.push_back({"legacy-bitmap", legacy_b});
    c.push_back({"legacy-meta", legacy});  // no padding with a metadata device: version 2
    c.push_back({"recalculate", params(4)});
    return c;
}

Devices on(uint64_t data, uint64_t start = 0, std::optional<uint64_t> meta = std::nullopt) {
    Devices d;
    d.data_sectors = data;
    d.start = start;
    d.meta_sectors = meta;
    return d;
}

Devices devices_of(const std::map<std::string, std::string>& info) {
    Devices d;
    if (info.count("data_device_bytes")) {
        // integritysetup's DEVICE holds the metadata; --data-device the data.
        d.meta_sectors = number(info, "backing_sectors");
        d.data_sectors = number(info, "data_device_bytes") / 512;
    } else {
        d.data_sectors = number(info, "backing_sectors");
    }
    return d;
}

}  // namespace

TEST_CASE("integrity: integritysetup's superblocks parse, re-encode and dump byte for byte", "[integrity][golden]") {
    for (const auto& c : recorded_cases()) {
        INFO(c.name);
        std::vector<uint8_t> area;
        REQUIRE(read_file(kGolden + c.name + ".sb", &area));
        REQUIRE(area.size() == kSuperblockSectors * kSectorSize);
        auto sb = decode_superblock(area);
        REQUIRE(sb.ok());
        // The whole 4 KiB area, zeros included, is what the kernel wrote.
        CHECK(encode_superblock(*sb) == area);
        const std::string dump = testutil::read_text(kGolden + c.name + ".dump");
        CHECK(dump_text(*sb, dumped_device(dump)) == dump);
    }
}

TEST_CASE("integrity: geometry equals the kernel's for integritysetup's superblocks", "[integrity][golden]") {
    for (const auto& c : recorded_cases()) {
        INFO(c.name);
        const auto info = testutil::read_info(kGolden + c.name + ".info");
        CHECK(info.at("format rc") == "0");
        CHECK(info.at("dump rc") == "0");
        CHECK(info.at("open rc") == "0");
        std::vector<uint8_t> area;
        REQUIRE(read_file(kGolden + c.name + ".sb", &area));
        auto sb = decode_superblock(area);
        REQUIRE(sb.ok());
        const Devices dev = devices_of(info);
        const uint64_t kernel_provided = number(info, "provided_sectors");  // blockdev --getsz of the mapping

        // Opening: the kernel recomputes the size from the devices.
        auto g = open_geometry(*sb, dev);
        REQUIRE(g.ok());
        CHECK(g->provided_data_sectors == kernel_provided);
        CHECK(sb->provided_data_sectors == kernel_provided);
        // The kernel's table reports its journal as section sectors x sections,
        // and the buffer it settled on.
        const std::string table = info.at("table");
        CHECK(uint64_t(g->journal_section_sectors) * g->journal_sections == table_arg(table, "journal_sectors"));
        CHECK((uint64_t(1) << g->log2_buffer_sectors) == table_arg(table, "buffer_sectors"));
        CHECK(g->log2_blocks_per_bitmap_bit == sb->log2_blocks_per_bitmap_bit);

        // Formatting: the same superblock, all but the random salt.
        FormatParams p = c.params;
        p.salt = sb->salt;
        auto made = format_superblock(p, dev);
        REQUIRE(made.ok());
        CHECK(encode_superblock(*made) == area);
    }
}

TEST_CASE("integrity: data and tags lie where the kernel puts them", "[integrity]") {
    // crc32c default on 16 MiB (from the golden): one journal section of
    // 176 sectors, tag runs of 32768 x 4 bytes = 256 sectors.
    std::vector<uint8_t> area;
    REQUIRE(read_file(kGolden + "crc32c-default.sb", &area));
    auto sb = decode_superblock(area);
    REQUIRE(sb.ok());
    auto g = open_geometry(*sb, on(32768));
    REQUIRE(g.ok());
    CHECK(g->initial_sectors == 8 + 176);
    CHECK(g->metadata_run == 256);
    CHECK(g->tag_offset(0) == (8 + 176) * 512);
    CHECK(g->tag_offset(1) == (8 + 176) * 512 + 4);
    CHECK(g->data_offset(0) == (8 + 176 + 256) * 512);
    // The last provided sector ends inside the device.
    CHECK(g->data_offset(g->provided_data_sectors - 1) + 512 <= 32768ull * 512);
    CHECK(g->data_offset(g->provided_data_sectors - 1) + 512 > (32768ull - 8) * 512);

    // With interleave 8 sectors, the second area starts after the first's
    // data and the second tag run.
    FormatParams p = params(4);
    p.interleave_sectors = 8;
    auto small = format_superblock(p, on(4096));
    REQUIRE(small.ok());
    auto gs = open_geometry(*small, on(4096));
    REQUIRE(gs.ok());
    CHECK(gs->metadata_run == 8);  // 8 x 4 bytes, padded to 4 KiB
    CHECK(gs->data_offset(8) == gs->data_offset(0) + (8 + 8) * 512);
    CHECK(gs->tag_offset(8) == gs->tag_offset(0) + (8 + 8) * 512);

    // A metadata device: data from sector 0 of the data device, tags after
    // the journal on the metadata device.
    const Devices md = on(24576, 0, 8192);
    FormatParams mp = params(4);
    auto msb = format_superblock(mp, md);
    REQUIRE(msb.ok());
    auto gm = open_geometry(*msb, md);
    REQUIRE(gm.ok());
    CHECK(gm->data_offset(100) == 100 * 512);
    CHECK(gm->tag_offset(100) == gm->initial_sectors * 512 + 400);
}

// sha256 of `sectors` zero sectors: what sha256sum of a zero-filled
// mapping of that size prints (cached: several cases share a size).
static std::string zeros_sha256(uint64_t sectors) {
    static std::map<uint64_t, std::string> cache;
    if (auto it = cache.find(sectors); it != cache.end()) return it->second;
    auto sha = Shash::alloc(registry(), "sha256");
    REQUIRE(sha.ok());
    auto d = sha->new_desc();
    REQUIRE(d.ok());
    d->init();
    static const std::vector<uint8_t> zeros(1 << 20, 0);
    for (uint64_t left = sectors * 512; left;) {
        const std::size_t n = std::min<uint64_t>(left, zeros.size());
        d->update(ConstBytes(zeros.data(), n));
        left -= n;
    }
    std::vector<uint8_t> digest(32);
    REQUIRE(d->final(digest) == Status::Ok);
    return cache[sectors] = hex(digest);
}

// cryptsetup tests/integrity-compat-test, intformat: a 32 MiB image formatted
// with --integrity-legacy-padding, filled with zeros through the mapping;
// the sha256 of the mapping pins its size.
TEST_CASE("integrity: integrity-compat-test checksums of the mapping's size", "[integrity][compat]") {
    struct Row {
        uint16_t tag;
        uint32_t sector;
        const char* sha256;
    };
    const Row rows[] = {
        {32, 512, "8e5fe4119558e117bfc40e3b0f13ade3abe497b52604d4c7cca0cfd6c7f4cf11"},   // blake2*, sha256, hmac-sha256
        {4, 512, "08f63eb27fb9ce2ce903b0a56429c68ce5e209253ba42154841ef045a53839d7"},    // crc32c, crc32
        {8, 512, "6ff6bb889a8485f1fb26aa82671ff5da64f60381fc469e31d7be6094241eee09"},    // xxhash64
        {20, 512, "6eedd6344dab8875cd185fcd6565dfc869ab36bc57e577f40c685290b1fa7fe7"},   // sha1
        {16, 4096, "e152ec88227b539cd9cafd8bdb587a1072d720cd6bcebe1398d4136c9e7f337b"},  // sha1 --tag-size 16
        {32, 4096, "33f7dfa5163ca9f740383fb8b0919574e38a7b20a94a4170fde4238196b7c4b4"},  // sha256, hmac-sha256
    };
    for (const Row& r : rows) {
        INFO("tag " << r.tag << ", sector " << r.sector);
        FormatParams p = params(r.tag, r.sector);
        p.fix_padding = false;
        auto sb = format_superblock(p, on(65536));
        REQUIRE(sb.ok());
        CHECK(sb->version == 5);  // fix_hmac (not legacy there) with an internal hash
        auto g = open_geometry(*sb, on(65536));
        REQUIRE(g.ok());
        CHECK(g->provided_data_sectors == sb->provided_data_sectors);
        CHECK(zeros_sha256(sb->provided_data_sectors) == r.sha256);
    }
    // The values the checksums stand for, and the one case where the padding
    // matters (tag 16 at 4 KiB: 64 KiB of tags per area, padded to 128 KiB
    // before fix_padding).
    FormatParams legacy = params(16, 4096);
    legacy.fix_padding = false;
    CHECK(format_superblock(legacy, on(65536))->provided_data_sectors == 64688);
    CHECK(format_superblock(params(16, 4096), on(65536))->provided_data_sectors == 64944);
    // The detached metadata case: the whole data device.
    CHECK(format_superblock(params(4), on(65536, 0, 65536))
              ->provided_data_sectors == 65536);
}

// cryptsetup tests/luks2-integrity-test, intformat: luksFormat --type luks2
// --integrity ... --offset 8192 --integrity-legacy-padding on 32 MiB: the
// integrity device starts at sector 8192 with the tags dm-crypt makes (no
// internal hash), and the sha256 of the zero-wiped mapping pins its size.
TEST_CASE("integrity: luks2-integrity-test checksums of the mapping's size", "[integrity][compat]") {
    struct Row {
        uint16_t tag;
        uint32_t sector;
        const char* sha256;
        const char* modes;
    };
    const Row rows[] = {
        {32, 512, "ee501705a084cd0ab6f4a28014bcf62b8bfa3434de00b82743c50b3abf06232c", "cbc-essiv/xts-plain64 + hmac-sha256, aegis128-random"},
        {48, 512, "492c2d1cc9e222a850c399bfef4ed5a86bf5afc59e54f0f0c7ba8e2a64548323", "xts-random + hmac-sha256"},
        {32, 4096, "358d6beceddf593aff6b22c31684e0df9c226330aff5812e060950215217d21b", "hmac-sha256, aegis128-random"},
        {48, 4096, "8c0463f5ac09613674bdf40b0ff6f985edbc3de04e51fdc688873cb333ef3cda", "xts-random + hmac-sha256"},
        {64, 4096, "9873d864fccb866521e79c9f0f75ad0c578d6bd7620399bbf4779e698c6e92fd", "hmac-sha512"},
        {80, 4096, "621f6c03f7361c2bf8f10059ae822339223f8471c750b0cf8584fba7134bd4a2", "xts-random + hmac-sha512"},
        {20, 4096, "7370c66a92708fb71b186931468be6aa9b26f4f88373b00b1c57360b9ee1304e", "xts-plain64 + hmac-sha1"},
        {36, 4096, "8c0463f5ac09613674bdf40b0ff6f985edbc3de04e51fdc688873cb333ef3cda", "xts-random + hmac-sha1"},
        {28, 512, "5f6f3f6be03c74d9aaaeaf40dd310c99a20e2786045f78a1fc6a0b189d231f57", "gcm-random, chacha20-random poly1305"},
        {28, 4096, "358d6beceddf593aff6b22c31684e0df9c226330aff5812e060950215217d21b", "gcm-random, chacha20-random poly1305"},
        {24, 512, "288e5e9bc5be6c0bd2a74abbb72c7944da83198b5e3041dcf159e7ae250dafa8", "ccm-random"},
        {24, 4096, "7370c66a92708fb71b186931468be6aa9b26f4f88373b00b1c57360b9ee1304e", "ccm-random"},
        {16, 512, "3f82eae753ff52a689ddc559c691bbdff838361bbe9a3ce8c7212e16e51b5dbe", "chacha20-plain64 poly1305"},
        {16, 4096, "7370c66a92708fb71b186931468be6aa9b26f4f88373b00b1c57360b9ee1304e", "chacha20-plain64 poly1305"},
    };
    for (const Row& r : rows) {
        INFO(r.modes << ": tag " << r.tag << ", sector " << r.sector);
        FormatParams p = params(r.tag, r.sector);
        p.fix_padding = false;
        p.internal_hash = false;
        auto sb = format_superblock(p, on(65536, 8192));
        REQUIRE(sb.ok());
        CHECK(sb->version == 1);  // no flag at all: legacy padding, no salt
        auto g = open_geometry(*sb, on(65536, 8192));
        REQUIRE(g.ok());
        CHECK(g->provided_data_sectors == sb->provided_data_sectors);
        CHECK(zeros_sha256(sb->provided_data_sectors) == r.sha256);
    }
}

TEST_CASE("integrity: versions and flags as the kernel sets them", "[integrity]") {
    CHECK(kernel_version(kFlagFixedHmac | kFlagFixedPadding, false, false) == 5);
    CHECK(kernel_version(kFlagFixedPadding, true, false) == 4);
    CHECK(kernel_version(0, true, false) == 3);
    CHECK(kernel_version(kFlagDirtyBitmap, false, false) == 3);
    CHECK(kernel_version(0, false, true) == 2);
    CHECK(kernel_version(kFlagRecalculating, false, false) == 2);
    CHECK(kernel_version(0, false, false) == 1);

    // Under dm-crypt (no internal hash) fix_hmac adds no salt: version 4.
    FormatParams luks = params(28, 4096);
    luks.internal_hash = false;
    luks.salt.fill(0xaa);
    auto sb = format_superblock(luks, on(65536, 8192));
    REQUIRE(sb.ok());
    CHECK(sb->version == 4);
    CHECK(sb->flags == kFlagFixedPadding);
    CHECK(sb->salt == std::array<uint8_t, kSaltSize>{});
}

TEST_CASE("integrity: untrusted superblocks are refused with reasons", "[integrity]") {
    std::vector<uint8_t> area;
    REQUIRE(read_file(kGolden + "crc32c-default.sb", &area));
    CHECK(decode_superblock(ConstBytes(area.data(), 63)).status() == Status::Corrupt);
    auto bad = area;
    bad[0] = 'J';
    CHECK(decode_superblock(bad).status() == Status::NotFound);
    for (uint8_t v : {0, 6, 255}) {
        bad = area;
        bad[8] = v;
        CHECK(decode_superblock(bad).status() == Status::Corrupt);
    }
    // integritysetup 2.6.1 dumps any block size byte (its 32-bit shift
    // taken mod 32, as on x86-64); the kernel's checks refuse it.
    bad = area;
    bad[28] = 23;
    auto odd = decode_superblock(bad);
    REQUIRE(odd.ok());
    CHECK(dump_text(*odd, "x").find("\nsector_size 0\n") != std::string::npos);
    CHECK(check_superblock(*odd, false).status() == Status::Corrupt);
    bad[28] = 40;
    auto odd40 = decode_superblock(bad);
    REQUIRE(odd40.ok());
    CHECK(dump_text(*odd40, "x").find("\nsector_size 131072\n") != std::string::npos);

    // The kernel's checks, each able to fail alone.
    auto sb = decode_superblock(area);
    REQUIRE(sb.ok());
    REQUIRE(check_superblock(*sb, false).ok());
    auto with = [&](auto change) {
        Superblock s = *sb;
        change(s);
        return check_superblock(s, false);
    };
    CHECK(with([](Superblock& s) { s.log2_sectors_per_block = 4; }).status() == Status::Corrupt);
    CHECK(with([](Superblock& s) { s.tag_size = 0; }).status() == Status::Corrupt);
    CHECK(with([](Superblock& s) { s.tag_size = 425; }).status() == Status::Corrupt);
    CHECK(with([](Superblock& s) { s.tag_size = 424; }).ok());
    CHECK(with([](Superblock& s) { s.journal_sections = 0; }).status() == Status::Corrupt);
    CHECK(with([](Superblock& s) { s.log2_interleave_sectors = 2; }).status() == Status::Corrupt);
    CHECK(with([](Superblock& s) { s.log2_interleave_sectors = 32; }).status() == Status::Corrupt);
    CHECK(with([](Superblock& s) { s.flags |= kFlagInline; }).status() == Status::Corrupt);
    CHECK(check_superblock(*sb, true).status() == Status::Corrupt);  // interleave 15 with a metadata device

    // The smallest device: superblock, journal, one tag run, one 8-sector
    // piece of data.
    CHECK(open_geometry(*sb, on(8 + 176 + 256 + 8 - 1)).status() == Status::Invalid);
    auto smallest = open_geometry(*sb, on(8 + 176 + 256 + 8));
    REQUIRE(smallest.ok());
    CHECK(smallest->provided_data_sectors == 8);
    CHECK(format_superblock(params(4), on(100)).status() == Status::Invalid);
    CHECK(format_superblock(params(0), on(65536)).status() == Status::Invalid);
    CHECK(format_superblock(params(4, 1024 + 512), on(65536)).status() == Status::Invalid);
}

TEST_CASE("integrity: containers::detect names the superblock, open refuses it", "[integrity][containers]") {
    std::vector<uint8_t> area;
    REQUIRE(read_file(kGolden + "meta-device.sb", &area));
    MemoryStore image(area.size());
    std::copy(area.begin(), area.end(), image.data().begin());
    auto f = containers::detect(image);
    REQUIRE(f.ok());
    CHECK(*f == containers::Format::Integrity);
    CHECK(containers::format_name(*f) == "INTEGRITY");
    // A version integritysetup 2.6.1 does not know is no integrity superblock.
    image.data()[8] = 6;
    CHECK(containers::detect(image).status() == Status::NotFound);

    const std::string path = std::string(testutil::kSourceDir) + "/tests/golden/integrity/crc32c-default.sb";
    auto c = containers::open(registry(), path);
    REQUIRE_FALSE(c.ok());
    CHECK(c.status() == Status::Unsupported);
}

// Found by fuzz_integrity_superblock (tests/fuzz/crashes/integrity_superblock/
// check-message-shift): the refusal's message shifted 512 by the unchecked
// byte (116), undefined behaviour; it names the byte now.
TEST_CASE("integrity: a huge block size byte is refused by name", "[integrity][fuzz]") {
    std::vector<uint8_t> input;
    REQUIRE(read_file(std::string(testutil::kSourceDir) + "/tests/fuzz/crashes/integrity_superblock/check-message-shift",
                      &input));
    auto sb = decode_superblock(input);
    REQUIRE(sb.ok());
    REQUIRE(sb->log2_sectors_per_block == 116);
    auto ok = check_superblock(*sb, false);
    REQUIRE_FALSE(ok.ok());
    CHECK_THAT(ok.error().message, Catch::Contains("log2 sectors per block 116"));
}

// Found by fuzz_integrity_superblock (crashes/integrity_superblock/
// meta-start-offset): with a metadata device and a start offset, the
// kernel's size check leaves the offset out, so the last tags lay past the
// device's end. open_geometry refuses that.
TEST_CASE("integrity: a start offset that pushes tags past the metadata device is refused", "[integrity][fuzz]") {
    auto sb = format_superblock(params(4), on(1019904, 0, 8192));
    REQUIRE(sb.ok());
    auto g = open_geometry(*sb, on(1019904, 0, 8192));
    REQUIRE(g.ok());
    CHECK(g->tag_offset(1019903) + 4 <= 8192ull * 512);
    auto shifted = open_geometry(*sb, on(1019904, 64, 8192));
    CHECK(shifted.status() == Status::Invalid);
}
