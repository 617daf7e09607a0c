// ctr(C): counter mode as the kernel's crypto/ctr.c, NIST SP 800-38A section
// 6.5. The IV is the initial counter block, incremented as one big-endian
// integer of the whole block; the key stream is E(counter) and the cipher is
// only ever used forward. The building block of gcm, ccm and rfc3686.
//
// Name: ctr(<cipher>), e.g. ctr(aes). The argument is a single block cipher
// whose block is 4 to 32 bytes and a multiple of 4 (as the kernel requires).
// Any length is accepted (a stream cipher: blocksize 1, chunksize = the
// cipher's block). On completion req.iv holds the next unused counter value,
// as in the kernel; a partial final block still consumes its counter.
#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/internal/walk.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <cstring>

namespace blkcrypt {
namespace {

constexpr std::size_t kMaxBlock = 32;
constexpr std::size_t kBatchBytes = 512;  // key stream made per cipher call

// Big-endian increment of the whole block (the kernel's crypto_inc).
void increment(uint8_t* ctr, std::size_t n) noexcept {
    for (std::size_t i = n; i-- > 0;)
        if (++ctr[i] != 0) break;
}

class CtrTfm final : public CipherModeTfm {
public:
    using CipherModeTfm::CipherModeTfm;

private:
    // Encryption and decryption are the same operation.
    Status crypt(SkcipherRequest& req, bool) const override {
        uint8_t ctr[kMaxBlock];
        uint8_t ks[kBatchBytes];
        std::memcpy(ctr, req.iv.data(), bs_);
        const std::size_t per = kBatchBytes / bs_;
        // Unit = one block: the walker hands whole blocks and, last, the remainder.
        for (SgWalk w(req.src, req.dst, req.len, bs_); w.next(); w.done()) {
            const uint8_t* in = w.in();
            uint8_t* out = w.out();
            std::size_t n = w.len();
            while (n >= bs_) {
                std::size_t k = n / bs_;
                if (k > per) k = per;
                for (std::size_t i = 0; i < k; ++i) {
                    std::memcpy(ks + i * bs_, ctr, bs_);
                    increment(ctr, bs_);
                }
                cipher_->encrypt(ks, ks, k);
                xor_into(out, in, ks, k * bs_);
                in += k * bs_;
                out += k * bs_;
                n -= k * bs_;
            }
            if (n) {  // the final partial block
                cipher_->encrypt(ctr, ks, 1);
                xor_into(out, in, ks, n);
                increment(ctr, bs_);
            }
        }
        std::memcpy(req.iv.data(), ctr, bs_);
        secure_wipe(ks, sizeof ks);
        return Status::Ok;
    }
};

}  // namespace

std::shared_ptr<Template> make_ctr_template() {
    return make_cipher_mode<CtrTfm>({.name = "ctr",
                                     .min_block = 4,
                                     .max_block = kMaxBlock,
                                     .block_step = 4,
                                     .accepted = "ctr needs a multiple of 4 from 4 to 32",
                                     .adjust = [](AlgInfo& i, const AlgInfo&) { i.blocksize = 1; }});
}

}  // namespace blkcrypt
