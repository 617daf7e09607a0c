// The dm-integrity target against the kernel: tests/golden/integrity-data/
// holds images Debian 12's kernel (6.1) formatted with integritysetup 2.6.1
// (with the wipe), wrote a pattern into with dd, and read whole (CASE.sha256);
// tamper.log holds the sectors its dmesg named for flipped bytes. record.sh
// there recorded them in ../shared/oracle, in one boot.
#include "paths.hpp"
#include "golden_files.hpp"
#include "test_util.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/integrity/device.hpp>
#include <blkcrypt/shash.hpp>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

using namespace blkcrypt;
using namespace blkcrypt::integrity;
using testutil::registry;
namespace fs = std::filesystem;

namespace {

const std::string kGolden = std::string(testutil::kSourceDir) + "/tests/golden/integrity-data/";
const char kKey[] = "0123456789abcdef0123456789ABCDEF";  // record.sh's /tmp/key

// A temporary directory, removed at scope exit.
struct TempDir {
    fs::path path;
    TempDir() {
        char tmpl[] = "/tmp/blkcrypt-integrity-XXXXXX";
        REQUIRE(::mkdtemp(tmpl) != nullptr);
        path = tmpl;
    }
    ~TempDir() { fs::remove_all(path); }
};

// Unpacks CASE.img.xz (or CASE.meta.xz) into dir.
std::string unpack(const TempDir& dir, const std::string& file) {
    const std::string out = (dir.path / file).string();
    const std::string cmd = "xz -dc '" + kGolden + file + ".xz' > '" + out + "'";
    REQUIRE(std::system(cmd.c_str()) == 0);
    return out;
}

struct Case {
    std::string name;
    std::string hash;  // internal_hash:, kernel form
    char mode = 'J';
    bool key = false;
    bool meta = false;
};

const std::vector<Case>& cases() {
    static const std::vector<Case> c = {
        {"crc32c", "crc32c"},        {"crc32", "crc32"},
        {"sha1-4k", "sha1"},         {"sha256", "sha256"},
        {"hmac-sha256", "hmac(sha256)", 'J', true},
        {"sector4096", "crc32c"},    {"interleave256", "crc32c"},
        {"meta", "crc32c", 'J', false, true},
        {"bitmap", "crc32c", 'B'},   {"direct", "crc32c", 'D'},
    };
    return c;
}

OpenOptions options_for(const Case& c, bool read_only) {
    OpenOptions o;
    o.mode = c.mode;
    o.internal_hash = c.hash;
    if (c.key) o.internal_hash_key.assign(ConstBytes(reinterpret_cast<const uint8_t*>(kKey), 32));
    o.read_only = read_only;
    return o;
}

struct Opened {
    std::shared_ptr<IntegrityTarget> target;
    std::string image;  // the file with the superblock and tags
};

Opened open_case(const TempDir& dir, const Case& c, bool read_only, std::optional<OpenOptions> opts = {}) {
    const std::string img = unpack(dir, c.name + ".img");
    auto dev = open_file_store(img, !read_only);
    REQUIRE(dev.ok());
    std::shared_ptr<BackingStore> meta;
    std::string sb_file = img;
    if (c.meta) {
        sb_file = unpack(dir, c.name + ".meta");
        auto m = open_file_store(sb_file, !read_only);
        REQUIRE(m.ok());
        meta = *m;
    }
    auto t = IntegrityTarget::open(registry(), *dev, meta, opts ? *opts : options_for(c, read_only));
    INFO(c.name << ": " << (t.ok() ? "" : t.error().message));
    REQUIRE(t.ok());
    return {*t, sb_file};
}

// The case's files already in dir, opened read-only.
std::shared_ptr<IntegrityTarget> open_case_in_place(const TempDir& dir, const Case& c) {
    auto dev = open_file_store((dir.path / (c.name + ".img")).string(), false);
    REQUIRE(dev.ok());
    std::shared_ptr<BackingStore> meta;
    if (c.meta) {
        auto m = open_file_store((dir.path / (c.name + ".meta")).string(), false);
        REQUIRE(m.ok());
        meta = *m;
    }
    auto t = IntegrityTarget::open(registry(), *dev, meta, options_for(c, true));
    REQUIRE(t.ok());
    return *t;
}

// sha256 of the whole device read through read_checked, in 60 KiB pieces
// (not a divisor of an interleave area: pieces straddle area boundaries).
Result<std::string> checked_sha256(IntegrityTarget& t) {
    auto sha = Shash::alloc(registry(), "sha256");
    REQUIRE(sha.ok());
    auto d = sha->new_desc();
    REQUIRE(d.ok());
    d->init();
    std::vector<uint8_t> buf(61440);
    for (uint64_t off = 0; off < t.size(); off += buf.size()) {
        const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(buf.size(), t.size() - off));
        if (auto r = t.read_checked(off, Bytes(buf.data(), n)); !r) return r.error();
        d->update(ConstBytes(buf.data(), n));
    }
    uint8_t out[32];
    REQUIRE(d->final(out) == Status::Ok);
    return testutil::hex(ConstBytes(out, 32));
}

