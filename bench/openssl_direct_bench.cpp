// SHA-256 called directly in OpenSSL (EVP with a reused context, and the
// low-level SHA256_* the OpenSSL driver uses), BM_direct/openssl-sha256-*/<bytes>:
// the baseline of the OpenSSL driver's per-call overhead. Built only with
// BLKCRYPT_WITH_OPENSSL (bench/CMakeLists.txt).
#define OPENSSL_SUPPRESS_DEPRECATED  // SHA256_Init/Update/Final, for the baseline
#include "bench_util.hpp"

#include <openssl/evp.h>
#include <openssl/sha.h>

namespace {

const bool registered = [] {
    bench::register_direct("openssl-sha256-evp", [](benchmark::State& st, const std::vector<uint8_t>& d, uint8_t* out) {
        // Fetched once and one context reused: the fastest EVP usage.
        EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
        EVP_MD_CTX* ctx = EVP_MD_CTX_new();
        for (auto _ : st) {
            unsigned len = 0;
            if (EVP_DigestInit_ex2(ctx, md, nullptr) != 1 || EVP_DigestUpdate(ctx, d.data(), d.size()) != 1 ||
                EVP_DigestFinal_ex(ctx, out, &len) != 1) {
                st.SkipWithError("EVP digest failed");
                break;
            }
            benchmark::DoNotOptimize(out);
        }
        EVP_MD_CTX_free(ctx);
        EVP_MD_free(md);
    });
    bench::register_direct("openssl-sha256-lowlevel", [](benchmark::State& st, const std::vector<uint8_t>& d, uint8_t* out) {
        for (auto _ : st) {
            SHA256_CTX c;
            SHA256_Init(&c);
            SHA256_Update(&c, d.data(), d.size());
            SHA256_Final(out, &c);
            benchmark::DoNotOptimize(out);
        }
    });
    return true;
}();

}  // namespace
