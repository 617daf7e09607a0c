// The machinery shared by rfc4106, rfc4309 and rfc4543; see esp_wrap.hpp.
#include "esp_wrap.hpp"

#include "aead_util.hpp"

#include <blkcrypt/secure_buffer.hpp>

#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace blkcrypt::esp {
namespace {

// sg with bytes [hole, hole + kIvSize) cut out: what the inner aead sees.
std::vector<SgEntry> without_iv(SgList sg, std::size_t hole) {
    std::vector<SgEntry> out(sg.size() + 1);
    const std::size_t a = sg_slice(sg, 0, hole, out).size();
    const std::size_t total = sg_total(sg);
    const std::size_t rest = total > hole + kIvSize ? total - hole - kIvSize : 0;
    const std::size_t b = sg_slice(sg, hole + kIvSize, rest, std::span(out).subspan(a)).size();
    out.resize(a + b);
    return out;
}

}  // namespace

WrapTfm::~WrapTfm() { secure_wipe(salt_, sizeof salt_); }

Status WrapTfm::setkey(ConstBytes key) {
    if (key.size() < salt_len_) return Status::Invalid;
    std::memcpy(salt_, key.data() + key.size() - salt_len_, salt_len_);
    return child_->setkey(key.first(key.size() - salt_len_));
}

Status WrapTfm::setauthsize(std::size_t n) {
    if (!authsize_ok(n)) return Status::Invalid;
    return child_->setauthsize(n);
}

Status WrapTfm::crypt_skipping_iv(AeadRequest& req, std::size_t authsize, bool enc,
                                  Bytes inner_iv) const {
    const std::size_t hole = req.assoclen - kIvSize;
    const bool in_place = sg_same(req.src, req.dst);
    const auto src = without_iv(req.src, hole);
    const auto dst = in_place ? std::vector<SgEntry>() : without_iv(req.dst, hole);
    AeadRequest sub;
    sub.src = src;
    sub.dst = in_place ? SgList(src) : SgList(dst);
    sub.assoclen = hole;
    sub.cryptlen = req.cryptlen;
    sub.iv = inner_iv;
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

namespace {

class WrapAlg final : public AeadAlg {
public:
    WrapAlg(AlgInfo info, std::shared_ptr<const Alg> inner, MakeTfm make_tfm)
        : AeadAlg(std::move(info)), inner_(*this, std::move(inner)), make_tfm_(make_tfm) {}
    std::unique_ptr<AeadTfm> create_tfm() const override { return make_tfm_(inner_.create_tfm()); }

private:
    Spawn<AeadAlg> inner_;
    MakeTfm make_tfm_;
};

class WrapTemplate final : public Template {
public:
    WrapTemplate(const Spec& spec, MakeTfm make_tfm) : spec_(spec), make_tfm_(make_tfm) {}
    std::string_view name() const override { return spec_.name; }

    Result<std::shared_ptr<Alg>> create(Registry& reg, const AlgName& name) const override {
        const std::string t(spec_.name);
        if (auto r = check_arg_count(name, 1); !r) return r.error();
        auto inner = grab_spawn(reg, t, name.args()[0], AlgType::Aead);
        if (!inner) return inner.error();
        const AlgInfo& g = (*inner)->info();
        if (g.async)
            return make_error(Status::Invalid, t + ": '" + g.driver + "' is asynchronous; wrap " +
                                                   t + " in cryptd instead");
        if (g.ivsize != spec_.inner_iv || g.blocksize != 1 || g.maxauthsize < spec_.maxauthsize)
            return make_error(Status::Invalid, t + ": '" + g.name + "' has " +
                                                   aead_util::a_bytes(g.ivsize) + " IV; " + t +
                                                   " needs " + std::string(spec_.needs));
        AlgInfo info;
        info.module = module;
        set_instance_names(info, t, {inner->get()});
        info.type = AlgType::Aead;
        info.needs_key = true;
        info.blocksize = 1;
        info.ivsize = kIvSize;
        info.maxauthsize = spec_.maxauthsize;
        info.min_keysize = g.min_keysize + spec_.salt;
        info.max_keysize = g.max_keysize + spec_.salt;
        auto alg = std::make_shared<WrapAlg>(info, *inner, make_tfm_);
        return std::shared_ptr<Alg>(alg);
    }

private:
    Spec spec_;
    MakeTfm make_tfm_;
};

}  // namespace

std::shared_ptr<Template> make_template(const Spec& spec, MakeTfm make_tfm) {
    return std::make_shared<WrapTemplate>(spec, make_tfm);
}

}  // namespace blkcrypt::esp