std::map<std::string, std::string> kernel_read(const std::string& name) {
    std::map<std::string, std::string> kv;
    std::istringstream in(testutil::read_text(kGolden + name + ".sha256"));
    std::string line;
    while (std::getline(in, line))
        if (auto eq = line.find('='); eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
    return kv;
}

void flip_byte(const std::string& path, uint64_t at) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(f);
    f.seekg(static_cast<std::streamoff>(at));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5a);  // as record.sh's flip
    f.seekp(static_cast<std::streamoff>(at));
    f.write(&c, 1);
}

struct Tamper {
    std::string name, source;
    uint64_t byte = 0;
    std::string sector;  // "0x5", as dmesg named it
};

// tamper.log: "=== tamper NAME", "flipped byte N of DEV", "Checksum failed at sector 0xS".
std::vector<Tamper> tampers() {
    std::vector<Tamper> v;
    std::istringstream in(testutil::read_text(kGolden + "tamper.log"));
    std::string line;
    std::smatch m;
    while (std::getline(in, line)) {
        if (std::regex_match(line, m, std::regex("=== tamper (\\S+)"))) v.push_back({m[1], "", 0, ""});
        else if (std::regex_search(line, m, std::regex("^flipped byte ([0-9]+) ")) && !v.empty())
            v.back().byte = std::stoull(m[1]);
        else if (std::regex_search(line, m, std::regex("Checksum failed at sector (0x[0-9a-f]+)")) && !v.empty())
            v.back().sector = m[1];
    }
    for (auto& t : v) t.source = t.name == "tamper-4k" ? "sector4096" : "crc32c";  // record.sh's sources
    return v;
}

const Case& case_named(const std::string& n) {
    for (const auto& c : cases())
        if (c.name == n) return c;
    FAIL("no case " << n);
    std::abort();
}

std::shared_ptr<BackingStore> store(const std::string& path, bool writable) {
    auto s = open_file_store(path, writable);
    REQUIRE(s.ok());
    return *s;
}

std::shared_ptr<IntegrityTarget> must_open(std::shared_ptr<BackingStore> dev, std::shared_ptr<BackingStore> meta,
                                           const OpenOptions& o) {
    auto t = IntegrityTarget::open(registry(), std::move(dev), std::move(meta), o);
    INFO((t.ok() ? "" : t.error().message));
    REQUIRE(t.ok());
    return *t;
}

Superblock sb_of(ConstBytes area) {
    auto sb = decode_superblock(area);
    REQUIRE(sb.ok());
    return *sb;
}

// read_checked of n bytes at off.
Result<void> checked_at(IntegrityTarget& t, uint64_t off, std::size_t n = 512) {
    std::vector<uint8_t> b(n);
    return t.read_checked(off, b);
}

}  // namespace

TEST_CASE("integrity device: every kernel-written image reads to the kernel's bytes, every tag checked",
          "[integrity][golden]") {
    for (const auto& c : cases()) {
        DYNAMIC_SECTION(c.name) {
            TempDir dir;
            auto o = open_case(dir, c, true);
            const auto k = kernel_read(c.name);
            CHECK(std::to_string(o.target->size()) == k.at("size"));
            auto sha = checked_sha256(*o.target);
            INFO((sha.ok() ? "" : sha.error().message));
            REQUIRE(sha.ok());
            CHECK(*sha == k.at("sha256"));
        }
    }
}

TEST_CASE("integrity device: a wrong key, a wrong hash or no hash at all fails or refuses",
          "[integrity][golden]") {
    TempDir dir;
    Case c = case_named("hmac-sha256");
    OpenOptions o = options_for(c, true);
    o.internal_hash_key.assign(ConstBytes(reinterpret_cast<const uint8_t*>("another key, 32 bytes long......"), 32));
    auto t = open_case(dir, c, true, o);
    auto r = checked_at(*t.target, 0, 512);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status() == Status::Corrupt);
    CHECK(r.error().message.find("Checksum failed at sector 0x0") != std::string::npos);

    TempDir dir2;
    OpenOptions o2 = options_for(case_named("crc32c"), true);
    o2.internal_hash = "crc32";
    auto t2 = open_case(dir2, case_named("crc32c"), true, o2);
    CHECK(checked_at(*t2.target, 4096, 512).status() == Status::Corrupt);

    TempDir dir3;
    OpenOptions o3 = options_for(case_named("crc32c"), true);
    o3.internal_hash.clear();
    auto t3 = open_case(dir3, case_named("crc32c"), true, o3);
    CHECK(checked_at(*t3.target, 0, 512).status() == Status::Invalid);
    // The raw tagged read still works: data and tags, no check.
    std::vector<uint8_t> data(1024), tags(8);
    REQUIRE(t3.target->read(0, data, tags).ok());
    CHECK(std::string(data.begin(), data.begin() + 24) == "blkcrypt integrity golde");
}

