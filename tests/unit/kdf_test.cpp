// PBKDF2 against published vectors (RFC 6070 for HMAC-SHA1; the SHA-256
// values are the widely republished ones for the same inputs, which Python's
// hashlib.pbkdf2_hmac reproduces), and the LUKS anti-forensic splitter.
#include "test_util.hpp"

#include <blkcrypt/kdf.hpp>
#include <blkcrypt/luks/af.hpp>
#include <blkcrypt/random.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace blkcrypt;
using testutil::hex;
using testutil::registry;
using testutil::text;

namespace {

std::string pbkdf2_hex(const std::string& hash, const std::string& pw, const std::string& salt,
                       uint32_t iter, std::size_t len) {
    std::vector<uint8_t> out(len);
    auto r = pbkdf2(registry(), hash, text(pw), text(salt), iter, out);
    REQUIRE(r.ok());
    return hex(out);
}

}  // namespace

TEST_CASE("pbkdf2: RFC 6070 HMAC-SHA1 vectors", "[kdf]") {
    CHECK(pbkdf2_hex("sha1", "password", "salt", 1, 20) == "0c60c80f961f0e71f3a9b524af6012062fe037a6");
    CHECK(pbkdf2_hex("sha1", "password", "salt", 2, 20) == "ea6c014dc72d6f8ccd1ed92ace1d41f0d8de8957");
    CHECK(pbkdf2_hex("sha1", "password", "salt", 4096, 20) == "4b007901b765489abead49d926f721d065a429c1");
    CHECK(pbkdf2_hex("sha1", "passwordPASSWORDpassword", "saltSALTsaltSALTsaltSALTsaltSALTsalt", 4096, 25) ==
          "3d2eec4fe41c849b80c8d83662c0e44a8b291a964cf2f07038");
    CHECK(pbkdf2_hex("sha1", std::string("pass\0word", 9), std::string("sa\0lt", 5), 4096, 16) ==
          "56fa6aa75548099dcc37d7f03425e0c3");
}

TEST_CASE("pbkdf2: HMAC-SHA256, output longer than one block", "[kdf]") {
    CHECK(pbkdf2_hex("sha256", "password", "salt", 1, 32) ==
          "120fb6cffcf8b32c43e7225256c4f837a86548c92ccc35480805987cb70be17b");
    CHECK(pbkdf2_hex("sha256", "password", "salt", 4096, 32) ==
          "c5e478d59288c841aa530db6845c4c8d962893a001ce4e11a4963873aa98134a");
    // 40 bytes: the second block's first 8 bytes follow the first block.
    CHECK(pbkdf2_hex("sha256", "passwordPASSWORDpassword", "saltSALTsaltSALTsaltSALTsaltSALTsalt", 4096, 40) ==
          "348c89dbcbd32b2f32d814b8116e84cf2b17347ebc1800181c4e2a1fb8dd53e1c635518c7dac47e9");
}

TEST_CASE("pbkdf2: refuses zero iterations and unknown hashes", "[kdf]") {
    std::vector<uint8_t> out(16);
    const uint8_t pw[] = {'p'};
    CHECK(pbkdf2(registry(), "sha256", pw, pw, 0, out).status() == Status::Invalid);
    CHECK(pbkdf2(registry(), "no-such-hash", pw, pw, 1, out).status() == Status::NotFound);
}

TEST_CASE("af: split then merge gives the key back, every stripe matters", "[kdf][luks]") {
    for (const char* hash : {"sha1", "sha256", "sha512"}) {
        for (std::size_t n : {16u, 32u, 64u, 65u}) {
            INFO(hash << " key " << n);
            std::vector<uint8_t> key(n), back(n);
            REQUIRE(random_bytes(key).ok());
            const uint32_t stripes = 4000;
            std::vector<uint8_t> area(n * stripes);
            REQUIRE(luks::af_split(registry(), hash, key, stripes, area).ok());
            REQUIRE(luks::af_merge(registry(), hash, area, stripes, back).ok());
            CHECK(back == key);
            for (std::size_t at : {std::size_t{0}, area.size() / 2, area.size() - 1}) {
                area[at] ^= 1;
                REQUIRE(luks::af_merge(registry(), hash, area, stripes, back).ok());
                CHECK(back != key);
                area[at] ^= 1;
            }
        }
    }
    std::vector<uint8_t> key(32), area(32 * 3 + 1);
    CHECK(luks::af_split(registry(), "sha256", key, 3, area).status() == Status::Invalid);
}

