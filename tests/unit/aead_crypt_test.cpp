// dm-crypt's integrity feature: the table fields (integrity:N:aead|none, the
// kernel's refusals, dmsetup's print order), the kernel's tag layout per
// cipher, and the engine over an in-memory TaggedDevice: round trips, every
// sector's ciphertext and tag computed independently by python3-cryptography
// (AESGCM, AESCCM, ChaCha20Poly1305, AES-XTS + HMAC) from the same key, IV
// and AAD, aegis128 through its kernel AF_ALG golden, and tampering that
// fails exactly the sector touched.
#include "paths.hpp"
#include "kernel_probes.hpp"
#include "golden_files.hpp"
#include "test_util.hpp"
#include <blkcrypt/aead.hpp>
#include <blkcrypt/dm/aead_target.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/dm/dm_table.hpp>
#include <blkcrypt/integrity/device.hpp>
#include <blkcrypt/shash.hpp>
#include <blkcrypt/integrity/tagged_device.hpp>

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <unistd.h>

using namespace blkcrypt;
using testutil::hex;
using testutil::unhex;

namespace {

// Data and a tag per block, in memory: what dm-integrity gives dm-crypt.
class MemTagged final : public integrity::TaggedDevice {
public:
    MemTagged(uint64_t blocks, uint32_t bs, uint32_t ts) : data_(blocks * bs), tags_(blocks * ts), bs_(bs), ts_(ts) {}
    uint64_t size() const override { return data_.size(); }
    uint32_t block_size() const override { return bs_; }
    uint32_t tag_size() const override { return ts_; }
    bool read_only() const override { return false; }
    Result<void> read(uint64_t off, Bytes data, Bytes tags) override {
        if (Status s = check(off, data.size(), tags.size()); s != Status::Ok) return make_error(s, "bad read");
        std::lock_guard lk(mu_);
        std::copy_n(data_.begin() + static_cast<long>(off), data.size(), data.begin());
        std::copy_n(tags_.begin() + static_cast<long>(off / bs_ * ts_), tags.size(), tags.begin());
        return {};
    }
    Result<void> write(uint64_t off, ConstBytes data, ConstBytes tags) override {
        if (Status s = check(off, data.size(), tags.size()); s != Status::Ok) return make_error(s, "bad write");
        std::lock_guard lk(mu_);
        std::copy(data.begin(), data.end(), data_.begin() + static_cast<long>(off));
        std::copy(tags.begin(), tags.end(), tags_.begin() + static_cast<long>(off / bs_ * ts_));
        ++writes;
        return {};
    }
    Result<void> flush() override { return {}; }
    std::string describe() const override { return "memory tags"; }

