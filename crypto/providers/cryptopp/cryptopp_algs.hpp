// Private to the Crypto++ provider: the factories provider.cpp registers and
// two small helpers they share. No Crypto++ type appears here.
#pragma once

#include <blkcrypt/internal/bytes_util.hpp>
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

}  // namespace blkcrypt::cryptopp
