// rfc4309(C): CCM for IPsec ESP, RFC 4309 (the kernel's crypto/ccm.c,
// crypto_rfc4309_*), the xfrm algorithm "rfc4309(ccm(aes))".
//
// Name: rfc4309(<ccm aead>), e.g. rfc4309(ccm(aes)). The argument is an aead
// taking the kernel's 16-byte CCM counter-block IV (a ccm instance). Key =
// the CCM key || a 3-byte salt; the IV is the 8-byte ESP IV; the CCM nonce is
// salt || IV with a 4-byte length field (L = 4). As in the kernel the
// associated data is 16 or 20 bytes followed by the 8 IV bytes, which are
// passed over. Tags: 8, 12 or 16 bytes.
#include "esp_wrap.hpp"

#include <cstring>

namespace blkcrypt {
namespace {

constexpr std::size_t kSalt = 3;
constexpr std::size_t kInnerIv = 16;

class Rfc4309Tfm final : public esp::WrapTfm {
public:
    explicit Rfc4309Tfm(std::unique_ptr<AeadTfm> child) : WrapTfm(std::move(child), kSalt) {}

private:
    // crypto_rfc4309_crypt: counter block L'=3 || salt || IV || counter.
    Status crypt(AeadRequest& req, std::size_t authsize, bool enc) const override {
        if (!esp::assoclen_ok(req.assoclen)) return Status::Invalid;
        uint8_t iv[kInnerIv] = {};
        iv[0] = 3;  // L - 1, L = 4
        std::memcpy(iv + 1, salt(), kSalt);
        std::memcpy(iv + 1 + kSalt, req.iv.data(), esp::kIvSize);
        return crypt_skipping_iv(req, authsize, enc, Bytes(iv, sizeof iv));
    }
};

}  // namespace

std::shared_ptr<Template> make_rfc4309_template() {
    return esp::make_template({"rfc4309", kSalt, kInnerIv, 16, "ccm (16-byte IV, 16-byte tags)"},
                              [](std::unique_ptr<AeadTfm> child) -> std::unique_ptr<AeadTfm> {
                                  return std::make_unique<Rfc4309Tfm>(std::move(child));
                              });
}

}  // namespace blkcrypt