TEST_CASE("integrity device: a flipped data or tag byte names the sector the kernel named", "[integrity][golden]") {
    const auto ts = tampers();
    REQUIRE(ts.size() == 3);
    for (const auto& tc : ts) {
        DYNAMIC_SECTION(tc.name) {
            REQUIRE(!tc.sector.empty());
            TempDir dir;
            const Case& c = case_named(tc.source);
            const std::string img = unpack(dir, c.name + ".img");
            flip_byte(img, tc.byte);
            auto dev = open_file_store(img, false);
            REQUIRE(dev.ok());
            auto t = IntegrityTarget::open(registry(), *dev, nullptr, options_for(c, true));
            REQUIRE(t.ok());
            auto sha = checked_sha256(**t);
            REQUIRE_FALSE(sha.ok());
            CHECK(sha.error().status == Status::Corrupt);
            INFO(sha.error().message);
            CHECK(sha.error().message.find("Checksum failed at sector " + tc.sector) != std::string::npos);
            CHECK(sha.error().message.ends_with(tc.sector));

            // Recovery mode (R) reads it anyway, as the kernel does.
            OpenOptions r = options_for(c, true);
            r.mode = 'R';
            auto tr = IntegrityTarget::open(registry(), *dev, nullptr, r);
            REQUIRE(tr.ok());
            CHECK(checked_sha256(**tr).ok());
        }
    }
}

TEST_CASE("integrity device: write_hashed writes data and tags that read back checked", "[integrity]") {
    for (const char* name : {"crc32c", "interleave256", "sector4096", "meta", "hmac-sha256", "direct"}) {
        DYNAMIC_SECTION(name) {
            TempDir dir;
            const Case& c = case_named(name);
            auto o = open_case(dir, c, false);
            auto& t = *o.target;
            const uint32_t bs = t.block_size();
            // Across the first interleave area's end when areas are small, and the last block.
            std::vector<uint8_t> buf(64 * 1024);
            for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 131 + (i >> 9));
            const uint64_t at = (uint64_t(200) * 512) / bs * bs;
            REQUIRE(t.write_hashed(at, buf).ok());
            REQUIRE(t.write_hashed(t.size() - bs, ConstBytes(buf).first(bs)).ok());
            REQUIRE(t.close().ok());
            o.target.reset();

            auto dev = open_file_store((dir.path / (c.name + ".img")).string(), false);
            REQUIRE(dev.ok());
            std::shared_ptr<BackingStore> meta;
            if (c.meta) meta = store(o.image, false);
            auto t2 = IntegrityTarget::open(registry(), *dev, meta, options_for(c, true));
            REQUIRE(t2.ok());
            std::vector<uint8_t> back(buf.size());
            REQUIRE((*t2)->read_checked(at, back).ok());
            CHECK(back == buf);
            REQUIRE((*t2)->read_checked((*t2)->size() - bs, Bytes(back.data(), bs)).ok());
            CHECK(std::equal(back.begin(), back.begin() + bs, buf.begin()));
            auto sha = checked_sha256(**t2);
            INFO((sha.ok() ? "" : sha.error().message));
            CHECK(sha.ok());

            // Tags that do not match the data are caught where they were written.
            OpenOptions w = options_for(c, false);
            auto t3 = IntegrityTarget::open(registry(), store((dir.path / (c.name + ".img")).string(), true),
                                            c.meta ? store(o.image, true) : nullptr, w);
            REQUIRE(t3.ok());
            std::vector<uint8_t> bad_tags((*t3)->tag_size(), 0xa5);
            REQUIRE((*t3)->write(at + bs, ConstBytes(buf).first(bs), bad_tags).ok());
            auto r = (*t3)->read_checked(at, back);
            REQUIRE_FALSE(r.ok());
            char want[32];
            std::snprintf(want, sizeof want, "0x%llx", static_cast<unsigned long long>((at + bs) / 512));
            CHECK(r.error().message.ends_with(std::string("Checksum failed at sector ") + want));
        }
    }
}

