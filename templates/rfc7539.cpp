// rfc7539(chacha20,poly1305): the ChaCha20-Poly1305 AEAD of RFC 7539 (the
// kernel's crypto/chacha20poly1305.c), used by WireGuard-style protocols,
// TLS 1.3 and IPsec (RFC 7634, through the kernel's rfc7539esp).
//
// Name: rfc7539(<stream skcipher>,<poly1305 shash>), e.g.
// rfc7539(chacha20,poly1305). The first argument is a stream cipher with the
// kernel's 16-byte ChaCha IV (LE32 block counter || 96-bit nonce), the second
// a 16-byte Poly1305 that, as the kernel's, takes its one-time key as the
// first 32 bytes of input. Key: 32 bytes; IV: the 12-byte nonce; tag: 16.
//
// Poly1305 key = the first 32 bytes of ChaCha20 block 0; the text is
// encrypted from block 1; tag = Poly1305(assoc || pad16 || ciphertext ||
// pad16 || le64 assoclen || le64 textlen). Decryption checks the tag over src
// first and only then decrypts into dst.
#include "aead_util.hpp"

#include <blkcrypt/internal/bytes_util.hpp>
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

constexpr std::size_t kKey = 32;
constexpr std::size_t kNonce = 12;
constexpr std::size_t kChachaIv = 16;
constexpr std::size_t kPolyKey = 32;
constexpr std::size_t kTag = 16;
// RFC 7539 section 2.8: blocks 1 .. 2^32 - 1 of the 32-bit counter.
constexpr uint64_t kMaxText = ((uint64_t{1} << 32) - 1) * 64;

class Rfc7539Tfm final : public AeadTfm {
public:
    Rfc7539Tfm(std::unique_ptr<SkcipherTfm> chacha, std::unique_ptr<ShashTfm> poly)
        : chacha_(std::move(chacha)), poly_(std::move(poly)) {}

    Status setkey(ConstBytes key) override {
        if (key.size() != kKey) return Status::Invalid;
        return chacha_->setkey(key) == Status::Ok ? Status::Ok : Status::Invalid;
    }

    Status setauthsize(std::size_t n) override {
        return n == kTag ? Status::Ok : Status::Invalid;  // chachapoly_setauthsize
    }

    Status encrypt(AeadRequest& req, std::size_t authsize) const override {
        const std::size_t alen = req.assoclen, tlen = req.cryptlen;
        if (tlen > kMaxText) return Status::Invalid;
        uint8_t pkey[kPolyKey], tag[kTag];
        Status s = poly_key(req, pkey);
        if (s == Status::Ok) {
            copy_assoc(req);
            s = chacha(req, tlen, 1);
        }
        if (s == Status::Ok) {
            mac(pkey, req.dst, alen, tlen, tag);  // over the ciphertext just written
            sg_scatter(req.dst, alen + tlen, ConstBytes(tag, authsize));
        }
        secure_wipe(pkey, sizeof pkey);
        return s;
    }

    Status decrypt(AeadRequest& req, std::size_t authsize) const override {
        const std::size_t alen = req.assoclen, tlen = req.cryptlen - authsize;
        if (tlen > kMaxText) return Status::Invalid;
        uint8_t pkey[kPolyKey], tag[kTag];
        Status s = poly_key(req, pkey);
        if (s == Status::Ok) {
            mac(pkey, req.src, alen, tlen, tag);
            if (!tag_matches(req.src, alen + tlen, tag, authsize))
                s = Status::BadMsg;  // nothing written to dst
        }
        secure_wipe(pkey, sizeof pkey);
        if (s != Status::Ok) return s;
        copy_assoc(req);
        return chacha(req, tlen, 1);
    }

private:
    // The kernel's chacha IV: LE32 block counter || nonce.
    static void chacha_iv(const AeadRequest& req, uint32_t counter, uint8_t iv[kChachaIv]) {
        put_le32(iv, counter);
        std::memcpy(iv + 4, req.iv.data(), kNonce);
    }

    // poly_genkey: the first 32 bytes of key stream block 0.
    Status poly_key(const AeadRequest& req, uint8_t pkey[kPolyKey]) const {
        uint8_t iv[kChachaIv];
        chacha_iv(req, 0, iv);
        std::memset(pkey, 0, kPolyKey);
        SgEntry e{pkey, kPolyKey};
        SkcipherRequest sk;
        sk.src = SgList(&e, 1);
        sk.dst = sk.src;
        sk.len = kPolyKey;
        sk.iv = Bytes(iv, kChachaIv);
        return chacha_->encrypt(sk);
    }

