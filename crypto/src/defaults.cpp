#include <blkcrypt/registry.hpp>

namespace blkcrypt {

void register_cryptopp_provider(Registry& reg);  // providers/cryptopp
void register_cryptopp_chacha_poly(Registry& reg);  // providers/cryptopp/chacha_poly.cpp
#ifdef BLKCRYPT_WITH_OPENSSL
void register_openssl_provider(Registry& reg);  // providers/openssl (BLKCRYPT_WITH_OPENSSL)
#endif
Result<void> register_generic_provider(Registry& reg);  // providers/generic
void register_builtin_templates(Registry& reg);  // templates/
void register_iv_templates(Registry& reg);       // templates/iv/
#ifdef BLKCRYPT_HAVE_X86
void register_x86_provider(Registry& reg);  // providers/x86 (CPU-detected)
#endif

void register_defaults(Registry& reg) {
    register_cryptopp_provider(reg);
    register_cryptopp_chacha_poly(reg);
#ifdef BLKCRYPT_WITH_OPENSSL
    register_openssl_provider(reg);  // after Crypto++; priority 300 over its 100
#endif
    (void)register_generic_provider(reg);  // names no other provider has
#ifdef BLKCRYPT_HAVE_X86
    register_x86_provider(reg);  // sha256-ni, xts-aes-vaes(-avx2): priority 400 (350)
#endif
    register_builtin_templates(reg);
    register_iv_templates(reg);
}

}  // namespace blkcrypt