TEST_CASE("integrity device: tagged reads and writes move tags beside their blocks", "[integrity]") {
    TempDir dir;
    auto o = open_case(dir, case_named("interleave256"), false, [] {
        OpenOptions x;
        x.mode = 'D';  // no internal hash: the tags come from above
        return x;
    }());
    auto& t = *o.target;
    CHECK(t.tag_hash() == nullptr);
    // 64 blocks from sector 230: across the area boundary at 256.
    std::vector<uint8_t> data(64 * 512), tags(64 * 4), d2(data.size()), t2(tags.size());
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i ^ (i >> 8));
    for (std::size_t i = 0; i < tags.size(); ++i) tags[i] = static_cast<uint8_t>(0x40 + i);
    REQUIRE(t.write(230 * 512, data, tags).ok());
    REQUIRE(t.read(230 * 512, d2, t2).ok());
    CHECK(d2 == data);
    CHECK(t2 == tags);
    // Each block where the geometry puts it, block by block.
    auto raw = open_file_store(o.image, false);
    REQUIRE(raw.ok());
    for (uint64_t b = 0; b < 64; ++b) {
        uint8_t one[512], tag[4];
        REQUIRE((*raw)->read(t.geometry().data_offset(230 + b), one) == Status::Ok);
        REQUIRE((*raw)->read(t.geometry().tag_offset(230 + b), tag) == Status::Ok);
        CHECK(std::equal(one, one + 512, data.begin() + b * 512));
        CHECK(std::equal(tag, tag + 4, tags.begin() + b * 4));
    }
    // Misaligned, oversized and past-the-end requests are refused.
    CHECK(t.read(100, d2, t2).status() == Status::Invalid);
    CHECK(t.read(0, d2, Bytes(t2.data(), 3)).status() == Status::Invalid);
    CHECK(t.read(t.size(), Bytes(d2.data(), 512), Bytes(t2.data(), 4)).status() == Status::IoError);
}

TEST_CASE("integrity device: bitmap mode flags written regions before writing and clears them at close",
          "[integrity][golden]") {
    TempDir dir;
    const Case& c = case_named("bitmap");
    auto o = open_case(dir, c, false);
    auto& t = *o.target;
    auto raw = open_file_store(o.image, false);
    REQUIRE(raw.ok());
    auto sb_now = [&] {
        std::vector<uint8_t> a(4096);
        REQUIRE((*raw)->read(0, a) == Status::Ok);
        return sb_of(a);
    };
    CHECK_FALSE(sb_now().has(kFlagDirtyBitmap));  // the kernel closed it clean
    std::vector<uint8_t> blk(512, 0x33);
    REQUIRE(t.write_hashed(512 * 1000, blk).ok());
    // While open: DIRTY_BITMAP, and the bit of the region (one bit per 32768
    // sectors here: bit 0) set in the first bitmap byte of the journal area.
    CHECK(sb_now().has(kFlagDirtyBitmap));
    CHECK(sb_now().version == 5);
    uint8_t first = 0;
    REQUIRE((*raw)->read(8 * 512, Bytes(&first, 1)) == Status::Ok);
    CHECK(first == 1);
    REQUIRE(t.close().ok());
    REQUIRE((*raw)->read(8 * 512, Bytes(&first, 1)) == Status::Ok);
    CHECK(first == 0);
    o.target.reset();

    // Reopened: the clear bitmap recalculates nothing, every tag is checked.
    auto dev = open_file_store((dir.path / "bitmap.img").string(), false);
    auto t2 = IntegrityTarget::open(registry(), *dev, nullptr, options_for(c, true));
    REQUIRE(t2.ok());
    std::vector<uint8_t> back(512);
    REQUIRE((*t2)->read_checked(512 * 1000, back).ok());
    CHECK(back == blk);
    CHECK(checked_sha256(**t2).ok());
}

