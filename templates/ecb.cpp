// ecb(C): electronic codebook mode, every block enciphered on its own (the
// kernel's crypto/ecb.c). Used where the caller supplies its own per-block
// tweak (e.g. as the inner step of a driver) and by tests; on its own it leaks
// equal plaintext blocks, so disk encryption uses xts instead.
//
// Name: ecb(<cipher>), e.g. ecb(aes), ecb(des3_ede). The argument is a single
// block cipher. No IV; the length must be a whole number of blocks.
#include <blkcrypt/internal/template.hpp>
#include <cstdint>

namespace blkcrypt {
namespace {

// A cipher used as an skcipher is ECB already (the type layer's adapter);
// ecb(C) names it, with setkey failures reported as Invalid like the modes.
class EcbTfm final : public SkcipherTfm {
public:
    explicit EcbTfm(const Spawn<CipherAlg>& c) : ecb_(create_skcipher_tfm(c.alg())) {}

    Status setkey(ConstBytes key) override {
        return ecb_->setkey(key) == Status::Ok ? Status::Ok : Status::Invalid;
    }
    Status encrypt(SkcipherRequest& req) const override { return ecb_->encrypt(req); }
    Status decrypt(SkcipherRequest& req) const override { return ecb_->decrypt(req); }

private:
    std::unique_ptr<SkcipherTfm> ecb_;
};

}  // namespace

std::shared_ptr<Template> make_ecb_template() {
    return make_cipher_mode<EcbTfm>({.name = "ecb",
                                     .max_block = SIZE_MAX,
                                     .accepted = "ecb needs one of at least 1 byte",
                                     .adjust = [](AlgInfo& i, const AlgInfo&) { i.ivsize = 0; }});
}

}  // namespace blkcrypt
