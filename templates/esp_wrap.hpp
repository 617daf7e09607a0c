// The machinery shared by the IPsec ESP wrappers rfc4106(gcm), rfc4309(ccm)
// and rfc4543(gcm) (the kernel's crypto_rfc4106_*, crypto_rfc4309_*,
// crypto_rfc4543_*): each wraps an inner aead, takes a salt from the end of
// its key, an 8-byte ESP IV, and 16- or 20-byte associated data that ends
// with that IV. What differs (the inner nonce, the tags allowed, how the
// request is passed on) stays in each template file.
#pragma once

#include <blkcrypt/internal/template.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace blkcrypt::esp {

inline constexpr std::size_t kIvSize = 8;  // the ESP IV
inline constexpr std::size_t kMaxSalt = 4;

// crypto_ipsec_check_assoclen: ESP headers with 32- or 64-bit sequence
// numbers, each followed by the IV.
inline bool assoclen_ok(std::size_t n) noexcept { return n == 16 || n == 20; }

// An aead over an inner aead, keyed with inner key || salt. Subclasses check
// the tag size and build the inner request in crypt().
class WrapTfm : public AeadTfm {
public:
    WrapTfm(std::unique_ptr<AeadTfm> child, std::size_t salt_len)
        : child_(std::move(child)), salt_len_(salt_len) {}
    ~WrapTfm() override;

    Status setkey(ConstBytes key) override;
    Status setauthsize(std::size_t n) override;

    Status encrypt(AeadRequest& req, std::size_t authsize) const override {
        return crypt(req, authsize, true);
    }
    Status decrypt(AeadRequest& req, std::size_t authsize) const override {
        return crypt(req, authsize, false);
    }

protected:
    // ESP's ICV lengths (RFC 4106 section 5, RFC 4309 section 3).
    virtual bool authsize_ok(std::size_t n) const noexcept { return n == 8 || n == 12 || n == 16; }
    virtual Status crypt(AeadRequest& req, std::size_t authsize, bool enc) const = 0;

    const uint8_t* salt() const noexcept { return salt_; }
    const AeadTfm& child() const noexcept { return *child_; }

    // Runs the inner aead with nonce `inner_iv` on req with the IV at the end
    // of the associated data cut out (rfc4106, rfc4309: the IV is
    // authenticated through the nonce). Out of place, copies the IV to dst.
    Status crypt_skipping_iv(AeadRequest& req, std::size_t authsize, bool enc,
                             Bytes inner_iv) const;

private:
    std::unique_ptr<AeadTfm> child_;
    std::size_t salt_len_;
    uint8_t salt_[kMaxSalt] = {};
};

// What a wrapper template needs of its inner aead, and what it offers.
struct Spec {
    std::string_view name;   // "rfc4106"
    std::size_t salt;        // key bytes taken as salt
    std::size_t inner_iv;    // the ivsize the inner aead must have
    std::size_t maxauthsize; // and at least this maxauthsize; ours too
    std::string_view needs;  // for the error: "gcm (12-byte IV, 16-byte tags)"
};

using MakeTfm = std::unique_ptr<AeadTfm> (*)(std::unique_ptr<AeadTfm> child);

// The template "<spec.name>(<inner aead>)", whose tfms make_tfm builds.
std::shared_ptr<Template> make_template(const Spec& spec, MakeTfm make_tfm);

}  // namespace blkcrypt::esp
