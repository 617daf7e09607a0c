// AEAD throughput: one in-place encryption per iteration of 16 bytes of
// associated data (an ESP header: what rfc4106/4309/4543 require) and n bytes
// of text, full-size tag; bytes counted = text. BM_aead/<driver>/<bytes>.
#include "bench_util.hpp"

#include <blkcrypt/aead.hpp>

#include <memory>

namespace {

using namespace blkcrypt;

constexpr std::size_t kAssoc = 16;

std::vector<uint8_t> bench_iv(const AlgInfo& info) {
    std::vector<uint8_t> iv(info.ivsize, 1);
    if (!iv.empty() && info.name.rfind("ccm(", 0) == 0) iv[0] = 3;  // L' = 3: 4-byte length field
    return iv;
}

// One in-place request over buf (associated data, text, room for the tag).
struct InPlace {
    InPlace(const Aead& tfm, std::size_t n)
        : buf(kAssoc + n + tfm.authsize(), 0x5a), iv(bench_iv(tfm.info())), seg{buf.data(), buf.size()} {
        req.src = SgList(&seg, 1);
        req.dst = SgList(&seg, 1);
        req.assoclen = kAssoc;
        req.cryptlen = n;
        req.iv = iv;
    }
    InPlace(const InPlace&) = delete;  // req points into this object
    std::vector<uint8_t> buf, iv;
    SgEntry seg;
    AeadRequest req;
};

void register_one(const bench::Candidate& c) {
    auto t = Aead::alloc(bench::registry(), c.driver);
    if (!t) return;
    auto tfm = std::make_shared<Aead>(std::move(t).value());
    if (tfm->setkey(bench::bench_key(tfm->info())) != Status::Ok) return;
    for (std::size_t n : bench::sizes()) {
        InPlace probe(*tfm, n);
        if (tfm->encrypt(probe.req) != Status::Ok) continue;  // refused shapes are skipped
        benchmark::RegisterBenchmark(bench::bm_name("aead", c.driver, n).c_str(),
                                     [tfm, n](benchmark::State& st) {
            InPlace r(*tfm, n);
            for (auto _ : st) {
                if (tfm->encrypt(r.req) != Status::Ok) {
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
    for (const auto& c : bench::candidates(AlgType::Aead)) register_one(c);
    return true;
}();

}  // namespace
