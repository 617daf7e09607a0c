// dm-crypt throughput.
//
// BM_dmcrypt_request/<whole|per_sector>/<cipher>/<sector_size>: a 1 MiB bio
// encrypted (caller memory -> bounce buffer, as a write) either as ONE
// IV-template request, or as one request per sector as the kernel's
// crypt_convert issues them: the cost of the per-request overhead.
//
// BM_dmcrypt_engine/<write|read>/<cipher>/<bio bytes>/threads:<n>: the whole
// CryptTarget over a MemoryStore, 16 MiB per iteration in bios submitted
// back to back, then drained.
#include "bench_util.hpp"

#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/hex.hpp>
#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/skcipher.hpp>

#include <deque>
#include <memory>

namespace {

using namespace blkcrypt;

constexpr std::size_t kBio = 1 << 20;
constexpr std::size_t kTotal = 16 << 20;  // bytes per engine iteration

struct Spec {
    const char* cipher;
    std::size_t keylen;
};
// The capi: line forces OpenSSL's driver, the same primitive `openssl speed`
// runs, so the engine's own overhead shows beside the best driver's figure.
constexpr Spec kSpecs[] = {{"aes-xts-plain64", 64}, {"capi:xts-aes-openssl-plain64", 64}, {"aes-cbc-essiv:sha256", 32}};

Result<dm::CryptTable> make_table(const Spec& s, std::size_t sector_size) {
    const std::string key = hex_encode(bench::key_bytes(s.keylen));
    std::string args = std::string(s.cipher) + " " + key + " 0";
    if (sector_size != 512) args += " 1 sector_size:" + std::to_string(sector_size);
    return dm::parse_crypt_args(args);
}

void register_requests(const Spec& spec, std::size_t ss) {
    auto t = make_table(spec, ss);
    if (!t) return;
    auto a = Skcipher::alloc(bench::registry(), t->alg_name);
    if (!a) return;
    auto tfm = std::make_shared<Skcipher>(std::move(a).value());
    if (tfm->set_sector_params({ss, false, 1}) != Status::Ok || tfm->setkey(t->key) != Status::Ok) return;
    for (bool whole : {true, false}) {
        std::string name = std::string("BM_dmcrypt_request/") + (whole ? "whole/" : "per_sector/") +
                           spec.cipher + "/" + std::to_string(ss);
        benchmark::RegisterBenchmark(name.c_str(), [tfm, ss, whole](benchmark::State& st) {
            std::vector<uint8_t> src(kBio, 0x5a), dst(kBio);
            uint8_t iv[8];
            SgEntry s{}, d{};
            SkcipherRequest req;
            req.src = SgList(&s, 1);
            req.dst = SgList(&d, 1);
            req.iv = Bytes(iv, 8);
            const std::size_t step = whole ? kBio : ss;
            for (auto _ : st) {
                for (std::size_t off = 0; off < kBio; off += step) {
                    s = {src.data() + off, step};
                    d = {dst.data() + off, step};
                    req.len = step;
                    put_le64(iv, off / 512);
                    if (tfm->encrypt(req) != Status::Ok) {
                        st.SkipWithError("encrypt failed");
                        return;
                    }
                }
                benchmark::ClobberMemory();
            }
            st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(kBio));
        });
    }
}

void register_engine(const Spec& spec, dm::BioDir dir, std::size_t bio_bytes) {
    auto t = make_table(spec, 512);
    if (!t) return;
    // As register_requests: only what this build has (no xts-aes-openssl without OpenSSL).
    if (!Skcipher::alloc(bench::registry(), t->alg_name)) return;
    auto table = std::make_shared<dm::CryptTable>(std::move(t).value());
    std::string name = std::string("BM_dmcrypt_engine/") + (dir == dm::BioDir::Write ? "write/" : "read/") +
                       spec.cipher + "/" + std::to_string(bio_bytes);
    auto* b = benchmark::RegisterBenchmark(name.c_str(), [table, dir, bio_bytes](benchmark::State& st) {
        auto store = std::make_shared<dm::MemoryStore>(kTotal);
        dm::CryptTargetOptions o;
        o.threads = static_cast<unsigned>(st.range(0));
        auto tg = dm::CryptTarget::create(bench::registry(), *table, store, 0, o);
        if (!tg) {
            st.SkipWithError(tg.error().message.c_str());
            return;
        }
        std::vector<uint8_t> mem(kTotal, 0x5a);
        std::deque<dm::Bio> bios(kTotal / bio_bytes);
        std::vector<SgEntry> segs(bios.size());
        for (std::size_t i = 0; i < bios.size(); ++i) {
            segs[i] = {mem.data() + i * bio_bytes, bio_bytes};
            bios[i].sector = i * bio_bytes / 512;
            bios[i].dir = dir;
            bios[i].vecs = {segs[i]};
            bios[i].on_complete = [](Status) {};
        }
        for (auto _ : st) {
            for (auto& bio : bios) (*tg)->submit(bio);
            (*tg)->drain();
        }
        st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(kTotal));
    });
    b->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime();
}

const bool registered = [] {
    for (const Spec& s : kSpecs)
        for (std::size_t ss : {512u, 4096u}) register_requests(s, ss);
    for (const Spec& s : kSpecs)
        for (auto dir : {dm::BioDir::Write, dm::BioDir::Read})
            for (std::size_t n : {64u << 10, 1u << 20}) register_engine(s, dir, n);
    return true;
}();

}  // namespace
