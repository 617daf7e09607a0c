// authenc(MAC,SKCIPHER): encrypt-then-MAC (the kernel's crypto/authenc.c).
// The AEAD of IPsec ESP with separate algorithms ("authenc(hmac(sha256),
// cbc(aes))") and of dm-crypt/dm-integrity's "capi:authenc(hmac(sha256),
// xts(aes))-random".
//
// Name: authenc(<keyed hash>,<skcipher>), e.g. authenc(hmac(sha1),cbc(aes)).
// The first argument is a keyed shash (a MAC such as hmac(sha256)), the
// second any synchronous skcipher; ivsize is the skcipher's and the tag at
// most the MAC's digest. The key is the kernel's rtattr blob:
//   u16 rta_len = 8, u16 rta_type = 1 (CRYPTO_AUTHENC_KEYA_PARAM), both in
//   host (little-endian) order; __be32 enckeylen; authkey; enckey.
// Encryption: skcipher over the text with the request IV, then tag =
// MAC(assoc || ciphertext) truncated to authsize, appended. Decryption checks
// the tag over src first and only then decrypts into dst.
#include "aead_util.hpp"

#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/internal/walk.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace blkcrypt {
namespace {

using namespace aead_util;  // for_each_piece, copy_assoc, tag_matches, a_bytes

constexpr std::size_t kMaxDigest = 64;  // the kernel's HASH_MAX_DIGESTSIZE
constexpr std::size_t kMaxIv = 32;      // the kernel's MAX_IVLEN in testmgr
constexpr uint16_t kKeyAParam = 1;      // CRYPTO_AUTHENC_KEYA_PARAM
constexpr std::size_t kRtaLen = 8;      // struct rtattr + __be32 enckeylen
static_assert(kMaxDigest <= aead_util::kMaxTag);

class AuthencTfm final : public AeadTfm {
public:
    AuthencTfm(std::unique_ptr<ShashTfm> auth, std::unique_ptr<SkcipherTfm> enc, std::size_t ds,
               std::size_t ivsize)
        : auth_(std::move(auth)), enc_(std::move(enc)), ds_(ds), ivsize_(ivsize) {}

    // crypto_authenc_extractkeys, with its checks.
    Status setkey(ConstBytes key) override {
        if (key.size() < 4) return Status::Invalid;
        const std::size_t rta_len = key[0] | key[1] << 8;
        const unsigned rta_type = key[2] | key[3] << 8;
        // RTA_OK, and a payload of exactly the 4-byte enckeylen parameter.
        if (rta_len < 4 || rta_len > key.size() || rta_type != kKeyAParam || rta_len != kRtaLen)
            return Status::Invalid;
        const std::size_t enckeylen = std::size_t{key[4]} << 24 | std::size_t{key[5]} << 16 |
                                      std::size_t{key[6]} << 8 | key[7];
        const ConstBytes keys = key.subspan(rta_len);
        if (keys.size() < enckeylen) return Status::Invalid;
        const std::size_t authkeylen = keys.size() - enckeylen;
        if (auth_->setkey(keys.first(authkeylen)) != Status::Ok) return Status::Invalid;
        if (enc_->setkey(keys.subspan(authkeylen)) != Status::Ok) return Status::Invalid;
        return Status::Ok;
    }

    Status setauthsize(std::size_t n) override {
        // Any truncation of the MAC (IPsec uses 12 bytes of hmac(sha1)); an
        // empty tag would authenticate nothing.
        return (n >= 1 && n <= ds_) ? Status::Ok : Status::Invalid;
    }

    Status encrypt(AeadRequest& req, std::size_t authsize) const override {
        const std::size_t alen = req.assoclen, tlen = req.cryptlen;
        copy_assoc(req);
        const Status s = skcipher(req, tlen, true);
        if (s != Status::Ok) return s;
        uint8_t tag[kMaxDigest];
        mac(req.dst, alen + tlen, tag);
        sg_scatter(req.dst, alen + tlen, ConstBytes(tag, authsize));
        secure_wipe(tag, sizeof tag);
        return Status::Ok;
    }

    Status decrypt(AeadRequest& req, std::size_t authsize) const override {
        const std::size_t alen = req.assoclen, tlen = req.cryptlen - authsize;
        uint8_t tag[kMaxDigest];
        mac(req.src, alen + tlen, tag);
        const bool ok = tag_matches(req.src, alen + tlen, tag, authsize);
        secure_wipe(tag, sizeof tag);
        if (!ok) return Status::BadMsg;  // nothing written to dst
        copy_assoc(req);
        return skcipher(req, tlen, false);
    }

private:
    // MAC over bytes [0, n) of sg (assoc || ciphertext).
    void mac(SgList sg, std::size_t n, uint8_t out[kMaxDigest]) const {
        auto st = auth_->new_state();
        st->init();
        for_each_piece(sg, 0, n,
                       [&](const uint8_t* p, std::size_t k) { st->update(ConstBytes(p, k)); });
        st->final(Bytes(out, ds_));
    }

