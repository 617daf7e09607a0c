// Little-endian fields and GUIDs of BitLocker metadata at an offset of a byte
// span, shared by the parsers; the byte order itself lives in the core
// (bytes_util.hpp, guid.hpp). Callers check the bounds.
#pragma once

#include <blkcrypt/bytes.hpp>
#include <blkcrypt/guid.hpp>
#include <blkcrypt/internal/bytes_util.hpp>

#include <cstdint>
#include <string>

namespace blkcrypt::bitlk::detail {

inline uint16_t le16(ConstBytes b, std::size_t off) { return get_le16(b.data() + off); }
inline uint32_t le32(ConstBytes b, std::size_t off) { return get_le32(b.data() + off); }
inline uint64_t le64(ConstBytes b, std::size_t off) { return get_le64(b.data() + off); }

// A GUID as libuuid prints it: the first three fields are little-endian.
inline std::string guid_string(ConstBytes b, std::size_t off) { return guid_text(b.data() + off); }

}  // namespace blkcrypt::bitlk::detail
