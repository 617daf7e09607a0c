// dm-verity FEC codec: BM_fec_accumulate/<roots> is the encoder's inner step
// (one message symbol position of 64 KiB of codewords multiply-accumulated
// into the parity rows; bytes = message bytes), BM_fec_encode/<roots>/<threads>
// the whole FEC of 64 MiB in memory, BM_fec_decode/<roots> one codeword with
// roots/2 errors.
#include "bench_util.hpp"

#include <blkcrypt/verity/fec.hpp>
#include <blkcrypt/verity/reed_solomon.hpp>
#include <blkcrypt/verity/tree.hpp>

#include <random>

namespace {

using namespace blkcrypt;
using namespace blkcrypt::verity;

void BM_fec_accumulate(benchmark::State& state) {
    const auto roots = static_cast<unsigned>(state.range(0));
    auto rs = ReedSolomon::create(roots);
    constexpr std::size_t n = 64 << 10;
    std::vector<uint8_t> col(n, 0x5a), rows((n + 64) * roots, 0);
    std::vector<uint8_t*> ptr;
    for (unsigned j = 0; j < roots; ++j) ptr.push_back(rows.data() + j * (n + 64));  // as fec_encode lays them
    unsigned s = 0;
    for (auto _ : state) {
        rs->accumulate(s, col.data(), ptr.data(), n);
        s = (s + 1) % rs->message_size();
        benchmark::DoNotOptimize(rows.data());
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
}
BENCHMARK(BM_fec_accumulate)->Arg(2)->Arg(8)->Arg(24);

void BM_fec_encode(benchmark::State& state) {
    const auto roots = static_cast<uint32_t>(state.range(0));
    const auto threads = static_cast<unsigned>(state.range(1));
    VerityParams p;
    p.data_blocks = 16384;  // 64 MiB
    auto tg = compute_geometry(p, 32);
    MemoryStore data(p.data_blocks * 4096), hash(tg->hash_device_size(p));
    std::mt19937 rng(1);
    for (auto& b : data.data()) b = static_cast<uint8_t>(rng());
    auto g = fec_geometry(p, *tg, roots, fec_covered_blocks(p, *tg, hash.size()), 0);
    MemoryStore fec(g->parity_bytes());
    for (auto _ : state)
        if (!fec_encode(*g, data, hash, fec, threads)) state.SkipWithError("encode failed");
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * data.size()));
}
BENCHMARK(BM_fec_encode)->Args({2, 1})->Args({2, 0})->Args({24, 1})->Args({24, 0})->UseRealTime();

void BM_fec_decode(benchmark::State& state) {
    const auto roots = static_cast<unsigned>(state.range(0));
    auto rs = ReedSolomon::create(roots);
    std::mt19937 rng(2);
    uint8_t good[255];
    for (unsigned i = 0; i < rs->message_size(); ++i) good[i] = static_cast<uint8_t>(rng());
    rs->encode(good, good + rs->message_size());
    for (auto _ : state) {
        uint8_t w[255];
        std::copy(good, good + 255, w);
        for (unsigned e = 0; e < roots / 2; ++e) w[(e * 37) % 255] ^= 0x33;
        benchmark::DoNotOptimize(rs->decode(w));
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_fec_decode)->Arg(2)->Arg(8)->Arg(24);

}  // namespace
