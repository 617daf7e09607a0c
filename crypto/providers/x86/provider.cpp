// The x86 provider: drivers on CPU-specific instructions, each registered
// only when CPUID (and, for AVX-512, XGETBV) says the CPU and OS support it.
#include "aes_xts_driver.hpp"

#include <blkcrypt/registry.hpp>

namespace blkcrypt {

Result<void> register_sha256_ni(Registry& reg);  // sha256_ni_driver.cpp
Result<void> register_aegis128_aesni(Registry& reg);  // aegis128_aesni.cpp

Result<void> register_x86_provider(Registry& reg) {
    if (auto r = register_sha256_ni(reg); !r) return r;  // sha256-ni, priority 400
    if (auto r = register_aegis128_aesni(reg); !r) return r;  // aegis128-aesni, priority 400
    return register_aes_xts_vaes(reg);  // xts-aes-vaes (400), xts-aes-vaes-avx2 (350)
}

}  // namespace blkcrypt
