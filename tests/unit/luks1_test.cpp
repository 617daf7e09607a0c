// LUKS1: header parsing and validation (synthetic headers with one field
// broken at a time), and containers made by cryptsetup (run live; skipped
// with a warning where it is not installed) parsed, dumped and unlocked, the
// volume key compared with `cryptsetup luksDump --dump-volume-key`.
#include "test_util.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/luks/container.hpp>
#include <blkcrypt/luks/luks1.hpp>

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

using namespace blkcrypt;
using namespace blkcrypt::luks;
using testutil::registry;
using testutil::text;

namespace {

// A header laid out as cryptsetup's LUKS_generate_phdr lays one out.
luks1::Header sample_header(uint32_t key_bytes = 32) {
    luks1::Header h;
    h.cipher_name = "aes";
    h.cipher_mode = "xts-plain64";
    h.hash_spec = "sha256";
    h.key_bytes = key_bytes;
    h.mk_digest_iterations = 1000;
    h.uuid = "12226ebc-ef51-49fb-b236-8eabf697e7df";
    const uint64_t stride = (luks1::af_sectors(key_bytes, luks1::kStripes) + 7) / 8 * 8;
    uint64_t sector = 8;
    for (auto& k : h.keyslots) {
        k.key_material_offset = static_cast<uint32_t>(sector);
        sector += stride;
    }
    h.payload_offset = static_cast<uint32_t>((sector + 2047) / 2048 * 2048);
    return h;
}

std::vector<uint8_t> bytes_of(const luks1::Header& h) {
    auto raw = luks1::serialize_header(h);
    REQUIRE(raw.ok());
    return {raw->begin(), raw->end()};
}

std::string parse_error(const std::vector<uint8_t>& raw) {
    auto r = luks1::parse_header(raw);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status() == Status::Invalid);
    return r.error().message;
}

bool have(const char* tool) {
    return std::system((std::string("command -v ") + tool + " >/dev/null 2>&1").c_str()) == 0;
}

std::string run(const std::string& cmd) {
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    REQUIRE(::pclose(p) == 0);
    return out;
}

struct TempDir {
    std::filesystem::path path;
    TempDir() {
        char tmpl[] = "/tmp/blkcrypt-luks1-XXXXXX";
        REQUIRE(::mkdtemp(tmpl) != nullptr);
        path = tmpl;
    }
    ~TempDir() { std::filesystem::remove_all(path); }
    std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// The "MK dump:" lines of luksDump --dump-volume-key, as hex without spaces.
std::string volume_key_hex(const std::string& dump) {
    const auto at = dump.find("MK dump:");
    REQUIRE(at != std::string::npos);
    std::string hex;
    for (char c : dump.substr(at + 8))
        if (std::isxdigit(static_cast<unsigned char>(c))) hex += c;
    return hex;
}

}  // namespace

TEST_CASE("luks1: a header serialises and parses back", "[luks1]") {
    const luks1::Header h = sample_header(64);
    const auto raw = bytes_of(h);
    REQUIRE(raw.size() == 592);
    auto back = luks1::parse_header(raw);
    REQUIRE(back.ok());
    CHECK(back->cipher_spec() == "aes-xts-plain64");
    CHECK(back->hash_spec == "sha256");
    CHECK(back->payload_offset == 4096);
    CHECK(back->keyslots[7].key_material_offset == 8 + 7 * 504);
    CHECK(bytes_of(*back) == raw);
    // Big-endian fields where cryptsetup puts them.
    CHECK(raw[0] == 'L');
    CHECK(raw[7] == 1);
    CHECK(raw[108 + 3] == 64);
    CHECK((raw[208] == 0x00 && raw[209] == 0x00 && raw[210] == 0xde && raw[211] == 0xad));
    CHECK(luks1::device_sectors(h) == 8 + 7 * 504 + 500);
}

