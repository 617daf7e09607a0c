// kw(C): AES key wrap, RFC 3394 / NIST SP 800-38F KW (the kernel's former
// crypto/keywrap.c). FileVault 2 wraps its keys this way.
//
// Name: kw(<cipher>), e.g. kw(aes). The argument is a cipher of 16-byte
// blocks. The data are n >= 2 semiblocks (8 bytes each); the 8-byte IV is the
// integrity value A, as in the kernel: encrypt starts from the default
// A6A6A6A6A6A6A6A6 and leaves the final A (the wrapped key's first semiblock)
// in req.iv; decrypt takes that A in req.iv and returns BadMsg, with the
// output zeroed, when the unwrapped A is not the default value.
#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/sg.hpp>

#include <cstring>

namespace blkcrypt {
namespace {

constexpr std::size_t kSemi = 8;
constexpr uint64_t kDefaultIv = 0xA6A6A6A6A6A6A6A6ull;

class KwTfm final : public CipherModeTfm {
public:
    using CipherModeTfm::CipherModeTfm;

private:
    Status crypt(SkcipherRequest& req, bool enc) const override {
        if (req.len < 2 * kSemi || req.len % kSemi) return Status::Invalid;
        // Six passes over all semiblocks: work on a linear copy (the request may
        // be split anywhere, and in place).
        SecureBuffer r(req.len);
        sg_gather(req.src, 0, r.span());
        const std::size_t n = req.len / kSemi;
        uint8_t b[16];
        uint64_t a = enc ? kDefaultIv : get_be64(req.iv.data());
        if (enc) {
            for (uint64_t j = 0; j < 6; ++j)
                for (std::size_t i = 0; i < n; ++i) {
                    put_be64(b, a);
                    std::memcpy(b + kSemi, r.data() + i * kSemi, kSemi);
                    cipher_->encrypt(b, b, 1);
                    a = get_be64(b) ^ (n * j + i + 1);
                    std::memcpy(r.data() + i * kSemi, b + kSemi, kSemi);
                }
        } else {
            for (uint64_t j = 6; j-- > 0;)
                for (std::size_t i = n; i-- > 0;) {
                    put_be64(b, a ^ (n * j + i + 1));
                    std::memcpy(b + kSemi, r.data() + i * kSemi, kSemi);
                    cipher_->decrypt(b, b, 1);
                    a = get_be64(b);
                    std::memcpy(r.data() + i * kSemi, b + kSemi, kSemi);
                }
        }
        secure_wipe(b, sizeof b);
        if (!enc && a != kDefaultIv) {
            // Never hand out the bytes of a failed unwrap.
            std::memset(r.data(), 0, r.size());
            sg_scatter(req.dst, 0, r.span());
            return Status::BadMsg;
        }
        sg_scatter(req.dst, 0, r.span());
        if (enc) put_be64(req.iv.data(), a);
        return Status::Ok;
    }
};

}  // namespace

std::shared_ptr<Template> make_kw_template() {
    return make_cipher_mode<KwTfm>({.name = "kw",
                                    .min_block = 16,
                                    .max_block = 16,
                                    .accepted = "kw needs one of 16 bytes",
                                    .adjust = [](AlgInfo& i, const AlgInfo&) {
                                        i.blocksize = kSemi;
                                        i.chunksize = kSemi;
                                        i.ivsize = kSemi;
                                    }});
}

}  // namespace blkcrypt
