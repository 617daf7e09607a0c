// LUKS2 against the real peer: containers made by cryptsetup luksFormat
// (and data written by cryptsetup's own userspace reencryption) must open,
// give the volume key cryptsetup prints, decrypt to the plaintext, and dump
// exactly as cryptsetup luksDump does. Skipped, with a warning, when
// cryptsetup is not installed.
#include "test_util.hpp"
#include "torn_store.hpp"

#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/luks/luks2.hpp>
#include <blkcrypt/luks/pbkdf_bench.hpp>

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace blkcrypt;
namespace luks2 = blkcrypt::luks::luks2;
using testutil::registry;
using testutil::text;

namespace {

// Whether cryptsetup is installed; if not, the test warns what it skips.
bool cryptsetup_here(const char* skipped) {
    static const bool yes = std::system("cryptsetup --version >/dev/null 2>&1") == 0;
    if (!yes) WARN("cryptsetup not installed: " << skipped);
    return yes;
}

int sh(const std::string& cmd) { return std::system(cmd.c_str()); }

std::string capture(const std::string& cmd) {
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return out;
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
    return out;
}

struct TempDir {
    std::string path;
    TempDir() {
        char t[] = "/tmp/blkcrypt-luks2-XXXXXX";
        path = ::mkdtemp(t);
    }
    ~TempDir() { (void)sh("rm -rf '" + path + "'"); }
    std::string operator/(const std::string& n) const { return path + "/" + n; }
};

void write_text(const std::string& path, const std::string& s) {
    std::ofstream f(path, std::ios::binary);
    f << s;
}

std::shared_ptr<BackingStore> open_store(const std::string& path) {
    auto s = open_file_store(path, false);
    REQUIRE(s.ok());
    return *s;
}

// The volume key as `cryptsetup luksDump --dump-volume-key` prints it.
std::string cryptsetup_volume_key(const std::string& hdr, const std::string& keyfile) {
    const std::string out = capture("cryptsetup luksDump -q --dump-volume-key --key-file '" + keyfile + "' '" + hdr +
                                    "' 2>/dev/null");
    const auto at = out.find("MK dump:");
    if (at == std::string::npos) return {};
    std::string hexs;
    for (char c : out.substr(at + 8))
        if (std::isxdigit(static_cast<unsigned char>(c))) hexs += c;
    return hexs;
}

const char* kFast = " --pbkdf pbkdf2 --pbkdf-force-iterations 1000";
const char* kArgon = " --pbkdf argon2id --pbkdf-force-iterations 4 --pbkdf-memory 32 --pbkdf-parallel 1";

struct Case {
    const char* name;
    std::string format;    // luksFormat options
    bool detached = false;
    std::vector<std::string> more_keys;  // luksAddKey options, one keyslot each
    const char* header_size = "4M";      // of a detached header file
};

std::vector<Case> matrix() {
    return {
        {"aes-xts 512-bit, sector 4096, pbkdf2-sha256", std::string("--cipher aes-xts-plain64 --key-size 512 --sector-size 4096") + kFast},
        {"aes-xts 256-bit, sector 512, pbkdf2-sha512", "--cipher aes-xts-plain64 --key-size 256 --sector-size 512 --hash sha512 --pbkdf pbkdf2 --pbkdf-force-iterations 1000"},
        {"aes-cbc-essiv:sha256, argon2i", std::string("--cipher aes-cbc-essiv:sha256 --key-size 256 --sector-size 512 --pbkdf argon2i --pbkdf-force-iterations 4 --pbkdf-memory 32 --pbkdf-parallel 1")},
        {"argon2id, label, subsystem, three keyslots", std::string("--label my-label --subsystem my-sub") + kArgon,
         false, {std::string(kFast), std::string("--key-slot 7") + kArgon}},
        {"detached header, small metadata", std::string("--luks2-metadata-size 32k --luks2-keyslots-size 2M --offset 0 --sector-size 4096") + kFast, true},
        {"largest layout: metadata 4 MiB, keyslots 128 MiB, detached",
         std::string("--luks2-metadata-size 4m --luks2-keyslots-size 128m --offset 0") + kFast, true, {std::string(kFast)}, "140M"},
        {"argon2id 2 lanes, sha1 AF/digest", "--hash sha1 --pbkdf argon2id --pbkdf-force-iterations 4 --pbkdf-memory 64 --pbkdf-parallel 2"},
        // cryptsetup's hash names that the registry spells otherwise (wp512, rmd160)
        {"pbkdf2-whirlpool keyslot, AF and digest", std::string("--hash whirlpool") + kFast},
        {"ripemd160 AF and digest, argon2i keyslot", "--hash ripemd160 --pbkdf argon2i --pbkdf-force-iterations 4 --pbkdf-memory 32 --pbkdf-parallel 1"},
    };
}

std::string passphrase(std::size_t i) { return "pass phrase " + std::to_string(i); }

// Formats one case into dir; returns the header path and writes pw0..pwN.
std::string make_container(const TempDir& dir, const Case& c) {
    const std::string img = dir / "img", hdr = c.detached ? dir / "hdr" : img;
    REQUIRE(sh("truncate -s 20M '" + img + "'") == 0);
    if (c.detached) REQUIRE(sh("truncate -s " + std::string(c.header_size) + " '" + hdr + "'") == 0);
    write_text(dir / "pw0", passphrase(0));
    const std::string header_opt = c.detached ? " --header '" + hdr + "'" : "";
    REQUIRE(sh("cryptsetup luksFormat -q --type luks2 " + c.format + header_opt + " --key-file '" + (dir / "pw0") +
               "' '" + img + "' >/dev/null 2>&1") == 0);
    for (std::size_t i = 0; i < c.more_keys.size(); ++i) {
        write_text(dir / ("pw" + std::to_string(i + 1)), passphrase(i + 1));
        REQUIRE(sh("cryptsetup luksAddKey -q " + c.more_keys[i] + header_opt + " --key-file '" + (dir / "pw0") + "' '" +
                   img + "' '" + (dir / ("pw" + std::to_string(i + 1))) + "' >/dev/null 2>&1") == 0);
    }
    return hdr;
}

// f(case, dir, header path, store, header) for each container of the
// matrix, made by cryptsetup, its header read by us.
template <class F>
void for_each_container(F&& f) {
    for (const Case& c : matrix()) {
        INFO(c.name);
        TempDir dir;
        const std::string hdr = make_container(dir, c);
        auto store = open_store(hdr);
        Result<luks2::Header> h = luks2::read_header(registry(), *store);
        REQUIRE(h.ok());
        f(c, dir, hdr, *store, *h);
    }
}

}  // namespace

