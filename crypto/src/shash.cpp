#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>

namespace blkcrypt {

Result<Shash> Shash::alloc(Registry& reg, std::string_view name) {
    auto alg = reg.lookup(name, AlgType::Shash);
    if (!alg) return alg.error();
    return Shash(AlgRef(*alg), static_cast<const ShashAlg&>(**alg).create_tfm());
}

Shash::Shash(AlgRef ref, std::unique_ptr<ShashTfm> tfm)
    : ref_(std::move(ref)), tfm_(std::move(tfm)), keyed_(!ref_.info().needs_key) {}
Shash::Shash(Shash&&) noexcept = default;
Shash& Shash::operator=(Shash&&) noexcept = default;
Shash::~Shash() = default;

Status Shash::setkey(ConstBytes key) {
    Status s = tfm_->setkey(key);
    if (s == Status::Ok) keyed_ = true;
    else if (info().needs_key) keyed_ = false;
    return s;
}

Status Shash::digest(ConstBytes data, Bytes out) const {
    if (!keyed_) return Status::NoKey;
    if (out.size() < digestsize()) return Status::Invalid;
    tfm_->digest(data, out.first(digestsize()));
    return Status::Ok;
}

Result<ShashDesc> Shash::new_desc() const {
    if (!keyed_) return make_error(Status::NoKey, "'" + info().driver + "' needs a key");
    return ShashDesc(tfm_->new_state(), &info());
}

ShashDesc::ShashDesc(std::unique_ptr<ShashState> st, const AlgInfo* info)
    : st_(std::move(st)), info_(info) {}
ShashDesc::ShashDesc(ShashDesc&&) noexcept = default;
ShashDesc& ShashDesc::operator=(ShashDesc&&) noexcept = default;
ShashDesc::~ShashDesc() = default;

std::size_t ShashDesc::digestsize() const noexcept { return info_->digestsize; }
std::size_t ShashDesc::statesize() const noexcept { return info_->statesize; }

Status ShashDesc::init() {
    st_->init();
    return Status::Ok;
}

Status ShashDesc::update(ConstBytes data) {
    st_->update(data);
    return Status::Ok;
}

Status ShashDesc::final(Bytes out) {
    if (out.size() < digestsize()) return Status::Invalid;
    st_->final(out.first(digestsize()));
    return Status::Ok;
}

Status ShashDesc::finup(ConstBytes data, Bytes out) {
    if (out.size() < digestsize()) return Status::Invalid;
    st_->finup(data, out.first(digestsize()));
    return Status::Ok;
}

Status ShashDesc::digest(ConstBytes data, Bytes out) {
    if (out.size() < digestsize()) return Status::Invalid;
    st_->init();
    st_->finup(data, out.first(digestsize()));
    return Status::Ok;
}

Status ShashDesc::export_state(Bytes out) const {
    if (statesize() == 0) return Status::Unsupported;
    if (out.size() < statesize()) return Status::Invalid;
    st_->export_state(out.first(statesize()));
    return Status::Ok;
}

Status ShashDesc::import_state(ConstBytes in) {
    if (statesize() == 0) return Status::Unsupported;
    if (in.size() != statesize()) return Status::Invalid;
    return st_->import_state(in);
}

}  // namespace blkcrypt
