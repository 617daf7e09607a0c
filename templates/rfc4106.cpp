// rfc4106(G): GCM for IPsec ESP, RFC 4106 (the kernel's crypto/gcm.c,
// crypto_rfc4106_*). This is what the kernel's xfrm uses for
// "rfc4106(gcm(aes))" security associations.
//
// Name: rfc4106(<gcm aead>), e.g. rfc4106(gcm(aes)). The argument is an aead
// with a 12-byte IV (a gcm instance). Key = the GCM key || a 4-byte salt; the
// IV is the 8-byte ESP IV, and the GCM nonce is salt || IV. As in the kernel
// the associated data is 16 or 20 bytes (SPI, sequence number [, high
// sequence]) followed by the 8 IV bytes, which are passed over: the IV is
// authenticated through the nonce, not as associated data. Tags: 8, 12 or 16.
#include "esp_wrap.hpp"

#include <cstring>

namespace blkcrypt {
namespace {

constexpr std::size_t kSalt = 4;
constexpr std::size_t kInnerIv = kSalt + esp::kIvSize;

class Rfc4106Tfm final : public esp::WrapTfm {
public:
    explicit Rfc4106Tfm(std::unique_ptr<AeadTfm> child) : WrapTfm(std::move(child), kSalt) {}

private:
    // crypto_rfc4106_crypt: the inner request skips the IV at the end of the
    // associated data and takes salt || IV as its nonce.
    Status crypt(AeadRequest& req, std::size_t authsize, bool enc) const override {
        if (!esp::assoclen_ok(req.assoclen)) return Status::Invalid;
        uint8_t iv[kInnerIv];
        std::memcpy(iv, salt(), kSalt);
        std::memcpy(iv + kSalt, req.iv.data(), esp::kIvSize);
        return crypt_skipping_iv(req, authsize, enc, Bytes(iv, sizeof iv));
    }
};

}  // namespace

std::shared_ptr<Template> make_rfc4106_template() {
    return esp::make_template({"rfc4106", kSalt, kInnerIv, 16, "gcm (12-byte IV, 16-byte tags)"},
                              [](std::unique_ptr<AeadTfm> child) -> std::unique_ptr<AeadTfm> {
                                  return std::make_unique<Rfc4106Tfm>(std::move(child));
                              });
}

}  // namespace blkcrypt