    uint8_t* block(uint64_t i) { return data_.data() + i * bs_; }
    uint8_t* tag(uint64_t i) { return tags_.data() + i * ts_; }
    int writes = 0;

private:
    Status check(uint64_t off, std::size_t n, std::size_t t) const {
        if (off % bs_ || n % bs_ || off + n > data_.size() || t != n / bs_ * ts_) return Status::Invalid;
        return Status::Ok;
    }
    std::mutex mu_;
    std::vector<uint8_t> data_, tags_;
    uint32_t bs_, ts_;
};

struct Mode {
    const char* cipher;
    unsigned tag;       // integrity:<tag>
    const char* auth;   // aead or none
    std::size_t key;    // bytes
    const char* peer;   // how python computes a sector: gcm, ccm, chacha, xts-hmac-<hash>, xts
};

const Mode kModes[] = {
    {"capi:gcm(aes)-random", 28, "aead", 32, "gcm"},
    {"capi:gcm(aes)-random", 28, "aead", 16, "gcm"},
    {"capi:rfc4309(ccm(aes))-random", 24, "aead", 19, "ccm"},
    {"capi:rfc4309(ccm(aes))-random", 24, "aead", 35, "ccm"},
    {"capi:rfc7539(chacha20,poly1305)-random", 28, "aead", 32, "chacha"},
    {"capi:authenc(hmac(sha256),xts(aes))-random", 48, "aead", 64 + 32, "xts-hmac-sha256"},
    {"capi:authenc(hmac(sha256),xts(aes))-plain64", 32, "aead", 64 + 32, "xts-hmac-sha256"},
    {"capi:authenc(hmac(sha512),xts(aes))-random", 80, "aead", 64 + 64, "xts-hmac-sha512"},
    {"capi:authenc(hmac(sha1),xts(aes))-plain64", 20, "aead", 32 + 20, "xts-hmac-sha1"},
    {"capi:xts(aes)-random", 16, "none", 64, "xts"},
};

std::vector<uint8_t> rnd(std::mt19937& rng, std::size_t n) { return testutil::random_bytes(rng, n); }

dm::CryptTable table_of(const std::string& cipher, ConstBytes key, uint64_t iv_offset, const std::string& opts) {
    auto t = dm::parse_crypt_args(cipher + " " + hex(key) + " " + std::to_string(iv_offset) + " " + opts);
    INFO(cipher << " " << opts);
    REQUIRE(t);
    return *t;
}

std::string opts_of(unsigned tag, const char* auth, std::size_t ss, bool large = false) {
    int n = 1 + (ss != 512) + large;
    std::string o = std::to_string(n) + " integrity:" + std::to_string(tag) + ":" + auth;
    if (ss != 512) o += " sector_size:" + std::to_string(ss);
    if (large) o += " iv_large_sectors";
    return o;
}

std::shared_ptr<dm::BlockDevice> device(const dm::CryptTable& t, std::shared_ptr<MemTagged> m,
                                        dm::AeadCryptOptions o = {}) {
    if (!o.threads) o.threads = 2;
    if (o.chunk == dm::AeadCryptOptions{}.chunk) o.chunk = 8 * 1024;  // several chunks per I/O
    auto d = dm::make_aead_crypt_device(testutil::registry(), t, std::move(m), 0, o);
    INFO(t.cipher);
    if (!d) FAIL(d.error().message);
    return *d;
}

bool have_python() {
    return std::system("python3 -c 'from cryptography.hazmat.primitives.ciphers.aead import "
                       "AESGCM, AESCCM, ChaCha20Poly1305' >/dev/null 2>&1") == 0;
}

// Each line "peer,key,iv,aad,plaintext,authsize" -> hex(ciphertext || auth tag).
std::vector<std::string> python_peer(const std::vector<std::string>& lines) {
    namespace fs = std::filesystem;
    const std::string stem = "blkcrypt-aead-crypt-" + std::to_string(::getpid());
    const fs::path script = fs::temp_directory_path() / (stem + ".py");
    const fs::path input = fs::temp_directory_path() / (stem + ".txt");
    {
        std::ofstream py(script);
        py << "import sys, hmac, hashlib\n"
              "from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes\n"
              "from cryptography.hazmat.primitives.ciphers.aead import AESGCM, AESCCM, ChaCha20Poly1305\n"
              "for line in open(sys.argv[1]):\n"
              "    peer, k, iv, a, p, t = line.split(',')\n"
              "    k, iv, a, p = map(bytes.fromhex, (k, iv, a, p))\n"
              "    t = int(t)\n"
              "    if peer == 'gcm':\n"
              "        out = AESGCM(k).encrypt(iv, p, a)\n"
              "    elif peer == 'chacha':\n"
              "        out = ChaCha20Poly1305(k).encrypt(iv, p, a)\n"
              "    elif peer == 'ccm':\n"
              "        # rfc4309: key = AES key || 3-byte salt, nonce = salt || IV; the\n"
              "        # AAD's last 8 bytes are the IV (ESP layout) and not authenticated.\n"
              "        out = AESCCM(k[:-3], tag_length=t).encrypt(k[-3:] + iv, p, a[:-8])\n"
              "    elif peer == 'xts':\n"
              "        e = Cipher(algorithms.AES(k), modes.XTS(iv)).encryptor()\n"
              "        out = e.update(p) + e.finalize()\n"
              "    else:\n"
              "        h = peer.split('-')[2]\n"
              "        ml = hashlib.new(h).digest_size\n"
              "        e = Cipher(algorithms.AES(k[:-ml]), modes.XTS(iv)).encryptor()\n"
              "        c = e.update(p) + e.finalize()\n"
              "        out = c + hmac.new(k[-ml:], a + c, h).digest()[:t]\n"
              "    print(out.hex())\n";
        std::ofstream in(input);
        for (const auto& l : lines) in << l << "\n";
    }
    auto out = testutil::command_lines("python3 '" + script.string() + "' '" + input.string() + "'");
    fs::remove(script);
    fs::remove(input);
    return out;
}

std::string le64_hex(uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
    return hex(ConstBytes(b, 8));
}

// The plain64 IV of iv_sector, iv_size bytes.
std::vector<uint8_t> plain64(uint64_t s, std::size_t n) {
    std::vector<uint8_t> iv(n, 0);
    for (int i = 0; i < 8; ++i) iv[static_cast<std::size_t>(i)] = static_cast<uint8_t>(s >> (8 * i));
    return iv;
}

}  // namespace