    // The text after the associated data, src to dst, from block `counter`.
    Status chacha(AeadRequest& req, std::size_t tlen, uint32_t counter) const {
        std::vector<SgEntry> s(req.src.size()), d(req.dst.size());
        uint8_t iv[kChachaIv];
        chacha_iv(req, counter, iv);
        SkcipherRequest sk;
        sk.src = sg_slice(req.src, req.assoclen, tlen, s);
        sk.dst = sg_same(req.src, req.dst) ? sk.src : sg_slice(req.dst, req.assoclen, tlen, d);
        sk.len = tlen;
        sk.iv = Bytes(iv, kChachaIv);
        sk.flags = req.flags;
        return chacha_->encrypt(sk);
    }

    // Poly1305 over assoc || pad || ciphertext || pad || lengths, both read
    // from sg (src to verify, dst after encrypting).
    void mac(const uint8_t pkey[kPolyKey], SgList sg, std::size_t alen, std::size_t tlen,
             uint8_t tag[kTag]) const {
        static const uint8_t zeros[16] = {};
        auto st = poly_->new_state();
        st->init();
        st->update(ConstBytes(pkey, kPolyKey));
        for_each_piece(sg, 0, alen, [&](const uint8_t* p, std::size_t n) { st->update({p, n}); });
        st->update(ConstBytes(zeros, (16 - alen % 16) % 16));
        for_each_piece(sg, alen, tlen, [&](const uint8_t* p, std::size_t n) {
            st->update({p, n});
        });
        st->update(ConstBytes(zeros, (16 - tlen % 16) % 16));
        uint8_t lens[16];
        put_le64(lens, alen);
        put_le64(lens + 8, tlen);
        st->update(ConstBytes(lens, sizeof lens));
        st->final(Bytes(tag, kTag));
    }

    std::unique_ptr<SkcipherTfm> chacha_;
    std::unique_ptr<ShashTfm> poly_;
};

class Rfc7539Alg final : public AeadAlg {
public:
    Rfc7539Alg(AlgInfo info, std::shared_ptr<const Alg> chacha, std::shared_ptr<const Alg> poly)
        : AeadAlg(std::move(info)), chacha_(*this, std::move(chacha)), poly_(*this, std::move(poly)) {}
    std::unique_ptr<AeadTfm> create_tfm() const override {
        return std::make_unique<Rfc7539Tfm>(chacha_.create_tfm(), poly_.create_tfm());
    }

private:
    Spawn<SkcipherAlg> chacha_;
    Spawn<ShashAlg> poly_;
};

class Rfc7539Template final : public Template {
public:
    std::string_view name() const override { return "rfc7539"; }

    Result<std::shared_ptr<Alg>> create(Registry& reg, const AlgName& name) const override {
        if (auto r = check_arg_count(name, 2); !r) return r.error();
        auto chacha = grab_spawn(reg, "rfc7539", name.args()[0], AlgType::Skcipher);
        if (!chacha) return chacha.error();
        auto poly = grab_spawn(reg, "rfc7539", name.args()[1], AlgType::Shash);
        if (!poly) return poly.error();
        const AlgInfo& c = (*chacha)->info();
        const AlgInfo& p = (*poly)->info();
        // chachapoly_create's checks: a stream cipher with the ChaCha IV and
        // a 16-byte Poly1305.
        if (c.type != AlgType::Skcipher || c.ivsize != kChachaIv || c.blocksize != 1)
            return make_error(
                Status::Invalid,
                "rfc7539: '" + c.name + "' is not a stream cipher with " + "the 16-byte ChaCha IV");
        if (c.async)
            return make_error(
                Status::Invalid,
                "rfc7539: '" + c.driver + "' is asynchronous; wrap rfc7539 in cryptd instead");
        if (p.type != AlgType::Shash || p.digestsize != kTag || p.needs_key)
            return make_error(Status::Invalid,
                              "rfc7539: '" + p.name + "' has " + a_bytes(p.digestsize) +
                                  " digest; rfc7539 needs an unkeyed 16-byte poly1305");
        AlgInfo info;
        info.module = module;
        set_instance_names(info, "rfc7539", {chacha->get(), poly->get()});
        info.priority = (c.priority + p.priority) / 2;  // chachapoly_create
        info.type = AlgType::Aead;
        info.needs_key = true;
        info.blocksize = 1;
        info.chunksize = c.chunksize;
        info.ivsize = kNonce;
        info.maxauthsize = kTag;
        info.min_keysize = info.max_keysize = kKey;
        auto alg = std::make_shared<Rfc7539Alg>(info, *chacha, *poly);
        return std::shared_ptr<Alg>(alg);
    }
};

}  // namespace

std::shared_ptr<Template> make_rfc7539_template() { return std::make_shared<Rfc7539Template>(); }

}  // namespace blkcrypt
