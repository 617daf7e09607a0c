// Little-endian fields and GUIDs of BitLocker metadata, shared by the parsers.
#pragma once

#include <blkcrypt/bytes.hpp>

#include <cstdint>
#include <cstdio>
#include <string>

namespace blkcrypt::bitlk::detail {

inline uint16_t le16(ConstBytes b, std::size_t off) { return static_cast<uint16_t>(b[off] | (b[off + 1] << 8)); }
inline uint32_t le32(ConstBytes b, std::size_t off) { return le16(b, off) | (uint32_t{le16(b, off + 2)} << 16); }
inline uint64_t le64(ConstBytes b, std::size_t off) { return le32(b, off) | (uint64_t{le32(b, off + 4)} << 32); }

// A GUID as libuuid prints it: the first three fields are little-endian.
inline std::string guid_string(ConstBytes b, std::size_t off) {
    char s[37];
    std::snprintf(s, sizeof s, "%08x-%04x-%04x-%02x%02x-%02x%02x%02x%02x%02x%02x", le32(b, off), le16(b, off + 4),
                  le16(b, off + 6), b[off + 8], b[off + 9], b[off + 10], b[off + 11], b[off + 12], b[off + 13],
                  b[off + 14], b[off + 15]);
    return s;
}

}  // namespace blkcrypt::bitlk::detail