TEST_CASE("crypt table: the integrity feature as the kernel parses and prints it", "[aead-crypt]") {
    const std::string key(64, '1');
    auto t = dm::parse_crypt_args("capi:gcm(aes)-random " + key + " 0 2 sector_size:4096 integrity:28:aead");
    REQUIRE(t);
    CHECK(t->integrity_tag_size == 28);
    CHECK(t->integrity_auth == "aead");
    CHECK(t->integrity_aead());
    CHECK(t->ivmode == "random");
    CHECK(t->alg_name == "gcm(aes)");
    // dmsetup table: integrity before sector_size, as crypt_status emits them.
    CHECK(t->crypt_args(true) == "capi:gcm(aes)-random " + key + " 0 2 integrity:28:aead sector_size:4096");
    auto back = dm::parse_crypt_args(t->crypt_args(true));
    REQUIRE(back);
    CHECK(back->crypt_args(true) == t->crypt_args(true));

    auto a = dm::parse_table_line("0 8 crypt capi:authenc(hmac(sha256),xts(aes))-plain64 " + std::string(192, 'a') +
                                  " 0 /dev/mapper/x 0 1 integrity:32:AEAD");
    REQUIRE(a);
    CHECK(a->integrity_aead());  // strcasecmp, printed as written
    CHECK(a->alg_name == "authenc(hmac(sha256),xts(aes))");
    CHECK(a->table_line(false).ends_with(" /dev/mapper/x 0 1 integrity:32:AEAD"));

    // Legacy grammar with 'none' (random IVs only stored).
    auto n = dm::parse_crypt_args("aes-xts-random " + key + " 0 1 integrity:16:none");
    REQUIRE(n);
    CHECK_FALSE(n->integrity_aead());
    CHECK(n->alg_name == "xts(aes)");

    auto refused = [&](const std::string& args, const std::string& why) {
        auto r = dm::parse_crypt_args(args);
        INFO(args);
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message, Catch::Contains(why));
        CHECK(r.error().message.find(key) == std::string::npos);
    };
    refused("capi:gcm(aes)-random " + key + " 0", "needs the integrity feature");
    refused("aes-xts-random " + key + " 0", "needs the integrity feature");
    CHECK_FALSE(dm::parse_cipher_spec("capi:gcm(aes)-random"));
    refused("capi:gcm(aes)-random " + key + " 0 1 integrity:0:aead", "Invalid integrity arguments");
    refused("capi:gcm(aes)-random " + key + " 0 1 integrity:481:aead", "Invalid integrity arguments");
    refused("capi:gcm(aes)-random " + key + " 0 1 integrity:28", "Invalid integrity arguments");
    // The kernel takes aead or none; an HMAC is named in the cipher.
    refused("aes-xts-plain64 " + key + " 0 1 integrity:32:hmac(sha256)", "Unknown integrity profile");
    // crypt_ctr_cipher_old: no AEAD in the legacy grammar.
    refused("aes-xts-plain64 " + key + " 0 1 integrity:32:aead", "Bad cipher specification");
    CHECK(dm::parse_crypt_args("capi:gcm(aes)-random " + key + " 0 1 integrity:480:aead"));
}

