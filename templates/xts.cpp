// xts(C): XEX-based tweaked codebook mode with ciphertext stealing, IEEE
// 1619-2007 / NIST SP 800-38E, as the kernel's crypto/xts.c. The standard
// mode of dm-crypt ("aes-xts-plain64") and LUKS2.
//   T[0] = E_K2(IV),  T[j+1] = T[j] * alpha  (GF(2^128), little-endian),
//   C[j] = E_K1(P[j] ^ T[j]) ^ T[j]
// A final partial block of r bytes (length >= 16, not a multiple of 16) is
// handled by ciphertext stealing: the last full block is enciphered with the
// last tweak but one, its first r bytes become the partial output block, and
// the partial input padded with the rest of it is enciphered with the last
// tweak into the last full output block.
//
// Name: xts(<cipher>), e.g. xts(aes); the cipher must have 16-byte blocks.
// Key = K1 || K2, two equal halves, each a valid key of the cipher (xts(aes):
// 32, 48 or 64 bytes). IV = the 16-byte tweak, typically the little-endian
// sector number (plain64). Lengths below 16 are refused. req.iv is left
// unchanged, as by the kernel's generic xts.
#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/internal/walk.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <bit>
#include <cstring>

namespace blkcrypt {
namespace {

constexpr std::size_t kBlock = 16;
constexpr std::size_t kBatch = 32;  // blocks whose tweaks are prepared at once

// The tweak as a little-endian 128-bit integer (IEEE 1619 byte order).
struct Tweak {
    uint64_t lo = 0, hi = 0;

    void load(const uint8_t* b) noexcept {
        lo = get_le64(b);
        hi = get_le64(b + 8);
    }
    void store(uint8_t* b) const noexcept {
        put_le64(b, lo);
        put_le64(b + 8, hi);
    }
    // Multiply by alpha (x): shift left one bit, reduce by x^7 + x^2 + x + 1.
    void mul_alpha() noexcept {
        const uint64_t carry = hi >> 63;
        hi = hi << 1 | lo >> 63;
        lo = lo << 1 ^ (0x87 & (0 - carry));
    }
};

class XtsTfm final : public SkcipherTfm {
public:
    explicit XtsTfm(const Spawn<CipherAlg>& c) : data_(c.create_tfm()), tweak_(c.create_tfm()) {}

    Status setkey(ConstBytes key) override {
        if (key.empty() || key.size() % 2) return Status::Invalid;
        const std::size_t half = key.size() / 2;
        if (data_->setkey(key.first(half)) != Status::Ok) return Status::Invalid;
        if (tweak_->setkey(key.subspan(half)) != Status::Ok) return Status::Invalid;
        return Status::Ok;
    }
    Status encrypt(SkcipherRequest& req) const override { return crypt(req, true); }
    Status decrypt(SkcipherRequest& req) const override { return crypt(req, false); }

private:
    void run(uint8_t* p, std::size_t nblocks, bool enc) const {
        if (enc) data_->encrypt(p, p, nblocks);
        else data_->decrypt(p, p, nblocks);
    }

    // One block in place with tweak t.
    void one(uint8_t* b, const Tweak& t, bool enc) const {
        uint8_t tb[kBlock];
        t.store(tb);
        xor_into(b, b, tb, kBlock);
        run(b, 1, enc);
        xor_into(b, b, tb, kBlock);
        secure_wipe(tb, sizeof tb);
    }

    Status crypt(SkcipherRequest& req, bool enc) const {
        if (req.len < kBlock) return Status::Invalid;  // checked before any output
        const std::size_t tail = req.len % kBlock;
        // With a partial block, the last full block joins it in the stealing step.
        const std::size_t bulk = tail ? req.len - kBlock - tail : req.len;

        uint8_t tw[kBatch * kBlock];
        std::memcpy(tw, req.iv.data(), kBlock);
        tweak_->encrypt(tw, tw, 1);
        Tweak t;
        t.load(tw);

        for (SgWalk w(req.src, req.dst, bulk, kBlock); w.next(); w.done()) {
            const uint8_t* in = w.in();
            uint8_t* out = w.out();
            std::size_t n = w.len() / kBlock;
            while (n) {
                const std::size_t k = n < kBatch ? n : kBatch;
                Tweak cur = t;  // a local the compiler can keep in registers
                for (std::size_t i = 0; i < k; ++i) {
                    cur.store(tw + i * kBlock);
                    cur.mul_alpha();
                }
                t = cur;
                // XOR, one multi-block cipher call, XOR: out may alias in.
                xor_into(out, in, tw, k * kBlock);
                run(out, k, enc);
                xor_into(out, out, tw, k * kBlock);
                in += k * kBlock;
                out += k * kBlock;
                n -= k;
            }
        }

        if (tail) {
            // Gathered into a local buffer, so segment boundaries do not matter.
            uint8_t buf[2 * kBlock];
            sg_gather(req.src, bulk, Bytes(buf, kBlock + tail));
            Tweak last = t;  // the tweak of the last full block
            Tweak next = t;
            next.mul_alpha();  // the tweak of the stolen block
            uint8_t* full = buf;
            uint8_t* part = buf + kBlock;
            // Encrypt: CC = E(P[m-1], T[m-1]); out = E(P[m] || CC[r..], T[m]) || CC[..r].
            // Decrypt: PP = D(C[m-1], T[m]);   out = D(C[m] || PP[r..], T[m-1]) || PP[..r].
            one(full, enc ? last : next, enc);
            uint8_t stolen[kBlock];
            std::memcpy(stolen, part, tail);
            std::memcpy(stolen + tail, full + tail, kBlock - tail);
            std::memcpy(part, full, tail);
            one(stolen, enc ? next : last, enc);
            std::memcpy(full, stolen, kBlock);
            sg_scatter(req.dst, bulk, ConstBytes(buf, kBlock + tail));
            secure_wipe(buf, sizeof buf);
            secure_wipe(stolen, sizeof stolen);
        }
        secure_wipe(tw, sizeof tw);
        return Status::Ok;
    }

    std::unique_ptr<CipherTfm> data_;   // K1
    std::unique_ptr<CipherTfm> tweak_;  // K2
};

}  // namespace

std::shared_ptr<Template> make_xts_template() {
    return make_cipher_mode<XtsTfm>({.name = "xts",
                                     .min_block = kBlock,
                                     .max_block = kBlock,
                                     .accepted = "xts needs 16",
                                     .adjust = [](AlgInfo& i, const AlgInfo&) {
                                         i.min_keysize *= 2;  // K1 || K2
                                         i.max_keysize *= 2;
                                     }});
}

}  // namespace blkcrypt
