// Tests for the shared byte utilities (internal/bytes_util.hpp) and the
// public hex codec (<blkcrypt/hex.hpp>).
#include <blkcrypt/hex.hpp>
#include <blkcrypt/internal/bytes_util.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

using namespace blkcrypt;

namespace {

// Compile-time use: the constant-evaluated branch gives the same bytes.
constexpr uint32_t kLe = [] {
    std::array<uint8_t, 4> b{};
    put_le32(b.data(), 0x11223344u);
    return get_be32(b.data());
}();
static_assert(kLe == 0x44332211u);
constexpr uint64_t kBe = [] {
    std::array<uint8_t, 8> b{};
    put_be64(b.data(), 0x0102030405060708ull);
    return b[0] == 1 && b[7] == 8 ? get_le64(b.data()) : 0;
}();
static_assert(kBe == 0x0807060504030201ull);

}  // namespace

TEST_CASE("endian helpers store and load the stated byte order at any alignment", "[bytes]") {
    std::array<uint8_t, 17> buf{};
    for (std::size_t off : {0u, 1u, 3u, 7u}) {
        put_le64(buf.data() + off, 0x0102030405060708ull);
        CHECK(buf[off] == 0x08);
        CHECK(buf[off + 7] == 0x01);
        CHECK(get_le64(buf.data() + off) == 0x0102030405060708ull);
        CHECK(get_be64(buf.data() + off) == 0x0807060504030201ull);

        put_be32(buf.data() + off, 0xa1b2c3d4u);
        CHECK(buf[off] == 0xa1);
        CHECK(buf[off + 3] == 0xd4);
        CHECK(get_be32(buf.data() + off) == 0xa1b2c3d4u);
        CHECK(get_le32(buf.data() + off) == 0xd4c3b2a1u);

        put_le16(buf.data() + off, 0xbeef);
        CHECK(buf[off] == 0xef);
        CHECK(get_le16(buf.data() + off) == 0xbeef);
        put_be16(buf.data() + off, 0xbeef);
        CHECK(buf[off] == 0xbe);
        CHECK(get_be16(buf.data() + off) == 0xbeef);
    }
    // The generic form takes its width from the type.
    put_le<uint32_t>(buf.data(), 5);
    CHECK(buf[0] == 5);
    CHECK(get_le<uint32_t>(buf.data()) == 5);
}

TEST_CASE("xor_into xors whole words and the tail, in place or not", "[bytes]") {
    for (std::size_t n : {0u, 1u, 7u, 8u, 9u, 16u, 31u}) {
        std::vector<uint8_t> a(n), b(n), out(n);
        for (std::size_t i = 0; i < n; ++i) {
            a[i] = static_cast<uint8_t>(i * 37 + 1);
            b[i] = static_cast<uint8_t>(i * 91 + 5);
        }
        xor_into(out.data(), a.data(), b.data(), n);
        for (std::size_t i = 0; i < n; ++i) CHECK(out[i] == (a[i] ^ b[i]));
        std::vector<uint8_t> c = a;
        xor_into(c.data(), b.data(), n);
        CHECK(c == out);
    }
}

TEST_CASE("block_phrase picks the article by how the number sounds", "[bytes]") {
    CHECK(block_phrase(8) == "an 8-byte block");
    CHECK(block_phrase(16) == "a 16-byte block");
    CHECK(block_phrase(11) == "an 11-byte block");
    CHECK(block_phrase(18) == "an 18-byte block");
    CHECK(block_phrase(80) == "an 80-byte block");
    CHECK(block_phrase(1) == "a 1-byte block");
}

TEST_CASE("hex codec round-trips and names the first fault", "[bytes][hex]") {
    const std::vector<uint8_t> v = {0x00, 0x9f, 0xa0, 0xff};
    CHECK(hex_encode(v) == "009fa0ff");
    CHECK(hex_encode({}).empty());

    auto d = hex_decode("009FA0ff");
    REQUIRE(d);
    CHECK(*d == v);
    auto e = hex_decode("");
    REQUIRE(e);
    CHECK(e->empty());

    auto odd = hex_decode("abc");
    REQUIRE(!odd);
    CHECK(odd.status() == Status::Invalid);
    CHECK(odd.error().message == "odd number of hex digits");
    auto bad = hex_decode("00g0");
    REQUIRE(!bad);
    CHECK(bad.error().message == "not a hex digit at position 3");
    CHECK(hex_decode("0x").error().message == "not a hex digit at position 2");
    CHECK(!hex_decode("+1"));  // from_chars-style signs are not digits
    CHECK(!hex_decode(" 1"));

    auto s = hex_decode_secret("0102");
    REQUIRE(s);
    REQUIRE(s->size() == 2);
    CHECK((*s)[0] == 1);
    CHECK((*s)[1] == 2);
    auto sbad = hex_decode_secret("01z2");
    REQUIRE(!sbad);
    // The message never quotes the input.
    CHECK(sbad.error().message.find("01z2") == std::string::npos);

    std::array<uint8_t, 2> small{};
    CHECK(!hex_decode_into("010203", small));
    CHECK(hex_decode_into("0a0b", small));
    CHECK(small[1] == 0x0b);
}