TEST_CASE("crypt integrity: the tag layout the kernel derives for each cipher", "[aead-crypt]") {
    struct Want {
        const char* cipher;
        const char* opt;
        std::size_t iv, stored, auth, mac;
    };
    const Want wants[] = {
        {"capi:gcm(aes)-random", "integrity:28:aead", 12, 12, 16, 0},
        {"capi:rfc4309(ccm(aes))-random", "integrity:24:aead", 8, 8, 16, 0},
        {"capi:rfc7539(chacha20,poly1305)-random", "integrity:28:aead", 12, 12, 16, 0},
        {"capi:aegis128-random", "integrity:32:aead", 16, 16, 16, 0},
        {"capi:authenc(hmac(sha256),xts(aes))-random", "integrity:48:aead", 16, 16, 32, 32},
        {"capi:authenc(hmac(sha256),xts(aes))-plain64", "integrity:32:aead", 16, 0, 32, 32},
        {"capi:authenc(hmac(sha512),xts(aes))-random", "integrity:80:aead", 16, 16, 64, 64},
        {"capi:authenc(hmac(sha1),xts(aes))-random", "integrity:36:aead", 16, 16, 20, 20},
        {"capi:gcm(aes)-random", "integrity:24:aead", 12, 12, 12, 0},  // truncated GCM tag
        {"aes-xts-random", "integrity:16:none", 16, 16, 0, 0},
    };
    for (const Want& w : wants) {
        auto t = dm::parse_crypt_args(std::string(w.cipher) + " - 0 1 " + w.opt);
        INFO(w.cipher << " " << w.opt);
        REQUIRE(t);
        auto l = dm::aead_layout(testutil::registry(), *t);
        if (!l) FAIL(l.error().message);
        CHECK(l->iv_size == w.iv);
        CHECK(l->iv_stored == w.stored);
        CHECK(l->auth_size == w.auth);
        CHECK(l->mac_key_size == w.mac);
        CHECK(l->on_disk == t->integrity_tag_size);
    }
    auto refused = [](const std::string& args, const std::string& why) {
        auto t = dm::parse_crypt_args(args);
        REQUIRE(t);
        auto l = dm::aead_layout(testutil::registry(), *t);
        INFO(args);
        REQUIRE_FALSE(l);
        CHECK_THAT(l.error().message, Catch::Contains(why));
    };
    // 40 - 12 = 28 bytes of GCM tag, 12 - 12 = none at all.
    refused("capi:gcm(aes)-random - 0 1 integrity:40:aead", "auth tag size is not supported");
    refused("capi:gcm(aes)-random - 0 1 integrity:12:aead", "auth tag size is not supported");
    refused("capi:authenc(hmac(sha256),xts(aes))-random - 0 1 integrity:60:aead", "auth tag size is not supported");
    refused("capi:xts(aes)-plain64 - 0 1 integrity:16:aead", "Error allocating crypto tfm");
    refused("aes-xts-random - 0 1 integrity:20:none", "Not enough space for integrity tag");
    refused("capi:gcm(aes)-essiv:sha256 - 0 1 integrity:28:aead", "not available with the integrity feature");
}

TEST_CASE("crypt integrity: every mode writes what python3-cryptography computes, and reads it back",
          "[aead-crypt]") {
    const bool py = have_python();
    if (!py) WARN("python3 with the cryptography package not found: sectors checked by round trip only");
    std::mt19937 rng(0x1eadu ^ Catch::rngSeed());
    std::vector<std::string> lines, got;
    for (const Mode& m : kModes) {
        for (std::size_t ss : {512u, 4096u}) {
            const uint64_t iv_offset = std::string(m.cipher).ends_with("plain64") ? 8 * (1 + rng() % 4) : 0;
            const auto key = rnd(rng, m.key);
            auto t = table_of(m.cipher, key, iv_offset, opts_of(m.tag, m.auth, ss));
            auto lay = dm::aead_layout(testutil::registry(), t);
            REQUIRE(lay);
            const uint64_t blocks = 24;
            auto mem = std::make_shared<MemTagged>(blocks, static_cast<uint32_t>(ss), m.tag);
            auto dev = device(t, mem);
            // Sectors 2.. of the device, over several chunks and worker threads.
            const auto data = rnd(rng, 20 * ss);
            REQUIRE(dm::write_sync(*dev, 2 * ss, ConstBytes(data.data(), data.size())) == Status::Ok);
            std::vector<uint8_t> back(data.size());
            REQUIRE(dm::read_sync(*dev, 2 * ss, Bytes(back.data(), back.size())) == Status::Ok);
            INFO(m.cipher << " sector " << ss << " key " << m.key);
            CHECK(back == data);
            for (uint64_t b = 2; b < 22; ++b) {
                const uint8_t* tag = mem->tag(b);
                // Padding after the tag and stored IV is zero.
                for (std::size_t i = lay->auth_size + lay->iv_stored; i < m.tag; ++i) CHECK(tag[i] == 0);
                if (lay->iv_stored) {
                    // A fresh random IV per sector.
                    CHECK(hex(ConstBytes(tag + lay->auth_size, lay->iv_stored)) !=
                          hex(ConstBytes(mem->tag(b + 1) + lay->auth_size, lay->iv_stored)));
                } else {
                    CHECK(std::all_of(tag + lay->auth_size, tag + m.tag, [](uint8_t c) { return c == 0; }));
                }
                const uint64_t rel = b * ss / 512;
                const auto iv = lay->iv_stored
                                    ? std::vector<uint8_t>(tag + lay->auth_size, tag + lay->auth_size + lay->iv_size)
                                    : plain64(rel + iv_offset, lay->iv_size);
                const std::string aad = le64_hex(rel) + hex(ConstBytes(iv.data(), iv.size()));
                const ConstBytes pt(data.data() + (b - 2) * ss, ss);
                lines.push_back(std::string(m.peer) + "," + hex(key) + "," + hex(ConstBytes(iv.data(), iv.size())) +
                                "," + aad + "," + hex(pt) + "," + std::to_string(lay->auth_size));
                got.push_back(hex(ConstBytes(mem->block(b), ss)) + hex(ConstBytes(tag, lay->auth_size)));
            }
        }
    }
    if (!py) return;
    const auto want = python_peer(lines);
    REQUIRE(want.size() == got.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        INFO(lines[i].substr(0, lines[i].find(',')) << " case " << i);
        CHECK(got[i] == want[i]);
    }
}

