// cmac(C): the cipher-based MAC of NIST SP 800-38B / RFC 4493 (OMAC1; the
// kernel's crypto/cmac.c). Used by AES-CMAC users (IEEE 802.11, SMB3, TPM
// sessions) and as a PRF (RFC 4615).
//
// Name: cmac(<cipher>), e.g. cmac(aes), cmac(des3_ede). The argument is a
// block cipher with 8- or 16-byte blocks; the key is the cipher's key and the
// MAC is one block.
//
// CBC-MAC over the message, with the last block XORed with subkey K1 (when
// it is complete) or padded with 10..0 and XORed with K2. K1 and K2 derive
// from L = E_K(0) by doubling in GF(2^b), computed once in setkey.
//
// The running state and its export format (2 * blocksize + 1 bytes) are
// shared with xcbc: see cbcmac_state.hpp.
#include "cbcmac_state.hpp"

#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <string>

namespace blkcrypt {
namespace {

constexpr std::size_t kMaxBlock = CbcMacState::kMaxBlock;

// Multiply by x in GF(2^b), blocks big-endian (SP 800-38B section 6.1).
void gf_double(uint8_t* out, const uint8_t* in, std::size_t bs) noexcept {
    const uint8_t rb = bs == 16 ? 0x87 : 0x1b;  // x^128 + x^7 + x^2 + x + 1; x^64 + x^4 + x^3 + x + 1
    const uint8_t carry = in[0] >> 7;
    for (std::size_t i = 0; i + 1 < bs; ++i) out[i] = static_cast<uint8_t>(in[i] << 1 | in[i + 1] >> 7);
    out[bs - 1] = static_cast<uint8_t>(in[bs - 1] << 1 ^ (carry ? rb : 0));
}

class CmacTfm final : public ShashTfm {
public:
    explicit CmacTfm(const Spawn<CipherAlg>& c)
        : cipher_(c.create_tfm()), bs_(c.info().blocksize), subkeys_(2 * bs_) {}

    Status setkey(ConstBytes key) override {
        if (cipher_->setkey(key) != Status::Ok) return Status::Invalid;
        uint8_t l[kMaxBlock] = {};
        cipher_->encrypt(l, l, 1);
        gf_double(subkeys_.data(), l, bs_);                   // K1
        gf_double(subkeys_.data() + bs_, subkeys_.data(), bs_);  // K2
        secure_wipe(l, sizeof l);
        return Status::Ok;
    }

    // K1 finishes a complete last block, K2 a padded one.
    std::unique_ptr<ShashState> new_state() const override {
        return std::make_unique<CbcMacState>(*cipher_, bs_, subkeys_.data(), subkeys_.data() + bs_);
    }

private:
    std::unique_ptr<CipherTfm> cipher_;
    std::size_t bs_;
    SecureBuffer subkeys_;  // K1 || K2
};

}  // namespace

std::shared_ptr<Template> make_cmac_template() {
    // The subkey polynomials of SP 800-38B exist for 64- and 128-bit blocks only.
    return make_cipher_mode<CmacTfm>({.name = "cmac",
                                      .min_block = 8,
                                      .max_block = 16,
                                      .block_step = 8,
                                      .accepted = "cmac needs 8 or 16",
                                      .adjust = [](AlgInfo& i, const AlgInfo& c) {
                                          i.statesize = CbcMacState::statesize(c.blocksize);
                                      }});
}

}  // namespace blkcrypt
