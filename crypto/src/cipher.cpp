#include <blkcrypt/cipher.hpp>
#include <blkcrypt/internal/alg.hpp>

namespace blkcrypt {

Result<Cipher> Cipher::alloc(Registry& reg, std::string_view name) {
    auto alg = reg.lookup(name, AlgType::Cipher);
    if (!alg) return alg.error();
    return Cipher(AlgRef(*alg), create_cipher_tfm(**alg));
}

Cipher::Cipher(AlgRef ref, std::unique_ptr<CipherTfm> tfm)
    : ref_(std::move(ref)), tfm_(std::move(tfm)), keyed_(!ref_.info().needs_key) {}
Cipher::Cipher(Cipher&&) noexcept = default;
Cipher& Cipher::operator=(Cipher&& o) noexcept {
    if (this != &o) rebind(ref_, tfm_, std::move(o.ref_), std::move(o.tfm_));
    keyed_ = o.keyed_;
    return *this;
}
Cipher::~Cipher() = default;

Status Cipher::setkey(ConstBytes key) {
    keyed_ = false;
    Status s = tfm_->setkey(key);
    keyed_ = (s == Status::Ok);
    return s;
}

Status Cipher::encrypt(const uint8_t* in, uint8_t* out, std::size_t nblocks) const {
    if (!keyed_) return Status::NoKey;
    tfm_->encrypt(in, out, nblocks);
    return Status::Ok;
}

Status Cipher::decrypt(const uint8_t* in, uint8_t* out, std::size_t nblocks) const {
    if (!keyed_) return Status::NoKey;
    tfm_->decrypt(in, out, nblocks);
    return Status::Ok;
}

}  // namespace blkcrypt
