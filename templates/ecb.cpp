// ecb(C): electronic codebook mode, every block enciphered on its own (the
// kernel's crypto/ecb.c). Used where the caller supplies its own per-block
// tweak (e.g. as the inner step of a driver) and by tests; on its own it leaks
// equal plaintext blocks, so disk encryption uses xts instead.
//
// Name: ecb(<cipher>), e.g. ecb(aes), ecb(des3_ede). The argument is a single
// block cipher. No IV; the length must be a whole number of blocks.
#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/internal/walk.hpp>

namespace blkcrypt {
namespace {

class EcbTfm final : public SkcipherTfm {
public:
    EcbTfm(std::unique_ptr<CipherTfm> cipher, std::size_t bs)
        : cipher_(std::move(cipher)), bs_(bs) {}

    Status setkey(ConstBytes key) override {
        return cipher_->setkey(key) == Status::Ok ? Status::Ok : Status::Invalid;
    }
    Status encrypt(SkcipherRequest& req) const override { return crypt(req, true); }
    Status decrypt(SkcipherRequest& req) const override { return crypt(req, false); }

private:
    Status crypt(SkcipherRequest& req, bool enc) const {
        if (req.len % bs_) return Status::Invalid;  // checked before any output
        // Blocks are independent, so each contiguous run goes to the cipher at once.
        for (SgWalk w(req.src, req.dst, req.len, bs_); w.next(); w.done()) {
            if (enc) cipher_->encrypt(w.in(), w.out(), w.len() / bs_);
            else cipher_->decrypt(w.in(), w.out(), w.len() / bs_);
        }
        return Status::Ok;
    }

    std::unique_ptr<CipherTfm> cipher_;
    std::size_t bs_;
};

class EcbAlg final : public SkcipherAlg {
public:
    EcbAlg(AlgInfo info, std::shared_ptr<const Alg> cipher)
        : SkcipherAlg(std::move(info)), cipher_(std::move(cipher)) {}
    std::unique_ptr<SkcipherTfm> create_tfm() const override {
        return std::make_unique<EcbTfm>(static_cast<const CipherAlg&>(*cipher_).create_tfm(),
                                        cipher_->info().blocksize);
    }

private:
    std::shared_ptr<const Alg> cipher_;
};

class EcbTemplate final : public Template {
public:
    std::string_view name() const override { return "ecb"; }

    Result<std::shared_ptr<Alg>> create(Registry& reg, const AlgName& name) const override {
        if (auto r = check_arg_count(name, 1); !r) return r.error();
        auto cipher = grab_spawn(reg, "ecb", name.args()[0], AlgType::Cipher);
        if (!cipher) return cipher.error();
        const AlgInfo& c = (*cipher)->info();
        if (c.blocksize == 0)
            return make_error(Status::Invalid,
                              "ecb: cipher '" + c.name + "' reports no block size");
        AlgInfo info;
        info.module = module;
        set_instance_names(info, "ecb", {cipher->get()});
        info.type = AlgType::Skcipher;
        info.needs_key = true;
        info.blocksize = c.blocksize;
        info.chunksize = c.blocksize;
        info.min_keysize = c.min_keysize;
        info.max_keysize = c.max_keysize;
        info.ivsize = 0;
        auto alg = std::make_shared<EcbAlg>(info, *cipher);
        alg->spawns = {*cipher};
        return std::shared_ptr<Alg>(alg);
    }
};

}  // namespace

std::shared_ptr<Template> make_ecb_template() { return std::make_shared<EcbTemplate>(); }

}  // namespace blkcrypt
