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
#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace blkcrypt {
namespace {

constexpr std::size_t kSalt = 4;
constexpr std::size_t kIvSize = 8;
constexpr std::size_t kInnerIv = kSalt + kIvSize;

// crypto_ipsec_check_assoclen: ESP headers with 32- or 64-bit sequence
// numbers, each followed by the IV.
bool esp_assoclen(std::size_t n) noexcept { return n == 16 || n == 20; }

// sg with bytes [hole, hole + kIvSize) cut out: what the inner gcm sees.
std::vector<SgEntry> without_iv(SgList sg, std::size_t hole) {
    std::vector<SgEntry> out(sg.size() + 1);
    const std::size_t a = sg_slice(sg, 0, hole, out).size();
    const std::size_t total = sg_total(sg);
    const std::size_t rest = total > hole + kIvSize ? total - hole - kIvSize : 0;
    const std::size_t b = sg_slice(sg, hole + kIvSize, rest, std::span(out).subspan(a)).size();
    out.resize(a + b);
    return out;
}

// "a 16-byte", "an 8-byte": the article for a number said aloud.
std::string a_bytes(std::size_t n) {
    const std::string d = std::to_string(n);
    const bool an = d[0] == '8' || n == 11 || n == 18;
    return (an ? "an " : "a ") + d + "-byte";
}

class Rfc4106Tfm final : public AeadTfm {
public:
    explicit Rfc4106Tfm(std::unique_ptr<AeadTfm> child) : child_(std::move(child)) {}
    ~Rfc4106Tfm() override { secure_wipe(salt_, sizeof salt_); }

    Status setkey(ConstBytes key) override {
        if (key.size() < kSalt) return Status::Invalid;
        std::memcpy(salt_, key.data() + key.size() - kSalt, kSalt);
        return child_->setkey(key.first(key.size() - kSalt));
    }

    Status setauthsize(std::size_t n) override {
        if (n != 8 && n != 12 && n != 16) return Status::Invalid;  // RFC 4106 section 5
        return child_->setauthsize(n);
    }

    Status encrypt(AeadRequest& req, std::size_t authsize) const override {
        return crypt(req, authsize, true);
    }
    Status decrypt(AeadRequest& req, std::size_t authsize) const override {
        return crypt(req, authsize, false);
    }

private:
    // crypto_rfc4106_crypt: the inner request skips the IV at the end of the
    // associated data and takes salt || IV as its nonce.
    Status crypt(AeadRequest& req, std::size_t authsize, bool enc) const {
        if (!esp_assoclen(req.assoclen)) return Status::Invalid;
        const std::size_t hole = req.assoclen - kIvSize;
        uint8_t iv[kInnerIv];
        std::memcpy(iv, salt_, kSalt);
        std::memcpy(iv + kSalt, req.iv.data(), kIvSize);

        const bool in_place = sg_same(req.src, req.dst);
        const auto src = without_iv(req.src, hole);
        const auto dst = in_place ? std::vector<SgEntry>() : without_iv(req.dst, hole);
        AeadRequest sub;
        sub.src = src;
        sub.dst = in_place ? SgList(src) : SgList(dst);
        sub.assoclen = hole;
        sub.cryptlen = req.cryptlen;
        sub.iv = Bytes(iv, sizeof iv);
        sub.flags = req.flags;
        const Status s = enc ? child_->encrypt(sub, authsize) : child_->decrypt(sub, authsize);
        if (s == Status::Ok && !in_place) {
            // The inner aead copied the rest of the associated data.
            uint8_t ivb[kIvSize];
            sg_gather(req.src, hole, Bytes(ivb, kIvSize));
            sg_scatter(req.dst, hole, ConstBytes(ivb, kIvSize));
        }
        return s;
    }

    std::unique_ptr<AeadTfm> child_;
    uint8_t salt_[kSalt] = {};
};

class Rfc4106Alg final : public AeadAlg {
public:
    Rfc4106Alg(AlgInfo info, std::shared_ptr<const Alg> gcm)
        : AeadAlg(std::move(info)), gcm_(std::move(gcm)) {}
    std::unique_ptr<AeadTfm> create_tfm() const override {
        return std::make_unique<Rfc4106Tfm>(static_cast<const AeadAlg&>(*gcm_).create_tfm());
    }

private:
    std::shared_ptr<const Alg> gcm_;
};

class Rfc4106Template final : public Template {
public:
    std::string_view name() const override { return "rfc4106"; }

    Result<std::shared_ptr<Alg>> create(Registry& reg, const AlgName& name) const override {
        if (auto r = check_arg_count(name, 1); !r) return r.error();
        auto gcm = grab_spawn(reg, "rfc4106", name.args()[0], AlgType::Aead);
        if (!gcm) return gcm.error();
        const AlgInfo& g = (*gcm)->info();
        if (g.async)
            return make_error(
                Status::Invalid,
                "rfc4106: '" + g.driver + "' is asynchronous; wrap rfc4106 in cryptd instead");
        if (g.ivsize != kInnerIv || g.blocksize != 1 || g.maxauthsize < 16)
            return make_error(Status::Invalid,
                              "rfc4106: '" + g.name + "' has " + a_bytes(g.ivsize) +
                                  " IV; rfc4106 needs gcm (12-byte IV, 16-byte tags)");
        AlgInfo info;
        info.module = module;
        set_instance_names(info, "rfc4106", {gcm->get()});
        info.type = AlgType::Aead;
        info.needs_key = true;
        info.blocksize = 1;
        info.ivsize = kIvSize;
        info.maxauthsize = 16;
        info.min_keysize = g.min_keysize + kSalt;
        info.max_keysize = g.max_keysize + kSalt;
        auto alg = std::make_shared<Rfc4106Alg>(info, *gcm);
        alg->spawns = {*gcm};
        return std::shared_ptr<Alg>(alg);
    }
};

}  // namespace

std::shared_ptr<Template> make_rfc4106_template() { return std::make_shared<Rfc4106Template>(); }

}  // namespace blkcrypt
