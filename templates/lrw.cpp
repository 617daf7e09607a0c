// lrw(C): Liskov-Rivest-Wagner tweakable narrow-block mode as the kernel's
// crypto/lrw.c (IEEE P1619 draft, superseded by XTS; still used by old
// dm-crypt/TrueCrypt volumes, "aes-lrw-benbi"):
//   C[i] = E_K1(P[i] ^ T[i]) ^ T[i],   T[i] = K2 (x) I[i]  in GF(2^128)
// where I[i] is the 128-bit big-endian block index (I[0] = the IV, then +1
// per block) and (x) is multiplication modulo x^128 + x^7 + x^2 + x + 1 with
// the kernel's "bbe" bit order (the block read as a big-endian integer whose
// most significant bit is the x^127 coefficient).
//
// Name: lrw(<cipher>), e.g. lrw(aes); the cipher must have 16-byte blocks.
// Key = cipher key || 16-byte tweak key K2. IV = 16 bytes; whole blocks only.
// On completion req.iv holds the index of the next block, as in the kernel.
//
// Tweaks are table driven: at setkey, K2 (x) x^j for every j, and from them
// the per-increment differences K2 (x) (2^(k+1) - 1) that the kernel's lrw
// also uses (going from I to I+1 flips the k+1 lowest bits, k = trailing ones).
#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/internal/walk.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <cstring>

namespace blkcrypt {
namespace {

constexpr std::size_t kBlock = 16;
constexpr std::size_t kBatch = 32;  // blocks whose tweaks are prepared at once

// Multiply by x in the bbe convention: shift the big-endian integer left,
// reduce by x^7 + x^2 + x + 1 (0x87) when the x^127 bit falls out.
void mul_x_bbe(uint8_t* b) noexcept {
    const uint8_t carry = b[0] >> 7;
    for (std::size_t i = 0; i < kBlock - 1; ++i)
        b[i] = static_cast<uint8_t>(b[i] << 1 | b[i + 1] >> 7);
    b[kBlock - 1] = static_cast<uint8_t>(b[kBlock - 1] << 1);
    if (carry) b[kBlock - 1] ^= 0x87;
}

// Number of trailing one bits of the big-endian 128-bit index (127 when all
// are set: the wrap to zero flips every bit, which is entry 127's difference).
std::size_t trailing_ones(const uint8_t* idx) noexcept {
    std::size_t n = 0;
    for (std::size_t i = kBlock; i-- > 0; n += 8) {
        if (idx[i] == 0xff) continue;
        for (unsigned v = idx[i]; v & 1; v >>= 1) ++n;
        return n;
    }
    return 127;
}

void increment(uint8_t* idx) noexcept {
    for (std::size_t i = kBlock; i-- > 0;)
        if (++idx[i] != 0) break;
}

class LrwTfm final : public SkcipherTfm {
public:
    explicit LrwTfm(const Spawn<CipherAlg>& c) : cipher_(c.create_tfm()), tables_(2 * 128 * kBlock) {}

    Status setkey(ConstBytes key) override {
        if (key.size() <= kBlock) return Status::Invalid;
        if (cipher_->setkey(key.first(key.size() - kBlock)) != Status::Ok) return Status::Invalid;
        uint8_t* pow = tables_.data();              // pow[j] = K2 (x) x^j
        uint8_t* inc = tables_.data() + 128 * kBlock;  // inc[k] = pow[0] ^ ... ^ pow[k]
        std::memcpy(pow, key.data() + key.size() - kBlock, kBlock);
        for (std::size_t j = 1; j < 128; ++j) {
            std::memcpy(pow + j * kBlock, pow + (j - 1) * kBlock, kBlock);
            mul_x_bbe(pow + j * kBlock);
        }
        std::memcpy(inc, pow, kBlock);
        for (std::size_t k = 1; k < 128; ++k)
            xor_into(inc + k * kBlock, inc + (k - 1) * kBlock, pow + k * kBlock, kBlock);
        return Status::Ok;
    }
    Status encrypt(SkcipherRequest& req) const override { return crypt(req, true); }
    Status decrypt(SkcipherRequest& req) const override { return crypt(req, false); }

private:
    Status crypt(SkcipherRequest& req, bool enc) const {
        if (req.len % kBlock) return Status::Invalid;  // checked before any output
        const uint8_t* pow = tables_.data();
        const uint8_t* inc = tables_.data() + 128 * kBlock;
        uint8_t idx[kBlock], t[kBlock] = {}, tw[kBatch * kBlock];
        std::memcpy(idx, req.iv.data(), kBlock);
        // T = K2 (x) I: the sum of K2 (x) x^j over the set bits j of I.
        for (std::size_t j = 0; j < 128; ++j)
            if (idx[kBlock - 1 - j / 8] >> (j % 8) & 1) xor_into(t, t, pow + j * kBlock, kBlock);
        for (SgWalk w(req.src, req.dst, req.len, kBlock); w.next(); w.done()) {
            const uint8_t* in = w.in();
            uint8_t* out = w.out();
            std::size_t n = w.len() / kBlock;
            while (n) {
                const std::size_t k = n < kBatch ? n : kBatch;
                for (std::size_t i = 0; i < k; ++i) {
                    std::memcpy(tw + i * kBlock, t, kBlock);
                    xor_into(t, t, inc + trailing_ones(idx) * kBlock, kBlock);
                    increment(idx);
                }
                // XOR, one multi-block cipher call, XOR: out may alias in.
                xor_into(out, in, tw, k * kBlock);
                if (enc) cipher_->encrypt(out, out, k);
                else cipher_->decrypt(out, out, k);
                xor_into(out, out, tw, k * kBlock);
                in += k * kBlock;
                out += k * kBlock;
                n -= k;
            }
        }
        std::memcpy(req.iv.data(), idx, kBlock);
        secure_wipe(t, sizeof t);
        secure_wipe(tw, sizeof tw);
        return Status::Ok;
    }

    std::unique_ptr<CipherTfm> cipher_;
    SecureBuffer tables_;  // derived from K2: as secret as the key
};

}  // namespace

std::shared_ptr<Template> make_lrw_template() {
    return make_cipher_mode<LrwTfm>({.name = "lrw",
                                     .min_block = kBlock,
                                     .max_block = kBlock,
                                     .accepted = "lrw needs 16",
                                     .adjust = [](AlgInfo& i, const AlgInfo&) {
                                         i.min_keysize += kBlock;  // the cipher key, then K2
                                         i.max_keysize += kBlock;
                                     }});
}

}  // namespace blkcrypt
