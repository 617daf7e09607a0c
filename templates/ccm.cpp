// ccm(C): Counter with CBC-MAC, NIST SP 800-38C / RFC 3610 (the kernel's
// crypto/ccm.c). Used by IPsec through rfc4309, by 802.11 (CCMP) and
// Bluetooth LE.
//
// Name: ccm(<cipher>), e.g. ccm(aes). The argument is a single-block cipher
// with 16-byte blocks. The 16-byte IV follows the kernel: it is the first
// counter block, iv[0] = L - 1 (1..7, so L = 2..8 bytes of length field) and
// iv[1 .. 15-L] the nonce; the counter bytes are ignored. Tags: 4..16 bytes,
// even. The message must fit the L-byte length field.
//
// CCM authenticates the plaintext, so decryption runs twice: first it
// decrypts into a small wiped stack buffer only to compute the MAC, then,
// if the tag matches, it decrypts into dst. A forgery leaves dst untouched.
#include "aead_util.hpp"

#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/internal/walk.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

namespace blkcrypt {
namespace {

using namespace aead_util;  // for_each_piece, copy_assoc, tag_matches

constexpr std::size_t kBlock = 16;
constexpr std::size_t kMaxAuth = 16;
constexpr std::size_t kBatch = 16;  // counter blocks per cipher call

// CBC-MAC, fed bytes in any split; pad() zero-fills to a block boundary.
class CbcMac {
public:
    CbcMac(const CipherTfm& c, const uint8_t b0[kBlock]) : c_(c) {
        std::memcpy(st_.x, b0, kBlock);
        c_.encrypt(st_.x, st_.x, 1);
    }
    ~CbcMac() { secure_wipe(&st_, sizeof st_); }
    CbcMac(const CbcMac&) = delete;
    CbcMac& operator=(const CbcMac&) = delete;

    void update(const uint8_t* p, std::size_t n) {
        while (n) {
            const std::size_t k = std::min(n, kBlock - st_.n);
            for (std::size_t i = 0; i < k; ++i) st_.x[st_.n + i] ^= p[i];
            st_.n += k;
            p += k;
            n -= k;
            if (st_.n == kBlock) {
                c_.encrypt(st_.x, st_.x, 1);
                st_.n = 0;
            }
        }
    }
    void pad() {
        if (!st_.n) return;
        c_.encrypt(st_.x, st_.x, 1);  // the zero padding XORs nothing in
        st_.n = 0;
    }
    const uint8_t* value() const noexcept { return st_.x; }

private:
    const CipherTfm& c_;
    struct {
        uint8_t x[kBlock];
        std::size_t n = 0;  // bytes of the current block absorbed
    } st_;
};

// CTR key stream from a counter block, consumed in any split. The counter is
// the whole block big-endian, as the kernel's ctr(aes); the length check
// keeps it inside the L-byte field.
class CtrStream {
public:
    CtrStream(const CipherTfm& c, const uint8_t ctr[kBlock]) : c_(c) {
        std::memcpy(st_.ctr, ctr, kBlock);
    }
    ~CtrStream() { secure_wipe(&st_, sizeof st_); }
    CtrStream(const CtrStream&) = delete;
    CtrStream& operator=(const CtrStream&) = delete;

    void apply(const uint8_t* in, uint8_t* out, std::size_t n) {
        while (n) {
            if (st_.pos == st_.avail) refill(n);
            const std::size_t k = std::min(n, st_.avail - st_.pos);
            for (std::size_t i = 0; i < k; ++i)
                out[i] = static_cast<uint8_t>(in[i] ^ st_.ks[st_.pos + i]);
            st_.pos += k;
            in += k;
            out += k;
            n -= k;
        }
    }

private:
    void refill(std::size_t want) {
        const std::size_t nb = std::min(kBatch, (want + kBlock - 1) / kBlock);
        for (std::size_t i = 0; i < nb; ++i) {
            std::memcpy(st_.ks + i * kBlock, st_.ctr, kBlock);
            for (int j = kBlock - 1; j >= 0; --j)
                if (++st_.ctr[j]) break;
        }
        c_.encrypt(st_.ks, st_.ks, nb);
        st_.pos = 0;
        st_.avail = nb * kBlock;
    }
    const CipherTfm& c_;
    struct {
        uint8_t ctr[kBlock];
        uint8_t ks[kBatch * kBlock];
        std::size_t pos = 0, avail = 0;
    } st_;
};

class CcmTfm final : public aead_util::SymmetricAeadTfm {
public:
    explicit CcmTfm(std::unique_ptr<CipherTfm> cipher) : cipher_(std::move(cipher)) {}

    Status setkey(ConstBytes key) override {
        return cipher_->setkey(key) == Status::Ok ? Status::Ok : Status::Invalid;
    }