TEST_CASE("luks1: invalid headers are refused with a reason", "[luks1]") {
    const luks1::Header good = sample_header();
    auto raw = bytes_of(good);
    REQUIRE(luks1::parse_header(raw).ok());

    CHECK(parse_error(std::vector<uint8_t>(raw.begin(), raw.begin() + 591)) == "not a LUKS device");
    auto m = raw;
    m[4] = 0;
    CHECK(parse_error(m) == "not a LUKS device");
    m = raw;
    m[7] = 2;
    CHECK(parse_error(m) == "Unsupported LUKS version 2.");

    auto with = [&](auto change) {
        luks1::Header h = good;
        change(h);
        return parse_error(bytes_of(h));
    };
    CHECK_THAT(with([](auto& h) { h.key_bytes = 0; }), Catch::Contains("volume key of 0 bytes"));
    CHECK_THAT(with([](auto& h) { h.key_bytes = 65; }), Catch::Contains("volume key of 65 bytes"));
    CHECK_THAT(with([](auto& h) { h.key_bytes = 0xffffffffu; }), Catch::Contains("4294967295 bytes"));
    CHECK_THAT(with([](auto& h) { h.keyslots[3].stripes = 1; }), Catch::Contains("keyslot 3 is invalid: 1 anti-forensic"));
    CHECK_THAT(with([](auto& h) { h.keyslots[0].key_material_offset = 1; }), Catch::Contains("overlaps the header"));
    CHECK_THAT(with([](auto& h) { h.keyslots[2].key_material_offset = h.keyslots[1].key_material_offset + 100; }),
               Catch::Contains("keyslot 1 is invalid: its key material overlaps keyslot 2"));
    CHECK_THAT(with([](auto& h) { h.payload_offset = h.keyslots[7].key_material_offset + 10; }),
               Catch::Contains("keyslot 7 is invalid: its key material (sectors"));
    // Offsets near 2^32 do not wrap around the payload check.
    CHECK_THAT(with([](auto& h) { h.keyslots[7].key_material_offset = 0xffffff00u; }),
               Catch::Contains("runs into the payload"));
    CHECK_THAT(with([](auto& h) { h.cipher_name.clear(); }), Catch::Contains("without a cipher"));

    // A detached header (payload offset 0) skips the payload checks, as cryptsetup does.
    luks1::Header detached = good;
    detached.payload_offset = 0;
    detached.keyslots[7].key_material_offset = 0xffffff00u;
    REQUIRE(luks1::parse_header(bytes_of(detached)).ok());
    // ... but the device must then hold the areas.
    auto store = std::make_shared<MemoryStore>(1 << 20);
    const auto d = bytes_of(detached);
    std::copy(d.begin(), d.end(), store->data().begin());
    auto r = luks1::read_header(registry(), *store);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("is too small. (LUKS1 requires at least"));

    // Strings are cut at the field's last byte even without a NUL.
    auto s = raw;
    std::fill(s.begin() + 8, s.begin() + 40, 'a');
    auto p = luks1::parse_header(s);
    REQUIRE(p.ok());
    CHECK(p->cipher_name == std::string(31, 'a'));

    // An unknown hash is refused as cryptsetup words it.
    luks1::Header bad_hash = good;
    bad_hash.hash_spec = "nohash";
    const auto bh = bytes_of(bad_hash);
    std::copy(bh.begin(), bh.end(), store->data().begin());
    auto rh = luks1::read_header(registry(), *store);
    REQUIRE_FALSE(rh.ok());
    CHECK(rh.error().message == "Requested LUKS hash nohash is not supported.");
}

TEST_CASE("luks1: detect tells LUKS1 from LUKS2 and from anything else", "[luks1]") {
    MemoryStore s(4096);
    CHECK(detect(s).status() == Status::Invalid);
    const auto raw = bytes_of(sample_header());
    std::copy(raw.begin(), raw.end(), s.data().begin());
    REQUIRE(detect(s).ok());
    CHECK(detect(s).value() == Version::Luks1);
    s.data()[7] = 2;
    CHECK(detect(s).value() == Version::Luks2);
    s.data()[7] = 3;
    CHECK(detect(s).error().message == "Unsupported LUKS version 3.");
    MemoryStore tiny(4);
    CHECK(detect(tiny).status() == Status::Invalid);
}

