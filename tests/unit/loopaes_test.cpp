// loop-AES key files and the mapping cryptsetup 2.6 builds (lib/loopaes):
// the key-file grammar, the per-line hash with its defaults and tweaks, the
// table. The kernel's own answers are replayed by tests/cli/loopaes.sh.
#include "test_util.hpp"

#include <blkcrypt/loopaes/loopaes.hpp>
#include <blkcrypt/shash.hpp>

#include <catch2/catch.hpp>

#include <string>

using namespace blkcrypt;
using testutil::hex;
using testutil::registry;
using testutil::text;

namespace {

// n lines of `len` characters, line i made of the letter 'A' + i % 26 and digits.
std::string key_lines(unsigned n, std::size_t len = 20, const std::string& eol = "\n") {
    std::string s;
    for (unsigned i = 0; i < n; ++i) {
        std::string line = std::string(1, static_cast<char>('A' + i % 26)) + std::to_string(i);
        line.resize(len, 'x');
        s += line + eol;
    }
    return s;
}

std::string first_error(const std::string& key_file) {
    auto r = loopaes::parse_keyfile(text(key_file));
    return r ? std::string() : r.error().message;
}

}  // namespace

TEST_CASE("loop-AES key files: 1, 64 or 65 equal lines, each terminated", "[loopaes]") {
    for (unsigned n : {1u, 64u, 65u}) {
        auto r = loopaes::parse_keyfile(text(key_lines(n)));
        REQUIRE(r);
        REQUIRE(r->size() == n);
        CHECK(std::string(reinterpret_cast<const char*>((*r)[n - 1].data()), (*r)[n - 1].size()) ==
              key_lines(n).substr(21 * (n - 1), 20));
    }
    const std::string bad = "Incompatible loop-AES keyfile detected.";
    for (unsigned n : {2u, 63u, 66u, 100u}) CHECK(first_error(key_lines(n)) == bad);
    CHECK(first_error("") == bad);
    CHECK(first_error("no newline at the end") == bad);         // unterminated key
    CHECK(first_error(key_lines(64).substr(0, 64 * 21 - 1)) == bad);
    CHECK(first_error("\n" + key_lines(1)) == bad);              // an empty first key
    std::string uneven = key_lines(64);
    uneven.erase(5, 1);                                          // key 0 one shorter
    CHECK(first_error(uneven) == bad);
}

TEST_CASE("loop-AES key files: CR, LF and NUL separate, runs of them are one", "[loopaes]") {
    auto plain = loopaes::parse_keyfile(text(key_lines(64)));
    auto dos = loopaes::parse_keyfile(text(key_lines(64, 20, "\r\n") + "\n\r\n\n"));
    std::string nul = key_lines(65, 20, std::string("\0", 1));
    auto nuls = loopaes::parse_keyfile(text(nul));
    REQUIRE(plain);
    REQUIRE(dos);
    REQUIRE(nuls);
    REQUIRE(dos->size() == 64);
    CHECK(nuls->size() == 65);
    for (std::size_t i = 0; i < 64; ++i) CHECK(hex((*dos)[i]) == hex((*plain)[i]));
}

TEST_CASE("loop-AES key files: GPG armour in the first 100 bytes is refused", "[loopaes]") {
    const std::string armour = "-----BEGIN PGP MESSAGE-----\n";
    CHECK(first_error(armour + key_lines(1)).starts_with("Detected not yet supported GPG encrypted keyfile"));
    // Past the first 100 bytes (or after a NUL) cryptsetup does not look: the
    // file is then judged as key lines.
    CHECK(first_error(std::string(120, 'k') + "\n" + armour) == "Incompatible loop-AES keyfile detected.");
    CHECK(first_error(std::string("k\0", 2) + armour) == "Incompatible loop-AES keyfile detected.");
}

TEST_CASE("loop-AES keys: hash by key size, cut, first byte tweaked", "[loopaes]") {
    // The kernel's table for this line (tests/loopaes/kernel/oracle.txt, k1, k1-192).
    const std::string line = "blkcrypt loop-AES single key passphrase 2026\n";
    auto v = loopaes::open(registry(), {}, text(line));
    REQUIRE(v);
    CHECK(v->key_count == 1);
    CHECK(v->table.cipher == "aes-cbc-plain64");
    CHECK(hex(v->table.key) == "6c3365b3ad135ab3865c0824b041828c78800ec5244f25800781b636186fa95e");
    loopaes::Params p192;
    p192.key_size = 24;
    auto v192 = loopaes::open(registry(), p192, text(line));
    REQUIRE(v192);
    CHECK(hex(v192->table.key) == "40fdc2cb32524c113702f7eb6b3cbb019294529b2f453221");

    for (auto [n, tweak] : {std::pair{64u, 0x55}, std::pair{65u, 0xF4}}) {
        loopaes::Params p;
        p.key_size = 16;
        p.hash = "sha1";  // 20 bytes, cut to 16
        auto lines = loopaes::parse_keyfile(text(key_lines(n)));
        REQUIRE(lines);
        auto key = loopaes::derive_key(registry(), p, *lines);
        REQUIRE(key);
        REQUIRE(key->size() == 16 * n);
        auto h = Shash::alloc(registry(), "sha1");
        REQUIRE(h);
        for (unsigned i : {0u, 1u, n - 1}) {
            std::vector<uint8_t> d(20);
            REQUIRE(h->digest((*lines)[i], d) == Status::Ok);
            d[0] ^= static_cast<uint8_t>(tweak);
            d.resize(16);
            CHECK(hex(ConstBytes(key->data() + 16 * i, 16)) == hex(d));
        }
    }
}

TEST_CASE("loop-AES keys: a hash shorter than the key, or none, is refused", "[loopaes]") {
    auto lines = loopaes::parse_keyfile(text(key_lines(1)));
    REQUIRE(lines);
    loopaes::Params p;
    p.hash = "sha1";  // 20 bytes for a 32-byte key
    auto r = loopaes::derive_key(registry(), p, *lines);
    REQUIRE_FALSE(r);
    CHECK(r.error().message == "Key processing error (using hash sha1).");
    loopaes::Params odd;
    odd.key_size = 20;  // no default hash
    CHECK(loopaes::derive_key(registry(), odd, *lines).error().message == "Key processing error (using hash [none]).");
    loopaes::Params unknown;
    unknown.hash = "nosuch";
    CHECK_FALSE(loopaes::derive_key(registry(), unknown, *lines));
    loopaes::Params rmd;
    rmd.key_size = 16;
    rmd.hash = "ripemd160";  // cryptsetup's name for the registry's rmd160
    CHECK(loopaes::derive_key(registry(), rmd, *lines));
}

TEST_CASE("loop-AES tables: lmk for 64 and 65 keys, the IV offset is --skip or --offset", "[loopaes]") {
    loopaes::Params p;
    p.cipher = "twofish";
    p.offset = 8;
    auto v64 = loopaes::open(registry(), p, text(key_lines(64)));
    REQUIRE(v64);
    CHECK(v64->table.cipher == "twofish:64-cbc-lmk");
    CHECK(v64->table.key_count == 64);
    CHECK(v64->table.key.size() == 64 * 32);
    CHECK(v64->table.offset == 8);
    CHECK(v64->table.iv_offset == 8);
    p.skip = 3;
    auto v65 = loopaes::open(registry(), p, text(key_lines(65)));
    REQUIRE(v65);
    CHECK(v65->key_count == 65);
    CHECK(v65->table.key.size() == 65 * 32);  // 64 keys and the lmk seed
    CHECK(v65->table.iv_offset == 3);
}
