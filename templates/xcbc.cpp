// xcbc(C): the XCBC-MAC of RFC 3566 (AES-XCBC-MAC-96 for IPsec; the
// kernel's crypto/xcbc.c). IPsec (RFC 3566/4434 PRF) is the user.
//
// Name: xcbc(<cipher>), e.g. xcbc(aes). The argument is a block cipher with
// 16-byte blocks. The MAC is one block (IPsec truncates it to 96 bits itself).
//
// As in the kernel, the key is any key the cipher takes (RFC 3566 itself only
// defines 128-bit AES keys). setkey derives K1 = E_K(0x01..), K2 = E_K(0x02..)
// and K3 = E_K(0x03..), then keys the cipher with K1 for the CBC-MAC. The
// last block is XORed with K2 when complete, or padded with 10..0 and XORed
// with K3.
//
// The running state and its export format (33 bytes) are shared with cmac:
// see cbcmac_state.hpp.
#include "cbcmac_state.hpp"

#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <cstring>
#include <string>

namespace blkcrypt {
namespace {

constexpr std::size_t kBlock = 16;
constexpr std::size_t kStateSize = CbcMacState::statesize(kBlock);

class XcbcTfm final : public ShashTfm {
public:
    explicit XcbcTfm(const Spawn<CipherAlg>& c) : cipher_(c.create_tfm()), k23_(2 * kBlock) {}

    Status setkey(ConstBytes key) override {
        if (cipher_->setkey(key) != Status::Ok) return Status::Invalid;
        uint8_t k1[kBlock];
        uint8_t c[kBlock];
        for (int i = 1; i <= 3; ++i) {
            std::memset(c, i, kBlock);
            cipher_->encrypt(c, i == 1 ? k1 : k23_.data() + (i - 2) * kBlock, 1);
        }
        // Checked at create time: a block-sized key is valid for the cipher.
        Status s = cipher_->setkey(ConstBytes(k1, kBlock));
        secure_wipe(k1, sizeof k1);
        return s == Status::Ok ? Status::Ok : Status::Invalid;
    }

    // K2 finishes a complete last block, K3 a padded one.
    std::unique_ptr<ShashState> new_state() const override {
        return std::make_unique<CbcMacState>(*cipher_, kBlock, k23_.data(), k23_.data() + kBlock);
    }

private:
    std::unique_ptr<CipherTfm> cipher_;  // keyed with K1
    SecureBuffer k23_;                   // K2 || K3
};

}  // namespace

std::shared_ptr<Template> make_xcbc_template() {
    return make_cipher_mode<XcbcTfm>(
        {.name = "xcbc",
         .min_block = kBlock,
         .max_block = kBlock,
         .accepted = "xcbc needs 16",
         .adjust = [](AlgInfo& i, const AlgInfo&) { i.statesize = kStateSize; },
         .check = [](const SpawnRef<CipherAlg>& c) -> Result<void> {
             // The derived K1 (one block) becomes the cipher key.
             uint8_t zero[kBlock] = {};
             if (c.create_tfm()->setkey(zero) != Status::Ok)
                 return make_error(Status::Invalid, "xcbc: cipher '" + c.info().name +
                                                        "' does not take a 16-byte key (needed for K1)");
             return {};
         }});
}

}  // namespace blkcrypt