TEST_CASE("luks2: cryptsetup's containers open, refuse wrong passphrases, give cryptsetup's volume key", "[luks2]") {
    if (!cryptsetup_here("LUKS2 compatibility tests not run")) return;
    for_each_container([](const Case& c, const TempDir& dir, const std::string& hdr, BackingStore& store,
                          const luks2::Header& h) {
        CHECK(h.warnings.empty());
        const std::string vk = cryptsetup_volume_key(hdr, dir / "pw0");
        REQUIRE(!vk.empty());
        for (std::size_t i = 0; i <= c.more_keys.size(); ++i) {
            const std::string pw = passphrase(i);
            Result<luks::Volume> v = luks2::open(registry(), store, text(pw));
            REQUIRE(v.ok());
            CHECK(testutil::hex(v->table.key) == vk);
            CHECK(v->version == luks::Version::Luks2);
            CHECK(v->uuid == h.md.hdr.uuid);
            const luks2::Segment& seg = h.md.segments.at(0);
            CHECK(v->table.cipher == seg.encryption);
            CHECK(v->table.sector_size == seg.sector_size);
            CHECK(v->table.offset * 512 == seg.offset);
            CHECK_FALSE(v->table.iv_large_sectors);
            CHECK(v->length_sectors == 0);
        }
        Result<luks::Volume> wrong = luks2::open(registry(), store, text("not it"));
        REQUIRE_FALSE(wrong.ok());
        CHECK(wrong.status() == Status::NoKey);
        CHECK(wrong.error().message == "No key available with this passphrase.");
    });
}

TEST_CASE("luks2: luksDump and --dump-json-metadata match cryptsetup's byte for byte", "[luks2]") {
    if (!cryptsetup_here("LUKS2 dump tests not run")) return;
    for_each_container([](const Case&, const TempDir&, const std::string& hdr, BackingStore&, const luks2::Header& h) {
        CHECK(luks2::dump(h.md) == capture("cryptsetup luksDump '" + hdr + "'"));
        CHECK(luks2::dump_json(h.md) == capture("cryptsetup luksDump --dump-json-metadata '" + hdr + "'"));
    });
}

