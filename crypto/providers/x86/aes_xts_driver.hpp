// "xts-aes-vaes" and "xts-aes-vaes-avx2": registered by register_x86_provider
// (provider.cpp).
#pragma once

#include <blkcrypt/status.hpp>

namespace blkcrypt {

class Registry;

// Registers xts-aes-vaes (priority 400) when the CPU has VAES and AVX-512,
// xts-aes-vaes-avx2 (priority 350) when it has VAES and AVX2.
Result<void> register_aes_xts_vaes(Registry& reg);

}  // namespace blkcrypt
