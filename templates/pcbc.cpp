// pcbc(C): propagating cipher block chaining (the kernel's crypto/pcbc.c):
//   C[i] = E(P[i] ^ P[i-1] ^ C[i-1]),  with P[-1] ^ C[-1] = IV
// An error in one ciphertext block garbles every later block. Kept for
// compatibility with formats that use it (Kerberos 4, the kernel's rxrpc with
// pcbc(fcrypt)); nothing new should choose it.
//
// Name: pcbc(<cipher>), e.g. pcbc(aes). The argument is a single block cipher
// of at most 32-byte blocks. IV = one block; whole blocks only. On completion
// req.iv holds P[last] ^ C[last], the chaining value for a following request,
// as the kernel leaves it.
#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/internal/walk.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <cstring>

namespace blkcrypt {
namespace {

constexpr std::size_t kMaxBlock = 32;

class PcbcTfm final : public CipherModeTfm {
public:
    using CipherModeTfm::CipherModeTfm;

private:
    Status crypt(SkcipherRequest& req, bool enc) const override {
        if (req.len % bs_) return Status::Invalid;  // checked before any output
        uint8_t iv[kMaxBlock], in[kMaxBlock], tmp[kMaxBlock];
        std::memcpy(iv, req.iv.data(), bs_);
        for (SgWalk w(req.src, req.dst, req.len, bs_); w.next(); w.done()) {
            const uint8_t* src = w.in();
            uint8_t* dst = w.out();
            for (std::size_t off = 0; off < w.len(); off += bs_) {
                // Copy the input block first: in place, dst overwrites it.
                std::memcpy(in, src + off, bs_);
                if (enc) {
                    xor_into(tmp, in, iv, bs_);
                    cipher_->encrypt(tmp, dst + off, 1);
                } else {
                    cipher_->decrypt(in, tmp, 1);
                    xor_into(dst + off, tmp, iv, bs_);
                }
                xor_into(iv, in, dst + off, bs_);  // P ^ C either way
            }
        }
        std::memcpy(req.iv.data(), iv, bs_);
        secure_wipe(in, sizeof in);
        secure_wipe(tmp, sizeof tmp);
        secure_wipe(iv, sizeof iv);
        return Status::Ok;
    }
};

}  // namespace

std::shared_ptr<Template> make_pcbc_template() {
    return make_cipher_mode<PcbcTfm>({.name = "pcbc", .max_block = kMaxBlock, .accepted = "pcbc supports 1 to 32"});
}

}  // namespace blkcrypt