TEST_CASE("luks2: priorities, named and ignored keyslots, tokens kept", "[luks2]") {
    if (!cryptsetup_here("LUKS2 keyslot tests not run")) return;
    TempDir dir;
    Case c{"two keyslots", std::string(kFast), false, {std::string(kFast)}};
    const std::string img = make_container(dir, c);
    // Slot 1 preferred, slot 0 ignored; a token of an unknown type on slot 1.
    REQUIRE(sh("cryptsetup config --priority prefer --key-slot 1 '" + img + "'") == 0);
    REQUIRE(sh("cryptsetup config --priority ignore --key-slot 0 '" + img + "'") == 0);
    write_text(dir / "token.json", R"({"type":"acme-vault","keyslots":["1"],"acme_url":"https://x/y","n":[1,2]})");
    REQUIRE(sh("cryptsetup token import --json-file '" + (dir / "token.json") + "' '" + img + "'") == 0);
    auto store = open_store(img);
    Result<luks2::Header> h = luks2::read_header(registry(), *store);
    REQUIRE(h.ok());
    CHECK(h->md.keyslots.at(1).priority == 2);
    CHECK(h->md.keyslots.at(0).priority == 0);
    REQUIRE(h->md.tokens.size() == 1);
    CHECK(h->md.tokens.at(0).type == "acme-vault");
    CHECK(h->md.tokens.at(0).json == R"({"type":"acme-vault","keyslots":["1"],"acme_url":"https://x/y","n":[1,2]})");
    CHECK(luks2::dump(h->md) == capture("cryptsetup luksDump '" + img + "'"));
    CHECK(luks2::dump_json(h->md) == capture("cryptsetup luksDump --dump-json-metadata '" + img + "'"));

    // The ignored slot 0 does not open unless named, as cryptsetup.
    Result<luks::Volume> v0 = luks2::open(registry(), *store, text(passphrase(0)));
    CHECK(v0.status() == Status::NoKey);
    CHECK(sh("cryptsetup open --test-passphrase --key-file '" + (dir / "pw0") + "' '" + img + "' 2>/dev/null") != 0);
    luks2::OpenOptions named;
    named.keyslot = 0;
    Result<luks::Volume> v0n = luks2::open(registry(), *store, text(passphrase(0)), named);
    REQUIRE(v0n.ok());
    CHECK(v0n->keyslot == 0);
    Result<luks::Volume> v1 = luks2::open(registry(), *store, text(passphrase(1)));
    REQUIRE(v1.ok());
    CHECK(v1->keyslot == 1);
    named.keyslot = 1;
    CHECK(luks2::open(registry(), *store, text(passphrase(0)), named).status() == Status::NoKey);
    named.keyslot = 5;
    CHECK(luks2::open(registry(), *store, text(passphrase(0)), named).status() == Status::Invalid);
}

namespace {

// Decrypts the whole data segment of a Volume through the dm-crypt engine.
std::vector<uint8_t> decrypt_segment(const luks::Volume& v, const std::string& data_path, std::size_t bytes) {
    auto data = open_store(data_path);
    Result<std::unique_ptr<dm::CryptTarget>> t = dm::CryptTarget::create(registry(), v.table, data, v.length_sectors);
    REQUIRE(t.ok());
    std::vector<uint8_t> out(bytes);
    dm::Bio bio;
    bio.dir = dm::BioDir::Read;
    bio.vecs.push_back(SgEntry{out.data(), out.size()});
    REQUIRE((*t)->submit_sync(bio) == Status::Ok);
    return out;
}

std::vector<uint8_t> pattern(std::size_t bytes) {
    std::vector<uint8_t> p(bytes);
    for (std::size_t i = 0; i < bytes; i += 8) {
        const uint64_t v = i / 512 * 0x9e3779b97f4a7c15ull + i;
        for (int b = 0; b < 8; ++b) p[i + b] = static_cast<uint8_t>(v >> (8 * b));
    }
    return p;
}

}  // namespace

TEST_CASE("luks2: data written by cryptsetup's reencryption decrypts to the plaintext", "[luks2]") {
    if (!cryptsetup_here("LUKS2 data tests not run")) return;
    struct DataCase {
        const char* name;
        std::string opts;
        bool detached;
    };
    const std::vector<DataCase> cases = {
        {"aes-xts-plain64 512-bit, sector 4096, detached", "--cipher aes-xts-plain64 --key-size 512 --sector-size 4096", true},
        {"aes-xts-plain64 256-bit, sector 512, detached", "--cipher aes-xts-plain64 --key-size 256 --sector-size 512", true},
        {"aes-cbc-essiv:sha256, sector 512, in-place header", "--cipher aes-cbc-essiv:sha256 --key-size 256 --sector-size 512", false},
        {"aes-xts-plain64, sector 4096, in-place header", "--cipher aes-xts-plain64 --key-size 512 --sector-size 4096", false},
    };
    const std::size_t size = 12u << 20, used = 8u << 20;
    const std::vector<uint8_t> plain = pattern(size);
    for (const DataCase& c : cases) {
        INFO(c.name);
        TempDir dir;
        const std::string img = dir / "img", hdr = c.detached ? dir / "hdr" : img;
        {
            std::ofstream f(img, std::ios::binary);
            f.write(reinterpret_cast<const char*>(plain.data()), static_cast<std::streamsize>(plain.size()));
        }
        write_text(dir / "pw", "data pass");
        std::string cmd = "cryptsetup reencrypt --encrypt --type luks2 -q " + c.opts + kFast + " --key-file '" +
                          (dir / "pw") + "' ";
        if (c.detached) {
            REQUIRE(sh("truncate -s 16M '" + hdr + "'") == 0);
            cmd += "--header '" + hdr + "' ";
        } else {
            cmd += "--reduce-device-size 4M --luks2-metadata-size 16k --luks2-keyslots-size 1M ";
        }
        REQUIRE(sh(cmd + "'" + img + "' >/dev/null 2>&1") == 0);
        auto hstore = open_store(hdr);
        Result<luks::Volume> v = luks2::open(registry(), *hstore, text(std::string("data pass")));
        REQUIRE(v.ok());
        const std::size_t n = c.detached ? size : used;
        std::vector<uint8_t> got = decrypt_segment(*v, img, n);
        CHECK(std::equal(got.begin(), got.end(), plain.begin()));
    }
}

TEST_CASE("luks2: a damaged primary header falls back to the secondary - both damaged refuse", "[luks2]") {
    if (!cryptsetup_here("LUKS2 header recovery tests not run")) return;
    TempDir dir;
    Case c{"plain", std::string(kFast)};
    const std::string img = make_container(dir, c);
    auto pristine = open_store(img);
    Result<luks2::Header> h0 = luks2::read_header(registry(), *pristine);
    REQUIRE(h0.ok());
    const uint64_t hdr_size = h0->md.hdr.hdr_size;
    auto corrupt = [&](uint64_t at) {
        std::fstream f(img, std::ios::in | std::ios::out | std::ios::binary);
        f.seekg(static_cast<std::streamoff>(at));
        char b = 0;
        f.read(&b, 1);
        b = static_cast<char>(b ^ 0x5a);
        f.seekp(static_cast<std::streamoff>(at));
        f.write(&b, 1);
    };
    // One byte of the primary's JSON area: its checksum fails.
    corrupt(4096 + 10);
    {
        auto store = open_store(img);
        Result<luks2::Header> h = luks2::read_header(registry(), *store);
        REQUIRE(h.ok());
        CHECK_FALSE(h->primary_ok);
        CHECK(h->secondary_ok);
        REQUIRE(h->warnings.size() == 1);
        CHECK(h->warnings[0].find("primary LUKS2 header is damaged") != std::string::npos);
        std::vector<std::string> warnings;
        luks2::OpenOptions o;
        o.warnings = &warnings;
        Result<luks::Volume> v = luks2::open(registry(), *store, text(passphrase(0)), o);
        REQUIRE(v.ok());
        CHECK(warnings.size() == 1);
        CHECK(testutil::hex(v->table.key) == cryptsetup_volume_key(img, dir / "pw0"));
    }
    // cryptsetup luksDump (just above) may have repaired the primary from
    // the secondary; break it elsewhere, and the secondary too.
    corrupt(4096 + 20);
    corrupt(hdr_size + 4096 + 10);
    auto store = open_store(img);
    Result<luks2::Header> h = luks2::read_header(registry(), *store);
    REQUIRE_FALSE(h.ok());
    CHECK(h.error().message.find("is not a valid LUKS device") != std::string::npos);
    CHECK(luks2::open(registry(), *store, text(passphrase(0))).status() == Status::Invalid);
}

namespace {
// A good image whose reads touching [bad_begin, bad_end) fail, as a disk or
// an NBD server returning EIO there would.
class EioStore final : public BackingStore {
public:
    EioStore(std::shared_ptr<BackingStore> inner, uint64_t bad_begin, uint64_t bad_end)
        : inner_(std::move(inner)), begin_(bad_begin), end_(bad_end) {}
    Status read(uint64_t off, Bytes out) override {
        if (off < end_ && begin_ < off + out.size()) return Status::IoError;
        return inner_->read(off, out);
    }
    Status write(uint64_t, ConstBytes) override { return Status::IoError; }
    uint64_t size() const override { return inner_->size(); }

private:
    std::shared_ptr<BackingStore> inner_;
    uint64_t begin_, end_;
};
}  // namespace

TEST_CASE("luks2: a header copy that cannot be read is not called damaged", "[luks2]") {
    if (!cryptsetup_here("LUKS2 header read-error tests not run")) return;
    TempDir dir;
    Case c{"plain", std::string(kFast)};
    const std::string img = make_container(dir, c);
    std::shared_ptr<BackingStore> good = open_store(img);
    REQUIRE(good);
    Result<luks2::Header> h0 = luks2::read_header(registry(), *good);
    REQUIRE(h0.ok());
    const uint64_t hdr_size = h0->md.hdr.hdr_size;
    const std::string want_key = cryptsetup_volume_key(img, dir / "pw0");
    struct Way {
        const char* failing;
        const char* used;
        uint64_t begin, end;
    };
    // The binary header of the primary; the JSON area of the secondary.
    for (const Way w : {Way{"primary", "secondary", 0, 512}, Way{"secondary", "primary", hdr_size + 4096, hdr_size + 4097}}) {
        CAPTURE(w.failing);
        EioStore store(good, w.begin, w.end);
        Result<luks2::Header> h = luks2::read_header(registry(), store);
        REQUIRE(h.ok());
        CHECK(h->primary_ok == (std::string(w.failing) != "primary"));
        CHECK(h->secondary_ok == (std::string(w.failing) != "secondary"));
        REQUIRE(h->warnings.size() == 1);
        const std::string& msg = h->warnings[0];
        CHECK(msg.find(std::string("reading the ") + w.failing + " LUKS2 header failed (cannot read the LUKS2 ") !=
              std::string::npos);
        CHECK(msg.find("I/O error); using the " + std::string(w.used) + " header.") != std::string::npos);
        CHECK(msg.find("damaged") == std::string::npos);
        CHECK(msg.find("repair") == std::string::npos);
        std::vector<std::string> warnings;
        luks2::OpenOptions o;
        o.warnings = &warnings;
        Result<luks::Volume> v = luks2::open(registry(), store, text(passphrase(0)), o);
        REQUIRE(v.ok());
        CHECK(warnings == h->warnings);
        CHECK(testutil::hex(v->table.key) == want_key);
    }
    // Both copies unreadable: refused, saying why.
    EioStore dead(good, 0, 8 << 20);
    Result<luks2::Header> h = luks2::read_header(registry(), dead);
    REQUIRE_FALSE(h.ok());
    CHECK(h.error().message.find("primary header: cannot read the LUKS2 header at byte 0: I/O error") !=
          std::string::npos);
}

namespace {

// Rewrites both header copies of img with json (seqid + 1, fresh checksums).
void rewrite_header(const std::string& img, const luks2::BinaryHeader& base, const std::string& json) {
    luks2::BinaryHeader h = base;
    h.seqid += 1;
    auto f = open_file_store(img, true);
    REQUIRE(f.ok());
    for (bool secondary : {false, true}) {
        Result<std::vector<uint8_t>> copy = luks2::build_copy(registry(), h, secondary, json);
        REQUIRE(copy.ok());
        REQUIRE((*f)->write(secondary ? h.hdr_size : 0, *copy) == Status::Ok);
    }
}

std::string replace_once(std::string s, const std::string& from, const std::string& to) {
    const auto at = s.find(from);
    REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("luks2: invalid metadata is refused with an error, as cryptsetup refuses it", "[luks2]") {
    if (!cryptsetup_here("LUKS2 validation tests not run")) return;
    TempDir dir;
    Case c{"two keyslots", std::string(kFast), false, {std::string(kFast)}};
    const std::string img = make_container(dir, c);
    REQUIRE(sh("cp '" + img + "' '" + (dir / "orig") + "'") == 0);
    Result<luks2::Header> h0 = luks2::read_header(registry(), *open_store(img));
    REQUIRE(h0.ok());
    const std::string json = h0->md.json;
    const luks2::Keyslot& k1 = h0->md.keyslots.at(1);
    const std::string off1 = "\"offset\":\"" + std::to_string(k1.area_offset) + "\"";
    const std::string size0 = "\"size\":\"" + std::to_string(h0->md.keyslots.at(0).area_size) + "\"";
    const std::string seg = "\"offset\":\"" + std::to_string(h0->md.segments.at(0).offset) + "\"";
    const std::string pw0 = " --key-file '" + (dir / "pw0") + "' '" + img + "' >/dev/null 2>&1";

    // Our writer's copies are ones cryptsetup accepts (the control case).
    rewrite_header(img, h0->md.hdr, json);
    REQUIRE(luks2::read_header(registry(), *open_store(img)).ok());
    REQUIRE(sh("cryptsetup open --test-passphrase" + pw0) == 0);

    struct Bad {
        const char* name;
        std::string json;
        bool cryptsetup_reads;  // luksDump passes; only unlocking is refused
    };
    const std::vector<Bad> cases = {
        {"overlapping keyslot areas", replace_once(json, off1, "\"offset\":\"40960\""), false},
        {"an area past the keyslots area", replace_once(json, off1, "\"offset\":\"16773120\""), false},
        {"an area size that overflows", replace_once(json, size0, "\"size\":\"18446744073709547520\""), false},
        {"a number too large for 64 bits", replace_once(json, size0, "\"size\":\"18446744073709551616\""), false},
        {"a 64-bit number as a JSON number", replace_once(json, off1, "\"offset\":290816"), false},
        {"a signed number string", replace_once(json, off1, "\"offset\":\"+290816\""), false},
        {"invalid JSON", json.substr(0, json.size() - 1), false},
        {"text after the JSON object", json + " x", false},
        {"the data segment inside the keyslots area", replace_once(json, seg, "\"offset\":\"8192\""), false},
        {"json_size not matching the header", replace_once(json, "\"json_size\":\"12288\"", "\"json_size\":\"28672\""), false},
        {"a digest naming a missing keyslot", replace_once(json, "\"keyslots\":[\"0\",\"1\"]", "\"keyslots\":[\"0\",\"1\",\"9\"]"), false},
    };
    for (const Bad& b : cases) {
        INFO(b.name);
        REQUIRE(sh("cp '" + (dir / "orig") + "' '" + img + "'") == 0);
        rewrite_header(img, h0->md.hdr, b.json);
        auto store = open_store(img);
        Result<luks2::Header> h = luks2::read_header(registry(), *store);
        CHECK_FALSE(h.ok());
        if (!h.ok()) CHECK(h.status() == Status::Invalid);
        CHECK(luks2::open(registry(), *store, text(passphrase(0))).status() == Status::Invalid);
        CHECK((sh("cryptsetup luksDump '" + img + "' >/dev/null 2>&1") == 0) == b.cryptsetup_reads);
        CHECK(sh("cryptsetup open --test-passphrase" + pw0) != 0);
    }

    // Whitespace after the object is part of it for json-c: accepted.
    REQUIRE(sh("cp '" + (dir / "orig") + "' '" + img + "'") == 0);
    rewrite_header(img, h0->md.hdr, json + " \n");
    CHECK(luks2::read_header(registry(), *open_store(img)).ok());
    CHECK(sh("cryptsetup luksDump '" + img + "' >/dev/null 2>&1") == 0);

    // AF data longer than its area: cryptsetup 2.6.1 reads the header and
    // unlocks (reading past the area); we read it and refuse that keyslot.
    REQUIRE(sh("cp '" + (dir / "orig") + "' '" + img + "'") == 0);
    rewrite_header(img, h0->md.hdr, replace_once(json, size0, "\"size\":\"4096\""));
    {
        auto st = open_store(img);
        Result<luks2::Header> hs = luks2::read_header(registry(), *st);
        REQUIRE(hs.ok());
        CHECK(luks2::dump(hs->md) == capture("cryptsetup luksDump '" + img + "'"));
        // Unnamed, the broken slot is passed over; named, its error shows.
        CHECK(luks2::open(registry(), *st, text(passphrase(0))).status() == Status::NoKey);
        luks2::OpenOptions slot0;
        slot0.keyslot = 0;
        Result<luks::Volume> vs = luks2::open(registry(), *st, text(passphrase(0)), slot0);
        CHECK(vs.status() == Status::Invalid);
        CHECK(vs.error().message.find("runs past its area") != std::string::npos);
        CHECK(luks2::open(registry(), *st, text(passphrase(1))).ok());  // slot 1 is whole
    }

    // An unknown mandatory requirement: the header reads, nothing unlocks
    // (cryptsetup: "Unmet LUKS2 requirements detected." on luksAddKey and
    // activation) but a passphrase test, as cryptsetup open --test-passphrase.
    REQUIRE(sh("cp '" + (dir / "orig") + "' '" + img + "'") == 0);
    rewrite_header(img, h0->md.hdr,
                   replace_once(json, "\"keyslots_size\":", "\"requirements\":{\"mandatory\":[\"acme-future\"]},\"keyslots_size\":"));
    auto store = open_store(img);
    Result<luks2::Header> h = luks2::read_header(registry(), *store);
    REQUIRE(h.ok());
    CHECK(h->md.config.requirements == std::vector<std::string>{"acme-future"});
    Result<luks::Volume> v = luks2::open(registry(), *store, text(passphrase(0)));
    CHECK(v.status() == Status::Unsupported);
    CHECK(sh("cryptsetup luksAddKey -q" + std::string(kFast) + " --key-file '" + (dir / "pw0") + "' '" + img + "' '" +
             (dir / "pw0") + "' >/dev/null 2>&1") != 0);
    luks2::OpenOptions test_only;
    test_only.ignore_requirements = true;
    CHECK(luks2::open(registry(), *store, text(passphrase(0)), test_only).ok());
    CHECK(sh("cryptsetup open --test-passphrase" + pw0) == 0);
    CHECK(luks2::dump(h->md) == capture("cryptsetup luksDump '" + img + "'"));
}

TEST_CASE("luks2: containers we format are read, unlocked and extended by cryptsetup", "[luks2]") {
    if (!cryptsetup_here("LUKS2 format tests not run")) return;
    struct FormatCase {
        const char* name;
        luks2::FormatOptions o;
        bool detached;
    };
    std::vector<FormatCase> cases(6);
    cases[0].name = "defaults: aes-xts-plain64 512-bit, sector 4096, pbkdf2-sha256";
    cases[0].o.pbkdf = "pbkdf2";
    cases[0].o.iterations = 1000;
    cases[1].name = "aes-cbc-essiv:sha256, sector 512, argon2id, label, subsystem, keyslot 3";
    cases[1].o.cipher = "aes-cbc-essiv:sha256";
    cases[1].o.key_size = 32;
    cases[1].o.sector_size = 512;
    cases[1].o.iterations = 4;
    cases[1].o.memory_kib = 32;
    cases[1].o.parallel = 1;
    cases[1].o.label = "our label";
    cases[1].o.subsystem = "our subsystem";
    cases[1].o.keyslot = 3;
    cases[2].name = "detached, metadata 32 KiB, keyslots 1 MiB, argon2i, sha512, given uuid";
    cases[2].o.pbkdf = "argon2i";
    cases[2].o.hash = "sha512";
    cases[2].o.iterations = 4;
    cases[2].o.memory_kib = 64;
    cases[2].o.parallel = 2;
    cases[2].o.metadata_size = 32 * 1024;
    cases[2].o.keyslots_size = 1 << 20;
    cases[2].o.data_offset = 0;
    cases[2].o.uuid = "0b7c1f2e-5d9a-4e8b-9f00-123456789abc";
    cases[2].detached = true;
    cases[3].name = "aes-xts-plain64 256-bit, 2 MiB offset, pbkdf2-sha1";
    cases[3].o.key_size = 32;
    cases[3].o.pbkdf = "pbkdf2";
    cases[3].o.hash = "sha1";
    cases[3].o.iterations = 1000;
    cases[3].o.data_offset = 2 << 20;
    // cryptsetup's names for the registry's wp512 and rmd160, kept in the JSON
    cases[4].name = "pbkdf2-whirlpool";
    cases[4].o.pbkdf = "pbkdf2";
    cases[4].o.hash = "whirlpool";
    cases[4].o.iterations = 1000;
    cases[5].name = "ripemd160 AF and digest, argon2id keyslot";
    cases[5].o.hash = "ripemd160";
    cases[5].o.iterations = 4;
    cases[5].o.memory_kib = 32;
    cases[5].o.parallel = 1;
    for (const FormatCase& c : cases) {
        INFO(c.name);
        TempDir dir;
        const std::string img = dir / "img", hdr = c.detached ? dir / "hdr" : img;
        REQUIRE(sh("truncate -s 20M '" + img + "'") == 0);
        if (c.detached) REQUIRE(sh("truncate -s 2M '" + hdr + "'") == 0);
        write_text(dir / "pw", "format pass");
        write_text(dir / "pw2", "added by cryptsetup");
        auto wstore = open_file_store(hdr, true);
        REQUIRE(wstore.ok());
        Result<luks::Volume> v = luks2::format(registry(), **wstore, text(std::string("format pass")), c.o);
        REQUIRE(v.ok());
        wstore->reset();
        const std::string hopt = c.detached ? " --header '" + hdr + "' " : " ";
        CHECK(testutil::hex(v->table.key) == cryptsetup_volume_key(hdr, dir / "pw"));
        CHECK(sh("cryptsetup open --test-passphrase" + hopt + "--key-file '" + (dir / "pw") + "' '" + img + "'") == 0);
        CHECK(sh("cryptsetup open --test-passphrase" + hopt + "--key-file '" + (dir / "pw2") + "' '" + img +
                 "' 2>/dev/null") != 0);
        {
            auto store = open_store(hdr);
            Result<luks2::Header> h = luks2::read_header(registry(), *store);
            REQUIRE(h.ok());
            CHECK(h->warnings.empty());
            CHECK(h->md.hdr.label == c.o.label);
            if (!c.o.uuid.empty()) CHECK(h->md.hdr.uuid == c.o.uuid);
            CHECK(luks2::dump(h->md) == capture("cryptsetup luksDump '" + hdr + "'"));
            CHECK(luks2::dump_json(h->md) == capture("cryptsetup luksDump --dump-json-metadata '" + hdr + "'"));
            CHECK(h->md.segments.at(0).offset == c.o.data_offset);
            CHECK(v->keyslot == c.o.keyslot);
        }
        // cryptsetup adds a keyslot to our header; we open it.
        REQUIRE(sh("cryptsetup luksAddKey -q" + std::string(kFast) + hopt + "--key-file '" + (dir / "pw") + "' '" + img +
                   "' '" + (dir / "pw2") + "' >/dev/null 2>&1") == 0);
        auto store = open_store(hdr);
        Result<luks::Volume> v2 = luks2::open(registry(), *store, text(std::string("added by cryptsetup")));
        REQUIRE(v2.ok());
        CHECK(testutil::hex(v2->table.key) == testutil::hex(v->table.key));
        CHECK(v2->keyslot != c.o.keyslot);
    }
}

TEST_CASE("luks2: format refuses impossible layouts and writes nothing", "[luks2]") {
    MemoryStore store(4u << 20);
    const std::string pw = "x";
    luks2::FormatOptions o;
    o.pbkdf = "pbkdf2";
    o.iterations = 1000;
    o.data_offset = 1 << 20;
    o.keyslots_size = 2 << 20;  // past the data offset
    CHECK(luks2::format(registry(), store, text(pw), o).status() == Status::Invalid);
    o.keyslots_size = 0;
    o.metadata_size = 20000;  // not a power of two
    CHECK(luks2::format(registry(), store, text(pw), o).status() == Status::Invalid);
    o.metadata_size = 16384;
    o.pbkdf = "scrypt";  // not a LUKS2 PBKDF
    CHECK(luks2::format(registry(), store, text(pw), o).status() == Status::Invalid);
    o.pbkdf = "pbkdf2";
    o.uuid = "not-a-uuid";
    CHECK(luks2::format(registry(), store, text(pw), o).status() == Status::Invalid);
    o.uuid.clear();
    o.data_offset = 16u << 20;  // the store is too small for 16 MiB of keyslots
    CHECK(luks2::format(registry(), store, text(pw), o).status() == Status::IoError);
    CHECK(std::all_of(store.data().begin(), store.data().end(), [](uint8_t b) { return b == 0; }));
    // A layout that fits: the container opens with the passphrase.
    o.data_offset = 1 << 20;
    Result<luks::Volume> v = luks2::format(registry(), store, text(pw), o);
    REQUIRE(v.ok());
    CHECK(v->table.offset == 2048);
    Result<luks::Volume> back = luks2::open(registry(), store, text(pw));
    REQUIRE(back.ok());
    CHECK(testutil::hex(back->table.key) == testutil::hex(v->table.key));
}

TEST_CASE("luks2: keyslots we add and kill are seen by cryptsetup - tokens kept", "[luks2]") {
    if (!cryptsetup_here("LUKS2 keyslot change tests not run")) return;
    TempDir dir;
    Case c{"one keyslot", std::string(kFast)};
    const std::string img = make_container(dir, c);
    write_text(dir / "token.json", R"({"type":"acme-vault","keyslots":["0"],"x":{"y":[true,null]}})");
    REQUIRE(sh("cryptsetup token import --json-file '" + (dir / "token.json") + "' '" + img + "'") == 0);
    const std::string vk_hex = cryptsetup_volume_key(img, dir / "pw0");
    const std::vector<uint8_t> vk = testutil::unhex(vk_hex);
    auto wstore = open_file_store(img, true);
    REQUIRE(wstore.ok());
    luks2::KeyslotOptions ko;
    ko.pbkdf = "argon2id";
    ko.iterations = 4;
    ko.memory_kib = 32;
    ko.parallel = 1;
    ko.priority = 2;
    Result<int> k = luks2::add_keyslot(registry(), **wstore, vk, text(passphrase(1)), ko);
    REQUIRE(k.ok());
    CHECK(*k == 1);
    write_text(dir / "pw1", passphrase(1));
    CHECK(sh("cryptsetup open --test-passphrase --key-slot 1 --key-file '" + (dir / "pw1") + "' '" + img + "'") == 0);
    CHECK(cryptsetup_volume_key(img, dir / "pw1") == vk_hex);
    {
        Result<luks2::Header> h = luks2::read_header(registry(), **wstore);
        REQUIRE(h.ok());
        CHECK(h->md.hdr.seqid > 1);
        CHECK(h->md.tokens.at(0).json == R"({"type":"acme-vault","keyslots":["0"],"x":{"y":[true,null]}})");
        CHECK(luks2::dump(h->md) == capture("cryptsetup luksDump '" + img + "'"));
    }
    // A wrong volume key is refused; a taken slot too.
    std::vector<uint8_t> wrong = vk;
    wrong[0] ^= 1;
    CHECK(luks2::add_keyslot(registry(), **wstore, wrong, text(passphrase(2)), ko).status() == Status::NoKey);
    ko.keyslot = 1;
    CHECK(luks2::add_keyslot(registry(), **wstore, vk, text(passphrase(2)), ko).status() == Status::Invalid);

    // Change slot 1's passphrase: cryptsetup opens slot 1 with the new one only.
    ko.keyslot = -1;
    ko.priority = 1;
    Result<int> ch = luks2::change_keyslot(registry(), **wstore, text(passphrase(1)), text(passphrase(3)), ko);
    REQUIRE(ch.ok());
    CHECK(*ch == 1);
    write_text(dir / "pw3", passphrase(3));
    CHECK(sh("cryptsetup open --test-passphrase --key-slot 1 --key-file '" + (dir / "pw3") + "' '" + img + "'") == 0);
    CHECK(sh("cryptsetup open --test-passphrase --key-file '" + (dir / "pw1") + "' '" + img + "' 2>/dev/null") != 0);
    CHECK(cryptsetup_volume_key(img, dir / "pw3") == vk_hex);
    write_text(dir / "pw1", passphrase(3));  // slot 1's passphrase from here on

    // Kill slot 0: cryptsetup no longer opens it, the token loses it, slot 1 works.
    REQUIRE(luks2::remove_keyslot(registry(), **wstore, 0).ok());
    CHECK(sh("cryptsetup open --test-passphrase --key-file '" + (dir / "pw0") + "' '" + img + "' 2>/dev/null") != 0);
    CHECK(sh("cryptsetup open --test-passphrase --key-file '" + (dir / "pw1") + "' '" + img + "'") == 0);
    Result<luks2::Header> h = luks2::read_header(registry(), **wstore);
    REQUIRE(h.ok());
    CHECK(h->md.tokens.at(0).keyslots.empty());
    CHECK(luks2::dump(h->md) == capture("cryptsetup luksDump '" + img + "'"));
    // The area is wiped.
    std::vector<uint8_t> area(4096);
    REQUIRE((*wstore)->read(32768, area) == Status::Ok);
    CHECK(std::all_of(area.begin(), area.end(), [](uint8_t b) { return b == 0; }));
    CHECK(luks2::remove_keyslot(registry(), **wstore, 0).status() == Status::Invalid);
}

// The crashing write lands its first half, as a torn write.
using CrashingStore = testutil::TornStore;

TEST_CASE("luks2: a crash at any write of add-, change- or kill-keyslot leaves the old or the new keys", "[luks2]") {
    // A container of our own (no cryptsetup needed): slot 0 with "old".
    MemoryStore base(2u << 20);
    luks2::FormatOptions fo;
    fo.pbkdf = "pbkdf2";
    fo.iterations = 1000;
    fo.data_offset = 1 << 20;
    Result<luks::Volume> v = luks2::format(registry(), base, text(std::string("old")), fo);
    REQUIRE(v.ok());
    const std::vector<uint8_t> vk(v->table.key.data(), v->table.key.data() + v->table.key.size());
    luks2::KeyslotOptions ko;
    ko.pbkdf = "pbkdf2";
    ko.iterations = 1000;
    auto opens = [&](BackingStore& s, const char* pw) { return luks2::open(registry(), s, text(std::string(pw))).ok(); };

    // Count the writes of a clean add, then crash at each of them.
    CrashingStore clean(base.data(), -1);
    REQUIRE(luks2::add_keyslot(registry(), clean, vk, text(std::string("new")), ko).ok());
    const int n = clean.writes();
    CHECK(n >= 3);  // keyslot area, primary, secondary
    for (int at = 1; at <= n; ++at) {
        INFO("add-keyslot crashing at write " << at);
        CrashingStore s(base.data(), at);
        CHECK_FALSE(luks2::add_keyslot(registry(), s, vk, text(std::string("new")), ko).ok());
        MemoryStore after(0);
        after.data() = s.image();
        CHECK(opens(after, "old"));  // the old passphrase always survives an add
        if (at == n) CHECK(opens(after, "new"));  // the primary was written: the new header wins
    }

    // Kill the old slot of a two-slot container, crashing at each write.
    std::vector<uint8_t> two = clean.image();
    CrashingStore clean_kill(two, -1);
    REQUIRE(luks2::remove_keyslot(registry(), clean_kill, 0).ok());
    const int m = clean_kill.writes();
    for (int at = 1; at <= m; ++at) {
        INFO("kill-keyslot crashing at write " << at);
        CrashingStore s(two, at);
        CHECK_FALSE(luks2::remove_keyslot(registry(), s, 0).ok());
        MemoryStore after(0);
        after.data() = s.image();
        CHECK(opens(after, "new"));  // the kept slot opens at every point
    }
    // Change "new" to "newer" in a two-slot container, crashing at each write.
    CrashingStore clean_change(two, -1);
    Result<int> changed = luks2::change_keyslot(registry(), clean_change, text(std::string("new")),
                                                text(std::string("newer")), ko);
    REQUIRE(changed.ok());
    CHECK(*changed == 1);
    const int c = clean_change.writes();
    for (int at = 1; at <= c; ++at) {
        INFO("change-keyslot crashing at write " << at);
        CrashingStore s(two, at);
        CHECK_FALSE(luks2::change_keyslot(registry(), s, text(std::string("new")), text(std::string("newer")), ko).ok());
        MemoryStore after(0);
        after.data() = s.image();
        CHECK((opens(after, "new") || opens(after, "newer")));  // never neither
        CHECK(opens(after, "old"));  // the other slot is untouched
    }
    {
        MemoryStore after(0);
        after.data() = clean_change.image();
        CHECK_FALSE(opens(after, "new"));
        CHECK(opens(after, "newer"));
        Result<luks2::Header> h = luks2::read_header(registry(), after);
        REQUIRE(h.ok());
        CHECK(h->md.keyslots.count(1));
        CHECK(h->md.keyslots.size() == 2);
    }

    MemoryStore done(0);
    done.data() = clean_kill.image();
    CHECK_FALSE(opens(done, "old"));
    CHECK(opens(done, "new"));
}

TEST_CASE("luks2: benchmarked KDF costs stay in cryptsetup's bounds and open in cryptsetup", "[luks2][bench]") {
    // The limits first (no timing): lanes and memory as cryptsetup caps them.
    CHECK(luks::default_argon2_parallel() >= 1);
    CHECK(luks::default_argon2_parallel() <= 4);
    CHECK(luks::default_argon2_memory_kib(1024) == 1024);
    CHECK(luks::benchmark_argon2(Argon2Type::Id, 64, 100, 16, 4).status() == Status::Invalid);  // below 4 lanes x 8 KiB
    if (!cryptsetup_here("KDF benchmark comparison not run")) return;
    // Same target, same machine, one after the other: the costs land in the
    // same range (printed), and what we pick opens in cryptsetup.
    TempDir dir;
    write_text(dir / "pw", "x");
    REQUIRE(sh("truncate -s 20M '" + (dir / "img") + "'") == 0);
    REQUIRE(sh("cryptsetup luksFormat -q --type luks2 --pbkdf pbkdf2 --iter-time 250 --key-file '" + (dir / "pw") +
               "' '" + (dir / "img") + "' >/dev/null 2>&1") == 0);
    REQUIRE(sh("cryptsetup luksAddKey -q --pbkdf argon2id --iter-time 400 --pbkdf-memory 65536 --pbkdf-parallel 1 "
               "--key-file '" + (dir / "pw") + "' '" + (dir / "img") + "' '" + (dir / "pw") + "' >/dev/null 2>&1") == 0);
    Result<luks2::Header> h = luks2::read_header(registry(), *open_store(dir / "img"));
    REQUIRE(h.ok());
    const luks2::Kdf& theirs_p = h->md.keyslots.at(0).kdf;
    const luks2::Kdf& theirs_a = h->md.keyslots.at(1).kdf;
    Result<uint32_t> ours_p = luks::benchmark_pbkdf2(registry(), "sha256", 64, 250);
    REQUIRE(ours_p.ok());
    INFO("pbkdf2-sha256 250 ms: cryptsetup " << theirs_p.iterations << ", ours " << *ours_p);
    // Wall-clock results of two benchmarks on a shared machine: reported, not
    // asserted (a loaded machine moves either by more than any fixed factor).
    CHECK(*ours_p >= 1000);  // cryptsetup's minimum
    if (*ours_p * 3.0 < theirs_p.iterations || *ours_p > theirs_p.iterations * 3.0)
        WARN("pbkdf2 benchmarks differ by more than 3x (machine load?)");
    Result<luks::Argon2Cost> ours_a = luks::benchmark_argon2(Argon2Type::Id, 64, 400, 65536, 1);
    REQUIRE(ours_a.ok());
    const double work_t = double(theirs_a.time) * theirs_a.memory, work_o = double(ours_a->time) * ours_a->memory_kib;
    INFO("argon2id 400 ms, 64 MiB, 1 lane: cryptsetup t=" << theirs_a.time << " m=" << theirs_a.memory << ", ours t="
                                                          << ours_a->time << " m=" << ours_a->memory_kib);
    CHECK(ours_a->time >= 4);
    CHECK(ours_a->memory_kib <= 65536);
    if (work_o * 3 < work_t || work_o > work_t * 3) WARN("argon2 benchmarks differ by more than 3x (machine load?)");
    // A format with benchmarked costs opens in cryptsetup.
    luks2::FormatOptions fo;
    fo.pbkdf = "argon2id";
    fo.iter_time_ms = 200;
    fo.memory_kib = 32768;
    auto w = open_file_store(dir / "img", true);
    REQUIRE(w.ok());
    REQUIRE(luks2::format(registry(), **w, text(std::string("x")), fo).ok());
    w->reset();
    CHECK(sh("cryptsetup open --test-passphrase --key-file '" + (dir / "pw") + "' '" + (dir / "img") + "'") == 0);
}

TEST_CASE("luks2: header backup equals cryptsetup's - restore brings old keyslots back", "[luks2]") {
    if (!cryptsetup_here("LUKS2 header backup tests not run")) return;
    TempDir dir;
    Case c{"argon2 + pbkdf2", std::string(kFast), false, {std::string(kArgon)}};
    const std::string img = make_container(dir, c);
    REQUIRE(sh("cryptsetup luksHeaderBackup '" + img + "' --header-backup-file '" + (dir / "theirs") + "'") == 0);
    std::vector<uint8_t> theirs;
    REQUIRE(testutil::read_file(dir / "theirs", &theirs));
    auto w = open_file_store(img, true);
    REQUIRE(w.ok());
    Result<std::vector<uint8_t>> ours = luks2::header_backup(registry(), **w);
    REQUIRE(ours.ok());
    CHECK(ours->size() == theirs.size());
    CHECK(*ours == theirs);

    // Kill slot 0, then restore our backup: slot 0 opens again, for cryptsetup too.
    REQUIRE(luks2::remove_keyslot(registry(), **w, 0).ok());
    CHECK(sh("cryptsetup open --test-passphrase --key-file '" + (dir / "pw0") + "' '" + img + "' 2>/dev/null") != 0);
    MemoryStore backup(ours->size());
    backup.data() = *ours;
    REQUIRE(luks2::header_restore(registry(), **w, backup).ok());
    CHECK(sh("cryptsetup open --test-passphrase --key-file '" + (dir / "pw0") + "' '" + img + "'") == 0);
    CHECK(luks2::open(registry(), **w, text(passphrase(0))).ok());

    // A backup of another layout is refused, and garbage is no backup.
    TempDir other;
    Case c2{"8 MiB data offset", std::string("--offset 16384") + kFast};
    const std::string img2 = make_container(other, c2);
    Result<std::vector<uint8_t>> b2 = luks2::header_backup(registry(), *open_store(img2));
    REQUIRE(b2.ok());
    MemoryStore backup2(b2->size());
    backup2.data() = *b2;
    CHECK(luks2::header_restore(registry(), **w, backup2).status() == Status::Invalid);
    MemoryStore junk(1 << 20);
    CHECK(luks2::header_restore(registry(), **w, junk).error().message == "Backup file doesn't contain valid LUKS header.");
    CHECK(luks2::open(registry(), **w, text(passphrase(0))).ok());
}