TEST_CASE("crypt integrity: iv_large_sectors and iv_offset set the IV, not the AAD", "[aead-crypt]") {
    if (!have_python()) {
        WARN("python3 with the cryptography package not found: not run");
        return;
    }
    std::mt19937 rng(77);
    const auto key = rnd(rng, 96);
    std::vector<std::string> lines, got;
    for (bool large : {false, true}) {
        const std::size_t ss = 4096;
        const uint64_t iv_offset = 16;
        auto t = table_of("capi:authenc(hmac(sha256),xts(aes))-plain64", key, iv_offset, opts_of(32, "aead", ss, large));
        auto mem = std::make_shared<MemTagged>(6, 4096, 32);
        auto dev = device(t, mem);
        const auto data = rnd(rng, 6 * ss);
        REQUIRE(dm::write_sync(*dev, 0, ConstBytes(data.data(), data.size())) == Status::Ok);
        for (uint64_t b = 0; b < 6; ++b) {
            const uint64_t rel = b * 8;
            const uint64_t ivs = large ? (rel + iv_offset) / 8 : rel + iv_offset;
            const auto iv = plain64(ivs, 16);
            lines.push_back("xts-hmac-sha256," + hex(ConstBytes(key.data(), key.size())) + "," +
                            hex(ConstBytes(iv.data(), 16)) + "," + le64_hex(rel) + hex(ConstBytes(iv.data(), 16)) +
                            "," + hex(ConstBytes(data.data() + b * ss, ss)) + ",32");
            got.push_back(hex(ConstBytes(mem->block(b), ss)) + hex(ConstBytes(mem->tag(b), 32)));
        }
    }
    const auto want = python_peer(lines);
    REQUIRE(want.size() == got.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        INFO("case " << i);
        CHECK(got[i] == want[i]);
    }
}

TEST_CASE("crypt integrity: aegis128-random is the kernel's AEGIS-128 with the dm-crypt AAD", "[aead-crypt]") {
    // Case 5 of the kernel's AF_ALG golden has dm-crypt's shape: 24 bytes of
    // AAD (le64 sector || 16-byte IV), a 4096-byte sector, a 16-byte tag.
    std::vector<uint8_t> file;
    REQUIRE(testutil::read_file(std::string(testutil::kSourceDir) + "/tests/aead/kernel/aegis128-af_alg.txt", &file));
    const std::string txt(file.begin(), file.end());
    const std::size_t at = txt.find("# case 5: assoc 24, text 4096, tag 16");
    REQUIRE(at != std::string::npos);
    auto field = [&](const char* name) {
        const std::size_t p = txt.find(std::string("\n") + name, at);
        REQUIRE(p != std::string::npos);
        const std::size_t b = txt.find("= ", p) + 2;
        return unhex(txt.substr(b, txt.find('\n', b) - b));
    };
    const auto gkey = field("key"), giv = field("iv"), gassoc = field("assoc"), gpt = field("ptext"),
               gct = field("ctext");
    REQUIRE(gassoc.size() == 24);
    auto a = Aead::alloc(testutil::registry(), "aegis128");
    REQUIRE(a);
    REQUIRE(a->setkey(ConstBytes(gkey.data(), gkey.size())) == Status::Ok);
    REQUIRE(a->setauthsize(16) == Status::Ok);
    std::vector<uint8_t> out(gpt.size() + 16), iv = giv;
    REQUIRE(a->encrypt(ConstBytes(gassoc.data(), 24), ConstBytes(gpt.data(), gpt.size()), Bytes(out.data(), out.size()),
                       Bytes(iv.data(), iv.size())) == Status::Ok);
    REQUIRE(out == gct);

    // The engine's sectors are that transform on le64(sector) || stored IV.
    std::mt19937 rng(5);
    const auto key = rnd(rng, 16);
    auto t = table_of("capi:aegis128-random", key, 0, opts_of(32, "aead", 4096));
    auto mem = std::make_shared<MemTagged>(4, 4096, 32);
    auto dev = device(t, mem);
    const auto data = rnd(rng, 4 * 4096);
    REQUIRE(dm::write_sync(*dev, 0, ConstBytes(data.data(), data.size())) == Status::Ok);
    REQUIRE(a->setkey(ConstBytes(key.data(), key.size())) == Status::Ok);
    for (uint64_t b = 0; b < 4; ++b) {
        std::vector<uint8_t> assoc = unhex(le64_hex(b * 8));
        assoc.insert(assoc.end(), mem->tag(b) + 16, mem->tag(b) + 32);
        std::vector<uint8_t> ivb(mem->tag(b) + 16, mem->tag(b) + 32), want(4096 + 16);
        REQUIRE(a->encrypt(ConstBytes(assoc.data(), 24), ConstBytes(data.data() + b * 4096, 4096),
                           Bytes(want.data(), want.size()), Bytes(ivb.data(), 16)) == Status::Ok);
        CHECK(hex(ConstBytes(mem->block(b), 4096)) == hex(ConstBytes(want.data(), 4096)));
        CHECK(hex(ConstBytes(mem->tag(b), 16)) == hex(ConstBytes(want.data() + 4096, 16)));
    }
    std::vector<uint8_t> back(data.size());
    REQUIRE(dm::read_sync(*dev, 0, Bytes(back.data(), back.size())) == Status::Ok);
    CHECK(back == data);
}

