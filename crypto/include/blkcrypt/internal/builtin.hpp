// The built-in providers' and templates' registration, for register_defaults
// and for tests that build a registry from a subset.
#pragma once

#include <blkcrypt/registry.hpp>

#include <memory>
#include <span>

namespace blkcrypt {

Result<void> register_cryptopp_provider(Registry& reg);     // providers/cryptopp
Result<void> register_cryptopp_chacha_poly(Registry& reg);  // providers/cryptopp/chacha_poly.cpp
#if defined(BLKCRYPT_WITH_OPENSSL) && BLKCRYPT_WITH_OPENSSL
Result<void> register_openssl_provider(Registry& reg);      // providers/openssl (BLKCRYPT_WITH_OPENSSL)
#endif
Result<void> register_generic_provider(Registry& reg);      // providers/generic
#ifdef BLKCRYPT_HAVE_X86
Result<void> register_x86_provider(Registry& reg);  // providers/x86 (CPU-detected)
#endif
// Every template of templates/ and templates/iv/ (all or nothing).
Result<void> register_builtin_templates(Registry& reg);

// One built-in template: its name, the source file defining its factory.
struct BuiltinTemplate {
    const char* name;
    const char* file;  // relative to the source tree
    std::shared_ptr<Template> (*make)();
};
std::span<const BuiltinTemplate> builtin_template_list();

}  // namespace blkcrypt