TEST_CASE("luks1: cryptsetup's containers parse, dump and unlock", "[luks1][cryptsetup]") {
    if (!have("cryptsetup")) {
        WARN("cryptsetup not installed: live LUKS1 cross-check skipped");
        return;
    }
    struct Case {
        const char* cipher;
        unsigned bits;
        const char* hash;
    };
    const Case cases[] = {
        {"aes-xts-plain64", 512, "sha256"},  {"aes-xts-plain64", 256, "sha1"},
        {"aes-cbc-essiv:sha256", 256, "sha512"}, {"aes-cbc-plain64", 128, "ripemd160"},
    };
    for (const Case& c : cases) {
        DYNAMIC_SECTION(c.cipher << " " << c.bits << " " << c.hash) {
            TempDir dir;
            const std::string img = dir / "img", pass = dir / "pass", pass2 = dir / "pass2";
            std::ofstream(pass) << "first passphrase";
            std::ofstream(pass2) << "second";
            run("truncate -s 4M " + img);
            run("cryptsetup luksFormat -q --type luks1 --cipher " + std::string(c.cipher) + " --key-size " +
                std::to_string(c.bits) + " --hash " + c.hash +
                " --pbkdf-force-iterations 1000 --key-file " + pass + " " + img);
            run("cryptsetup luksAddKey -q --pbkdf-force-iterations 1000 --key-slot 5 --key-file " + pass + " " + img +
                " " + pass2);
            const std::string theirs = run("cryptsetup luksDump " + img);
            const std::string vk_hex =
                volume_key_hex(run("cryptsetup luksDump -q --dump-volume-key --key-file " + pass + " " + img));

            auto store = open_file_store(img, false);
            REQUIRE(store.ok());
            auto h = luks1::read_header(registry(), **store);
            REQUIRE(h.ok());
            CHECK(luks1::dump(*h, img) == theirs);
            // The serialised header is the first 592 bytes of the image.
            std::vector<uint8_t> head(592);
            REQUIRE((*store)->read(0, head) == Status::Ok);
            auto raw = luks1::serialize_header(*h);
            REQUIRE(raw.ok());
            CHECK(std::vector<uint8_t>(raw->begin(), raw->end()) == head);

            auto u = luks1::open_any(registry(), **store, *h, text("first passphrase"));
            REQUIRE(u.ok());
            CHECK(u->keyslot == 0);
            CHECK(testutil::hex(u->volume_key) == vk_hex);
            auto u5 = luks1::open_any(registry(), **store, *h, text("second"));
            REQUIRE(u5.ok());
            CHECK(u5->keyslot == 5);
            CHECK(testutil::hex(u5->volume_key) == vk_hex);
            // --key-slot restricts the search.
            auto only0 = luks1::open_any(registry(), **store, *h, text("second"), 0);
            REQUIRE_FALSE(only0.ok());
            CHECK(only0.status() == Status::NoKey);
            auto wrong = luks1::open_any(registry(), **store, *h, text("first passphrasE"));
            REQUIRE_FALSE(wrong.ok());
            CHECK(wrong.status() == Status::NoKey);
            CHECK(wrong.error().message == "No key available with this passphrase.");
            auto dumped = luks1::dump_volume_key(*h, img, u->volume_key);
            CHECK(std::string(dumped.data(), dumped.data() + dumped.size()) ==
                  run("cryptsetup luksDump -q --dump-volume-key --key-file " + pass + " " + img));

            // The front API: a Volume whose target reads the payload.
            auto vol = open(registry(), **store, text("second"));
            REQUIRE(vol.ok());
            CHECK(vol->keyslot == 5);
            CHECK(vol->uuid == h->uuid);
            CHECK(vol->table.cipher == c.cipher);
            CHECK(vol->table.offset == h->payload_offset);
            CHECK(testutil::hex(vol->table.key) == vk_hex);
            auto t = dm_table(*vol, **store, img);
            REQUIRE(t.ok());
            REQUIRE(t->size() == 1);
            CHECK(t->front().length == 4 * 2048 - h->payload_offset);
            CHECK(t->front().crypt->device == img);
            auto target = dm::CryptTarget::create(registry(), *t->front().crypt, *store, t->front().length);
            REQUIRE(target.ok());
            CHECK((*target)->length_sectors() == 4 * 2048 - h->payload_offset);
            CHECK(open(registry(), **store, text("x")).status() == Status::NoKey);
        }
    }
}

