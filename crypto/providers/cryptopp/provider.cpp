// The Crypto++ provider: block ciphers, hashes and CRCs under the kernel's
// generic names, drivers "<name>-cryptopp", priority 100.
#include "cryptopp_algs.hpp"

#include <blkcrypt/registry.hpp>

namespace blkcrypt {

Result<void> register_cryptopp_provider(Registry& reg) {
    std::vector<std::shared_ptr<Alg>> all;
    for (auto make : {cryptopp::make_ciphers, cryptopp::make_hashes, cryptopp::make_crcs}) {
        auto algs = make();
        all.insert(all.end(), algs.begin(), algs.end());
    }
    // All or nothing; a clash (the provider registered twice) leaves the
    // registry as it was.
    return reg.register_algs(all);
}

}  // namespace blkcrypt
