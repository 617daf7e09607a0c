// gcm(aes) from OpenSSL's EVP as an aead, driver gcm-aes-openssl: 12-byte IV,
// tags of 4, 8 or 12..16 bytes (the kernel's crypto_gcm_check_authsize).
// Request layout as in aead.hpp: src = assoc || text, dst = assoc || text'
// (|| tag on encrypt); the assoc data is copied to dst when out of place.
// A decrypt whose tag does not match returns BadMsg with the text part of
// dst zeroed: OpenSSL decrypts before it can check, so the plaintext that
// was written is wiped.
#include "ossl_common.hpp"

#include <blkcrypt/internal/walk.hpp>

#include <algorithm>
#include <cstring>

namespace blkcrypt::ossl {
namespace {

constexpr std::size_t kIvSize = 12;
constexpr std::size_t kMaxTag = 16;
constexpr std::size_t kMaxUpdate = std::size_t{1} << 30;  // EVP lengths are int

// out == nullptr: assoc data.
bool update(EVP_CIPHER_CTX* ctx, uint8_t* out, const uint8_t* in, std::size_t n) {
    while (n) {
        const std::size_t k = std::min(n, kMaxUpdate);
        int outl = 0;
        if (EVP_CipherUpdate(ctx, out, &outl, in, static_cast<int>(k)) != 1) return false;
        in += k;
        if (out) out += k;
        n -= k;
    }
    return true;
}

const char* cipher_name(std::size_t keylen) {
    return keylen == 16 ? "AES-128-GCM" : keylen == 24 ? "AES-192-GCM" : keylen == 32 ? "AES-256-GCM" : nullptr;
}

class GcmTfm final : public AeadTfm {
public:
    Status setkey(ConstBytes key) override {
        const char* name = cipher_name(key.size());
        if (!name) return Status::Invalid;
        return key_pools(name, key, false, enc_, &dec_);
    }

    Status setauthsize(std::size_t n) override {
        return n == 4 || n == 8 || (n >= 12 && n <= kMaxTag) ? Status::Ok : Status::Invalid;
    }

    Status encrypt(AeadRequest& req, std::size_t authsize) const override {
        CtxPool::Lease ctx = enc_.acquire();
        if (!ctx) return Status::NoMem;
        const std::size_t textlen = req.cryptlen;
        uint8_t tag[kMaxTag];
        int outl = 0;
        // Final produces no bytes for gcm; tag is a harmless place to point.
        if (!start(ctx.get(), req) || !run(ctx.get(), req, textlen) ||
            EVP_CipherFinal_ex(ctx.get(), tag, &outl) != 1 ||
            EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_GET_TAG, static_cast<int>(authsize), tag) != 1)
            return Status::Invalid;  // only a broken context gets here
        sg_scatter(req.dst, req.assoclen + textlen, ConstBytes(tag, authsize));
        return Status::Ok;
    }

    Status decrypt(AeadRequest& req, std::size_t authsize) const override {
        CtxPool::Lease ctx = dec_.acquire();
        if (!ctx) return Status::NoMem;
        const std::size_t textlen = req.cryptlen - authsize;  // the handle checked cryptlen >= authsize
        // Read the tag before anything is written: in place, dst is src.
        uint8_t tag[kMaxTag];
        sg_gather(req.src, req.assoclen + textlen, Bytes(tag, authsize));
        if (!start(ctx.get(), req) || !run(ctx.get(), req, textlen)) return Status::Invalid;
        int outl = 0;
        if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_SET_TAG, static_cast<int>(authsize), tag) != 1 ||
            EVP_CipherFinal_ex(ctx.get(), tag, &outl) != 1) {
            sg_wipe(req.dst, req.assoclen, textlen);
            return Status::BadMsg;
        }
        return Status::Ok;
    }

private:
    // New IV on a pooled context: OpenSSL resets the GHASH and counter.
    static bool start(EVP_CIPHER_CTX* ctx, const AeadRequest& req) {
        return EVP_CipherInit_ex2(ctx, nullptr, nullptr, req.iv.data(), -1, nullptr) == 1;
    }

    // One walk over assoc || text: the assoc part is authenticated (and
    // copied to dst when out of place), the text part en/decrypted.
    static bool run(EVP_CIPHER_CTX* ctx, AeadRequest& req, std::size_t textlen) {
        const std::size_t total = req.assoclen + textlen;
        for (SgWalk w(req.src, req.dst, total, 1); w.next(); w.done()) {
            const uint8_t* in = w.in();
            uint8_t* out = w.out();
            std::size_t n = w.len();
            if (w.offset() < req.assoclen) {
                const std::size_t a = std::min(n, req.assoclen - w.offset());
                if (!update(ctx, nullptr, in, a)) return false;
                if (out != in) std::memcpy(out, in, a);
                in += a;
                out += a;
                n -= a;
            }
            if (n && !update(ctx, out, in, n)) return false;
        }
        return true;
    }

    CtxPool enc_, dec_;
};

class GcmAlg final : public AeadAlg {
public:
    using AeadAlg::AeadAlg;
    std::unique_ptr<AeadTfm> create_tfm() const override { return std::make_unique<GcmTfm>(); }
};

}  // namespace

std::vector<std::shared_ptr<Alg>> make_aeads() {
    AlgInfo info = provider_info("gcm(aes)", "gcm-aes-openssl", AlgType::Aead);
    info.needs_key = true;
    info.blocksize = 1;  // a stream cipher, as the kernel's gcm
    info.min_keysize = 16;
    info.max_keysize = 32;
    info.ivsize = kIvSize;
    info.maxauthsize = kMaxTag;
    return {std::make_shared<GcmAlg>(std::move(info))};
}

}  // namespace blkcrypt::ossl
