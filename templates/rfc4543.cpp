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
#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <cstring>
#include <string>

namespace blkcrypt {
namespace {

constexpr std::size_t kSalt = 4;
constexpr std::size_t kIvSize = 8;
constexpr std::size_t kInnerIv = kSalt + kIvSize;
constexpr std::size_t kTag = 16;

// crypto_ipsec_check_assoclen: ESP headers with 32- or 64-bit sequence
// numbers, each followed by the IV.
bool esp_assoclen(std::size_t n) noexcept { return n == 16 || n == 20; }

// "a 16-byte", "an 8-byte": the article for a number said aloud.
std::string a_bytes(std::size_t n) {
    const std::string d = std::to_string(n);
    const bool an = d[0] == '8' || n == 11 || n == 18;
    return (an ? "an " : "a ") + d + "-byte";
}

class Rfc4543Tfm final : public AeadTfm {
public:
    explicit Rfc4543Tfm(std::unique_ptr<AeadTfm> child) : child_(std::move(child)) {}
    ~Rfc4543Tfm() override { secure_wipe(salt_, sizeof salt_); }

    Status setkey(ConstBytes key) override {
        if (key.size() < kSalt) return Status::Invalid;
        std::memcpy(salt_, key.data() + key.size() - kSalt, kSalt);
        return child_->setkey(key.first(key.size() - kSalt));
    }

    Status setauthsize(std::size_t n) override {
        if (n != kTag) return Status::Invalid;  // RFC 4543 section 3: a full 16-byte ICV
        return child_->setauthsize(n);
    }

    Status encrypt(AeadRequest& req, std::size_t authsize) const override {
        return crypt(req, authsize, true);
    }
    Status decrypt(AeadRequest& req, std::size_t authsize) const override {
        return crypt(req, authsize, false);
    }

private:
    // crypto_rfc4543_crypt: the inner gcm gets assoc || text as associated
    // data and nothing (encrypt) or just the tag (decrypt) to process. Out of
    // place, the inner gcm copies assoc || text to dst, after verifying.
    Status crypt(AeadRequest& req, std::size_t authsize, bool enc) const {
        if (!esp_assoclen(req.assoclen)) return Status::Invalid;
        uint8_t iv[kInnerIv];
        std::memcpy(iv, salt_, kSalt);
        std::memcpy(iv + kSalt, req.iv.data(), kIvSize);
        const std::size_t text = enc ? req.cryptlen : req.cryptlen - authsize;
        AeadRequest sub;
        sub.src = req.src;
        sub.dst = req.dst;
        sub.assoclen = req.assoclen + text;
        sub.cryptlen = enc ? 0 : authsize;
        sub.iv = Bytes(iv, sizeof iv);
        sub.flags = req.flags;
        return enc ? child_->encrypt(sub, authsize) : child_->decrypt(sub, authsize);
    }

    std::unique_ptr<AeadTfm> child_;
    uint8_t salt_[kSalt] = {};
};

class Rfc4543Alg final : public AeadAlg {
public:
    Rfc4543Alg(AlgInfo info, std::shared_ptr<const Alg> gcm)
        : AeadAlg(std::move(info)), gcm_(std::move(gcm)) {}
    std::unique_ptr<AeadTfm> create_tfm() const override {
        return std::make_unique<Rfc4543Tfm>(static_cast<const AeadAlg&>(*gcm_).create_tfm());
    }

private:
    std::shared_ptr<const Alg> gcm_;
};

class Rfc4543Template final : public Template {
public:
    std::string_view name() const override { return "rfc4543"; }

    Result<std::shared_ptr<Alg>> create(Registry& reg, const AlgName& name) const override {
        if (auto r = check_arg_count(name, 1); !r) return r.error();
        auto gcm = grab_spawn(reg, "rfc4543", name.args()[0], AlgType::Aead);
        if (!gcm) return gcm.error();
        const AlgInfo& g = (*gcm)->info();
        if (g.async)
            return make_error(
                Status::Invalid,
                "rfc4543: '" + g.driver + "' is asynchronous; wrap rfc4543 in cryptd instead");
        if (g.ivsize != kInnerIv || g.blocksize != 1 || g.maxauthsize < kTag)
            return make_error(Status::Invalid,
                              "rfc4543: '" + g.name + "' has " + a_bytes(g.ivsize) +
                                  " IV; rfc4543 needs gcm (12-byte IV, 16-byte tags)");
        AlgInfo info;
        info.module = module;
        set_instance_names(info, "rfc4543", {gcm->get()});
        info.type = AlgType::Aead;
        info.needs_key = true;
        info.blocksize = 1;
        info.ivsize = kIvSize;
        info.maxauthsize = kTag;
        info.min_keysize = g.min_keysize + kSalt;
        info.max_keysize = g.max_keysize + kSalt;
        auto alg = std::make_shared<Rfc4543Alg>(info, *gcm);
        alg->spawns = {*gcm};
        return std::shared_ptr<Alg>(alg);
    }
};

}  // namespace

std::shared_ptr<Template> make_rfc4543_template() { return std::make_shared<Rfc4543Template>(); }

}  // namespace blkcrypt
