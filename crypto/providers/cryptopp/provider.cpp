#include <blkcrypt/registry.hpp>
namespace blkcrypt {
void register_cryptopp_provider(Registry&) {}
}
