// Hash and MAC throughput: one-shot digest per iteration, BM_shash/<driver>/<bytes>;
// and SHA-256 called directly in Crypto++ (OpenSSL: openssl_direct_bench.cpp),
// to show what the registry, handles and virtual calls add per call.
#include "bench_util.hpp"

#include <blkcrypt/shash.hpp>

#include <crypto++/sha.h>

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

const bool registered = [] {
    for (const auto& c : bench::candidates(AlgType::Shash)) register_one(c);

    bench::register_direct("cryptopp-sha256", [](benchmark::State& st, const std::vector<uint8_t>& d, uint8_t* out) {
        CryptoPP::SHA256 h;
        for (auto _ : st) {
            h.CalculateDigest(out, d.data(), d.size());
            benchmark::DoNotOptimize(out);
        }
    });
    return true;
}();

}  // namespace
