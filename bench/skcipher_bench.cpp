// Skcipher throughput: one in-place encryption request per iteration on a
// single-segment buffer (the common dm-crypt case), BM_skcipher/<driver>/<bytes>.
#include "bench_util.hpp"

#include <blkcrypt/skcipher.hpp>

#include <memory>

namespace {

using namespace blkcrypt;

void register_one(const bench::Candidate& c) {
    auto t = Skcipher::alloc(bench::registry(), c.driver);
    if (!t) return;
    auto tfm = std::make_shared<Skcipher>(std::move(t).value());
    if (tfm->setkey(bench::bench_key(tfm->info())) != Status::Ok) return;
    for (std::size_t n : bench::sizes()) {
        // Probe once: a size the mode refuses is not registered.
        std::vector<uint8_t> buf(n, 0x5a), iv(tfm->ivsize(), 1);
        if (tfm->encrypt(buf, buf, iv) != Status::Ok) continue;
        benchmark::RegisterBenchmark(bench::bm_name("skcipher", c.driver, n).c_str(),
                                     [tfm, n](benchmark::State& st) {
            std::vector<uint8_t> data(n, 0x5a), ivb(tfm->ivsize(), 1);
            SgEntry e{data.data(), n};
            SkcipherRequest req;
            req.src = SgList(&e, 1);
            req.dst = SgList(&e, 1);
            req.len = n;
            req.iv = ivb;
            for (auto _ : st) {
                if (tfm->encrypt(req) != Status::Ok) {
                    st.SkipWithError("encrypt failed");
                    break;
                }
                benchmark::ClobberMemory();
            }
            st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(n));
        });
    }
}

const bool registered = [] {
    for (const auto& c : bench::candidates(AlgType::Skcipher)) register_one(c);
    return true;
}();

}  // namespace
