// "xts-aes-vaes": registered by register_x86_provider (provider.cpp).
#pragma once

namespace blkcrypt {

class Registry;

// Registers xts-aes-vaes when the CPU has VAES and AVX-512 (else nothing).
void register_aes_xts_vaes(Registry& reg);

}  // namespace blkcrypt
