#include <blkcrypt/internal/builtin.hpp>

namespace blkcrypt {

Result<void> register_defaults(Registry& reg) {
    using Step = Result<void> (*)(Registry&);
    static constexpr Step steps[] = {
        register_cryptopp_provider,
        register_cryptopp_chacha_poly,
#ifdef BLKCRYPT_WITH_OPENSSL
        register_openssl_provider,  // after Crypto++; priority 300 over its 100
#endif
        register_generic_provider,  // names no other provider has
#ifdef BLKCRYPT_HAVE_X86
        register_x86_provider,  // sha256-ni, xts-aes-vaes(-avx2): priority 400 (350)
#endif
        register_builtin_templates,
    };
    // The first failure stops: a half-registered default set would pass for a
    // complete one (each step is all or nothing on its own).
    for (Step step : steps)
        if (auto r = step(reg); !r)
            return make_error(r.status(), "built-in registration: " + r.error().message);
    return {};
}

}  // namespace blkcrypt
