// plain(X): IV = LE32 of the low 32 bits of the sector number, zero padded
// (dm-crypt's "plain"; wraps at 2^32 sectors, kept for old volumes).
#include <blkcrypt/internal/geniv.hpp>

namespace blkcrypt {
namespace {
class PlainTfm final : public GenivTfm {
public:
    using GenivTfm::GenivTfm;

private:
    Status pre(GenivUnit& u) const override {
        for (int i = 0; i < 4; ++i) u.iv[i] = static_cast<uint8_t>(u.iv_sector >> (8 * i));
        return Status::Ok;
    }
};
}  // namespace

std::shared_ptr<Template> make_plain_template() {
    return std::make_shared<GenivTemplate>("plain", simple_geniv<PlainTfm>());
}

}  // namespace blkcrypt