    // The text after the associated data, src to dst, with a copy of the
    // request IV (an AEAD IV is not a chaining value to hand back).
    Status skcipher(AeadRequest& req, std::size_t tlen, bool enc) const {
        std::vector<SgEntry> s(req.src.size()), d(req.dst.size());
        uint8_t iv[kMaxIv];
        std::memcpy(iv, req.iv.data(), ivsize_);
        SkcipherRequest sk;
        sk.src = sg_slice(req.src, req.assoclen, tlen, s);
        sk.dst = sg_same(req.src, req.dst) ? sk.src : sg_slice(req.dst, req.assoclen, tlen, d);
        sk.len = tlen;
        sk.iv = Bytes(iv, ivsize_);
        sk.flags = req.flags;
        const Status st = enc ? enc_->encrypt(sk) : enc_->decrypt(sk);
        secure_wipe(iv, sizeof iv);
        return st;
    }

    std::unique_ptr<ShashTfm> auth_;
    std::unique_ptr<SkcipherTfm> enc_;
    std::size_t ds_;
    std::size_t ivsize_;
};

class AuthencAlg final : public AeadAlg {
public:
    AuthencAlg(AlgInfo info, std::shared_ptr<const Alg> auth, std::shared_ptr<const Alg> enc)
        : AeadAlg(std::move(info)), auth_(*this, std::move(auth)), enc_(*this, std::move(enc)) {}
    std::unique_ptr<AeadTfm> create_tfm() const override {
        return std::make_unique<AuthencTfm>(auth_.create_tfm(), enc_.create_tfm(), auth_.info().digestsize,
                                            enc_.info().ivsize);
    }

private:
    Spawn<ShashAlg> auth_;
    Spawn<SkcipherAlg> enc_;
};

class AuthencTemplate final : public Template {
public:
    std::string_view name() const override { return "authenc"; }

    Result<std::shared_ptr<Alg>> create(Registry& reg, const AlgName& name) const override {
        if (auto r = check_arg_count(name, 2); !r) return r.error();
        auto auth = grab_spawn(reg, "authenc", name.args()[0], AlgType::Shash);
        if (!auth) return auth.error();
        auto enc = grab_spawn(reg, "authenc", name.args()[1], AlgType::Skcipher);
        if (!enc) return enc.error();
        const AlgInfo& a = (*auth)->info();
        const AlgInfo& e = (*enc)->info();
        if (a.type != AlgType::Shash)
            return make_error(Status::Invalid,
                              "authenc: '" + a.name + "' is not a synchronous hash");
        if (!a.needs_key)
            return make_error(Status::Invalid,
                              "authenc: '" + a.name +
                                  "' is not a keyed hash; use a MAC such as hmac(" + a.name + ")");
        if (a.digestsize == 0 || a.digestsize > kMaxDigest)
            return make_error(Status::Invalid, "authenc: '" + a.name + "' has " +
                                                   a_bytes(a.digestsize) +
                                                   " digest; authenc supports 1 to 64");
        if (e.async)
            return make_error(
                Status::Invalid,
                "authenc: '" + e.driver + "' is asynchronous; wrap authenc in cryptd instead");
        if (e.ivsize > kMaxIv)
            return make_error(Status::Invalid, "authenc: '" + e.name + "' has " +
                                                   a_bytes(e.ivsize) +
                                                   " IV; authenc supports up to 32");
        AlgInfo info;
        info.module = module;
        set_instance_names(info, "authenc", {auth->get(), enc->get()});
        info.priority = e.priority * 10 + a.priority;  // crypto_authenc_create
        info.type = AlgType::Aead;
        info.needs_key = true;
        info.blocksize = e.blocksize;
        info.chunksize = e.chunksize;
        info.ivsize = e.ivsize;
        info.maxauthsize = a.digestsize;
        // The rtattr key has no fixed size: min/max_keysize stay 0.
        auto alg = std::make_shared<AuthencAlg>(info, *auth, *enc);
        return std::shared_ptr<Alg>(alg);
    }
};

}  // namespace

std::shared_ptr<Template> make_authenc_template() { return std::make_shared<AuthencTemplate>(); }

}  // namespace blkcrypt
