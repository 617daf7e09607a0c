#include <blkcrypt/registry.hpp>

namespace blkcrypt {

void register_cryptopp_provider(Registry& reg);  // providers/cryptopp
void register_builtin_templates(Registry& reg);  // templates/

void register_defaults(Registry& reg) {
    register_cryptopp_provider(reg);
    register_builtin_templates(reg);
}

}  // namespace blkcrypt
