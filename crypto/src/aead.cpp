#include <blkcrypt/aead.hpp>
#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/registry.hpp>

#include <cstring>
#include <vector>

namespace blkcrypt {

Result<Aead> Aead::alloc(Registry& reg, std::string_view name) {
    auto alg = reg.lookup(name, AlgType::Aead);
    if (!alg) return alg.error();
    return Aead(AlgRef(*alg), create_aead_tfm(**alg));
}

Aead::Aead(AlgRef ref, std::unique_ptr<AeadTfm> tfm)
    : ref_(std::move(ref)), tfm_(std::move(tfm)), authsize_(ref_.info().maxauthsize),
      keyed_(!ref_.info().needs_key) {}
Aead::Aead(Aead&&) noexcept = default;
Aead& Aead::operator=(Aead&& o) noexcept {
    if (this != &o) rebind(ref_, tfm_, std::move(o.ref_), std::move(o.tfm_));
    authsize_ = o.authsize_;
    keyed_ = o.keyed_;
    return *this;
}
Aead::~Aead() = default;

Status Aead::setkey(ConstBytes key) {
    keyed_ = false;
    Status s = tfm_->setkey(key);
    keyed_ = (s == Status::Ok);
    return s;
}

Status Aead::setauthsize(std::size_t n) {
    if (n > info().maxauthsize) return Status::Invalid;
    Status s = tfm_->setauthsize(n);
    if (s == Status::Ok) authsize_ = n;
    return s;
}

Status Aead::check(const AeadRequest& r, bool enc) const {
    if (!keyed_) return Status::NoKey;
    if (is_async() && !r.complete) return Status::Invalid;  // nobody to tell
    if (r.iv.size() < ivsize()) return Status::Invalid;
    if (!enc && r.cryptlen < authsize_) return Status::Invalid;
    std::size_t out = r.assoclen + (enc ? r.cryptlen + authsize_ : r.cryptlen - authsize_);
    if (sg_total(r.src) < r.assoclen + r.cryptlen || sg_total(r.dst) < out) return Status::Invalid;
    return Status::Ok;
}

Status Aead::encrypt(AeadRequest& req) const {
    if (Status s = check(req, true); s != Status::Ok) return s;
    return tfm_->encrypt(req, authsize_);
}

Status Aead::decrypt(AeadRequest& req) const {
    if (Status s = check(req, false); s != Status::Ok) return s;
    return tfm_->decrypt(req, authsize_);
}

Status Aead::crypt_flat(ConstBytes assoc, ConstBytes in, Bytes out, Bytes iv, bool enc) const {
    if (!enc && in.size() < authsize_) return Status::Invalid;
    std::size_t outlen = enc ? in.size() + authsize_ : in.size() - authsize_;
    if (out.size() < outlen) return Status::Invalid;
    // Separate buffers for assoc||text; the request layout wants them contiguous
    // in the sense of one list, so describe them as two segments.
    std::vector<uint8_t> ad(assoc.begin(), assoc.end());
    SgEntry src[2] = {{ad.data(), ad.size()}, {const_cast<uint8_t*>(in.data()), in.size()}};
    SgEntry dst[2] = {{ad.data(), ad.size()}, {out.data(), outlen}};
    AeadRequest req;
    req.src = SgList(src, 2);
    req.dst = SgList(dst, 2);
    req.assoclen = assoc.size();
    req.cryptlen = in.size();
    req.iv = iv;
    req.flags = kMayBacklog;
    CryptoWait wait;
    if (is_async()) req.complete = wait.callback();
    Status s = wait.wait(enc ? encrypt(req) : decrypt(req));
    if (s != Status::Ok && !out.empty()) std::memset(out.data(), 0, outlen);  // no partial output
    return s;
}

Status Aead::encrypt(ConstBytes assoc, ConstBytes in, Bytes out, Bytes iv) const {
    return crypt_flat(assoc, in, out, iv, true);
}

Status Aead::decrypt(ConstBytes assoc, ConstBytes in, Bytes out, Bytes iv) const {
    return crypt_flat(assoc, in, out, iv, false);
}

}  // namespace blkcrypt
