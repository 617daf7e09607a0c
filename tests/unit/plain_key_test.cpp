// cryptsetup plain-mode key derivation (dm::plain_key). The expected keys
// were computed with python hashlib from cryptsetup's definition; the CLI
// test tests/cli/plain.sh checks the same derivation against ciphertext the
// kernel wrote through `cryptsetup open --type plain`.
#include "test_util.hpp"

#include <blkcrypt/dm/plain_key.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <string_view>

using namespace blkcrypt;
using testutil::hex;
using testutil::text;

namespace {

std::string key_hex(std::optional<std::string_view> hash, std::size_t size, std::string_view pass) {
    auto k = dm::plain_key(testutil::registry(), hash, size, text(pass));
    REQUIRE(k);
    REQUIRE(k->size() == size);
    return hex(k->span());
}

constexpr std::string_view kPass = "correct horse";

}  // namespace

TEST_CASE("plain_key: one digest, cut or whole", "[plain]") {
    CHECK(key_hex("sha256", 32, kPass) == "4104d36f8da2c254349f85836793ebe029e0c957063a34c91c2e9203187b5631");
    CHECK(key_hex("sha256", 16, kPass) == "4104d36f8da2c254349f85836793ebe0");
    CHECK(key_hex("sha512", 64, "") ==
          "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce"
          "47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e");
}

TEST_CASE("plain_key: keys longer than the digest add rounds of 'A' prefixes", "[plain]") {
    // ripemd160 (cryptsetup's default) gives 20 bytes; a 256-bit key takes
    // H(p) || H("A" p)[0..12).
    CHECK(key_hex("ripemd160", 32, kPass) == "424573ebba1ce1abc618a416178f79ad83442dfccd852f665c5536c935adea5c");
    CHECK(key_hex("sha1", 64, kPass) ==
          "2f9e53523b62abc141a2b4d6019d23cba835dbd0d9a5deb78a31c8ae1ef31f3f"
          "f926deedb738a6c6a923169b32e84a32dbe6f122c0a141104a68dcb7b92070e7");
    CHECK(key_hex("sha256", 64, kPass) ==
          "4104d36f8da2c254349f85836793ebe029e0c957063a34c91c2e9203187b5631"
          "c51aefc7f409f4df0888cd78c638b969db451fa1e040e06e2a9ed77f2ae083d5");
}

TEST_CASE("plain_key: hash names as OpenSSL spells them, any case", "[plain]") {
    CHECK(dm::plain_hash_alg("ripemd160") == "rmd160");
    CHECK(dm::plain_hash_alg("RIPEMD160") == "rmd160");
    CHECK(dm::plain_hash_alg("whirlpool") == "wp512");
    CHECK(dm::plain_hash_alg("SHA256") == "sha256");
    CHECK(dm::plain_hash_alg("sha3-256") == "sha3-256");
    CHECK(key_hex("SHA256", 32, kPass) == key_hex("sha256", 32, kPass));
    CHECK(key_hex("rmd160", 32, kPass) == key_hex("RipeMD160", 32, kPass));
}

TEST_CASE("plain_key: hash:len fills len bytes and zeroes the rest", "[plain]") {
    CHECK(key_hex("sha256:16", 32, kPass) == "4104d36f8da2c254349f85836793ebe000000000000000000000000000000000");
    CHECK(key_hex("sha256:0", 8, kPass) == "0000000000000000");
    CHECK(key_hex("plain:4", 8, "passphrase") == "7061737300000000");
    CHECK(key_hex("plain", 4, "passphrase") == "70617373");
}

TEST_CASE("plain_key: no hash uses the passphrase, cut or zero-padded", "[plain]") {
    CHECK(key_hex(std::nullopt, 4, "passphrase") == "70617373");
    CHECK(key_hex(std::nullopt, 12, "passphrase") == "706173737068726173650000");
    CHECK(key_hex(std::nullopt, 2, "") == "0000");
}

TEST_CASE("plain_key: refusals", "[plain]") {
    auto& reg = testutil::registry();
    const auto pass = text(kPass);
    for (std::string_view bad : {"sha256:", "sha256:x", "sha256:-1", "sha256:33", ":16", "nosuchhash", "hmac(sha256)"}) {
        INFO(bad);
        CHECK_FALSE(dm::plain_key(reg, bad, 32, pass));
    }
    CHECK(dm::plain_key(reg, "nosuchhash", 32, pass).status() == Status::NotFound);
    // plain:N needs N bytes of passphrase.
    CHECK_FALSE(dm::plain_key(reg, "plain:16", 32, text("short")));
    CHECK_FALSE(dm::plain_key(reg, "sha256", 0, pass));
}
