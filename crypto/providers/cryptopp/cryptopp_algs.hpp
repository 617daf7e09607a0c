// Private to the Crypto++ provider: the factories provider.cpp registers and
// two small helpers they share. No Crypto++ type appears here.
#pragma once

#include <blkcrypt/internal/alg.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace blkcrypt::cryptopp {

std::vector<std::shared_ptr<Alg>> make_ciphers();  // ciphers.cpp
std::vector<std::shared_ptr<Alg>> make_hashes();   // hashes.cpp
std::vector<std::shared_ptr<Alg>> make_crcs();     // crc32.cpp

// The common part of every AlgInfo this provider registers.
inline AlgInfo provider_info(const std::string& name, AlgType type) {
    AlgInfo info;
    info.name = name;
    info.driver = name + "-cryptopp";
    info.module = "cryptopp";
    info.priority = 100;
    info.type = type;
    return info;
}

// Little-endian stores and loads: exported states are the kernel's structs
// as laid out on x86-64, whatever the host.
template <class T>
constexpr void store_le(uint8_t* p, T v) {
    for (std::size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

template <class T>
constexpr T load_le(const uint8_t* p) {
    T v = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(p[i]) << (8 * i);
    return v;
}

}  // namespace blkcrypt::cryptopp
