// dm-crypt with the integrity feature (dm/aead_target.hpp), issue 24's
// performance targets:
//
// BM_aead_crypt/<write|read>/<cipher>/threads:<n>: the engine over an
// in-memory TaggedDevice, 32 MiB a iteration in 1 MiB I/Os submitted back
// to back, then drained; 4096-byte sectors, as LUKS2 formats them.
//
// BM_aead_crypt_chained/xts-aes+hmac-sha256/4096: the two primitives of
// authenc(hmac(sha256),xts(aes)) chained on one core, per 4096-byte sector
// (xts over the sector, HMAC over AAD || ciphertext): the baseline the
// engine on 2 cores must beat 1.5x. The aes-256-gcm baseline is OpenSSL's
// own, in openssl_aead_crypt_bench.cpp (and `openssl speed -evp aes-256-gcm
// -bytes 4096`).
#include "bench_util.hpp"

#include <blkcrypt/dm/aead_target.hpp>
#include <blkcrypt/hex.hpp>
#include <blkcrypt/integrity/tagged_device.hpp>
#include <blkcrypt/shash.hpp>
#include <blkcrypt/skcipher.hpp>

#include <atomic>
#include <cstring>
#include <memory>

namespace {

using namespace blkcrypt;

constexpr std::size_t kTotal = 32 << 20;
constexpr std::size_t kIo = 1 << 20;
constexpr std::size_t kSs = 4096;

// Data and tags in memory, no locking: the benchmark's I/Os are disjoint.
class MemTagged final : public integrity::TaggedDevice {
public:
    MemTagged(std::size_t bytes, uint32_t ts) : data_(bytes), tags_(bytes / kSs * ts), ts_(ts) {}
    uint64_t size() const override { return data_.size(); }
    uint32_t block_size() const override { return kSs; }
    uint32_t tag_size() const override { return ts_; }
    bool read_only() const override { return false; }
    Result<void> read(uint64_t off, Bytes data, Bytes tags) override {
        std::memcpy(data.data(), data_.data() + off, data.size());
        std::memcpy(tags.data(), tags_.data() + off / kSs * ts_, tags.size());
        return {};
    }
    Result<void> write(uint64_t off, ConstBytes data, ConstBytes tags) override {
        std::memcpy(data_.data() + off, data.data(), data.size());
        std::memcpy(tags_.data() + off / kSs * ts_, tags.data(), tags.size());
        return {};
    }
    Result<void> flush() override { return {}; }
    std::string describe() const override { return "memory"; }

private:
    std::vector<uint8_t> data_, tags_;
    uint32_t ts_;
};

struct Spec {
    const char* cipher;
    unsigned tag;
    std::size_t keylen;
};
constexpr Spec kSpecs[] = {
    {"capi:gcm(aes)-random", 28, 32},
    {"capi:authenc(hmac(sha256),xts(aes))-plain64", 32, 96},
    {"capi:authenc(hmac(sha256),xts(aes))-random", 48, 96},
    {"capi:rfc7539(chacha20,poly1305)-random", 28, 32},
    {"capi:aegis128-random", 32, 16},
};

Status run_all(dm::BlockDevice& dev, bool write, std::vector<uint8_t>& mem) {
    std::atomic<int> failed{0};
    for (std::size_t off = 0; off < kTotal; off += kIo) {
        auto done = [&failed](Status s) {
            if (s != Status::Ok) failed.fetch_add(1);
        };
        Status s = write ? dev.submit_write(off, ConstBytes(mem.data() + off, kIo), done)
                         : dev.submit_read(off, Bytes(mem.data() + off, kIo), done);
        if (s != Status::InProgress) return s;
    }
    dev.drain();
    return failed.load() ? Status::IoError : Status::Ok;
}

void register_engine(const Spec& spec, bool write) {
    const std::string args = std::string(spec.cipher) + " " + hex_encode(bench::key_bytes(spec.keylen)) +
                             " 0 2 integrity:" + std::to_string(spec.tag) + ":aead sector_size:4096";
    auto t = dm::parse_crypt_args(args);
    if (!t || !dm::aead_layout(bench::registry(), *t)) return;
    auto table = std::make_shared<dm::CryptTable>(std::move(t).value());
    const std::string name = std::string("BM_aead_crypt/") + (write ? "write/" : "read/") + spec.cipher;
    auto* b = benchmark::RegisterBenchmark(name.c_str(), [table, write, spec](benchmark::State& st) {
        auto lower = std::make_shared<MemTagged>(kTotal, spec.tag);
        dm::AeadCryptOptions o;
        o.threads = static_cast<unsigned>(st.range(0));
        auto dev = dm::make_aead_crypt_device(bench::registry(), *table, lower, 0, o);
        if (!dev) {
            st.SkipWithError(dev.error().message.c_str());
            return;
        }
        std::vector<uint8_t> mem(kTotal, 0x5a);
        if (!write && run_all(**dev, true, mem) != Status::Ok) {  // valid tags to read
            st.SkipWithError("write failed");
            return;
        }
        for (auto _ : st) {
            if (run_all(**dev, write, mem) != Status::Ok) {
                st.SkipWithError("I/O failed");
                return;
            }
        }
        st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(kTotal));
    });
    // Real time for the rate; the CPU column is the whole process's (all
    // workers), the engine's cost a byte whatever else the machine runs.
    b->ArgName("threads")->Arg(1)->Arg(2)->MeasureProcessCPUTime()->UseRealTime();
}

void register_chained() {
    auto x = Skcipher::alloc(bench::registry(), "xts(aes)");
    auto h = Shash::alloc(bench::registry(), "hmac(sha256)");
    if (!x || !h) return;
    auto xts = std::make_shared<Skcipher>(std::move(x).value());
    auto mac = std::make_shared<Shash>(std::move(h).value());
    const auto k = bench::key_bytes(96);
    if (xts->setkey(ConstBytes(k.data(), 64)) != Status::Ok || mac->setkey(ConstBytes(k.data() + 64, 32)) != Status::Ok)
        return;
    const std::string name = "BM_aead_crypt_chained/" + xts->info().driver + "+" + mac->info().driver + "/4096";
    benchmark::RegisterBenchmark(name.c_str(), [xts, mac](benchmark::State& st) {
        // AAD (le64 sector || 16-byte IV) then the ciphertext, as authenc MACs them.
        std::vector<uint8_t> src(kSs, 0x5a), buf(24 + kSs);
        uint8_t iv[16], out[32];
        uint64_t sector = 0;
        for (auto _ : st) {
            std::memset(iv, 0, sizeof iv);
            std::memcpy(iv, &sector, 8);
            std::memcpy(buf.data(), &sector, 8);
            std::memcpy(buf.data() + 8, iv, 16);
            if (xts->encrypt(ConstBytes(src.data(), kSs), Bytes(buf.data() + 24, kSs), Bytes(iv, 16)) != Status::Ok ||
                mac->digest(ConstBytes(buf.data(), buf.size()), Bytes(out, 32)) != Status::Ok) {
                st.SkipWithError("failed");
                return;
            }
            benchmark::DoNotOptimize(out);
            sector += 8;
        }
        st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(kSs));
    });
}

const bool registered = [] {
    register_chained();
    for (const Spec& s : kSpecs)
        for (bool w : {true, false}) register_engine(s, w);
    return true;
}();

}  // namespace
