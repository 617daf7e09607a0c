// benbi(X): the last 8 bytes of the IV = BE64 of the 1-based count of
// cipher-block-sized units ((sector << shift) + 1, shift = 9 - log2 blocksize),
// dm-crypt's "benbi", for LRW's narrow-block tweak.
#include <blkcrypt/internal/geniv.hpp>

#include <bit>

namespace blkcrypt {
namespace {
class BenbiTfm final : public GenivTfm {
public:
    BenbiTfm(std::shared_ptr<const Alg> inner, unsigned shift)
        : GenivTfm(std::move(inner)), shift_(shift) {}

private:
    Status pre(GenivUnit& u) const override {
        put_be64(u.iv.data() + inner_ivsize() - 8, (u.iv_sector << shift_) + 1);
        return Status::Ok;
    }
    unsigned shift_;
};
}  // namespace

std::shared_ptr<Template> make_benbi_template() {
    auto prepare = [](Registry&, const Alg& inner, std::vector<std::shared_ptr<const Alg>>&)
        -> Result<GenivTemplate::MakeTfm> {
        std::size_t bs = inner.info().blocksize;
        if (!std::has_single_bit(bs) || bs > 512)
            return make_error(Status::Invalid, "benbi: block size of '" + inner.info().name +
                                                   "' must be a power of two up to 512");
        if (inner.info().ivsize < 8)
            return make_error(Status::Invalid, "benbi: '" + inner.info().name + "' has an IV shorter than 8 bytes");
        unsigned shift = 9 - static_cast<unsigned>(std::countr_zero(bs));
        return GenivTemplate::MakeTfm([shift](std::shared_ptr<const Alg> in) {
            return std::make_unique<BenbiTfm>(std::move(in), shift);
        });
    };
    return std::make_shared<GenivTemplate>("benbi", prepare);
}

}  // namespace blkcrypt
