// null(X): an all-zero IV for every sector (dm-crypt's "null"; for
// compatibility with old images, no security).
#include <blkcrypt/internal/geniv.hpp>

namespace blkcrypt {
namespace {
class NullTfm final : public GenivTfm {
public:
    using GenivTfm::GenivTfm;

private:
    Status pre(GenivUnit&) const override { return Status::Ok; }  // the IV buffer is already zero
};
}  // namespace

std::shared_ptr<Template> make_null_template() {
    return std::make_shared<GenivTemplate>("null", simple_geniv<NullTfm>());
}

}  // namespace blkcrypt
