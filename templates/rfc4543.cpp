// rfc4543(G): GMAC for IPsec ESP, RFC 4543 (the kernel's crypto/gcm.c,
// crypto_rfc4543_*), the xfrm algorithm "rfc4543(gcm(aes))": integrity
// without confidentiality.
//
// Name: rfc4543(<gcm aead>), e.g. rfc4543(gcm(aes)). The argument is an aead
// with a 12-byte IV (a gcm instance). Key = the GCM key || a 4-byte salt; the
// IV is the 8-byte ESP IV and the GCM nonce salt || IV. Nothing is
// encrypted: the whole associated data (16 or 20 bytes ending with the IV,
// which here IS authenticated, as in the kernel) and the text form GCM's
// associated data, and the 16-byte tag follows the text.
#include "esp_wrap.hpp"

#include <cstring>

namespace blkcrypt {
namespace {

constexpr std::size_t kSalt = 4;
constexpr std::size_t kInnerIv = kSalt + esp::kIvSize;
constexpr std::size_t kTag = 16;

class Rfc4543Tfm final : public esp::WrapTfm {
public:
    explicit Rfc4543Tfm(std::unique_ptr<AeadTfm> child) : WrapTfm(std::move(child), kSalt) {}

private:
    bool authsize_ok(std::size_t n) const noexcept override {
        return n == kTag;  // RFC 4543 section 3: a full 16-byte ICV
    }

    // crypto_rfc4543_crypt: the inner gcm gets assoc || text as associated
    // data and nothing (encrypt) or just the tag (decrypt) to process. Out of
    // place, the inner gcm copies assoc || text to dst, after verifying.
    Status crypt(AeadRequest& req, std::size_t authsize, bool enc) const override {
        if (!esp::assoclen_ok(req.assoclen)) return Status::Invalid;
        uint8_t iv[kInnerIv];
        std::memcpy(iv, salt(), kSalt);
        std::memcpy(iv + kSalt, req.iv.data(), esp::kIvSize);
        const std::size_t text = enc ? req.cryptlen : req.cryptlen - authsize;
        AeadRequest sub;
        sub.src = req.src;
        sub.dst = req.dst;
        sub.assoclen = req.assoclen + text;
        sub.cryptlen = enc ? 0 : authsize;
        sub.iv = Bytes(iv, sizeof iv);
        sub.flags = req.flags;
        return enc ? child().encrypt(sub, authsize) : child().decrypt(sub, authsize);
    }
};

}  // namespace

std::shared_ptr<Template> make_rfc4543_template() {
    return esp::make_template({"rfc4543", kSalt, kInnerIv, kTag, "gcm (12-byte IV, 16-byte tags)"},
                              [](std::unique_ptr<AeadTfm> child) -> std::unique_ptr<AeadTfm> {
                                  return std::make_unique<Rfc4543Tfm>(std::move(child));
                              });
}

}  // namespace blkcrypt