namespace {

std::string argon2_hex(Argon2Type type, const std::string& pw, const std::string& salt, uint32_t t,
                       uint32_t m_kib, uint32_t p, std::size_t len = 32) {
    std::vector<uint8_t> out(len);
    auto r = argon2(type, text(pw), text(salt), t, m_kib, p, out);
    REQUIRE(r.ok());
    return hex(out);
}

}  // namespace

// The reference implementation's vectors (phc-winner-argon2 src/test.c,
// version 0x13); the Argon2id values are also what python3-cryptography's
// independent Argon2id gives for the same inputs.
TEST_CASE("argon2: reference implementation vectors, version 0x13", "[kdf][argon2]") {
    using enum Argon2Type;
    CHECK(argon2_hex(I, "password", "somesalt", 2, 1u << 16, 1) ==
          "c1628832147d9720c5bd1cfd61367078729f6dfb6f8fea9ff98158e0d7816ed0");
    CHECK(argon2_hex(I, "password", "somesalt", 2, 1u << 8, 1) ==
          "89e9029f4637b295beb027056a7336c414fadd43f6b208645281cb214a56452f");
    CHECK(argon2_hex(I, "password", "somesalt", 2, 1u << 8, 2) ==
          "4ff5ce2769a1d7f4c8a491df09d41a9fbe90e5eb02155a13e4c01e20cd4eab61");
    CHECK(argon2_hex(I, "password", "somesalt", 1, 1u << 16, 1) ==
          "d168075c4d985e13ebeae560cf8b94c3b5d8a16c51916b6f4ac2da3ac11bbecf");
    CHECK(argon2_hex(I, "differentpassword", "somesalt", 2, 1u << 16, 1) ==
          "14ae8da01afea8700c2358dcef7c5358d9021282bd88663a4562f59fb74d22ee");
    CHECK(argon2_hex(I, "password", "diffsalt", 2, 1u << 16, 1) ==
          "b0357cccfbef91f3860b0dba447b2348cbefecadaf990abfe9cc40726c521271");
    CHECK(argon2_hex(Id, "password", "somesalt", 2, 1u << 16, 1) ==
          "09316115d5cf24ed5a15a31a3ba326e5cf32edc24702987c02b6566f61913cf7");
    CHECK(argon2_hex(Id, "password", "somesalt", 2, 1u << 8, 1) ==
          "9dfeb910e80bad0311fee20f9c0e2b12c17987b4cac90c2ef54d5b3021c68bfe");
    CHECK(argon2_hex(Id, "password", "somesalt", 2, 1u << 8, 2) ==
          "6d093c501fd5999645e0ea3bf620d7b8be7fd2db59c20d9fff9539da2bf57037");
}

TEST_CASE("argon2: leaves the caller's passphrase intact, refuses bad costs", "[kdf][argon2]") {
    std::string pw = "password";
    std::vector<uint8_t> pwv(pw.begin(), pw.end()), out(64);
    const std::string salt = "somesaltsomesalt";
    const ConstBytes s = text(salt);
    REQUIRE(argon2(Argon2Type::Id, pwv, s, 1, 64, 4, out).ok());
    CHECK(std::string(pwv.begin(), pwv.end()) == pw);
    // Memory below 8 KiB per lane, zero passes, a 1-byte salt.
    CHECK(argon2(Argon2Type::Id, pwv, s, 1, 7, 1, out).status() == Status::Invalid);
    CHECK(argon2(Argon2Type::I, pwv, s, 0, 64, 1, out).status() == Status::Invalid);
    CHECK(argon2(Argon2Type::I, pwv, s.first(1), 1, 64, 1, out).status() == Status::Invalid);
}
