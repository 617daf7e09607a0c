// Type-layer adapters: a cipher used as an (ECB) skcipher, and any shash used
// through the ahash interface (the kernel's crypto_init_shash_ops_async).
#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/internal/walk.hpp>

namespace blkcrypt {
namespace {

class CipherSkcipherTfm final : public SkcipherTfm {
public:
    explicit CipherSkcipherTfm(const CipherAlg& alg)
        : cipher_(alg.create_tfm()), bs_(alg.info().blocksize) {}

    Status setkey(ConstBytes key) override { return cipher_->setkey(key); }
    Status encrypt(SkcipherRequest& req) const override { return crypt(req, true); }
    Status decrypt(SkcipherRequest& req) const override { return crypt(req, false); }

private:
    Status crypt(SkcipherRequest& req, bool enc) const {
        if (req.len % bs_) return Status::Invalid;
        for (SgWalk w(req.src, req.dst, req.len, bs_); w.next(); w.done()) {
            if (enc) cipher_->encrypt(w.in(), w.out(), w.len() / bs_);
            else cipher_->decrypt(w.in(), w.out(), w.len() / bs_);
        }
        return Status::Ok;
    }

    std::unique_ptr<CipherTfm> cipher_;
    std::size_t bs_;
};

struct ShashAhashState final : AhashState {
    std::unique_ptr<ShashState> st;
};

class ShashAhashTfm final : public AhashTfm {
public:
    explicit ShashAhashTfm(const ShashAlg& alg)
        : tfm_(alg.create_tfm()), ds_(alg.info().digestsize) {}

    Status setkey(ConstBytes key) override { return tfm_->setkey(key); }
    std::unique_ptr<AhashState> new_state() const override {
        auto s = std::make_unique<ShashAhashState>();
        s->st = tfm_->new_state();
        return s;
    }
    Status init(AhashRequest& req) const override {
        st(req).init();
        return Status::Ok;
    }
    Status update(AhashRequest& req) const override {
        feed(req);
        return Status::Ok;
    }
    Status final(AhashRequest& req) const override {
        st(req).final(req.result.first(ds_));
        return Status::Ok;
    }
    Status finup(AhashRequest& req) const override {
        feed(req);
        return final(req);
    }
    Status digest(AhashRequest& req) const override {
        st(req).init();
        return finup(req);
    }
    Status export_state(const AhashRequest& req, Bytes out) const override {
        static_cast<const ShashAhashState&>(req.state()).st->export_state(out);
        return Status::Ok;
    }
    Status import_state(AhashRequest& req, ConstBytes in) const override {
        return st(req).import_state(in);
    }

private:
    static ShashState& st(AhashRequest& req) {
        return *static_cast<ShashAhashState&>(req.state()).st;
    }
    static void feed(AhashRequest& req) {
        std::size_t left = req.nbytes;
        for (const auto& e : req.src) {
            if (!left) break;
            std::size_t n = e.len < left ? e.len : left;
            st(req).update(ConstBytes(e.data, n));
            left -= n;
        }
    }

    std::unique_ptr<ShashTfm> tfm_;
    std::size_t ds_;
};

}  // namespace

// Registry::lookup only returns an algorithm usable as the type asked for,
// and AlgInfo::type says which class it is: these are the only downcasts.
std::unique_ptr<CipherTfm> create_cipher_tfm(const Alg& alg) {
    return static_cast<const CipherAlg&>(alg).create_tfm();
}

std::unique_ptr<SkcipherTfm> create_skcipher_tfm(const Alg& alg) {
    if (alg.info().type == AlgType::Cipher)
        return std::make_unique<CipherSkcipherTfm>(static_cast<const CipherAlg&>(alg));
    return static_cast<const SkcipherAlg&>(alg).create_tfm();
}

std::unique_ptr<AeadTfm> create_aead_tfm(const Alg& alg) {
    return static_cast<const AeadAlg&>(alg).create_tfm();
}

std::unique_ptr<ShashTfm> create_shash_tfm(const Alg& alg) {
    return static_cast<const ShashAlg&>(alg).create_tfm();
}

std::unique_ptr<AhashTfm> create_ahash_tfm(const Alg& alg) {
    if (alg.info().type == AlgType::Shash)
        return std::make_unique<ShashAhashTfm>(static_cast<const ShashAlg&>(alg));
    return static_cast<const AhashAlg&>(alg).create_tfm();
}

}  // namespace blkcrypt
