// Hash and MAC throughput: one-shot digest per iteration, BM_shash/<driver>/<bytes>;
// and SHA-256 called directly in Crypto++ and OpenSSL (EVP with a reused
// context, and the low-level SHA256_* the OpenSSL driver uses), to show what
// the registry, handles and virtual calls add per call.
#define OPENSSL_SUPPRESS_DEPRECATED  // SHA256_Init/Update/Final, for the baseline
#include "bench_util.hpp"

#include <blkcrypt/shash.hpp>

#include <crypto++/sha.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <memory>

namespace {

using namespace blkcrypt;

void register_one(const bench::Candidate& c) {
    auto h = Shash::alloc(bench::registry(), c.driver);
    if (!h) return;
    auto tfm = std::make_shared<Shash>(std::move(h).value());
    if (tfm->info().needs_key && tfm->setkey(bench::bench_key(tfm->info())) != Status::Ok) return;
    for (std::size_t n : bench::sizes()) {
        benchmark::RegisterBenchmark(bench::bm_name("shash", c.driver, n).c_str(),
                                     [tfm, n](benchmark::State& st) {
            std::vector<uint8_t> data(n, 0x5a), out(tfm->digestsize());
            for (auto _ : st) {
                if (tfm->digest(data, out) != Status::Ok) {
                    st.SkipWithError("digest failed");
                    break;
                }
                benchmark::DoNotOptimize(out.data());
                benchmark::ClobberMemory();
            }
            st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(n));
        });
    }
}

template <class Fn>
void register_direct(const char* what, Fn fn) {
    for (std::size_t n : bench::sizes())
        benchmark::RegisterBenchmark(bench::bm_name("direct", what, n).c_str(), [fn, n](benchmark::State& st) {
            std::vector<uint8_t> data(n, 0x5a);
            uint8_t out[32];
            fn(st, data, out);
            st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(n));
        });
}

const bool registered = [] {
    for (const auto& c : bench::candidates(AlgType::Shash)) register_one(c);

    register_direct("cryptopp-sha256", [](benchmark::State& st, const std::vector<uint8_t>& d, uint8_t* out) {
        CryptoPP::SHA256 h;
        for (auto _ : st) {
            h.CalculateDigest(out, d.data(), d.size());
            benchmark::DoNotOptimize(out);
        }
    });
    register_direct("openssl-sha256-evp", [](benchmark::State& st, const std::vector<uint8_t>& d, uint8_t* out) {
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
    register_direct("openssl-sha256-lowlevel", [](benchmark::State& st, const std::vector<uint8_t>& d, uint8_t* out) {
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
