// Byte-order helpers for on-disk and IV formats (unaligned, any host order).
#pragma once

#include <cstdint>

namespace blkcrypt {

template <class T>
inline void put_le(uint8_t* p, T v) noexcept {
    for (unsigned i = 0; i < sizeof(T); ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

template <class T>
inline T get_le(const uint8_t* p) noexcept {
    T v = 0;
    for (unsigned i = sizeof(T); i-- > 0;) v = static_cast<T>(v << 8 | p[i]);
    return v;
}

inline void put_le16(uint8_t* p, uint16_t v) noexcept { put_le(p, v); }
inline void put_le32(uint8_t* p, uint32_t v) noexcept { put_le(p, v); }
inline void put_le64(uint8_t* p, uint64_t v) noexcept { put_le(p, v); }
inline uint16_t get_le16(const uint8_t* p) noexcept { return get_le<uint16_t>(p); }
inline uint32_t get_le32(const uint8_t* p) noexcept { return get_le<uint32_t>(p); }
inline uint64_t get_le64(const uint8_t* p) noexcept { return get_le<uint64_t>(p); }

inline void put_be64(uint8_t* p, uint64_t v) noexcept {
    for (unsigned i = 0; i < 8; ++i) p[7 - i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace blkcrypt
