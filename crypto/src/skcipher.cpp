#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/skcipher.hpp>

namespace blkcrypt {

Result<Skcipher> Skcipher::alloc(Registry& reg, std::string_view name) {
    auto alg = reg.lookup(name, AlgType::Skcipher);
    if (!alg) return alg.error();
    auto tfm = create_skcipher_tfm(**alg);
    return Skcipher(AlgRef(*alg), std::move(tfm));
}

Skcipher::Skcipher(AlgRef ref, std::unique_ptr<SkcipherTfm> tfm)
    : ref_(std::move(ref)), tfm_(std::move(tfm)), keyed_(!ref_.info().needs_key) {}
Skcipher::Skcipher(Skcipher&&) noexcept = default;
Skcipher& Skcipher::operator=(Skcipher&& o) noexcept {
    if (this != &o) rebind(ref_, tfm_, std::move(o.ref_), std::move(o.tfm_));
    keyed_ = o.keyed_;
    return *this;
}
Skcipher::~Skcipher() = default;

Status Skcipher::setkey(ConstBytes key) {
    keyed_ = false;
    Status s = tfm_->setkey(key);
    keyed_ = (s == Status::Ok);
    return s;
}

Status Skcipher::set_sector_params(const SectorParams& p) {
    keyed_ = !info().needs_key;  // the key split may change: set it again
    return tfm_->set_sector_params(p);
}

Status Skcipher::check(const SkcipherRequest& r) const {
    if (!keyed_) return Status::NoKey;
    if (is_async() && !r.complete) return Status::Invalid;  // nobody to tell
    if (r.iv.size() < ivsize()) return Status::Invalid;
    if (sg_total(r.src) < r.len || sg_total(r.dst) < r.len) return Status::Invalid;
    return Status::Ok;
}

Status Skcipher::encrypt(SkcipherRequest& req) const {
    if (Status s = check(req); s != Status::Ok) return s;
    return tfm_->encrypt(req);
}

Status Skcipher::decrypt(SkcipherRequest& req) const {
    if (Status s = check(req); s != Status::Ok) return s;
    return tfm_->decrypt(req);
}

Status Skcipher::crypt_flat(ConstBytes in, Bytes out, Bytes iv, bool enc) const {
    if (out.size() < in.size()) return Status::Invalid;
    // The source is only read (unless it is also the destination).
    SgEntry src{const_cast<uint8_t*>(in.data()), in.size()};
    SgEntry dst{out.data(), in.size()};
    SkcipherRequest req;
    req.src = SgList(&src, 1);
    req.dst = SgList(&dst, 1);
    req.len = in.size();
    req.iv = iv;
    req.flags = kMayBacklog;
    CryptoWait wait;
    if (is_async()) req.complete = wait.callback();
    return wait.wait(enc ? encrypt(req) : decrypt(req));
}

Status Skcipher::encrypt(ConstBytes in, Bytes out, Bytes iv) const {
    return crypt_flat(in, out, iv, true);
}

Status Skcipher::decrypt(ConstBytes in, Bytes out, Bytes iv) const {
    return crypt_flat(in, out, iv, false);
}

}  // namespace blkcrypt