TEST_CASE("integrity device: unchecked blocks: recalculating, a dirty bitmap, discarded tags", "[integrity]") {
    TempDir dir;
    const Case& c = case_named("crc32c");
    const std::string img = unpack(dir, "crc32c.img");
    // Corrupt the tag of sector 9 and of sector 3000.
    flip_byte(img, 512 * 184 + 4 * 9);
    flip_byte(img, 512 * 184 + 4 * 3000);
    auto dev = store(img, true);
    auto base = options_for(c, true);
    {
        auto t = must_open(dev, nullptr, base);
        CHECK(checked_at(*t, 9 * 512, 512).status() == Status::Corrupt);
    }
    {
        // The kernel's recalculate option: everything from 0 is yet to be recalculated.
        auto o = base;
        o.recalculate = true;
        auto t = must_open(dev, nullptr, o);
        CHECK(checked_sha256(*t).ok());
    }
    {
        // A superblock recalculating from sector 1000: sector 9 fails, 3000 does not.
        std::vector<uint8_t> area(4096);
        REQUIRE(dev->read(0, area) == Status::Ok);
        Superblock sb = sb_of(area);
        sb.flags |= kFlagRecalculating;
        sb.recalc_sector = 1000;
        auto enc = encode_superblock(sb);
        REQUIRE(dev->write(0, enc) == Status::Ok);
        auto t = must_open(dev, nullptr, base);
        CHECK(checked_at(*t, 9 * 512, 512).status() == Status::Corrupt);
        CHECK(checked_at(*t, 3000 * 512, 512).ok());
        REQUIRE(dev->write(0, area) == Status::Ok);
    }
    {
        // A dirty bitmap with a bit set, opened in J mode: the kernel
        // recalculates the whole device, so nothing is checked.
        std::vector<uint8_t> area(4096);
        REQUIRE(dev->read(0, area) == Status::Ok);
        Superblock sb = sb_of(area);
        sb.flags |= kFlagDirtyBitmap;
        REQUIRE(dev->write(0, encode_superblock(sb)) == Status::Ok);
        const uint8_t one = 1;
        REQUIRE(dev->write(8 * 512, ConstBytes(&one, 1)) == Status::Ok);
        auto t = must_open(dev, nullptr, base);
        CHECK(checked_at(*t, 9 * 512, 512).ok());
        REQUIRE(dev->write(0, area) == Status::Ok);
    }
    {
        // allow_discards: an all-0xF6 tag reads unchecked; other bad tags still fail.
        const uint8_t f6[4] = {0xf6, 0xf6, 0xf6, 0xf6};
        REQUIRE(dev->write(512 * 184 + 4 * 9, ConstBytes(f6, 4)) == Status::Ok);
        auto o = base;
        o.allow_discards = true;
        auto t = must_open(dev, nullptr, o);
        CHECK(checked_at(*t, 9 * 512, 512).ok());
        CHECK(checked_at(*t, 3000 * 512, 512).status() == Status::Corrupt);
        auto t2 = must_open(dev, nullptr, base);
        CHECK(checked_at(*t2, 9 * 512, 512).status() == Status::Corrupt);
    }
}

TEST_CASE("integrity device: open refuses what the kernel refuses", "[integrity]") {
    TempDir dir;
    const std::string img = unpack(dir, "crc32c.img");
    auto dev = store(img, false);
    auto o = options_for(case_named("crc32c"), true);
    o.mode = 'X';
    CHECK(IntegrityTarget::open(registry(), dev, nullptr, o).status() == Status::Invalid);
    o = options_for(case_named("crc32c"), true);
    o.tag_size = 8;
    CHECK(IntegrityTarget::open(registry(), dev, nullptr, o).status() == Status::Invalid);
    o = options_for(case_named("crc32c"), true);
    o.block_size = 4096;
    CHECK(IntegrityTarget::open(registry(), dev, nullptr, o).status() == Status::Invalid);
    o = OpenOptions{};
    o.mode = 'B';
    CHECK(IntegrityTarget::open(registry(), dev, nullptr, o).status() == Status::Invalid);
    o = options_for(case_named("crc32c"), true);
    o.start = 8;  // no superblock there
    CHECK(IntegrityTarget::open(registry(), dev, nullptr, o).status() == Status::NotFound);
    auto zeros = std::make_shared<MemoryStore>(1 << 20);
    auto z = IntegrityTarget::open(registry(), zeros, nullptr, OpenOptions{});
    CHECK(z.status() == Status::NotFound);
    CHECK(z.error().message.find("not initialized") != std::string::npos);
    // A read-only open refuses writes.
    auto t = must_open(dev, nullptr, options_for(case_named("crc32c"), true));
    CHECK(t->write_hashed(0, std::vector<uint8_t>(512)).status() == Status::Invalid);
}

// --- the dm layer: integrity table lines -------------------------------

#include <blkcrypt/dm/dm_table.hpp>

namespace {

// CASE.table: the line `dmsetup table` printed, devices as DEV.
std::string kernel_table(const std::string& name) {
    std::string t = testutil::read_text(kGolden + name + ".table");
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
    return t;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
        s.replace(at, from.size(), to);
    return s;
}

dm::DmTable parse_ok(const std::string& text) {
    auto t = dm::parse_dm_table(text);
    INFO(text << ": " << (t.ok() ? "" : t.error().message));
    REQUIRE(t.ok());
    return *t;
}

dm::DmBuildOptions build_options(bool read_only) {
    dm::DmBuildOptions o;
    o.read_only = read_only;
    o.threads = 2;
    o.open = [](const std::string& path, bool writable) { return open_file_store(path, writable); };
    return o;
}

}  // namespace

