// TrueCrypt's legacy CBC pieces: the little-endian Blowfish against the
// standard one, the block-cipher cascade (outer CBC) against its stages, and
// the tables and volume keys of the legacy chains as cryptsetup lays them out
// (the volumes themselves are checked in tests/cli/tcrypt_legacy.sh against
// an independent generator and the kernel).
#include "test_util.hpp"

#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/shash.hpp>
#include <blkcrypt/skcipher.hpp>
#include <blkcrypt/tcrypt/tcrypt.hpp>

#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

using namespace blkcrypt;
using testutil::hex;
using testutil::registry;
using testutil::unhex;

namespace {

std::vector<uint8_t> run(const std::string& alg, const std::vector<uint8_t>& key, std::vector<uint8_t> data,
                         std::vector<uint8_t> iv = {}, bool enc = true) {
    auto sk = Skcipher::alloc(registry(), alg);
    REQUIRE(sk.ok());
    REQUIRE(sk->setkey(key) == Status::Ok);
    const Status s = enc ? sk->encrypt(data, data, iv) : sk->decrypt(data, data, iv);
    REQUIRE(s == Status::Ok);
    return data;
}

std::vector<uint8_t> swap_words(std::vector<uint8_t> b) {
    for (std::size_t i = 0; i + 4 <= b.size(); i += 4) {
        std::swap(b[i], b[i + 3]);
        std::swap(b[i + 1], b[i + 2]);
    }
    return b;
}

std::vector<uint8_t> pattern(std::size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
    return v;
}

uint32_t crc32(ConstBytes d) {
    auto c = Shash::alloc(registry(), "crc32");
    REQUIRE(c.ok());
    const uint8_t seed[4] = {0xff, 0xff, 0xff, 0xff};
    REQUIRE(c->setkey(ConstBytes(seed, 4)) == Status::Ok);
    uint8_t out[4];
    REQUIRE(c->digest(d, Bytes(out, 4)) == Status::Ok);
    return ~(uint32_t{out[0]} | uint32_t{out[1]} << 8 | uint32_t{out[2]} << 16 | uint32_t{out[3]} << 24);
}

// A decrypted TrueCrypt 4.x header (version 2) with key area `keys`.
std::vector<uint8_t> decrypted_header(const std::vector<uint8_t>& keys) {
    std::vector<uint8_t> d(448);
    std::memcpy(d.data(), "TRUE", 4);
    d[5] = 2;
    d[6] = 1;
    const uint32_t kc = crc32(keys);
    for (int i = 0; i < 4; ++i) d[8 + i] = static_cast<uint8_t>(kc >> (24 - 8 * i));
    d[36 + 6] = 1;  // volume size 65536
    std::memcpy(d.data() + 192, keys.data(), 256);
    return d;
}

}  // namespace

TEST_CASE("blowfish_le: TrueCrypt's vector, and the standard Blowfish on swapped words", "[tcrypt][legacy]") {
    // Zero key and block: the standard 4ef99745 6198dd78, word by word reversed.
    CHECK(hex(run("ecb(blowfish_le)", std::vector<uint8_t>(8), std::vector<uint8_t>(8))) == "4597f94e78dd9861");
    const auto key = pattern(56, 3), pt = pattern(64, 9);
    CHECK(run("ecb(blowfish_le)", key, pt) == swap_words(run("ecb(blowfish)", key, swap_words(pt))));
    CHECK(run("ecb(blowfish_le)", key, run("ecb(blowfish_le)", key, pt), {}, false) == pt);
    CHECK(registry().lookup("blowfish_le", AlgType::Cipher).ok());
}