TEST_CASE("luks1: format writes a container that opens and that cryptsetup reads", "[luks1][cryptsetup]") {
    TempDir dir;
    const std::string img = dir / "img";
    run("truncate -s 4M " + img);
    std::vector<uint8_t> vk(64);
    for (std::size_t i = 0; i < vk.size(); ++i) vk[i] = static_cast<uint8_t>(i * 7 + 1);
    luks1::FormatParams p;
    p.force_iterations = 1000;
    p.keyslot = 2;
    p.hash = "SHA512";  // stored lower-cased
    {
        auto store = open_file_store(img, true);
        REQUIRE(store.ok());
        auto h = luks1::format(registry(), **store, p, vk, text("secret"));
        REQUIRE(h.ok());
        CHECK(h->payload_offset == 4096);
        CHECK(h->hash_spec == "sha512");
        CHECK(h->keyslots[2].enabled());
        CHECK(h->keyslots[2].iterations == 1000);
        CHECK(h->mk_digest_iterations == 1000);
        CHECK(h->uuid.size() == 36);
        CHECK(h->uuid[14] == '4');
        auto again = luks1::read_header(registry(), **store);
        REQUIRE(again.ok());
        auto u = luks1::open_any(registry(), **store, *again, text("secret"));
        REQUIRE(u.ok());
        CHECK(u->keyslot == 2);
        CHECK(std::vector<uint8_t>(u->volume_key.data(), u->volume_key.data() + 64) == vk);
        // The volume key opens without a passphrase; another key does not.
        auto byvk = open_with_volume_key(registry(), **store, vk);
        REQUIRE(byvk.ok());
        CHECK(byvk->keyslot == -1);
        CHECK(byvk->table.offset == 4096);
        std::vector<uint8_t> other = vk;
        other[0] ^= 1;
        auto bad = open_with_volume_key(registry(), **store, other);
        CHECK(bad.status() == Status::NoKey);
        CHECK(open_with_volume_key(registry(), **store, std::vector<uint8_t>(32)).status() == Status::NoKey);
        // A second keyslot; a taken one is refused.
        REQUIRE(luks1::add_keyslot(registry(), **store, *again, 6, vk, text("other"), 1000).ok());
        CHECK_FALSE(luks1::add_keyslot(registry(), **store, *again, 6, vk, text("x"), 1000).ok());
    }
    if (!have("cryptsetup")) {
        WARN("cryptsetup not installed: reading our LUKS1 container with it skipped");
        return;
    }
    std::ofstream(dir / "pass") << "secret";
    std::ofstream(dir / "other") << "other";
    run("cryptsetup open --test-passphrase --key-slot 2 --key-file " + (dir / "pass") + " " + img);
    run("cryptsetup open --test-passphrase --key-slot 6 --key-file " + (dir / "other") + " " + img);
    CHECK(volume_key_hex(run("cryptsetup luksDump -q --dump-volume-key --key-file " + (dir / "pass") + " " + img)) ==
          testutil::hex(vk));
    const std::string dump = run("cryptsetup luksDump " + img);
    CHECK_THAT(dump, Catch::Contains("Hash spec:     \tsha512"));
    CHECK_THAT(dump, Catch::Contains("Key Slot 6: ENABLED"));
}

