// Registers the generic provider's algorithms (see generic.hpp).
#include <blkcrypt/internal/builtin.hpp>

namespace blkcrypt {

Result<void> register_generic_null(Registry& reg);        // null.cpp
Result<void> register_generic_xchacha(Registry& reg);     // xchacha.cpp
Result<void> register_generic_nhpoly1305(Registry& reg);  // nhpoly1305.cpp
Result<void> register_generic_streebog(Registry& reg);    // streebog.cpp
Result<void> register_generic_kuznyechik(Registry& reg);  // kuznyechik.cpp
Result<void> register_generic_aegis128(Registry& reg);    // aegis128.cpp

Result<void> register_generic_provider(Registry& reg) {
    for (auto* f : {register_generic_null, register_generic_xchacha, register_generic_nhpoly1305,
                   register_generic_streebog, register_generic_kuznyechik, register_generic_aegis128})
        if (auto r = f(reg); !r) return r;
    return {};
}

}  // namespace blkcrypt