TEST_CASE("cascade of block ciphers: each block through every cipher (outer CBC)", "[tcrypt][legacy][cascade]") {
    const auto k1 = pattern(32, 1), k2 = pattern(32, 50), k3 = pattern(32, 99), pt = pattern(96, 5);
    std::vector<uint8_t> k12 = k1, k123;
    k12.insert(k12.end(), k2.begin(), k2.end());
    k123 = k12;
    k123.insert(k123.end(), k3.begin(), k3.end());
    // ECB: the stages in order.
    CHECK(run("ecb(cascade(aes,twofish))", k12, pt) == run("ecb(twofish)", k2, run("ecb(aes)", k1, pt)));
    // CBC over the cascade: each plaintext block XORed with the previous
    // ciphertext, then through all three ciphers.
    const auto iv = pattern(16, 77);
    std::vector<uint8_t> want(pt.size()), prev = iv;
    for (std::size_t i = 0; i < pt.size(); i += 16) {
        std::vector<uint8_t> b(pt.begin() + i, pt.begin() + i + 16);
        for (int j = 0; j < 16; ++j) b[j] ^= prev[j];
        b = run("ecb(serpent)", k3, run("ecb(twofish)", k2, run("ecb(aes)", k1, b)));
        std::copy(b.begin(), b.end(), want.begin() + i);
        prev = b;
    }
    const auto got = run("cbc(cascade(aes,twofish,serpent))", k123, pt, iv);
    CHECK(got == want);
    // Not the inner CBC of stacked devices.
    CHECK(got != run("cascade(cbc(aes),cbc(twofish),cbc(serpent))", k123, pt, iv));
    CHECK(run("cbc(cascade(aes,twofish,serpent))", k123, got, iv, false) == pt);
    // Different block sizes cannot chain block by block.
    CHECK_FALSE(registry().lookup("cascade(aes,blowfish)", AlgType::Cipher).ok());
    auto c = registry().lookup("cascade(aes,twofish)", AlgType::Cipher);
    REQUIRE(c.ok());
    CHECK((*c)->info().type == AlgType::Cipher);
    CHECK((*c)->info().blocksize == 16);
}

TEST_CASE("tcrypt legacy chains: tables and volume keys as cryptsetup's", "[tcrypt][legacy]") {
    const auto keys = pattern(256, 11);
    const auto dec = decrypted_header(keys);
    tcrypt::OpenOptions o;
    auto cat = [&](std::initializer_list<std::pair<std::size_t, std::size_t>> spans) {
        std::vector<uint8_t> v;
        for (auto [at, n] : spans) v.insert(v.end(), keys.begin() + at, keys.begin() + at + n);
        return v;
    };
    struct Case {
        const char *cipher, *mode, *alg;
        std::vector<uint8_t> key;
    } cases[] = {
        {"cast5", "cbc-tcw", "tcw(cbc(cast5))", cat({{32, 16}, {0, 24}})},
        {"des3_ede", "cbc-tcw", "tcw(cbc(des3_ede))", cat({{32, 24}, {0, 24}})},
        {"blowfish_le", "cbc-tcrypt", "tcw(cbc(blowfish_le))", cat({{32, 56}, {0, 24}})},
        {"twofish-aes", "cbci-tcrypt", "tcw(cbc(cascade(twofish,aes)))", cat({{32, 64}, {0, 32}})},
        {"aes-twofish-serpent", "cbci-tcrypt", "tcw(cbc(cascade(aes,twofish,serpent)))", cat({{32, 96}, {0, 32}})},
        {"blowfish_le-aes", "cbc-tcrypt", "", cat({{32, 88}, {0, 32}})},
        {"serpent-blowfish_le-aes", "cbc-tcrypt", "", cat({{32, 120}, {0, 32}})},
    };
    for (const auto& c : cases) {
        INFO(c.cipher);
        auto v = tcrypt::from_decrypted(dec, c.cipher, c.mode, 1 << 20, o);
        REQUIRE(v.ok());
        CHECK(v->table.alg_name == c.alg);
        CHECK(v->hdr.key_size == c.key.size());
        CHECK(hex(tcrypt::volume_key(*v)) == hex(c.key));
        CHECK(v->table.offset == 1);
        CHECK(v->table.iv_offset == 1);
        if (!*c.alg) {
            MemoryStore data(1u << 20);
            auto t = tcrypt::dm_table(*v, data, "d");
            REQUIRE_FALSE(t.ok());
            CHECK(t.status() == Status::Unsupported);
        }
    }
}