TEST_CASE("integrity dm: the kernel's table lines parse and print back as dmsetup printed them",
          "[integrity][dm][golden]") {
    for (const auto& c : cases()) {
        DYNAMIC_SECTION(c.name) {
            const std::string line = kernel_table(c.name);
            auto t = dm::parse_dm_table(line);
            INFO(line << "\n" << (t.ok() ? "" : t.error().message));
            REQUIRE(t.ok());
            REQUIRE(t->size() == 1);
            REQUIRE((*t)[0].integrity.has_value());
            CHECK((*t)[0].integrity->internal_hash == c.hash);
            CHECK((*t)[0].integrity->mode == c.mode);
            CHECK(dm::format_dm_table(*t, false) == line + "\n");
        }
    }
}

TEST_CASE("integrity dm: a table line over each kernel image reads the kernel's bytes", "[integrity][dm][golden]") {
    for (const auto& c : cases()) {
        DYNAMIC_SECTION(c.name) {
            TempDir dir;
            const std::string img = unpack(dir, c.name + ".img");
            std::string line = kernel_table(c.name);
            if (c.meta) {
                const std::string meta = unpack(dir, c.name + ".meta");
                // integritysetup's DEVICE (the metadata) comes first, the data device in meta_device:.
                line = replace_all(line, "integrity DEV", "integrity " + img);
                line = replace_all(line, "meta_device:DEV", "meta_device:" + meta);
            } else {
                line = replace_all(line, "DEV", img);
            }
            if (c.key) line = replace_all(line, std::string(64, '0'), testutil::hex(ConstBytes(
                                                         reinterpret_cast<const uint8_t*>(kKey), 32)));
            auto t = dm::parse_dm_table(line);
            INFO(line << "\n" << (t.ok() ? "" : t.error().message));
            REQUIRE(t.ok());
            auto dev = dm::build_dm_table(registry(), *t, build_options(true));
            INFO((dev.ok() ? "" : dev.error().message));
            REQUIRE(dev.ok());
            const auto k = kernel_read(c.name);
            REQUIRE(std::to_string((*dev)->size()) == k.at("size"));
            std::vector<uint8_t> all((*dev)->size());
            REQUIRE(dm::read_sync(**dev, 0, all) == Status::Ok);
            auto sha = Shash::alloc(registry(), "sha256");
            uint8_t out[32];
            REQUIRE(sha->digest(all, out) == Status::Ok);
            CHECK(testutil::hex(ConstBytes(out, 32)) == k.at("sha256"));
        }
    }
}

