// cbc(C): cipher block chaining (the kernel's crypto/cbc.c), NIST SP 800-38A
// section 6.2. dm-crypt's classic "aes-cbc-essiv:sha256" runs on it through
// essiv(cbc(aes),sha256); it is also the mode of LUKS1 volumes.
//
// Name: cbc(<cipher>), e.g. cbc(aes), cbc(des3_ede). The argument is a single
// block cipher of at most 32-byte blocks. IV = one block; the length must be a
// whole number of blocks. On completion req.iv holds the last ciphertext
// block, so a long message can be processed in consecutive requests.
#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/internal/walk.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <algorithm>
#include <cstring>

namespace blkcrypt {
namespace {

constexpr std::size_t kMaxBlock = 32;
constexpr std::size_t kBatchBytes = 512;  // ciphertext kept aside per in-place batch

class CbcTfm final : public CipherModeTfm {
public:
    using CipherModeTfm::CipherModeTfm;

private:
    Status crypt(SkcipherRequest& req, bool enc) const override {
        if (req.len % bs_) return Status::Invalid;  // checked before any output
        uint8_t iv[kMaxBlock];
        std::memcpy(iv, req.iv.data(), bs_);
        for (SgWalk w(req.src, req.dst, req.len, bs_); w.next(); w.done()) {
            if (enc) encrypt_run(w.in(), w.out(), w.len() / bs_, iv);
            else decrypt_run(w.in(), w.out(), w.len() / bs_, iv);
        }
        std::memcpy(req.iv.data(), iv, bs_);
        return Status::Ok;
    }

    // Serial by nature: each block needs the previous ciphertext.
    void encrypt_run(const uint8_t* in, uint8_t* out, std::size_t n, uint8_t* iv) const {
        uint8_t blk[kMaxBlock];
        // bs_ <= kMaxBlock by construction; the bound tells the compiler so.
        const std::size_t bs = std::min(bs_, sizeof blk);
        const uint8_t* prev = iv;
        for (std::size_t i = 0; i < n; ++i, in += bs, out += bs) {
            xor_into(blk, in, prev, bs);  // read in before out is written (in place)
            cipher_->encrypt(blk, out, 1);
            prev = out;
        }
        std::memcpy(iv, prev, bs);
        secure_wipe(blk, sizeof blk);
    }

    // Parallel: decipher a batch of blocks in one call, then XOR each with the
    // ciphertext block before it. In place, that ciphertext is overwritten by
    // the call, so the batch is copied aside first.
    void decrypt_run(const uint8_t* in, uint8_t* out, std::size_t n, uint8_t* iv) const {
        uint8_t saved[kBatchBytes];
        const std::size_t per = kBatchBytes / bs_;
        while (n) {
            const std::size_t k = n < per ? n : per;
            const uint8_t* ct = in;
            if (in == out) {
                std::memcpy(saved, in, k * bs_);
                ct = saved;
            }
            cipher_->decrypt(ct, out, k);
            xor_into(out, out, iv, bs_);
            xor_into(out + bs_, out + bs_, ct, (k - 1) * bs_);
            std::memcpy(iv, ct + (k - 1) * bs_, bs_);
            in += k * bs_;
            out += k * bs_;
            n -= k;
        }
    }
};

}  // namespace

std::shared_ptr<Template> make_cbc_template() {
    return make_cipher_mode<CbcTfm>({.name = "cbc", .max_block = kMaxBlock, .accepted = "cbc supports 1 to 32"});
}

}  // namespace blkcrypt
