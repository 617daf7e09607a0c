// The generic provider: algorithms blkcrypt implements itself, in portable
// C++, where no library provides them with the kernel's semantics
// (crypto_null.c, chacha_generic.c's XChaCha, nhpoly1305.c).
#pragma once

#include <blkcrypt/alg_info.hpp>

#include <string>

namespace blkcrypt::generic {

inline AlgInfo provider_info(const std::string& name, const std::string& driver, AlgType type) {
    AlgInfo info;
    info.name = name;
    info.driver = driver;
    info.module = "generic";
    info.priority = 100;  // as the kernel's *-generic drivers
    info.type = type;
    return info;
}

}  // namespace blkcrypt::generic
