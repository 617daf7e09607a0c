// Byte utilities shared by the library: little/big-endian access at any
// alignment and on any host, XOR of byte runs, and the "an 8-byte block"
// phrase of error messages. The one home for these; do not copy them.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace blkcrypt {

namespace detail {

template <class T>
constexpr T byteswap(T v) noexcept {
    static_assert(std::is_unsigned_v<T>);
    if constexpr (sizeof(T) == 1) {
        return v;
    } else if constexpr (sizeof(T) == 2) {
        return static_cast<T>(__builtin_bswap16(v));
    } else if constexpr (sizeof(T) == 4) {
        return static_cast<T>(__builtin_bswap32(v));
    } else {
        static_assert(sizeof(T) == 8);
        return static_cast<T>(__builtin_bswap64(v));
    }
}

}  // namespace detail

// Loads and stores go through memcpy, not byte-by-byte through the pointer:
// byte stores may alias anything, so the compiler had to reload the values
// around them on every byte (XTS spent half a request reloading its tweak).
// memcpy of a fixed size compiles to one unaligned move. In constant
// expressions (compile-time tables, static_asserts) the bytes are shifted.
// Byte order E; the constant-evaluated loop and the run-time memcpy agree.
template <std::endian E, class T>
constexpr void put_as(uint8_t* p, T v) noexcept {
    static_assert(std::is_unsigned_v<T>);
    if (std::is_constant_evaluated()) {
        for (std::size_t i = 0; i < sizeof(T); ++i)
            p[E == std::endian::little ? i : sizeof(T) - 1 - i] = static_cast<uint8_t>(v >> (8 * i));
        return;
    }
    if constexpr (std::endian::native != E) v = detail::byteswap(v);
    std::memcpy(p, &v, sizeof v);
}

template <std::endian E, class T>
constexpr T get_as(const uint8_t* p) noexcept {
    static_assert(std::is_unsigned_v<T>);
    T v = 0;
    if (std::is_constant_evaluated()) {
        for (std::size_t i = 0; i < sizeof(T); ++i)
            v = static_cast<T>(v | T{p[E == std::endian::little ? i : sizeof(T) - 1 - i]} << (8 * i));
        return v;
    }
    std::memcpy(&v, p, sizeof v);
    if constexpr (std::endian::native != E) v = detail::byteswap(v);
    return v;
}

template <class T>
constexpr void put_le(uint8_t* p, T v) noexcept { put_as<std::endian::little>(p, v); }
template <class T>
constexpr T get_le(const uint8_t* p) noexcept { return get_as<std::endian::little, T>(p); }
template <class T>
constexpr void put_be(uint8_t* p, T v) noexcept { put_as<std::endian::big>(p, v); }
template <class T>
constexpr T get_be(const uint8_t* p) noexcept { return get_as<std::endian::big, T>(p); }

constexpr void put_le16(uint8_t* p, uint16_t v) noexcept { put_le(p, v); }
constexpr void put_le32(uint8_t* p, uint32_t v) noexcept { put_le(p, v); }
constexpr void put_le64(uint8_t* p, uint64_t v) noexcept { put_le(p, v); }
constexpr uint16_t get_le16(const uint8_t* p) noexcept { return get_le<uint16_t>(p); }
constexpr uint32_t get_le32(const uint8_t* p) noexcept { return get_le<uint32_t>(p); }
constexpr uint64_t get_le64(const uint8_t* p) noexcept { return get_le<uint64_t>(p); }
constexpr void put_be16(uint8_t* p, uint16_t v) noexcept { put_be(p, v); }
constexpr void put_be32(uint8_t* p, uint32_t v) noexcept { put_be(p, v); }
constexpr void put_be64(uint8_t* p, uint64_t v) noexcept { put_be(p, v); }
constexpr uint16_t get_be16(const uint8_t* p) noexcept { return get_be<uint16_t>(p); }
constexpr uint32_t get_be32(const uint8_t* p) noexcept { return get_be<uint32_t>(p); }
constexpr uint64_t get_be64(const uint8_t* p) noexcept { return get_be<uint64_t>(p); }

// dst = a ^ b over n bytes; dst may be a or b. Eight bytes at a time through
// memcpy (the same aliasing reason as above), then the tail.
inline void xor_into(uint8_t* dst, const uint8_t* a, const uint8_t* b, std::size_t n) noexcept {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x, y;
        std::memcpy(&x, a + i, 8);
        std::memcpy(&y, b + i, 8);
        x ^= y;
        std::memcpy(dst + i, &x, 8);
    }
    for (; i < n; ++i) dst[i] = static_cast<uint8_t>(a[i] ^ b[i]);
}

// dst ^= src over n bytes.
inline void xor_into(uint8_t* dst, const uint8_t* src, std::size_t n) noexcept {
    xor_into(dst, dst, src, n);
}

// "an 8-byte block", "a 16-byte block": for error messages.
inline std::string block_phrase(std::size_t n) {
    const std::string s = std::to_string(n);
    const bool an = s[0] == '8' || s == "11" || s == "18";
    return (an ? "an " : "a ") + s + "-byte block";
}

}  // namespace blkcrypt