    Status setauthsize(std::size_t n) override {
        // RFC 3610 section 2: M = 4, 6, 8, 10, 12, 14 or 16.
        return (n >= 4 && n <= kMaxAuth && n % 2 == 0) ? Status::Ok : Status::Invalid;
    }

private:
    Status crypt(AeadRequest& req, std::size_t authsize, bool enc) const override {
        const uint8_t* iv = req.iv.data();
        if (iv[0] < 1 || iv[0] > 7) return Status::Invalid;  // crypto_ccm_check_iv
        const std::size_t l = iv[0] + 1u;
        const std::size_t alen = req.assoclen;
        const std::size_t tlen = enc ? req.cryptlen : req.cryptlen - authsize;
        if (l < 8 && (static_cast<uint64_t>(tlen) >> (8 * l)) != 0) return Status::Invalid;

        // B0 = flags || nonce || [tlen]_L; A0 = L-1 || nonce || 0 (RFC 3610 2.2, 2.3).
        uint8_t b0[kBlock], a[kBlock];
        std::memcpy(b0, iv, kBlock);
        b0[0] = static_cast<uint8_t>(b0[0] | ((authsize - 2) / 2) << 3 | (alen ? 0x40 : 0));
        uint64_t v = tlen;
        for (std::size_t i = 0; i < l; ++i, v >>= 8) b0[15 - i] = static_cast<uint8_t>(v);
        std::memcpy(a, iv, kBlock);
        std::memset(a + kBlock - l, 0, l);

        CbcMac mac(*cipher_, b0);
        if (alen) {
            // The length of the associated data, RFC 3610 section 2.2.
            uint8_t hdr[10];
            std::size_t h = 0;
            uint64_t n = alen;
            if (n < 0xff00) {
                hdr[h++] = static_cast<uint8_t>(n >> 8);
            } else {
                const bool small = n <= 0xffffffffull;
                hdr[h++] = 0xff;
                hdr[h++] = small ? 0xfe : 0xff;
                for (int s = small ? 24 : 56; s > 0; s -= 8)
                    hdr[h++] = static_cast<uint8_t>(n >> s);
            }
            hdr[h++] = static_cast<uint8_t>(n);
            mac.update(hdr, h);
            for_each_piece(req.src, 0, alen,
                           [&](const uint8_t* p, std::size_t k) { mac.update(p, k); });
            mac.pad();
        }

        uint8_t s0[kBlock];  // E(A0) masks the MAC
        cipher_->encrypt(a, s0, 1);
        a[15] = 1;  // the payload counter starts at 1

        std::vector<SgEntry> sv(req.src.size()), dv(req.dst.size());
        const auto src = sg_slice(req.src, alen, tlen, sv);
        const auto dst = sg_slice(req.dst, alen, tlen, dv);
        Status st = Status::Ok;
        uint8_t tag[kBlock];
        if (enc) {
            copy_assoc(req);
            CtrStream ctr(*cipher_, a);
            for (SgWalk w(src, dst, tlen, kBlock); w.next(); w.done()) {
                mac.update(w.in(), w.len());  // before an in-place overwrite
                ctr.apply(w.in(), w.out(), w.len());
            }
            mac.pad();
            for (std::size_t i = 0; i < kBlock; ++i) tag[i] = mac.value()[i] ^ s0[i];
            sg_scatter(req.dst, alen + tlen, ConstBytes(tag, authsize));
        } else {
            {
                // Pass 1: plaintext only into a wiped stack buffer, for the MAC.
                CtrStream ctr(*cipher_, a);
                uint8_t tmp[256];
                for_each_piece(req.src, alen, tlen, [&](const uint8_t* p, std::size_t k) {
                    while (k) {
                        const std::size_t m = std::min(k, sizeof tmp);
                        ctr.apply(p, tmp, m);
                        mac.update(tmp, m);
                        p += m;
                        k -= m;
                    }
                });
                secure_wipe(tmp, sizeof tmp);
            }
            mac.pad();
            for (std::size_t i = 0; i < kBlock; ++i) tag[i] = mac.value()[i] ^ s0[i];
            if (!tag_matches(req.src, alen + tlen, tag, authsize)) {
                st = Status::BadMsg;  // nothing written to dst
            } else {
                // Pass 2: the tag holds; now decrypt into dst.
                copy_assoc(req);
                CtrStream ctr(*cipher_, a);
                for (SgWalk w(src, dst, tlen, kBlock); w.next(); w.done())
                    ctr.apply(w.in(), w.out(), w.len());
            }
        }
        secure_wipe(s0, sizeof s0);
        secure_wipe(tag, sizeof tag);
        return st;
    }

    std::unique_ptr<CipherTfm> cipher_;
};

}  // namespace

std::shared_ptr<Template> make_ccm_template() {
    return std::make_shared<aead_util::CipherAeadTemplate<CcmTfm>>("ccm", kBlock, kMaxAuth);
}

}  // namespace blkcrypt
