#include "alg_record.hpp"

#include <blkcrypt/ahash.hpp>
#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/registry.hpp>

namespace blkcrypt {

AhashRequest::AhashRequest(std::unique_ptr<AhashState> st) : st_(std::move(st)) {}
AhashRequest::AhashRequest(AhashRequest&&) noexcept = default;
AhashRequest& AhashRequest::operator=(AhashRequest&&) noexcept = default;
AhashRequest::~AhashRequest() = default;

Result<Ahash> Ahash::alloc(Registry& reg, std::string_view name) {
    auto alg = reg.lookup(name, AlgType::Ahash);
    if (!alg) return alg.error();
    auto tfm = create_ahash_tfm(**alg);
    return Ahash(AlgRef(*alg), std::move(tfm));
}

const std::string& Ahash::computes() const noexcept {
    const std::string& tested_as = detail::record_of(ref_.alg()).test_name;
    return tested_as.empty() ? info().name : tested_as;
}

Ahash::Ahash(AlgRef ref, std::unique_ptr<AhashTfm> tfm)
    : ref_(std::move(ref)), tfm_(std::move(tfm)), keyed_(!ref_.info().needs_key) {}
Ahash::Ahash(Ahash&&) noexcept = default;
Ahash& Ahash::operator=(Ahash&& o) noexcept {
    if (this != &o) rebind(ref_, tfm_, std::move(o.ref_), std::move(o.tfm_));
    keyed_ = o.keyed_;
    return *this;
}
Ahash::~Ahash() = default;

Status Ahash::setkey(ConstBytes key) {
    Status s = tfm_->setkey(key);
    if (s == Status::Ok) keyed_ = true;
    else if (info().needs_key) keyed_ = false;
    return s;
}

Result<AhashRequest> Ahash::new_request() const {
    if (!keyed_) return make_error(Status::NoKey, "'" + info().driver + "' needs a key");
    return AhashRequest(tfm_->new_state());
}

Status Ahash::check(const AhashRequest& r, bool needs_src, bool needs_result) const {
    if (!keyed_) return Status::NoKey;
    if (is_async() && !r.complete) return Status::Invalid;  // nobody to tell
    if (needs_src && sg_total(r.src) < r.nbytes) return Status::Invalid;
    if (needs_result && r.result.size() < digestsize()) return Status::Invalid;
    return Status::Ok;
}

Status Ahash::init(AhashRequest& req) const {
    if (Status s = check(req, false, false); s != Status::Ok) return s;
    return tfm_->init(req);
}

Status Ahash::update(AhashRequest& req) const {
    if (Status s = check(req, true, false); s != Status::Ok) return s;
    return tfm_->update(req);
}

Status Ahash::final(AhashRequest& req) const {
    if (Status s = check(req, false, true); s != Status::Ok) return s;
    return tfm_->final(req);
}

Status Ahash::finup(AhashRequest& req) const {
    if (Status s = check(req, true, true); s != Status::Ok) return s;
    return tfm_->finup(req);
}

Status Ahash::digest(AhashRequest& req) const {
    if (Status s = check(req, true, true); s != Status::Ok) return s;
    return tfm_->digest(req);
}

Status Ahash::export_state(const AhashRequest& req, Bytes out) const {
    if (statesize() == 0) return Status::Unsupported;
    if (out.size() < statesize()) return Status::Invalid;
    return tfm_->export_state(req, out.first(statesize()));
}

Status Ahash::import_state(AhashRequest& req, ConstBytes in) const {
    if (statesize() == 0) return Status::Unsupported;
    if (in.size() != statesize()) return Status::Invalid;
    return tfm_->import_state(req, in);
}

Status Ahash::digest(ConstBytes data, Bytes out) const {
    auto req = new_request();
    if (!req) return req.status();
    SgEntry e{const_cast<uint8_t*>(data.data()), data.size()};
    req->src = SgList(&e, 1);
    req->nbytes = data.size();
    req->result = out;
    req->flags = kMayBacklog;
    CryptoWait wait;
    if (is_async()) req->complete = wait.callback();
    return wait.wait(digest(*req));
}

}  // namespace blkcrypt
