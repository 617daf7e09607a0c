// Small helpers shared by the AEAD templates (gcm, ccm, authenc, rfc7539 and
// the rfc4106/rfc4309/rfc4543 wrappers). They used to be copied into each
// template; this is their one home. Internal to templates/, not installed.
#pragma once

#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/internal/walk.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

namespace blkcrypt::aead_util {

// Calls fn(ptr, n) for each contiguous piece of bytes [off, off+len) of sg.
template <class Fn>
void for_each_piece(SgList sg, std::size_t off, std::size_t len, Fn fn) {
    for (const auto& e : sg) {
        if (!len) break;
        if (off >= e.len) {
            off -= e.len;
            continue;
        }
        std::size_t n = std::min(e.len - off, len);
        fn(e.data + off, n);
        len -= n;
        off = 0;
    }
}

// Bytes [0, n) of src to dst.
inline void copy_prefix(SgList dst, SgList src, std::size_t n) {
    for (SgWalk w(src, dst, n, 1); w.next(); w.done()) std::memcpy(w.out(), w.in(), w.len());
}

// The kernel's templates copy the associated data when a request is out of
// place (crypto_authenc_copy_assoc and friends); in place it is already there.
inline void copy_assoc(const AeadRequest& req) {
    if (!sg_same(req.src, req.dst)) copy_prefix(req.dst, req.src, req.assoclen);
}

inline bool equal_ct(const uint8_t* a, const uint8_t* b, std::size_t n) noexcept {
    uint8_t d = 0;
    for (std::size_t i = 0; i < n; ++i) d |= static_cast<uint8_t>(a[i] ^ b[i]);
    return d == 0;
}

// An AEAD tfm whose encryption and decryption are one routine with a
// direction flag (gcm, ccm): the two entry points in one place.
class SymmetricAeadTfm : public AeadTfm {
public:
    Status encrypt(AeadRequest& req, std::size_t authsize) const final { return crypt(req, authsize, true); }
    Status decrypt(AeadRequest& req, std::size_t authsize) const final { return crypt(req, authsize, false); }

private:
    virtual Status crypt(AeadRequest& req, std::size_t authsize, bool enc) const = 0;
};

// The largest tag any AEAD template checks: authenc's HASH_MAX_DIGESTSIZE.
inline constexpr std::size_t kMaxTag = 64;

// Does the authsize-byte tag stored in src at `off` equal `tag`? Constant
// time in the tag bytes.
inline bool tag_matches(SgList src, std::size_t off, const uint8_t* tag, std::size_t authsize) {
    uint8_t given[kMaxTag];
    sg_gather(src, off, Bytes(given, authsize));
    return equal_ct(tag, given, authsize);
}

// "a 16-byte", "an 8-byte": the article for a number said aloud.
inline std::string a_bytes(std::size_t n) {
    const std::string d = std::to_string(n);
    const bool an = d[0] == '8' || n == 11 || n == 18;
    return (an ? "an " : "a ") + d + "-byte";
}

// The template "<name>(<cipher>)" of an aead over one 16-byte-block cipher
// spawn (gcm, ccm), a stream mode taking any length: each tfm is a Tfm built
// around a fresh tfm of that cipher.
template <class Tfm>
class CipherAeadTemplate final : public Template {
public:
    CipherAeadTemplate(std::string_view name, std::size_t ivsize, std::size_t maxauthsize)
        : name_(name), ivsize_(ivsize), maxauthsize_(maxauthsize) {}
    std::string_view name() const override { return name_; }

    Result<std::shared_ptr<Alg>> create(Registry& reg, const AlgName& name) const override {
        const std::string t(name_);
        if (auto r = check_arg_count(name, 1); !r) return r.error();
        auto cipher = grab_spawn(reg, t, name.args()[0], AlgType::Cipher);
        if (!cipher) return cipher.error();
        const AlgInfo& c = (*cipher)->info();
        if (c.blocksize != 16)
            return make_error(Status::Invalid, t + ": cipher '" + c.name + "' has " +
                                                   a_bytes(c.blocksize) + " block; " + t +
                                                   " needs 16");
        AlgInfo info;
        info.module = module;
        set_instance_names(info, t, {cipher->get()});
        info.type = AlgType::Aead;
        info.needs_key = true;
        info.blocksize = 1;  // a stream mode: any length
        info.ivsize = ivsize_;
        info.maxauthsize = maxauthsize_;
        info.min_keysize = c.min_keysize;
        info.max_keysize = c.max_keysize;
        auto alg = std::make_shared<Instance>(info, *cipher);
        return std::shared_ptr<Alg>(alg);
    }

private:
    class Instance final : public AeadAlg {
    public:
        Instance(AlgInfo info, std::shared_ptr<const Alg> cipher)
            : AeadAlg(std::move(info)), cipher_(*this, std::move(cipher)) {}
        std::unique_ptr<AeadTfm> create_tfm() const override {
            return std::make_unique<Tfm>(cipher_.create_tfm());
        }

    private:
        Spawn<CipherAlg> cipher_;
    };

    std::string_view name_;  // a string literal
    std::size_t ivsize_;
    std::size_t maxauthsize_;
};

}  // namespace blkcrypt::aead_util
