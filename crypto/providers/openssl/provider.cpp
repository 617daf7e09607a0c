// The OpenSSL provider: AES modes, gcm(aes), sha1/sha256/sha512 and
// hmac(sha256) from libcrypto, named like the kernel's accelerated drivers
// ("xts-aes-openssl"), module "openssl", priority 300. Registered after the
// Crypto++ provider, so each driver self-tests against the vectors of its
// generic name and a generic lookup prefers it; the template compositions
// stay reachable by driver name ("xts(aes-cryptopp)").
#include "ossl_common.hpp"

#include <blkcrypt/registry.hpp>

namespace blkcrypt {

Result<void> register_openssl_provider(Registry& reg) {
    std::vector<std::shared_ptr<Alg>> all;
    for (auto make : {ossl::make_skciphers, ossl::make_aeads, ossl::make_hashes}) {
        auto algs = make();
        all.insert(all.end(), algs.begin(), algs.end());
    }
    // All or nothing; a clash (registered twice) leaves the registry as it was.
    return reg.register_algs(all);
}

}  // namespace blkcrypt
