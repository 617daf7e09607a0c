#include <blkcrypt/registry.hpp>

namespace blkcrypt {

void register_cryptopp_provider(Registry& reg);  // providers/cryptopp
void register_cryptopp_chacha_poly(Registry& reg);  // providers/cryptopp/chacha_poly.cpp
void register_openssl_provider(Registry& reg);  // providers/openssl
void register_builtin_templates(Registry& reg);  // templates/
void register_iv_templates(Registry& reg);       // templates/iv/

void register_defaults(Registry& reg) {
    register_cryptopp_provider(reg);
    register_cryptopp_chacha_poly(reg);
    register_openssl_provider(reg);  // after Crypto++; priority 300 over its 100
    register_builtin_templates(reg);
    register_iv_templates(reg);
}

}  // namespace blkcrypt
