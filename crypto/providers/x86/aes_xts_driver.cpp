// "xts-aes-vaes": xts(aes) on VAES + AVX-512, 16 blocks in flight, and
// "xts-aes-vaes-avx2": VAES + AVX2 on ymm registers, 8 blocks in flight, for
// CPUs without AVX-512 (see aes_xts_vaes.hpp); each registered only when the
// CPU and the OS support it, the zmm one preferred.
// Semantics of the generic xts template (templates/xts.cpp), which the
// differential tests compare it with: one request = one data unit of 16
// bytes or more, ciphertext stealing for a partial last block, the IV is the
// tweak and is left unchanged; keys of 32, 48 or 64 bytes (AES-128, -192,
// -256), equal halves accepted as by the kernel outside FIPS mode.
#include "aes_xts_driver.hpp"

#include "aes_xts_vaes.hpp"
#include "cpu.hpp"

#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/internal/walk.hpp>
#include <blkcrypt/secure_buffer.hpp>

namespace blkcrypt {

namespace {

constexpr std::size_t kBlock = 16;

class VaesXtsTfm final : public SkcipherTfm {
public:
    explicit VaesXtsTfm(x86::XtsWidth width) : width_(width) {}
    VaesXtsTfm(const VaesXtsTfm&) = delete;
    VaesXtsTfm& operator=(const VaesXtsTfm&) = delete;
    ~VaesXtsTfm() override { secure_wipe(&key_, sizeof key_); }

    Status setkey(ConstBytes key) override {
        return x86::aes_xts_setkey(key_, key.data(), key.size()) ? Status::Ok : Status::Invalid;
    }
    Status encrypt(SkcipherRequest& req) const override { return crypt(req, true); }
    Status decrypt(SkcipherRequest& req) const override { return crypt(req, false); }

private:
    Status crypt(SkcipherRequest& req, bool enc) const {
        if (req.len < kBlock) return Status::Invalid;  // before any output
        const uint8_t* in = sg_contiguous(req.src, req.len);
        uint8_t* out = sg_contiguous(req.dst, req.len);
        if (in && out) {
            x86::aes_xts_crypt(key_, width_, enc, in, out, req.len, req.iv.data());
            return Status::Ok;
        }
        // Scattered: the whole blocks span by span, the tweak carried across
        // them; the last full block and a partial one gathered together.
        const std::size_t tail = req.len % kBlock;
        const std::size_t bulk = tail ? req.len - kBlock - tail : req.len;
        uint8_t tweak[kBlock];
        x86::aes_xts_start(key_, req.iv.data(), tweak);
        for (SgWalk w(req.src, req.dst, bulk, kBlock); w.next(); w.done())
            x86::aes_xts_blocks(key_, width_, enc, w.in(), w.out(), w.len() / kBlock, tweak);
        if (tail) {
            uint8_t buf[2 * kBlock];
            sg_gather(req.src, bulk, Bytes(buf, kBlock + tail));
            x86::aes_xts_finish(key_, enc, buf, buf, kBlock + tail, tweak);
            sg_scatter(req.dst, bulk, ConstBytes(buf, kBlock + tail));
            secure_wipe(buf, sizeof buf);
        }
        secure_wipe(tweak, sizeof tweak);
        return Status::Ok;
    }

    const x86::XtsWidth width_;
    x86::AesXtsKey key_{};
};

class VaesXtsAlg final : public SkcipherAlg {
public:
    explicit VaesXtsAlg(x86::XtsWidth width) : SkcipherAlg(make_info(width)), width_(width) {}
    std::unique_ptr<SkcipherTfm> create_tfm() const override { return std::make_unique<VaesXtsTfm>(width_); }

private:
    static AlgInfo make_info(x86::XtsWidth width) {
        const bool zmm = width == x86::XtsWidth::Zmm;
        AlgInfo i;
        i.name = "xts(aes)";
        i.driver = zmm ? "xts-aes-vaes" : "xts-aes-vaes-avx2";
        i.module = "x86";
        // Both above OpenSSL's 300 (AES-NI, one block per register), the zmm
        // driver above the ymm one where the CPU has both.
        i.priority = zmm ? 400 : 350;
        i.type = AlgType::Skcipher;
        i.needs_key = true;
        i.blocksize = kBlock;
        i.chunksize = kBlock;
        i.ivsize = kBlock;
        i.min_keysize = 32;  // two AES-128 keys
        i.max_keysize = 64;  // two AES-256 keys
        return i;
    }

    const x86::XtsWidth width_;
};

}  // namespace

Result<void> register_aes_xts_vaes(Registry& reg) {
    if (x86::have_vaes_avx512())
        if (auto r = reg.register_alg(std::make_shared<VaesXtsAlg>(x86::XtsWidth::Zmm)); !r) return r;
    if (x86::have_vaes_avx2()) return reg.register_alg(std::make_shared<VaesXtsAlg>(x86::XtsWidth::Ymm));
    return {};
}

}  // namespace blkcrypt