TEST_CASE("integrity dm: tampered reads fail, tags-from-above devices refuse plain I/O, bad lines are refused",
          "[integrity][dm]") {
    TempDir dir;
    const std::string img = unpack(dir, "crc32c.img");
    const std::string base = replace_all(kernel_table("crc32c"), "DEV", img);
    {
        flip_byte(img, 512 * 184 + 4 * 9);
        auto dev = dm::build_dm_table(registry(), parse_ok(base), build_options(true));
        REQUIRE(dev.ok());
        std::vector<uint8_t> b(4096);
        CHECK(dm::read_sync(**dev, 0, b) == Status::Ok);
        CHECK(dm::read_sync(**dev, 4096, b) == Status::Corrupt);  // sector 9 is in the second page
        CHECK((*dev)->tagged() != nullptr);
        flip_byte(img, 512 * 184 + 4 * 9);
    }
    {
        // No internal hash (dm-crypt would supply the tags): plain reads refused,
        // the tagged view reads data and raw tags.
        auto t = dm::parse_dm_table("0 3656 integrity " + img + " 0 4 D 0\n");
        REQUIRE(t.ok());
        auto dev = dm::build_dm_table(registry(), *t, build_options(true));
        REQUIRE(dev.ok());
        std::vector<uint8_t> b(512), tag(4);
        CHECK(dm::read_sync(**dev, 0, b) == Status::Unsupported);
        auto tagged = (*dev)->tagged();
        REQUIRE(tagged);
        CHECK(tagged->describe() == "integrity D tag 4 over " + img);
        REQUIRE(tagged->read(0, b, tag).ok());
        CHECK(std::string(b.begin(), b.begin() + 8) == "blkcrypt");
    }
    // A writable table writes through with tags the kernel would accept.
    {
        auto dev = dm::build_dm_table(registry(), parse_ok(base), build_options(false));
        REQUIRE(dev.ok());
        std::vector<uint8_t> b(8192, 0x5c), back(8192);
        REQUIRE(dm::write_sync(**dev, 4096 * 7, b) == Status::Ok);
        REQUIRE(dm::read_sync(**dev, 4096 * 7, back) == Status::Ok);
        CHECK(back == b);
    }
    auto refused = [&](const std::string& line, const std::string& why) {
        auto t = dm::parse_dm_table(line);
        if (t.ok()) {
            auto d = dm::build_dm_table(registry(), *t, build_options(true));
            REQUIRE_FALSE(d.ok());
            INFO(d.error().message);
            CHECK(d.error().message.find(why) != std::string::npos);
        } else {
            INFO(t.error().message);
            CHECK(t.error().message.find(why) != std::string::npos);
        }
    };
    refused("0 3656 integrity " + img + " 0 4 X 1 internal_hash:crc32c", "Invalid mode (expecting J, B, D, R)");
    refused("0 3656 integrity " + img + " 0 4 J 2 internal_hash:crc32c", "Invalid number of feature args");
    refused("0 3656 integrity " + img + " 0 4 J 1 frobnicate", "Invalid argument");
    refused("0 3656 integrity " + img + " 0 4 J 1 block_size:1000", "Invalid block_size argument");
    refused("0 3656 integrity " + img + " 0 4 J 1 journal_watermark:101", "Invalid journal_watermark argument");
    refused("0 3656 integrity " + img + " 0 0 J 0", "Unknown tag size");
    refused("0 3656 integrity " + img + " 0 4 B 0", "Bitmap mode can be only used with internal hash");
    refused("0 3656 integrity " + img + " 0 4 J 1 allow_discards", "Discard can be only used with internal hash");
    refused("0 3656 integrity " + img + " 0 4 J 1 internal_hash:crc32c:abc", "Invalid internal_hash argument");
    // journal_crypt: is taken (integrity_jcrypt_test.cpp); a key AES refuses is not.
    refused("0 3656 integrity " + img + " 0 4 J 2 internal_hash:crc32c journal_crypt:ctr(aes):00112233",
            "the key is refused");
    refused("0 3656 integrity " + img + " 0 4 J 2 internal_hash:crc32c journal_crypt:ctr(aes):001", "Invalid journal_crypt argument");
    // journal_mac: is taken with its key; this image was made without one.
    refused("0 3656 integrity " + img + " 0 4 J 2 internal_hash:crc32c journal_mac:hmac(sha256):0011",
            "Journal mac mismatch");
    refused("0 3656 integrity " + img + " 0 4 J 2 internal_hash:crc32c journal_mac:hmac(sha256):01x1",
            "Invalid journal_mac argument");
    refused("0 3657 integrity " + img + " 0 4 J 1 internal_hash:crc32c", "Not enough provided sectors");
    refused("0 3656 integrity " + img + " 0 8 J 1 internal_hash:crc32c", "doesn't match the superblock");
    // Keys: hidden unless asked, never in an error.
    auto k = dm::parse_dm_table("0 8 integrity x 0 32 J 1 internal_hash:hmac(sha256):00ff");
    REQUIRE(k.ok());
    CHECK(dm::format_dm_table(*k, false) == "0 8 integrity x 0 32 J 1 internal_hash:hmac(sha256):0000\n");
    CHECK(dm::format_dm_table(*k, true) == "0 8 integrity x 0 32 J 1 internal_hash:hmac(sha256):00ff\n");
    auto jc = dm::parse_dm_table("0 8 integrity x 0 4 J 1 journal_crypt:ctr(aes):00ff");
    REQUIRE(jc.ok());
    CHECK(dm::format_dm_table(*jc, false) == "0 8 integrity x 0 4 J 1 journal_crypt:ctr(aes):0000\n");
    CHECK(dm::format_dm_table(*jc, true) == "0 8 integrity x 0 4 J 1 journal_crypt:ctr(aes):00ff\n");
    auto jm = dm::parse_dm_table("0 8 integrity x 0 4 J 1 journal_mac:hmac(sha256):00fe");
    REQUIRE(jm.ok());
    CHECK(dm::format_dm_table(*jm, false) == "0 8 integrity x 0 4 J 1 journal_mac:hmac(sha256):0000\n");
    CHECK(dm::format_dm_table(*jm, true) == "0 8 integrity x 0 4 J 1 journal_mac:hmac(sha256):00fe\n");
    auto bad = dm::parse_dm_table("0 8 integrity x 0 32 J 1 internal_hash:hmac(sha256):00fg");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().message.find("00fg") == std::string::npos);
}

// --- the other direction: images blkcrypt wrote, read by the kernel ----

