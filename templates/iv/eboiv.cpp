// eboiv(X): encrypted byte-offset IV (dm-crypt's "eboiv", crypt_iv_eboiv_*;
// BitLocker without the diffuser).
//
// IV = X_K(one zero block, IV = LE64(iv_sector * sector_size) zero padded):
// for cbc, AES_K(byte offset). As in the kernel it is computed with the
// first transform (any_tfm(cc), key 0) whatever key the data unit uses, and
// X's block size must equal its IV size.
#include <blkcrypt/internal/geniv.hpp>

#include <cstring>

namespace blkcrypt {

namespace {

class EboivTfm final : public GenivTfm {
public:
    using GenivTfm::GenivTfm;

private:
    Status pre(GenivUnit& u) const override {
        const std::size_t n = inner_ivsize();
        uint8_t zero[kGenivMaxIv] = {}, buf[kGenivMaxIv] = {};
        put_le64(buf, u.iv_sector * params().sector_size);
        return inner_crypt(0, ConstBytes(zero, n), u.iv.first(n), Bytes(buf, n), true);
    }
};

}  // namespace

// Also elephant's rule (crypt_iv_eboiv_ctr): X's block size equals its IV size.
Result<void> eboiv_check_inner(std::string_view tmpl, const AlgInfo& in) {
    if (in.ivsize < 8 || in.blocksize != in.ivsize)
        return make_error(Status::Invalid, std::string(tmpl) + ": block size of '" + in.name + "' (" +
                                               std::to_string(in.blocksize) + ") does not match its IV size (" +
                                               std::to_string(in.ivsize) + "); expected a mode such as cbc(aes)");
    return {};
}

std::shared_ptr<Template> make_eboiv_template() {
    auto prepare = [](Registry&, const Alg& inner, std::vector<std::shared_ptr<const Alg>>&)
        -> Result<GenivTemplate::MakeTfm> {
        if (auto r = eboiv_check_inner("eboiv", inner.info()); !r) return r.error();
        return GenivTemplate::MakeTfm(
            [](std::shared_ptr<const Alg> in) { return std::make_unique<EboivTfm>(std::move(in)); });
    };
    return std::make_shared<GenivTemplate>("eboiv", prepare);
}

}  // namespace blkcrypt