TEST_CASE("crypt integrity: a flipped data, tag or stored IV byte fails exactly that sector", "[aead-crypt]") {
    std::mt19937 rng(9);
    for (const char* cipher : {"capi:gcm(aes)-random", "capi:authenc(hmac(sha256),xts(aes))-random",
                               "capi:rfc4309(ccm(aes))-random", "capi:authenc(hmac(sha256),xts(aes))-plain64"}) {
        const bool ccm = std::string(cipher).find("ccm") != std::string::npos;
        const bool authenc = std::string(cipher).find("authenc") != std::string::npos;
        const bool random = std::string(cipher).ends_with("random");
        const unsigned tag = ccm ? 24 : authenc ? (random ? 48 : 32) : 28;
        const auto key = rnd(rng, ccm ? 19 : authenc ? 96 : 32);
        auto t = table_of(cipher, key, 0, opts_of(tag, "aead", 512));
        auto lay = dm::aead_layout(testutil::registry(), t);
        REQUIRE(lay);
        auto mem = std::make_shared<MemTagged>(64, 512, tag);
        std::mutex mu;
        std::set<uint64_t> failed;
        dm::AeadCryptOptions o;
        o.on_error = [&](uint64_t s, Status st) {
            std::lock_guard lk(mu);
            CHECK(st == Status::BadMsg);
            failed.insert(s);
        };
        auto dev = device(t, mem, o);
        const auto data = rnd(rng, 64 * 512);
        REQUIRE(dm::write_sync(*dev, 0, ConstBytes(data.data(), data.size())) == Status::Ok);
        struct Flip {
            const char* what;
            uint8_t* at;
        };
        std::vector<Flip> flips = {{"data", mem->block(37) + 100}, {"tag", mem->tag(37) + 3}};
        if (lay->iv_stored) flips.push_back({"stored IV", mem->tag(37) + lay->auth_size + 1});
        for (const Flip& f : flips) {
            INFO(cipher << ": flipped " << f.what);
            failed.clear();
            *f.at ^= 0x20;
            std::vector<uint8_t> back(data.size());
            CHECK(dm::read_sync(*dev, 0, Bytes(back.data(), back.size())) == Status::BadMsg);
            CHECK(failed == std::set<uint64_t>{37});
            // Every other sector still reads; sector 37 alone fails.
            for (uint64_t s : {0u, 36u, 38u, 63u})
                CHECK(dm::read_sync(*dev, s * 512, Bytes(back.data(), 512)) == Status::Ok);
            CHECK(dm::read_sync(*dev, 37 * 512, Bytes(back.data(), 512)) == Status::BadMsg);
            *f.at ^= 0x20;
            CHECK(dm::read_sync(*dev, 37 * 512, Bytes(back.data(), 512)) == Status::Ok);
            CHECK(std::equal(back.begin(), back.begin() + 512, data.begin() + 37 * 512));
        }
        // A sector moved elsewhere (data and tag together) fails: the AAD binds its place.
        std::copy_n(mem->block(10), 512, mem->block(11));
        std::copy_n(mem->tag(10), tag, mem->tag(11));
        std::vector<uint8_t> one(512);
        failed.clear();
        CHECK(dm::read_sync(*dev, 11 * 512, Bytes(one.data(), 512)) == Status::BadMsg);
        CHECK(failed == std::set<uint64_t>{11});
    }
}

