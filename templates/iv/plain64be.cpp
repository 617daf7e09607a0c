// plain64be(X): IV = BE64 of the sector number in the LAST 8 bytes of the IV,
// the rest zero (dm-crypt's "plain64be").
#include <blkcrypt/internal/geniv.hpp>

namespace blkcrypt {
namespace {
class Plain64beTfm final : public GenivTfm {
public:
    using GenivTfm::GenivTfm;

private:
    Status pre(GenivUnit& u) const override {
        put_be64(u.iv.data() + inner_ivsize() - 8, u.iv_sector);
        return Status::Ok;
    }
};
}  // namespace

std::shared_ptr<Template> make_plain64be_template() {
    auto prepare = [](Registry&, const Alg& inner, std::vector<std::shared_ptr<const Alg>>&)
        -> Result<GenivTemplate::MakeTfm> {
        if (inner.info().ivsize < 8)
            return make_error(Status::Invalid, "plain64be: '" + inner.info().name + "' has an IV shorter than 8 bytes");
        return GenivTemplate::MakeTfm(
            [](std::shared_ptr<const Alg> in) { return std::make_unique<Plain64beTfm>(std::move(in)); });
    };
    return std::make_shared<GenivTemplate>("plain64be", prepare);
}

}  // namespace blkcrypt
