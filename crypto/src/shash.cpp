#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/shash.hpp>

#include <algorithm>
#include <array>
#include <vector>

namespace blkcrypt {

Result<Shash> Shash::alloc(Registry& reg, std::string_view name) {
    auto alg = reg.lookup(name, AlgType::Shash);
    if (!alg) return alg.error();
    return Shash(AlgRef(*alg), create_shash_tfm(**alg));
}

Shash::Shash(AlgRef ref, std::unique_ptr<ShashTfm> tfm)
    : ref_(std::move(ref)), tfm_(std::move(tfm)), keyed_(!ref_.info().needs_key) {}
Shash::Shash(Shash&&) noexcept = default;
Shash& Shash::operator=(Shash&& o) noexcept {
    if (this != &o) rebind(ref_, tfm_, std::move(o.ref_), std::move(o.tfm_));
    keyed_ = o.keyed_;
    return *this;
}
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

void ShashDesc::init() { st_->init(); }

void ShashDesc::update(ConstBytes data) { st_->update(data); }

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

Status ShashDesc::finup_mb(std::span<const ConstBytes> data, std::span<const Bytes> out) {
    if (data.size() != out.size()) return Status::Invalid;
    if (data.empty()) return Status::Ok;
    if (statesize() == 0) return Status::Unsupported;
    for (std::size_t i = 0; i < data.size(); ++i)
        if (data[i].size() != data[0].size() || out[i].size() < digestsize())
            return Status::Invalid;
    if (st_->finup_mb(data.data(), out.data(), data.size())) return Status::Ok;
    // The kernel's verity fast path: one export, then import + finup per message.
    std::array<uint8_t, 512> small;
    std::vector<uint8_t> large;
    Bytes saved = statesize() <= small.size() ? Bytes(small).first(statesize())
                                              : Bytes(large = std::vector<uint8_t>(statesize()));
    st_->export_state(saved);
    for (std::size_t i = 0; i < data.size(); ++i) {
        if (i > 0) {
            Status s = st_->import_state(saved);
            if (s != Status::Ok) return s;
        }
        st_->finup(data[i], out[i].first(digestsize()));
    }
    Status s = st_->import_state(saved);
    secure_wipe(saved.data(), saved.size());  // a keyed hash's state is key material
    return s;
}

unsigned ShashDesc::mb_width() const noexcept { return st_->mb_width(); }

Status ShashDesc::chain(Bytes msg, uint64_t rounds) {
    const std::size_t d = digestsize();
    if (d == 0 || msg.size() < d + 8) return Status::Invalid;
    auto set_counter = [&](uint64_t c) {
        for (int b = 0; b < 8; ++b) msg[msg.size() - 8 + b] = static_cast<uint8_t>(c >> (8 * b));
    };
    set_counter(0);
    if (st_->chain(msg, rounds)) return Status::Ok;
    // A driver may write its digest before it has read all its input: never in place.
    std::array<uint8_t, 64> small;
    std::vector<uint8_t> large;
    Bytes next = d <= small.size() ? Bytes(small).first(d) : Bytes(large = std::vector<uint8_t>(d));
    for (uint64_t i = 0; i < rounds; ++i) {
        st_->init();
        st_->finup(msg, next);
        std::copy(next.begin(), next.end(), msg.begin());
        set_counter(i + 1);
    }
    secure_wipe(next.data(), next.size());
    return Status::Ok;
}

}  // namespace blkcrypt