namespace {

// Writes record-blkcrypt.sh's pattern into the kernel image of `c` (opened
// writable in its own mode) and returns the sha256 of the whole device as
// read_checked then reads it. Deterministic: the kernel's reading of the
// same writes is in record-blkcrypt.log.
std::string write_blkcrypt_case(const TempDir& dir, const Case& c) {
    std::string sha;
    {
        auto o = open_case(dir, c, false);
        auto& t = *o.target;
        const uint32_t bs = t.block_size();
        std::vector<uint8_t> buf(96 * 1024);
        const std::string words = "blkcrypt wrote this through its dm-integrity target, case " + c.name + "; ";
        for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(words[i % words.size()] ^ (i >> 12));
        // The start, a run across sector 256 (an area boundary with
        // interleave 256), one block in the middle and the last block.
        REQUIRE(t.write_hashed(0, ConstBytes(buf).first(16 * 1024)).ok());
        REQUIRE(t.write_hashed(uint64_t(200) * 512 / bs * bs, buf).ok());
        REQUIRE(t.write_hashed(t.size() / 2 / bs * bs, ConstBytes(buf).first(bs)).ok());
        REQUIRE(t.write_hashed(t.size() - bs, ConstBytes(buf).subspan(bs, bs)).ok());
        REQUIRE(t.close().ok());
    }
    auto o = open_case_in_place(dir, c);
    auto s = checked_sha256(*o);
    REQUIRE(s.ok());
    return *s;
}

}  // namespace

TEST_CASE("integrity device: the kernel reads images blkcrypt wrote to blkcrypt's bytes, no integrity error",
          "[integrity][golden]") {
    // record-blkcrypt.log: "NAME kernel_sha256=HEX errors=N" per case.
    std::map<std::string, std::pair<std::string, std::string>> kernel;
    std::istringstream in(testutil::read_text(kGolden + "record-blkcrypt.log"));
    std::string line;
    std::smatch m;
    while (std::getline(in, line))
        if (std::regex_match(line, m, std::regex("result (\\S+) kernel_sha256=([0-9a-f]{64}) errors=([0-9]+)")))
            kernel[m[1]] = {m[2], m[3]};
    REQUIRE(kernel.size() == cases().size());
    for (const auto& c : cases()) {
        DYNAMIC_SECTION(c.name) {
            TempDir dir;
            const std::string ours = write_blkcrypt_case(dir, c);
            CHECK(kernel.at(c.name).first == ours);
            CHECK(kernel.at(c.name).second == "0");
        }
    }
}

// Not run by default: record-blkcrypt.sh runs it to make the images.
TEST_CASE("integrity device: write the images record-blkcrypt.sh gives the kernel", "[.integrity-record]") {
    const char* out = std::getenv("BLKCRYPT_INTEGRITY_OUT");
    REQUIRE(out);
    std::ofstream list(fs::path(out) / "ours.txt");
    for (const auto& c : cases()) {
        TempDir dir;
        const std::string sha = write_blkcrypt_case(dir, c);
        fs::copy_file(dir.path / (c.name + ".img"), fs::path(out) / (c.name + ".img"));
        if (c.meta) fs::copy_file(dir.path / (c.name + ".meta"), fs::path(out) / (c.name + ".meta"));
        list << c.name << " sha256=" << sha << "\n";
    }
}

TEST_CASE("integrity device: bitmap regions a crash left flagged read unchecked in B mode and stay flagged",
          "[integrity][golden]") {
    TempDir dir;
    const Case& c = case_named("bitmap");
    const std::string img = unpack(dir, "bitmap.img");
    // As a crash in B mode leaves it: DIRTY_BITMAP, the region's bit set, a
    // block whose tag no longer matches (sector 9: journal 176 + 8, tags at 184).
    auto dev = store(img, true);
    std::vector<uint8_t> area(4096);
    REQUIRE(dev->read(0, area) == Status::Ok);
    Superblock sb = sb_of(area);
    sb.flags |= kFlagDirtyBitmap;
    REQUIRE(dev->write(0, encode_superblock(sb)) == Status::Ok);
    const uint8_t one = 1;
    REQUIRE(dev->write(8 * 512, ConstBytes(&one, 1)) == Status::Ok);
    flip_byte(img, 512 * 184 + 4 * 9);
    {
        // J mode would recalculate everything (nothing checked); B mode the
        // flagged region, which here is all of this small device.
        auto t = must_open(dev, nullptr, options_for(c, false));
        CHECK(checked_at(*t, 9 * 512).ok());
        std::vector<uint8_t> blk(512, 0x77);
        REQUIRE(t->write_hashed(512 * 20, blk).ok());
        REQUIRE(t->close().ok());
    }
    uint8_t bits = 0;
    REQUIRE(dev->read(8 * 512, Bytes(&bits, 1)) == Status::Ok);
    CHECK(bits == 1);  // still the kernel's to recalculate
    // With the bit cleared (as the kernel leaves it once recalculated, here
    // without recalculating), the bad tag fails again.
    const uint8_t zero = 0;
    REQUIRE(dev->write(8 * 512, ConstBytes(&zero, 1)) == Status::Ok);
    auto t = must_open(dev, nullptr, options_for(c, true));
    CHECK(checked_at(*t, 9 * 512).status() == Status::Corrupt);
    CHECK(checked_at(*t, 20 * 512).ok());
}