TEST_CASE("luks1: make_header lays out keyslots and the payload as cryptsetup", "[luks1]") {
    std::vector<uint8_t> vk16(16, 1), vk32(32, 2), vk64(64, 3);
    luks1::FormatParams p;
    p.force_iterations = 1000;
    p.cipher = "aes-cbc-essiv:sha256";
    p.key_bytes = 16;
    auto h = luks1::make_header(registry(), p, vk16, 1000);
    REQUIRE(h.ok());
    CHECK(h->keyslots[1].key_material_offset == 8 + 128);
    CHECK(h->payload_offset == 2048);
    p.key_bytes = 32;
    h = luks1::make_header(registry(), p, vk32, 1000);
    REQUIRE(h.ok());
    CHECK(h->keyslots[7].key_material_offset == 8 + 7 * 256);
    CHECK(h->payload_offset == 4096);
    p.alignment = 3000;
    h = luks1::make_header(registry(), p, vk32, 1000);
    REQUIRE(h.ok());
    CHECK(h->payload_offset == 3000);
    p.offset = 5000;
    h = luks1::make_header(registry(), p, vk32, 1000);
    REQUIRE(h.ok());
    CHECK(h->payload_offset == 5000);
    p.offset = 100;
    CHECK(luks1::make_header(registry(), p, vk32, 1000).error().message == "Data offset is not multiple of 4096 bytes.");
    p.offset = 1000;
    CHECK_THAT(luks1::make_header(registry(), p, vk32, 1000).error().message, Catch::Contains("higher than header size"));
    p.offset = 0;
    p.detached = true;
    p.alignment = 0;
    h = luks1::make_header(registry(), p, vk32, 1000);
    REQUIRE(h.ok());
    CHECK(h->payload_offset == 0);
    // Digest iterations: 125 ms of the benchmark's 2000.
    p.force_iterations = 0;
    h = luks1::make_header(registry(), p, vk32, 160000);
    REQUIRE(h.ok());
    CHECK(h->mk_digest_iterations == 10000);
    // A key the cipher refuses.
    p.cipher = "aes-xts-plain64";
    p.key_bytes = 16;
    CHECK_THAT(luks1::make_header(registry(), p, vk16, 1000).error().message, Catch::Contains("is not available"));
}

TEST_CASE("luks1: the PBKDF2 benchmark scales with the time asked for", "[luks1]") {
    auto a = luks1::benchmark_pbkdf2(registry(), "sha256", 32, 1);
    REQUIRE(a.ok());
    CHECK(*a >= 1000);
    auto b = luks1::benchmark_pbkdf2(registry(), "sha256", 32, 200);
    REQUIRE(b.ok());
    CHECK(*b > *a);
    CHECK_FALSE(luks1::benchmark_pbkdf2(registry(), "nohash", 32, 100).ok());
}

namespace {

// A store that "dies" at its n-th write: that write and every later one (and
// flush) fail and change nothing, as if the process had been killed there.
class DyingStore final : public BackingStore {
public:
    DyingStore(std::vector<uint8_t> image, int writes) : mem_(image.size()), left_(writes) { mem_.data() = std::move(image); }
    Status read(uint64_t o, Bytes out) override { return mem_.read(o, out); }
    Status write(uint64_t o, ConstBytes in) override {
        if (left_ <= 0) return Status::IoError;
        --left_;
        return mem_.write(o, in);
    }
    Status flush() override { return left_ <= 0 ? Status::IoError : Status::Ok; }
    uint64_t size() const override { return mem_.size(); }
    std::vector<uint8_t>& data() { return mem_.data(); }
    bool died() const { return left_ <= 0; }

private:
    MemoryStore mem_;
    int left_;
};

bool opens(const std::vector<uint8_t>& image, const std::string& pass) {
    MemoryStore s(image.size());
    s.data() = image;
    auto h = luks1::read_header(registry(), s);
    return h.ok() && luks1::open_any(registry(), s, *h, text(pass)).ok();
}

}  // namespace

