// Verity block hashing: 4 KiB blocks with a 32-byte salt (veritysetup's
// defaults), per driver:
//   BM_verity_init_update/<driver>  init, update(salt), update(block), final
//   BM_verity_import_finup/<driver> import(salted state), finup(block)
//   BM_verity_finup_mb/<driver>     finup_mb over 16 blocks from the salted state
// and BM_verity_format/<threads>: format_tree over 64 MiB in memory.
#include "bench_util.hpp"

#include <blkcrypt/shash.hpp>
#include <blkcrypt/verity/tree.hpp>

#include <array>

namespace {

using namespace blkcrypt;
constexpr std::size_t kBlock = 4096;
constexpr std::size_t kBatch = 16;

struct Fixture {
    Shash tfm;
    ShashDesc desc;
    std::vector<uint8_t> salt = std::vector<uint8_t>(32, 0x11), state;
    std::vector<uint8_t> blocks = std::vector<uint8_t>(kBlock * kBatch, 0x5a);
    std::array<uint8_t, 64 * kBatch> out{};
};

std::shared_ptr<Fixture> fixture(const std::string& driver) {
    auto h = Shash::alloc(bench::registry(), driver);
    if (!h) return nullptr;
    auto d = h->new_desc();
    if (!d) return nullptr;
    auto f = std::make_shared<Fixture>(Fixture{std::move(*h), std::move(*d)});
    f->state.resize(f->tfm.statesize());
    f->desc.init();
    f->desc.update(f->salt);
    if (f->desc.export_state(f->state) != Status::Ok) return nullptr;
    return f;
}

void per_block(benchmark::State& st, std::size_t blocks) {
    st.SetBytesProcessed(static_cast<int64_t>(st.iterations() * blocks * kBlock));
}

const bool registered = [] {
    for (const char* driver : {"sha256-ni", "sha256-openssl", "sha256-cryptopp", "sha512-openssl", "sha1-openssl"}) {
        auto f = fixture(driver);
        if (!f) continue;
        const std::string d = driver;
        benchmark::RegisterBenchmark(("BM_verity_init_update/" + d).c_str(), [f](benchmark::State& st) {
            for (auto _ : st) {
                f->desc.init();
                f->desc.update(f->salt);
                f->desc.update(ConstBytes(f->blocks).first(kBlock));
                (void)f->desc.final(f->out);
                benchmark::DoNotOptimize(f->out.data());
            }
            per_block(st, 1);
        });
        benchmark::RegisterBenchmark(("BM_verity_import_finup/" + d).c_str(), [f](benchmark::State& st) {
            for (auto _ : st) {
                (void)f->desc.import_state(f->state);
                (void)f->desc.finup(ConstBytes(f->blocks).first(kBlock), f->out);
                benchmark::DoNotOptimize(f->out.data());
            }
            per_block(st, 1);
        });
        benchmark::RegisterBenchmark(("BM_verity_finup_mb/" + d).c_str(), [f](benchmark::State& st) {
            std::array<ConstBytes, kBatch> in;
            std::array<Bytes, kBatch> out;
            for (std::size_t i = 0; i < kBatch; ++i) {
                in[i] = ConstBytes(f->blocks).subspan(i * kBlock, kBlock);
                out[i] = Bytes(f->out).subspan(i * 64, 64);
            }
            (void)f->desc.import_state(f->state);
            for (auto _ : st) {
                (void)f->desc.finup_mb(in, out);
                benchmark::DoNotOptimize(f->out.data());
            }
            per_block(st, kBatch);
        });
    }
    for (unsigned threads : {1u, 2u}) {
        benchmark::RegisterBenchmark(("BM_verity_format/threads:" + std::to_string(threads)).c_str(),
                                     [threads](benchmark::State& st) {
            constexpr std::size_t kData = 64u << 20;
            dm::MemoryStore data(kData);
            verity::VerityParams p;
            p.data_blocks = kData / kBlock;
            p.salt.assign(32, 0x22);
            auto g = verity::plan_tree(bench::registry(), p);
            dm::MemoryStore hash(g->hash_device_size(p));
            verity::TreeOptions o;
            o.threads = threads;
            for (auto _ : st) {
                auto r = verity::format_tree(bench::registry(), p, data, hash, o);
                if (!r) {
                    st.SkipWithError(r.error().message.c_str());
                    break;
                }
            }
            st.SetBytesProcessed(static_cast<int64_t>(st.iterations() * kData));
        })->Unit(benchmark::kMillisecond)->UseRealTime();
    }
    return true;
}();

}  // namespace
