// plain64(X): IV = LE64 of the sector number, zero padded (dm-crypt's
// "plain64", the usual choice for xts). Also the base of "essiv": dm-crypt's
// aes-cbc-essiv:sha256 is plain64(essiv(cbc(aes),sha256)).
#include <blkcrypt/internal/geniv.hpp>

namespace blkcrypt {
namespace {
class Plain64Tfm final : public GenivTfm {
public:
    using GenivTfm::GenivTfm;

private:
    Status pre(GenivUnit& u) const override { put_le64(u.iv.data(), u.iv_sector); return Status::Ok; }
};
}  // namespace

std::shared_ptr<Template> make_plain64_template() {
    return std::make_shared<GenivTemplate>("plain64", simple_geniv<Plain64Tfm>());
}

}  // namespace blkcrypt