TEST_CASE("crypt integrity: the device below must carry the table's tags", "[aead-crypt]") {
    std::mt19937 rng(3);
    const auto key = rnd(rng, 32);
    auto t = table_of("capi:gcm(aes)-random", key, 0, opts_of(28, "aead", 4096));
    auto err = [&](std::shared_ptr<MemTagged> m) {
        auto d = dm::make_aead_crypt_device(testutil::registry(), t, std::move(m));
        REQUIRE_FALSE(d);
        return d.error().message;
    };
    CHECK_THAT(err(std::make_shared<MemTagged>(4, 4096, 32)), Catch::Contains("tag size mismatch"));
    CHECK_THAT(err(std::make_shared<MemTagged>(32, 512, 28)), Catch::Contains("sector size mismatch"));
    CHECK_THAT(err(nullptr), Catch::Contains("Integrity profile not supported"));
    // The I/O must be whole crypt sectors; a write leaves the caller's memory alone.
    auto mem = std::make_shared<MemTagged>(4, 4096, 28);
    auto dev = device(t, mem);
    std::vector<uint8_t> buf(4096, 0x5a);
    CHECK(dm::read_sync(*dev, 512, Bytes(buf.data(), 4096)) == Status::Invalid);
    CHECK(dm::write_sync(*dev, 0, ConstBytes(buf.data(), 4096)) == Status::Ok);
    CHECK(std::all_of(buf.begin(), buf.end(), [](uint8_t c) { return c == 0x5a; }));
    CHECK(dev->size() == 4 * 4096);
    CHECK(dev->block_size() == 4096);
    // A never-written sector (zero data, zero tag) fails like the kernel's.
    CHECK(dm::read_sync(*dev, 4096, Bytes(buf.data(), 4096)) == Status::BadMsg);
}

TEST_CASE("dm table: a crypt line with integrity needs a tagged device below", "[aead-crypt]") {
    const std::string text = "0 64 crypt capi:gcm(aes)-random " + std::string(64, '2') +
                             " 0 plain.img 0 1 integrity:28:aead\n";
    auto lines = dm::parse_dm_table(text);
    REQUIRE(lines);
    CHECK(dm::format_dm_table(*lines, true) == text);
    dm::DmBuildOptions o;
    o.open = [](const std::string&, bool) -> Result<std::shared_ptr<BackingStore>> {
        return std::shared_ptr<BackingStore>(std::make_shared<MemoryStore>(1 << 20));
    };
    auto d = dm::build_dm_table(testutil::registry(), *lines, o);
    REQUIRE_FALSE(d);
    CHECK_THAT(d.error().message, Catch::Contains("line 1: crypt: Integrity profile not supported: plain.img keeps no"));
}

TEST_CASE("crypt integrity: the plain-file crypt target refuses integrity tables by name", "[aead-crypt]") {
    auto t = dm::parse_crypt_args("capi:gcm(aes)-random " + std::string(64, '3') + " 0 1 integrity:28:aead");
    REQUIRE(t);
    auto c = dm::CryptTarget::create(testutil::registry(), *t, std::make_shared<MemoryStore>(1 << 16));
    REQUIRE_FALSE(c);
    CHECK_THAT(c.error().message, Catch::Contains("needs a dm-integrity device below"));
}

