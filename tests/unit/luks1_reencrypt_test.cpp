// LUKS1 legacy reencryption (reencrypt_luks1.hpp): what cryptsetup 2.6.1
// leaves as a plain user (tests/golden/luks1-reencrypt/, recorded by
// record.sh there) is rolled back or finished into an image cryptsetup opens
// with the original plaintext; our own re-key follows the same protocol, and
// a crash at any store write (a torn write) resumes to the right plaintext.
#include "paths.hpp"
#include "test_util.hpp"
#include "tmp_dir.hpp"
#include "torn_store.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/luks/container.hpp>
#include <blkcrypt/luks/luks1.hpp>
#include <blkcrypt/luks/reencrypt_luks1.hpp>
#include <blkcrypt/shash.hpp>

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <stdlib.h>

using namespace blkcrypt;
namespace luks1 = blkcrypt::luks::luks1;
namespace legacy = blkcrypt::luks::luks1::legacy;
using testutil::registry;
using testutil::text;
using testutil::TornStore;

namespace {

const std::string kGolden = std::string(testutil::kSourceDir) + "/tests/golden/luks1-reencrypt/";
const std::string kUuid = "5d2f4a1e-8a7b-4c3d-9e0f-123456789abc";
const std::string kPass = "legacy-pass";

struct TmpDir : testutil::TmpDir {
    TmpDir() : testutil::TmpDir("blkcrypt-reluks1") {}
};

std::vector<uint8_t> xz(const std::string& path) {
    std::vector<uint8_t> out;
    FILE* p = ::popen(("xz -dc '" + path + "'").c_str(), "r");
    REQUIRE(p);
    uint8_t buf[65536];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.insert(out.end(), buf, buf + n);
    REQUIRE(::pclose(p) == 0);
    return out;
}

std::vector<uint8_t> slurp(const std::string& path) {
    std::vector<uint8_t> out;
    REQUIRE(testutil::read_file(path, &out));
    return out;
}

void put(const std::string& path, const std::vector<uint8_t>& b) {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

std::string sha256(ConstBytes b) {
    Result<Shash> h = Shash::alloc(registry(), "sha256");
    REQUIRE(h);
    std::vector<uint8_t> d(32);
    REQUIRE(h->digest(b, d) == Status::Ok);
    return testutil::hex(d);
}

// The plaintext and volume key pw opens in image (empty when it does not open).
struct Opened {
    std::vector<uint8_t> plain, key;
};
Opened open_image(const std::vector<uint8_t>& image, const std::string& pw) {
    auto s = std::make_shared<MemoryStore>(0);
    s->data() = image;
    Result<luks::Volume> v = luks::open(registry(), *s, text(pw));
    if (!v) return {};
    Opened o;
    o.key.assign(v->table.key.data(), v->table.key.data() + v->table.key.size());
    auto t = dm::CryptTarget::create(registry(), v->table, s);
    REQUIRE(t);
    o.plain.resize((*t)->length_sectors() * 512);
    dm::Bio bio;
    bio.dir = dm::BioDir::Read;
    bio.vecs.push_back({o.plain.data(), o.plain.size()});
    REQUIRE((*t)->submit_sync(bio) == Status::Ok);
    return o;
}

// cryptsetup itself (as whoever runs the tests: luksDump and
// --test-passphrase need no device-mapper) opens image with pw. True when
// it is not installed: our own checks still run.
bool cryptsetup_opens(const std::vector<uint8_t>& image, const std::string& pw) {
    static const bool have = std::system("cryptsetup --version >/dev/null 2>&1") == 0;
    if (!have) return true;
    TmpDir d;
    put(d / "img", image);
    put(d / "pw", std::vector<uint8_t>(pw.begin(), pw.end()));
    return std::system(("cryptsetup luksDump '" + d / "img" + "' >/dev/null 2>&1 && cryptsetup open --test-passphrase --key-file '" +
                        d / "pw" + "' '" + d / "img" + "' 2>/dev/null")
                           .c_str()) == 0;
}

// cryptsetup's leftover in dir: the image (returned) and its three files.
std::vector<uint8_t> golden_leftover(const TmpDir& d) {
    const std::string base = "LUKS-" + kUuid;
    put(d / (base + ".log"), slurp(kGolden + base + ".log"));
    put(d / (base + ".org"), xz(kGolden + base + ".org.xz"));
    put(d / (base + ".new"), xz(kGolden + base + ".new.xz"));
    return xz(kGolden + "img.xz");
}

std::string golden_plain_sha() {
    std::ifstream f(kGolden + "plain.sha256");
    std::string s;
    f >> s;
    return s;
}

bool leftover_gone(const TmpDir& d, const std::string& uuid) {
    for (const char* ext : {"log", "org", "new", "blk"})
        if (std::filesystem::exists(d / ("LUKS-" + uuid + "." + ext))) return false;
    return true;
}

// A LUKS1 image: payload at 2 MiB (8 keyslots of 32-byte keys pass 1 MiB), `data` bytes of known plaintext, pw in slot 0.
std::vector<uint8_t> make_image(const std::vector<uint8_t>& plain, const std::string& pw, const std::string& uuid) {
    auto s = std::make_shared<MemoryStore>((2u << 20) + plain.size());
    luks1::FormatParams p;
    p.key_bytes = 32;
    p.force_iterations = 1000;
    p.uuid = uuid;
    std::vector<uint8_t> vk(32, 0x5a);
    Result<luks1::Header> h = luks1::format(registry(), *s, p, vk, text(pw));
    REQUIRE(h);
    Result<luks::Volume> v = luks::open(registry(), *s, text(pw));
    REQUIRE(v);
    auto t = dm::CryptTarget::create(registry(), v->table, s);
    INFO((t ? std::string() : t.error().message));
    REQUIRE(t);
    dm::Bio bio;
    bio.dir = dm::BioDir::Write;
    bio.vecs.push_back({const_cast<uint8_t*>(plain.data()), plain.size()});
    REQUIRE((*t)->submit_sync(bio) == Status::Ok);
    return s->data();
}

std::vector<uint8_t> pattern(std::size_t n) {
    std::vector<uint8_t> b(n);
    for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>((i * 131 + i / 512) ^ (i >> 9));
    return b;
}

// Runs `run` on img crashed at each of its `total` writes, torn both ways,
// each with its own leftover folder (set in p.dir), and hands `check` that
// folder, the image the crash left and its unusable-mark UUID (none: the
// crash tore the mark, or the run never wrote it).
template <class Params, class Run, class Check>
void crash_at_every_write(const std::vector<uint8_t>& img, int total, Params& p, Run run, Check check) {
    for (int at : testutil::crash_points(total))
        for (const auto tear : {TornStore::Tear::Prefix, TornStore::Tear::Suffix}) {
            INFO("crash at write " << at << (tear == TornStore::Tear::Prefix ? " (prefix)" : " (suffix)"));
            TmpDir d;
            p.dir = d.path;
            TornStore s(img, at, TornStore::kHalfBytes, tear);
            REQUIRE(!run(s));
            MemoryStore after(0);
            after.data() = s.image();
            Result<std::optional<std::string>> marked = legacy::unusable_uuid(after);
            REQUIRE(marked);
            check(at, d, after, *marked);
        }
}

}  // namespace

TEST_CASE("luks1 reencrypt: the log reads and prints as cryptsetup's", "[reencrypt-luks1]") {
    const std::vector<uint8_t> raw = slurp(kGolden + "LUKS-" + kUuid + ".log");
    Result<legacy::Log> log = legacy::parse_log(raw, kUuid);
    REQUIRE(log);
    CHECK(log->direction == legacy::Direction::Forward);
    CHECK(log->mode == legacy::Mode::Reencrypt);
    CHECK(log->offset == 0);
    CHECK(log->shift == 0);
    const auto again = legacy::format_log(*log);
    CHECK(std::vector<uint8_t>(again.begin(), again.end()) == raw);

    legacy::Log l2{kUuid, legacy::Direction::Backward, legacy::Mode::Reencrypt, 123456789012ull, 4096};
    const auto b2 = legacy::format_log(l2);
    Result<legacy::Log> p2 = legacy::parse_log(b2, kUuid);
    REQUIRE(p2);
    CHECK(p2->direction == legacy::Direction::Backward);
    CHECK(p2->offset == 123456789012ull);
    CHECK(p2->shift == 4096);

    auto mangled = [&](const std::string& from, const std::string& to) {
        std::string s(raw.begin(), raw.end());
        const std::size_t at = s.find(from);
        REQUIRE(at != std::string::npos);
        s.replace(at, from.size(), to);
        s.resize(512, '\0');
        return legacy::parse_log(ConstBytes(reinterpret_cast<const uint8_t*>(s.data()), 512), kUuid);
    };
    CHECK(mangled("version = 2", "version = 3").status() == Status::Invalid);
    CHECK(mangled("mode = 0", "mode = 3").status() == Status::Invalid);
    CHECK(mangled("shift = 0", "shaft = 0").status() == Status::Invalid);
    CHECK(mangled("UUID = 5d2f", "UUID = 6d2f").status() == Status::Invalid);
    CHECK(mangled("offset = 0", "offset=512").value().offset == 512);  // sscanf's whitespace matches none
    CHECK(legacy::parse_log(ConstBytes(raw).first(100), kUuid).status() == Status::IoError);
}

TEST_CASE("luks1 reencrypt: cryptsetup's non-root leftover rolls back to the original image", "[reencrypt-luks1]") {
    TmpDir d;
    std::vector<uint8_t> img = golden_leftover(d);
    REQUIRE(open_image(img, kPass).plain.empty());  // LUKS\xde\xad: nothing opens it
    MemoryStore s(0);
    s.data() = img;
    Result<legacy::Leftover> lo = legacy::find(registry(), s, d.path);
    REQUIRE(lo);
    CHECK(lo->uuid == kUuid);
    REQUIRE(legacy::rollback(registry(), s, *lo));
    CHECK(leftover_gone(d, kUuid));
    const Opened o = open_image(s.data(), kPass);
    REQUIRE(!o.plain.empty());
    CHECK(sha256(o.plain) == golden_plain_sha());
    CHECK(cryptsetup_opens(s.data(), kPass));
    // Without the files (or in another directory) it is not found.
    CHECK(!legacy::find(registry(), s, d.path));
}

TEST_CASE("luks1 reencrypt: cryptsetup's non-root leftover finishes with the new key", "[reencrypt-luks1]") {
    for (const bool backward : {false, true}) {
        DYNAMIC_SECTION((backward ? "backward" : "forward")) {
            TmpDir d;
            std::vector<uint8_t> img = golden_leftover(d);
            if (backward) {
                // cryptsetup's backward walk as its log starts it (offset ~0: the end).
                legacy::Log l{kUuid, legacy::Direction::Backward, legacy::Mode::Reencrypt, ~uint64_t{0}, 0};
                const auto b = legacy::format_log(l);
                put(d / ("LUKS-" + kUuid + ".log"), std::vector<uint8_t>(b.begin(), b.end()));
            }
            MemoryStore s(0);
            s.data() = img;
            Result<legacy::Leftover> lo = legacy::find(registry(), s, d.path);
            REQUIRE(lo);
            CHECK(legacy::finish(registry(), s, *lo, text("wrong")).status() == Status::NoKey);
            legacy::RunOptions ro;
            ro.block_size = 24 * 1024;  // not a divisor of the 64 KiB: a short last block
            REQUIRE(legacy::finish(registry(), s, *lo, text(kPass), ro));
            CHECK(leftover_gone(d, kUuid));
            const Opened o = open_image(s.data(), kPass);
            REQUIRE(!o.plain.empty());
            CHECK(sha256(o.plain) == golden_plain_sha());
            MemoryStore org(0);
            org.data() = xz(kGolden + "LUKS-" + kUuid + ".org.xz");
            Result<luks::Volume> old = luks::open(registry(), org, text(kPass));
            REQUIRE(old);
            CHECK(o.key != std::vector<uint8_t>(old->table.key.data(), old->table.key.data() + old->table.key.size()));
            CHECK(cryptsetup_opens(s.data(), kPass));
        }
    }
}

TEST_CASE("luks1 reencrypt: re-key in place, interrupted and resumed", "[reencrypt-luks1]") {
    const std::string uuid = "0a1b2c3d-4e5f-4061-8293-a4b5c6d7e8f9";
    const std::vector<uint8_t> plain = pattern(256 * 1024);
    const std::vector<uint8_t> img = make_image(plain, "pw", uuid);
    const std::vector<uint8_t> old_key = open_image(img, "pw").key;
    REQUIRE(!old_key.empty());
    legacy::ReencryptParams p;
    p.force_iterations = 1000;
    legacy::RunOptions ro;
    ro.block_size = 64 * 1024;

    SECTION("to the end, with a new cipher and key size") {
        TmpDir d;
        p.dir = d.path;
        p.cipher = "aes-cbc-essiv:sha256";
        p.key_bytes = 16;
        MemoryStore s(0);
        s.data() = img;
        REQUIRE(legacy::reencrypt(registry(), s, text("pw"), p, ro));
        CHECK(leftover_gone(d, uuid));
        Result<luks1::Header> h = luks1::parse_header(s.data());
        REQUIRE(h);
        CHECK(h->cipher_spec() == "aes-cbc-essiv:sha256");
        CHECK(h->uuid == uuid);
        const Opened o = open_image(s.data(), "pw");
        CHECK(o.plain == plain);
        CHECK(o.key.size() == 16);
        CHECK(cryptsetup_opens(s.data(), "pw"));
        CHECK(legacy::reencrypt(registry(), s, text("nope"), p, ro).status() == Status::NoKey);
    }
    SECTION("stopped after a block: rollback refused, finish resumes") {
        TmpDir d;
        p.dir = d.path;
        MemoryStore s(0);
        s.data() = img;
        legacy::RunOptions stop = ro;
        stop.progress = [](uint64_t, uint64_t) { return false; };
        CHECK(legacy::reencrypt(registry(), s, text("pw"), p, stop).status() == Status::Interrupted);
        Result<legacy::Leftover> lo = legacy::find(registry(), s, d.path);
        REQUIRE(lo);
        CHECK(lo->log.offset == 64 * 1024);  // the log says how far, as cryptsetup's --write-log
        CHECK(legacy::rollback(registry(), s, *lo).status() == Status::Invalid);
        CHECK(legacy::reencrypt(registry(), s, text("pw"), p, ro).status() == Status::Invalid);  // in progress
        REQUIRE(legacy::finish(registry(), s, *lo, text("pw"), ro));
        const Opened o = open_image(s.data(), "pw");
        CHECK(o.plain == plain);
        CHECK(o.key != old_key);
        CHECK(leftover_gone(d, uuid));
    }
}

TEST_CASE("luks1 reencrypt: a crash at any store write resumes to the plaintext", "[reencrypt-luks1]") {
    const std::string uuid = "1a1b2c3d-4e5f-4061-8293-a4b5c6d7e8f9";
    const std::vector<uint8_t> plain = pattern(192 * 1024);
    const std::vector<uint8_t> img = make_image(plain, "pw", uuid);
    legacy::ReencryptParams p;
    p.force_iterations = 1000;
    legacy::RunOptions ro;
    ro.block_size = 64 * 1024;

    int total = 0;
    {
        TmpDir d;
        p.dir = d.path;
        TornStore clean(img, 0);
        REQUIRE(legacy::reencrypt(registry(), clean, text("pw"), p, ro));
        total = clean.writes();
    }
    REQUIRE(total >= 5);  // the magic, three blocks, the header
    int resumed = 0;
    crash_at_every_write(
        img, total, p, [&](TornStore& s) { return bool(legacy::reencrypt(registry(), s, text("pw"), p, ro)); },
        [&](int, const TmpDir& d, MemoryStore& after, const std::optional<std::string>& marked) {
            if (marked) {
                Result<legacy::Leftover> lo = legacy::find(registry(), after, d.path);
                REQUIRE(lo);
                REQUIRE(legacy::finish(registry(), after, *lo, text("pw"), ro));
                ++resumed;
            }
            CHECK(open_image(after.data(), "pw").plain == plain);
        });
    CHECK(resumed > 0);
}

TEST_CASE("luks1 reencrypt: an image cryptsetup left half converted in the kernel finishes", "[reencrypt-luks1]") {
    // tests/golden/luks1-reencrypt-midway/record.sh: cryptsetup converted the
    // first 1 MiB block as root with dm-crypt, then hit an I/O error and
    // logged offset 1048576.
    const std::string dir = std::string(testutil::kSourceDir) + "/tests/golden/luks1-reencrypt-midway/";
    const std::string uuid = "7e3a5b2c-1d4f-4a6b-8c9d-0e1f2a3b4c5d", base = "LUKS-" + uuid;
    TmpDir d;
    put(d / (base + ".log"), slurp(dir + base + ".log"));
    put(d / (base + ".org"), xz(dir + base + ".org.xz"));
    put(d / (base + ".new"), xz(dir + base + ".new.xz"));
    MemoryStore s(0);
    s.data() = xz(dir + "img.xz");
    Result<legacy::Leftover> lo = legacy::find(registry(), s, d.path);
    REQUIRE(lo);
    CHECK(lo->log.offset == 1048576);
    CHECK(legacy::rollback(registry(), s, *lo).status() == Status::Invalid);  // data already converted
    legacy::RunOptions ro;
    ro.block_size = 256 * 1024;
    REQUIRE(legacy::finish(registry(), s, *lo, text("midway-pass"), ro));
    CHECK(leftover_gone(d, uuid));
    const Opened o = open_image(s.data(), "midway-pass");
    REQUIRE(!o.plain.empty());
    std::ifstream f(dir + "plain.sha256");
    std::string want;
    f >> want;
    CHECK(sha256(o.plain) == want);
    CHECK(cryptsetup_opens(s.data(), "midway-pass"));
}

TEST_CASE("luks1 reencrypt: cryptsetup's leftover, finish crashing at each write, resumed", "[reencrypt-luks1]") {
    legacy::RunOptions ro;
    ro.block_size = 32 * 1024;  // two blocks, then the header
    for (int at = 1; at <= 3; ++at) {
        INFO("crash at write " << at);
        TmpDir d;
        TornStore s(golden_leftover(d), at);
        Result<legacy::Leftover> lo = legacy::find(registry(), s, d.path);
        REQUIRE(lo);
        REQUIRE(!legacy::finish(registry(), s, *lo, text(kPass), ro));
        MemoryStore after(0);
        after.data() = s.image();
        Result<legacy::Leftover> again = legacy::find(registry(), after, d.path);
        if (again) REQUIRE(legacy::finish(registry(), after, *again, text(kPass), ro));
        CHECK(sha256(open_image(after.data(), kPass).plain) == golden_plain_sha());
    }
}

TEST_CASE("luks1 reencrypt: a block journal of another run is not replayed", "[reencrypt-luks1]") {
    const std::string uuid = "2a1b2c3d-4e5f-4061-8293-a4b5c6d7e8f9";
    std::vector<uint8_t> plain_a = pattern(256 * 1024), plain_b = plain_a;
    for (auto& c : plain_a) c ^= 0xff;
    legacy::ReencryptParams p;
    p.force_iterations = 1000;
    legacy::RunOptions ro;
    ro.block_size = 64 * 1024;
    TmpDir da, db;
    // Run A crashes inside its third block: its journal names log offset 131072.
    p.dir = da.path;
    TornStore a(make_image(plain_a, "pw", uuid), 4);
    REQUIRE(!legacy::reencrypt(registry(), a, text("pw"), p, ro));
    // Run B (another image, the same UUID) stops cleanly at offset 131072.
    p.dir = db.path;
    MemoryStore b(0);
    b.data() = make_image(plain_b, "pw", uuid);
    legacy::RunOptions stop = ro;
    int blocks = 0;
    stop.progress = [&](uint64_t, uint64_t) { return ++blocks < 2; };
    REQUIRE(legacy::reencrypt(registry(), b, text("pw"), p, stop).status() == Status::Interrupted);
    const std::string blk = "LUKS-" + uuid + ".blk";
    std::filesystem::copy_file(da / blk, db / blk, std::filesystem::copy_options::overwrite_existing);
    Result<legacy::Leftover> lo = legacy::find(registry(), b, db.path);
    REQUIRE(lo);
    REQUIRE(lo->log.offset == 131072);
    REQUIRE(legacy::finish(registry(), b, *lo, text("pw"), ro));
    CHECK(open_image(b.data(), "pw").plain == plain_b);
}

TEST_CASE("luks1 reencrypt: --keep-key rewrites the header only, and a crash at any write leaves old or new",
          "[reencrypt-luks1]") {
    const std::string uuid = "2a1b2c3d-4e5f-4061-8293-a4b5c6d7e8f9";
    const std::vector<uint8_t> plain = pattern(128 * 1024);
    const std::vector<uint8_t> img = make_image(plain, "pw", uuid);
    const std::vector<uint8_t> old_key = open_image(img, "pw").key;
    REQUIRE(!old_key.empty());
    const std::size_t payload = 2u << 20;
    const auto data_of = [&](const std::vector<uint8_t>& i) { return std::vector<uint8_t>(i.begin() + payload, i.end()); };
    legacy::ReencryptParams p;
    p.force_iterations = 1000;
    p.keep_key = true;
    p.hash = "sha512";

    SECTION("refused with a new cipher or a shift, nothing written") {
        for (int c = 0; c < 2; ++c) {
            TmpDir d;
            legacy::ReencryptParams q = p;
            q.dir = d.path;
            if (c == 0) q.cipher = "aes-cbc-essiv:sha256";
            else q.reduce_bytes = 64 * 1024;
            MemoryStore s(0);
            s.data() = img;
            CHECK(legacy::reencrypt(registry(), s, text("pw"), q).status() == Status::Invalid);
            CHECK(s.data() == img);
            CHECK(leftover_gone(d, uuid));
        }
    }

    int total = 0;
    {
        TmpDir d;
        p.dir = d.path;
        TornStore clean(img, 0);
        REQUIRE(legacy::reencrypt(registry(), clean, text("pw"), p));
        total = clean.writes();
        CHECK(leftover_gone(d, uuid));
        Result<luks1::Header> h = luks1::parse_header(clean.image());
        REQUIRE(h);
        CHECK(h->hash_spec == "sha512");
        CHECK(h->uuid == uuid);
        const Opened o = open_image(clean.image(), "pw");
        CHECK(o.key == old_key);
        CHECK(o.plain == plain);
        CHECK(data_of(clean.image()) == data_of(img));  // not a byte of the data rewritten
        CHECK(cryptsetup_opens(clean.image(), "pw"));
    }
    REQUIRE(total >= 3);  // the magic, the header with the magic still marked, the magic
    int marked_left = 0;
    // Torn in half either way, and after its first sector only (the header
    // sector without its keyslot areas: a restore that wrote the real magic
    // in its first write would leave a header whose keyslot does not open).
    const std::pair<std::size_t, TornStore::Tear> tears[] = {{TornStore::kHalfBytes, TornStore::Tear::Prefix},
                                                             {TornStore::kHalfBytes, TornStore::Tear::Suffix},
                                                             {1, TornStore::Tear::Prefix}};
    for (int at : testutil::crash_points(total))
        for (const auto& [keep, tear] : tears)
            for (const bool roll : {false, true}) {
                INFO("crash at write " << at << (tear == TornStore::Tear::Prefix ? " (prefix " : " (suffix ") << keep
                                       << ")" << (roll ? ", rolled back" : ", finished"));
                TmpDir d;
                p.dir = d.path;
                TornStore s(img, at, keep, tear);
                REQUIRE(!legacy::reencrypt(registry(), s, text("pw"), p));
                MemoryStore after(0);
                after.data() = s.image();
                Result<std::optional<std::string>> marked = legacy::unusable_uuid(after);
                REQUIRE(marked);
                if (*marked) {
                    ++marked_left;
                    Result<legacy::Leftover> lo = legacy::find(registry(), after, d.path);
                    REQUIRE(lo);
                    if (roll) REQUIRE(legacy::rollback(registry(), after, *lo));
                    else REQUIRE(legacy::finish(registry(), after, *lo, text("pw")));
                    CHECK(leftover_gone(d, uuid));
                    Result<luks1::Header> h = luks1::parse_header(after.data());
                    REQUIRE(h);
                    CHECK(h->hash_spec == (roll ? "sha256" : "sha512"));
                }
                const Opened o = open_image(after.data(), "pw");
                CHECK(o.key == old_key);
                CHECK(o.plain == plain);
                CHECK(data_of(after.data()) == data_of(img));
            }
    CHECK(marked_left > 0);
}

TEST_CASE("luks1 reencrypt: --reduce-device-size moves the data on, --device-size converts the start only",
          "[reencrypt-luks1]") {
    const std::string uuid = "3a1b2c3d-4e5f-4061-8293-a4b5c6d7e8f9";
    const std::vector<uint8_t> plain = pattern(192 * 1024);
    const std::vector<uint8_t> img = make_image(plain, "pw", uuid);
    legacy::ReencryptParams p;
    p.force_iterations = 1000;
    legacy::RunOptions ro;
    ro.block_size = 32 * 1024;

    SECTION("cryptsetup's checks of the reduce size, nothing written") {
        for (const uint64_t bad : {uint64_t{1000}, uint64_t{1536}, uint64_t{192 * 1024}, (uint64_t{1} << 30) + 4096}) {
            INFO("reduce " << bad);
            TmpDir d;
            legacy::ReencryptParams q = p;
            q.dir = d.path;
            q.reduce_bytes = bad;
            MemoryStore s(0);
            s.data() = img;
            CHECK(legacy::reencrypt(registry(), s, text("pw"), q, ro).status() == Status::Invalid);
            CHECK(s.data() == img);
            CHECK(leftover_gone(d, uuid));
        }
    }
    SECTION("--device-size: the first bytes only") {
        TmpDir d;
        p.dir = d.path;
        legacy::RunOptions r = ro;
        r.device_size = 64 * 1024;
        MemoryStore s(0);
        s.data() = img;
        REQUIRE(legacy::reencrypt(registry(), s, text("pw"), p, r));
        const Opened o = open_image(s.data(), "pw");
        REQUIRE(o.plain.size() == plain.size());
        CHECK(std::equal(plain.begin(), plain.begin() + 64 * 1024, o.plain.begin()));
        CHECK(!std::equal(plain.begin() + 64 * 1024, plain.end(), o.plain.begin() + 64 * 1024));
        r.device_size = 4 << 20;
        s.data() = img;
        TmpDir d2;
        p.dir = d2.path;
        CHECK(legacy::reencrypt(registry(), s, text("pw"), p, r).status() == Status::Invalid);
        CHECK(s.data() == img);
        CHECK(leftover_gone(d2, uuid));
    }
    SECTION("a shift of 64 KiB, crashed at any write and resumed") {
        p.reduce_bytes = 64 * 1024;
        const std::vector<uint8_t> want(plain.begin(), plain.end() - 64 * 1024);
        int total = 0;
        {
            TmpDir d;
            p.dir = d.path;
            TornStore clean(img, 0);
            REQUIRE(legacy::reencrypt(registry(), clean, text("pw"), p, ro));
            total = clean.writes();
            Result<luks1::Header> h = luks1::parse_header(clean.image());
            REQUIRE(h);
            CHECK(h->payload_offset == 4096 + 128);
            CHECK(open_image(clean.image(), "pw").plain == want);
            CHECK(cryptsetup_opens(clean.image(), "pw"));
        }
        REQUIRE(total >= 6);
        int resumed = 0;
        crash_at_every_write(
            img, total, p, [&](TornStore& s) { return bool(legacy::reencrypt(registry(), s, text("pw"), p, ro)); },
            [&](int at, const TmpDir& d, MemoryStore& after, const std::optional<std::string>& marked) {
                if (!marked) {  // the crash tore the mark (nothing changed) or the final magic (all done)
                    CHECK(open_image(after.data(), "pw").plain == (at == 1 ? plain : want));
                    return;
                }
                Result<legacy::Leftover> lo = legacy::find(registry(), after, d.path);
                REQUIRE(lo);
                CHECK(lo->log.direction == legacy::Direction::Backward);
                REQUIRE(legacy::finish(registry(), after, *lo, text("pw"), ro));
                ++resumed;
                CHECK(open_image(after.data(), "pw").plain == want);
            });
        CHECK(resumed > 0);
    }
}

TEST_CASE("luks1 reencrypt: --encrypt in place and --decrypt, crashed at any write and resumed", "[reencrypt-luks1]") {
    legacy::RunOptions ro;
    ro.block_size = 128 * 1024;

    SECTION("encrypt: the plaintext moves on behind a new header") {
        const std::vector<uint8_t> orig = pattern(2u << 20);
        const uint64_t reduce = (1u << 20) + 64 * 1024;  // past the keyslots of a 32-byte key (2056 sectors)
        const std::vector<uint8_t> want(orig.begin(), orig.end() - static_cast<std::ptrdiff_t>(reduce));
        legacy::EncryptParams p;
        p.force_iterations = 1000;
        p.reduce_bytes = reduce;
        {
            TmpDir d;
            p.dir = d.path;
            legacy::EncryptParams small = p;
            small.reduce_bytes = 1u << 20;  // the keyslots do not fit: cryptsetup's check
            MemoryStore s(0);
            s.data() = orig;
            CHECK(legacy::encrypt(registry(), s, text("pw"), small, ro).status() == Status::Invalid);
            CHECK(s.data() == orig);
            CHECK(leftover_gone(d, legacy::kEncryptUuid));
        }
        int total = 0;
        {
            TmpDir d;
            p.dir = d.path;
            TornStore clean(orig, 0);
            REQUIRE(legacy::encrypt(registry(), clean, text("pw"), p, ro));
            total = clean.writes();
            CHECK(leftover_gone(d, legacy::kEncryptUuid));
            Result<luks1::Header> h = luks1::parse_header(clean.image());
            REQUIRE(h);
            CHECK(h->payload_offset == reduce / 512);
            CHECK(h->cipher_spec() == "aes-xts-plain64");
            CHECK(h->key_bytes == 32);
            CHECK(open_image(clean.image(), "pw").plain == want);
            CHECK(cryptsetup_opens(clean.image(), "pw"));
            MemoryStore again(0);
            again.data() = clean.image();
            CHECK(legacy::encrypt(registry(), again, text("pw"), p, ro).status() == Status::Invalid);  // LUKS already
        }
        REQUIRE(total >= 10);
        // Wherever it crashed, an --encrypt run is found by its fixed UUID.
        crash_at_every_write(
            orig, total, p, [&](TornStore& s) { return bool(legacy::encrypt(registry(), s, text("pw"), p, ro)); },
            [&](int, const TmpDir& d, MemoryStore& after, const std::optional<std::string>&) {
                Result<legacy::Leftover> lo = legacy::find_unmarked(registry(), legacy::kEncryptUuid, d.path);
                REQUIRE(lo);
                CHECK(lo->log.mode == legacy::Mode::Encrypt);
                CHECK(legacy::finish(registry(), after, *lo, text("nope"), ro).status() == Status::NoKey);
                REQUIRE(legacy::finish(registry(), after, *lo, text("pw"), ro));
                CHECK(leftover_gone(d, legacy::kEncryptUuid));
                CHECK(open_image(after.data(), "pw").plain == want);
            });
    }
    SECTION("decrypt: the plaintext back at 0, the tail zeroed, no header") {
        const std::string uuid = "4a1b2c3d-4e5f-4061-8293-a4b5c6d7e8f9";
        const std::vector<uint8_t> plain = pattern(192 * 1024);
        const std::vector<uint8_t> img = make_image(plain, "pw", uuid);
        std::vector<uint8_t> want = plain;
        want.resize(img.size(), 0);
        legacy::DecryptParams p;
        int total = 0;
        {
            TmpDir d;
            p.dir = d.path;
            TornStore clean(img, 0);
            CHECK(legacy::decrypt(registry(), clean, text("nope"), p, ro).status() == Status::NoKey);
            CHECK(clean.image() == img);
            REQUIRE(legacy::decrypt(registry(), clean, text("pw"), p, ro));
            total = clean.writes();
            CHECK(clean.image() == want);
            CHECK(leftover_gone(d, uuid));
        }
        REQUIRE(total >= 5);
        int unmarked = 0;
        crash_at_every_write(
            img, total, p, [&](TornStore& s) { return bool(legacy::decrypt(registry(), s, text("pw"), p, ro)); },
            [&](int, const TmpDir& d, MemoryStore& after, const std::optional<std::string>& marked) {
                if (!marked) ++unmarked;
                Result<legacy::Leftover> lo =
                    marked ? legacy::find(registry(), after, d.path) : legacy::find_unmarked(registry(), uuid, d.path);
                REQUIRE(lo);
                CHECK(lo->log.mode == legacy::Mode::Decrypt);
                REQUIRE(legacy::finish(registry(), after, *lo, text("pw"), ro));
                CHECK(leftover_gone(d, uuid));
                CHECK(after.data() == want);
            });
        CHECK(unmarked > 0);  // the plaintext's first block overwrote the mark: resumed by UUID
    }
}

TEST_CASE("luks1 reencrypt: a detached header, either store crashed at any write, resumed", "[reencrypt-luks1]") {
    const std::string uuid = "5a1b2c3d-4e5f-4061-8293-a4b5c6d7e8f9";
    const std::vector<uint8_t> plain = pattern(192 * 1024);
    // The header alone (payload 0, detached), the data encrypted under it.
    MemoryStore hs((2u << 20));
    luks1::FormatParams fp;
    fp.key_bytes = 32;
    fp.force_iterations = 1000;
    fp.uuid = uuid;
    fp.detached = true;
    fp.alignment = 0;
    std::vector<uint8_t> vk(32, 0x3c);
    REQUIRE(luks1::format(registry(), hs, fp, vk, text("pw")));
    auto ds = std::make_shared<MemoryStore>(plain.size());
    {
        Result<dm::CryptTable> ct = dm::parse_cipher_spec("aes-xts-plain64");
        REQUIRE(ct);
        dm::CryptTable t = std::move(ct).value();
        t.key.assign(vk);
        auto tgt = dm::CryptTarget::create(registry(), t, ds);
        REQUIRE(tgt);
        dm::Bio bio;
        bio.dir = dm::BioDir::Write;
        bio.vecs.push_back({const_cast<uint8_t*>(plain.data()), plain.size()});
        REQUIRE((*tgt)->submit_sync(bio) == Status::Ok);
    }
    const std::vector<uint8_t> hdr0 = hs.data(), data0 = ds->data();
    // The plaintext under the header in h, the data in d.
    const auto plain_of = [&](const std::vector<uint8_t>& h, const std::vector<uint8_t>& d) {
        MemoryStore hm(0);
        hm.data() = h;
        Result<luks1::Header> hh = luks1::read_header(registry(), hm);
        if (!hh || hh->payload_offset != 0) return std::vector<uint8_t>();
        Result<luks1::Unlocked> u = luks1::open_any(registry(), hm, *hh, text("pw"));
        if (!u) return std::vector<uint8_t>();
        auto dm_ = std::make_shared<MemoryStore>(0);
        dm_->data() = d;
        Result<dm::CryptTable> ct = dm::parse_cipher_spec(hh->cipher_spec());
        REQUIRE(ct);
        dm::CryptTable t = std::move(ct).value();
        t.key.assign(u->volume_key.span());
        auto tgt = dm::CryptTarget::create(registry(), t, dm_);
        REQUIRE(tgt);
        std::vector<uint8_t> out(d.size());
        dm::Bio bio;
        bio.dir = dm::BioDir::Read;
        bio.vecs.push_back({out.data(), out.size()});
        REQUIRE((*tgt)->submit_sync(bio) == Status::Ok);
        return out;
    };
    REQUIRE(plain_of(hdr0, data0) == plain);
    legacy::ReencryptParams p;
    p.force_iterations = 1000;
    legacy::RunOptions ro;
    ro.block_size = 64 * 1024;

    int hw = 0, dw = 0;
    {
        TmpDir d;
        p.dir = d.path;
        TornStore h(hdr0, 0), dd(data0, 0);
        ro.data = &dd;
        REQUIRE(legacy::reencrypt(registry(), h, text("pw"), p, ro));
        hw = h.writes();
        dw = dd.writes();
        CHECK(leftover_gone(d, uuid));
        CHECK(dd.image() != data0);
        CHECK(plain_of(h.image(), dd.image()) == plain);
    }
    REQUIRE(hw >= 3);
    REQUIRE(dw == 3);
    int resumed = 0;
    for (const bool crash_header : {true, false})
        for (int at : testutil::crash_points(crash_header ? hw : dw))
            for (const auto tear : {TornStore::Tear::Prefix, TornStore::Tear::Suffix}) {
                INFO((crash_header ? "header" : "data") << " crash at write " << at);
                TmpDir d;
                p.dir = d.path;
                TornStore h(hdr0, crash_header ? at : 0, TornStore::kHalfBytes, tear);
                TornStore dd(data0, crash_header ? 0 : at, TornStore::kHalfBytes, tear);
                ro.data = &dd;
                REQUIRE(!legacy::reencrypt(registry(), h, text("pw"), p, ro));
                MemoryStore ha(0), da(0);
                ha.data() = h.image();
                da.data() = dd.image();
                Result<std::optional<std::string>> marked = legacy::unusable_uuid(ha);
                REQUIRE(marked);
                if (*marked) {
                    Result<legacy::Leftover> lo = legacy::find(registry(), ha, d.path);
                    REQUIRE(lo);
                    ro.data = &da;
                    REQUIRE(legacy::finish(registry(), ha, *lo, text("pw"), ro));
                    ++resumed;
                }
                CHECK(plain_of(ha.data(), da.data()) == plain);
            }
    CHECK(resumed > 0);
}

TEST_CASE("luks1 reencrypt: a crash inside the first block, rolled back, gives the plaintext", "[reencrypt-luks1]") {
    // The log still says offset 0 (nothing converted), but the first block's
    // write landed in part: rollback must put its old bytes back before the
    // old header (the block journal), as finish does before redoing it.
    const std::string uuid = "6a1b2c3d-4e5f-4061-8293-a4b5c6d7e8f9";
    const std::vector<uint8_t> plain = pattern(192 * 1024);
    const std::vector<uint8_t> img = make_image(plain, "pw", uuid);
    legacy::ReencryptParams p;
    p.force_iterations = 1000;
    legacy::RunOptions ro;
    ro.block_size = 64 * 1024;
    for (const auto tear : {TornStore::Tear::Prefix, TornStore::Tear::Suffix}) {
        TmpDir d;
        p.dir = d.path;
        TornStore s(img, 2, TornStore::kHalfBytes, tear);  // write 1 marks, write 2 is the first block
        REQUIRE(!legacy::reencrypt(registry(), s, text("pw"), p, ro));
        MemoryStore after(0);
        after.data() = s.image();
        Result<legacy::Leftover> lo = legacy::find(registry(), after, d.path);
        REQUIRE(lo);
        REQUIRE(lo->log.offset == 0);
        REQUIRE(legacy::rollback(registry(), after, *lo));
        CHECK(open_image(after.data(), "pw").plain == plain);
        CHECK(after.data() == img);
        CHECK(leftover_gone(d, uuid));
    }
}