TEST_CASE("luks1: add and remove keyslots survive a crash at every write", "[luks1]") {
    std::vector<uint8_t> vk(32, 0x5a);
    luks1::FormatParams p;
    p.force_iterations = 1000;
    p.cipher = "aes-xts-plain64";
    p.key_bytes = 32;
    MemoryStore base(3 << 20);
    auto h0 = luks1::format(registry(), base, p, vk, text("old"));
    REQUIRE(h0.ok());
    const std::vector<uint8_t> image = base.data();

    bool finished = false;
    for (int n = 0; !finished && n < 100; ++n) {
        DyingStore s(image, n);
        luks1::Header h = *h0;
        const bool ok = luks1::add_keyslot(registry(), s, h, 3, vk, text("new"), 1000).ok();
        finished = ok && !s.died();
        CHECK(opens(s.data(), "old"));  // never neither: the old passphrase always opens
        if (ok) CHECK(opens(s.data(), "new"));
    }
    CHECK(finished);

    // Removing: the other passphrase opens after a crash at any point, and
    // once done the removed one no longer does and its area is overwritten.
    MemoryStore two(image.size());
    two.data() = image;
    luks1::Header h = *h0;
    REQUIRE(luks1::add_keyslot(registry(), two, h, 3, vk, text("new"), 1000).ok());
    const std::vector<uint8_t> with_two = two.data();
    finished = false;
    for (int n = 0; !finished && n < 100; ++n) {
        DyingStore s(with_two, n);
        luks1::Header hh = h;
        const bool ok = luks1::remove_keyslot(s, hh, 0).ok();
        finished = ok && !s.died();
        CHECK(opens(s.data(), "new"));
        if (ok) {
            CHECK_FALSE(opens(s.data(), "old"));
            const uint64_t at = uint64_t{h.keyslots[0].key_material_offset} * 512;
            CHECK(!std::equal(s.data().begin() + at, s.data().begin() + at + 64000, with_two.begin() + at));
            auto back = luks1::parse_header(s.data());
            REQUIRE(back.ok());
            CHECK(back->keyslots[0].active == luks1::kKeyDisabled);
            CHECK(back->keyslots[0].iterations == 0);
        }
    }
    CHECK(finished);
}

TEST_CASE("luks1: change-key leaves the old or the new passphrase at every write", "[luks1]") {
    std::vector<uint8_t> vk(32, 0x33);
    luks1::FormatParams p;
    p.force_iterations = 1000;
    p.key_bytes = 32;
    MemoryStore base(3 << 20);
    auto h0 = luks1::format(registry(), base, p, vk, text("old"));
    REQUIRE(h0.ok());
    bool finished = false;
    for (int n = 0; !finished && n < 100; ++n) {
        DyingStore s(base.data(), n);
        luks1::Header h = *h0;
        const bool ok = luks1::change_keyslot(registry(), s, h, 0, 1, vk, text("new"), 1000).ok();
        finished = ok && !s.died();
        CHECK((opens(s.data(), "old") || opens(s.data(), "new")));
        if (ok) {
            CHECK_FALSE(opens(s.data(), "old"));
            CHECK(opens(s.data(), "new"));
        }
    }
    CHECK(finished);
    luks1::Header h = *h0;
    CHECK_FALSE(luks1::change_keyslot(registry(), base, h, 0, 0, vk, text("new"), 1000).ok());
}

TEST_CASE("luks1: header backup and restore", "[luks1]") {
    std::vector<uint8_t> vk(32, 0x44);
    luks1::FormatParams p;
    p.force_iterations = 1000;
    p.key_bytes = 32;
    MemoryStore s(3 << 20);
    auto h = luks1::format(registry(), s, p, vk, text("pw"));
    REQUIRE(h.ok());
    std::fill(s.data().begin() + 600, s.data().begin() + 700, uint8_t{0xee});  // junk after the header
    auto b = luks1::header_backup(registry(), s);
    REQUIRE(b.ok());
    CHECK(b->size() == (8 + 7 * 256 + 250) * 512 / 4096 * 4096 + 4096);
    CHECK(std::all_of(b->begin() + 592, b->begin() + 4096, [](uint8_t c) { return c == 0; }));
    MemoryStore blank(3 << 20);
    REQUIRE(luks1::header_restore(registry(), blank, *b).ok());
    auto h2 = luks1::read_header(registry(), blank);
    REQUIRE(h2.ok());
    CHECK(luks1::open_any(registry(), blank, *h2, text("pw")).ok());
    CHECK_FALSE(luks1::header_restore(registry(), blank, ConstBytes(*b).first(4096)).ok());
    // A device whose header has another key size is refused.
    luks1::FormatParams q = p;
    q.key_bytes = 64;
    std::vector<uint8_t> vk64(64, 1);
    REQUIRE(luks1::format(registry(), blank, q, vk64, text("pw")).ok());
    CHECK_THAT(luks1::header_restore(registry(), blank, *b).error().message, Catch::Contains("differs"));
}