// The kernel's own sectors: the LUKS2 --integrity images cryptsetup 2.6.1
// wrote in the kernel (tests/golden/luks2-integrity, recorded by luksint's
// record.sh), read through dm-integrity's target and this engine from the
// recorded crypt table: the kernel's read-back hashes, and its failing
// (never written) sectors fail here too.
TEST_CASE("crypt integrity: kernel-written LUKS2 integrity images read as the kernel read them",
          "[aead-crypt][kernel]") {
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(testutil::kSourceDir) / "tests/golden/luks2-integrity";
    if (!fs::is_directory(dir)) {
        WARN("tests/golden/luks2-integrity not in this tree: not run");
        return;
    }
    int cases = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
        if (e.path().extension() != ".info") continue;
        const std::string name = e.path().stem();
        if (!fs::exists(dir / (name + ".img.xz")) || fs::exists(dir / (name + ".hdr.xz"))) continue;
        INFO(name);
        std::ifstream f(e.path());
        std::string line, crypt, dif;
        while (std::getline(f, line)) {
            if (line.starts_with("table_crypt=")) crypt = line.substr(12);
            if (line.starts_with("table_dif=")) dif = line.substr(10);
        }
        std::istringstream ds(dif);
        std::vector<std::string> w;
        for (std::string x; ds >> x;) w.push_back(x);
        REQUIRE(w.size() > 5);
        const fs::path img = fs::temp_directory_path() / ("blkcrypt-aead-" + std::to_string(::getpid()) + ".img");
        REQUIRE(std::system(("xz -dc '" + (dir / (name + ".img.xz")).string() + "' > '" + img.string() + "'").c_str()) == 0);
        auto store = open_file_store(img.string(), false);
        REQUIRE(store);
        integrity::OpenOptions o;
        o.start = std::stoull(w[4]);  // <offset> of the integrity line
        o.read_only = true;
        auto lower = integrity::IntegrityTarget::open(testutil::registry(), *store, nullptr, o);
        if (!lower) FAIL(lower.error().message);
        auto t = dm::parse_table_line(crypt);
        if (!t) FAIL(t.error().message);
        dm::AeadCryptOptions ao;
        ao.read_only = true;
        auto d = dm::make_aead_crypt_device(testutil::registry(), *t, *lower, 0, ao);
        if (!d) FAIL(d.error().message);
        CHECK(testutil::kernel_probe_mismatches(**d, e.path().string(), t->sector_size) == std::vector<std::string>{});
        fs::remove(img);
        ++cases;
    }
    CHECK(cases >= 10);
}

namespace {
// A device below a table that offers tags (as a dm-integrity table's device does).
class TaggedBelow final : public dm::BlockDevice {
public:
    explicit TaggedBelow(std::shared_ptr<MemTagged> t) : t_(std::move(t)) {}
    uint64_t size() const override { return t_->size(); }
    uint32_t block_size() const override { return t_->block_size(); }
    bool read_only() const override { return false; }
    Status submit_read(uint64_t, Bytes, Completion) override { return Status::Unsupported; }
    Status submit_write(uint64_t, ConstBytes, Completion) override { return Status::Unsupported; }
    Status flush() override { return Status::Ok; }
    std::shared_ptr<integrity::TaggedDevice> tagged() override { return t_; }
    void drain() override {}
    std::string describe() const override { return "tagged"; }

private:
    std::shared_ptr<MemTagged> t_;
};
}  // namespace

TEST_CASE("dm table: a crypt line with integrity stacks on the tags of the device below, at its offset",
          "[aead-crypt]") {
    std::mt19937 rng(21);
    const auto key = rnd(rng, 32);
    auto mem = std::make_shared<MemTagged>(64, 512, 28);
    auto below = std::make_shared<TaggedBelow>(mem);
    // 48 sectors from sector 8 of the device below.
    const std::string text = "0 48 crypt capi:gcm(aes)-random " + hex(ConstBytes(key.data(), key.size())) +
                             " 0 lower 8 1 integrity:28:aead\n";
    auto lines = dm::parse_dm_table(text);
    REQUIRE(lines);
    dm::DmBuildOptions o;
    o.threads = 2;
    o.named = [&](const std::string& n) -> std::shared_ptr<dm::BlockDevice> {
        return n == "lower" ? below : nullptr;
    };
    o.open = [](const std::string& p, bool) -> Result<std::shared_ptr<BackingStore>> {
        return make_error(Status::NotFound, p);
    };
    auto d = dm::build_dm_table(testutil::registry(), *lines, o);
    if (!d) FAIL(d.error().message);
    CHECK((*d)->size() == 48 * 512);
    const auto data = rnd(rng, 48 * 512);
    REQUIRE(dm::write_sync(**d, 0, ConstBytes(data.data(), data.size())) == Status::Ok);
    // Sectors 0..7 of the device below are untouched; 8..55 carry tags.
    for (uint64_t b = 0; b < 64; ++b) {
        const bool used = b >= 8 && b < 56;
        INFO("block " << b);
        CHECK(std::any_of(mem->tag(b), mem->tag(b) + 28, [](uint8_t c) { return c != 0; }) == used);
    }
    std::vector<uint8_t> back(data.size());
    REQUIRE(dm::read_sync(**d, 0, Bytes(back.data(), back.size())) == Status::Ok);
    CHECK(back == data);
    // The AAD sector is relative to the target (0 for its first sector), not
    // to the device below: the same bytes through a target at offset 0 fail.
    auto t0 = table_of("capi:gcm(aes)-random", key, 0, "1 integrity:28:aead");
    auto at0 = device(t0, mem);
    CHECK(dm::read_sync(*at0, 8 * 512, Bytes(back.data(), 512)) == Status::BadMsg);
}
