// gcm(C): Galois/Counter Mode, NIST SP 800-38D (the kernel's crypto/gcm.c).
// The AEAD of IPsec ESP (through rfc4106), MACsec, TLS and dm-crypt's
// "capi:gcm(aes)-random" integrity mode.
//
// Name: gcm(<cipher>), e.g. gcm(aes). The argument is a single-block cipher
// with 16-byte blocks (the cipher "aes", not "ctr(aes)"). IV: 12 bytes, so
// J0 = IV || 0^31 || 1 and the counter is the last 32 bits, big-endian, as
// SP 800-38D section 7.1 and the kernel. Tags: 4, 8 or 12..16 bytes.
//
// Encryption runs CTR and GHASHes the ciphertext as it is written. Decryption
// GHASHes the ciphertext in src first and decrypts into dst only when the tag
// matches, so a forgery never puts plaintext in dst. GHASH is a portable,
// constant-time carry-less multiply (no secret-indexed tables).
#include "aead_util.hpp"

#include <blkcrypt/internal/bytes_util.hpp>
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
constexpr std::size_t kIvSize = 12;
constexpr std::size_t kMaxAuth = 16;
constexpr std::size_t kBatch = 16;  // counter blocks per cipher call
// SP 800-38D section 5.2.1.1: at most 2^32 - 2 blocks, so that the 32-bit
// counter never wraps around to J0, whose block masks the tag.
constexpr uint64_t kMaxText = ((uint64_t{1} << 32) - 2) * kBlock;

// Carry-less 64x64 -> low 64 bits, constant time: the operands are split into
// four interleaved bit sets so that integer multiplication cannot carry into
// a bit that is kept (the "multiply with holes" of BearSSL's ghash_ctmul64).
uint64_t bmul64(uint64_t x, uint64_t y) noexcept {
    constexpr uint64_t m0 = 0x1111111111111111ull, m1 = m0 << 1, m2 = m0 << 2, m3 = m0 << 3;
    const uint64_t x0 = x & m0, x1 = x & m1, x2 = x & m2, x3 = x & m3;
    const uint64_t y0 = y & m0, y1 = y & m1, y2 = y & m2, y3 = y & m3;
    const uint64_t z0 = (x0 * y0) ^ (x1 * y3) ^ (x2 * y2) ^ (x3 * y1);
    const uint64_t z1 = (x0 * y1) ^ (x1 * y0) ^ (x2 * y3) ^ (x3 * y2);
    const uint64_t z2 = (x0 * y2) ^ (x1 * y1) ^ (x2 * y0) ^ (x3 * y3);
    const uint64_t z3 = (x0 * y3) ^ (x1 * y2) ^ (x2 * y1) ^ (x3 * y0);
    return (z0 & m0) | (z1 & m1) | (z2 & m2) | (z3 & m3);
}

uint64_t rev64(uint64_t x) noexcept {
    x = ((x & 0x5555555555555555ull) << 1) | ((x >> 1) & 0x5555555555555555ull);
    x = ((x & 0x3333333333333333ull) << 2) | ((x >> 2) & 0x3333333333333333ull);
    x = ((x & 0x0f0f0f0f0f0f0f0full) << 4) | ((x >> 4) & 0x0f0f0f0f0f0f0f0full);
    x = ((x & 0x00ff00ff00ff00ffull) << 8) | ((x >> 8) & 0x00ff00ff00ff00ffull);
    x = ((x & 0x0000ffff0000ffffull) << 16) | ((x >> 16) & 0x0000ffff0000ffffull);
    return (x << 32) | (x >> 32);
}

// The hash subkey H = E_K(0^128) as two big-endian halves, plus the
// bit-reversed forms the multiply needs. Wiped on destruction.
struct GhashKey {
    uint64_t h1 = 0, h0 = 0, h1r = 0, h0r = 0;

    void set(const uint8_t h[kBlock]) noexcept {
        h1 = get_be64(h);
        h0 = get_be64(h + 8);
        h1r = rev64(h1);
        h0r = rev64(h0);
    }
    ~GhashKey() { secure_wipe(this, sizeof *this); }

    // y = y * H in GF(2^128) with the GCM bit order: Karatsuba over 64-bit
    // halves, each product computed on the values and on their bit reversals
    // (which yields the high halves), then reduced by x^128 + x^7 + x^2 + x + 1.
    void mul(uint64_t& y1, uint64_t& y0) const noexcept {
        const uint64_t y0r = rev64(y0), y1r = rev64(y1);
        uint64_t z0 = bmul64(y0, h0), z1 = bmul64(y1, h1), z2 = bmul64(y0 ^ y1, h0 ^ h1);
        uint64_t z0h = bmul64(y0r, h0r), z1h = bmul64(y1r, h1r);
        uint64_t z2h = bmul64(y0r ^ y1r, h0r ^ h1r);
        z2 ^= z0 ^ z1;
        z2h ^= z0h ^ z1h;
        z0h = rev64(z0h) >> 1;
        z1h = rev64(z1h) >> 1;
        z2h = rev64(z2h) >> 1;
        uint64_t v0 = z0, v1 = z0h ^ z2, v2 = z1 ^ z2h, v3 = z1h;
        v3 = (v3 << 1) | (v2 >> 63);
        v2 = (v2 << 1) | (v1 >> 63);
        v1 = (v1 << 1) | (v0 >> 63);
        v0 <<= 1;
        v2 ^= v0 ^ (v0 >> 1) ^ (v0 >> 2) ^ (v0 >> 7);
        v1 ^= (v0 << 63) ^ (v0 << 62) ^ (v0 << 57);
        v3 ^= v1 ^ (v1 >> 1) ^ (v1 >> 2) ^ (v1 >> 7);
        v2 ^= (v1 << 63) ^ (v1 << 62) ^ (v1 << 57);
        y1 = v3;
        y0 = v2;
    }
};

// One running GHASH. Byte-oriented so that data split anywhere across
// segments hashes the same; pad() closes a section (A or C) with zeros.
class Ghash {
public:
    explicit Ghash(const GhashKey& k) noexcept : k_(k) {}
    ~Ghash() { secure_wipe(&st_, sizeof st_); }
    Ghash(const Ghash&) = delete;
    Ghash& operator=(const Ghash&) = delete;

    void update(const uint8_t* p, std::size_t n) noexcept {
        if (st_.nbuf) {
            std::size_t t = std::min(n, kBlock - st_.nbuf);
            if (t) std::memcpy(st_.buf + st_.nbuf, p, t);  // p may be null when n is 0
            st_.nbuf += t;
            p += t;
            n -= t;
            if (st_.nbuf < kBlock) return;
            block(st_.buf);
            st_.nbuf = 0;
        }
        for (; n >= kBlock; p += kBlock, n -= kBlock) block(p);
        if (n) std::memcpy(st_.buf, p, n);
        st_.nbuf = n;
    }
    void pad() noexcept {
        if (!st_.nbuf) return;
        std::memset(st_.buf + st_.nbuf, 0, kBlock - st_.nbuf);
        block(st_.buf);
        st_.nbuf = 0;
    }
    // S = GHASH(A || pad || C || pad || [len(A)]64 || [len(C)]64), in bits.
    void final(uint64_t alen, uint64_t clen, uint8_t out[kBlock]) noexcept {
        pad();
        uint8_t lens[kBlock];
        put_be64(lens, alen * 8);
        put_be64(lens + 8, clen * 8);
        block(lens);
        put_be64(out, st_.y1);
        put_be64(out + 8, st_.y0);
    }

private:
    void block(const uint8_t* p) noexcept {
        st_.y1 ^= get_be64(p);
        st_.y0 ^= get_be64(p + 8);
        k_.mul(st_.y1, st_.y0);
    }
    const GhashKey& k_;
    struct {
        uint64_t y1 = 0, y0 = 0;   // the running hash, big-endian halves
        uint8_t buf[kBlock] = {};  // a partial block
        std::size_t nbuf = 0;
    } st_;
};

void inc32(uint8_t ctr[kBlock]) noexcept {
    for (int i = 15; i >= 12; --i)
        if (++ctr[i]) break;
}

class GcmTfm final : public aead_util::SymmetricAeadTfm {
public:
    explicit GcmTfm(std::unique_ptr<CipherTfm> cipher) : cipher_(std::move(cipher)) {}

    Status setkey(ConstBytes key) override {
        if (cipher_->setkey(key) != Status::Ok) return Status::Invalid;
        uint8_t h[kBlock] = {};
        cipher_->encrypt(h, h, 1);
        ghkey_.set(h);
        secure_wipe(h, sizeof h);
        return Status::Ok;
    }

    Status setauthsize(std::size_t n) override {
        // SP 800-38D section 5.2.1.2: 128, 120, 112, 104, 96 bits, and 64 or
        // 32 for special uses; the kernel's crypto_gcm_check_authsize.
        return (n == 4 || n == 8 || (n >= 12 && n <= 16)) ? Status::Ok : Status::Invalid;
    }

private:
    Status crypt(AeadRequest& req, std::size_t authsize, bool enc) const override {
        const std::size_t alen = req.assoclen;
        const std::size_t tlen = enc ? req.cryptlen : req.cryptlen - authsize;
        if (tlen > kMaxText) return Status::Invalid;

        uint8_t ctr[kBlock], tag[kBlock];
        std::memcpy(ctr, req.iv.data(), kIvSize);
        ctr[12] = ctr[13] = ctr[14] = 0;
        ctr[15] = 1;
        cipher_->encrypt(ctr, tag, 1);  // E(J0), masks the tag
        inc32(ctr);

        Ghash gh(ghkey_);
        for_each_piece(req.src, 0, alen, [&](const uint8_t* p, std::size_t n) { gh.update(p, n); });
        gh.pad();

        std::vector<SgEntry> s(req.src.size()), d(req.dst.size());
        const auto src = sg_slice(req.src, alen, tlen, s);
        const auto dst = sg_slice(req.dst, alen, tlen, d);
        Status st = Status::Ok;
        if (enc) {
            copy_assoc(req);
            for (SgWalk w(src, dst, tlen, kBlock); w.next(); w.done()) {
                ctr_xor(ctr, w.in(), w.out(), w.len());
                gh.update(w.out(), w.len());
            }
            finish_tag(gh, alen, tlen, tag);
            sg_scatter(req.dst, alen + tlen, ConstBytes(tag, authsize));
        } else {
            for_each_piece(req.src, alen, tlen,
                           [&](const uint8_t* p, std::size_t n) { gh.update(p, n); });
            finish_tag(gh, alen, tlen, tag);
            if (!tag_matches(req.src, alen + tlen, tag, authsize)) {
                st = Status::BadMsg;  // nothing written to dst
            } else {
                copy_assoc(req);
                for (SgWalk w(src, dst, tlen, kBlock); w.next(); w.done())
                    ctr_xor(ctr, w.in(), w.out(), w.len());
            }
        }
        secure_wipe(ctr, sizeof ctr);
        secure_wipe(tag, sizeof tag);
        return st;
    }

    static void finish_tag(Ghash& gh, std::size_t alen, std::size_t tlen, uint8_t tag[kBlock]) {
        uint8_t s[kBlock];
        gh.final(alen, tlen, s);
        for (std::size_t i = 0; i < kBlock; ++i) tag[i] ^= s[i];
        secure_wipe(s, sizeof s);
    }

    // out = in ^ key stream from ctr (advanced past every block used). Only
    // the last chunk of a walk may be a partial block.
    void ctr_xor(uint8_t ctr[kBlock], const uint8_t* in, uint8_t* out, std::size_t len) const {
        uint8_t ks[kBatch * kBlock];
        while (len) {
            const std::size_t nb = std::min(kBatch, (len + kBlock - 1) / kBlock);
            for (std::size_t i = 0; i < nb; ++i) {
                std::memcpy(ks + i * kBlock, ctr, kBlock);
                inc32(ctr);
            }
            cipher_->encrypt(ks, ks, nb);
            const std::size_t n = std::min(len, nb * kBlock);
            for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(in[i] ^ ks[i]);
            in += n;
            out += n;
            len -= n;
        }
        secure_wipe(ks, sizeof ks);
    }

    std::unique_ptr<CipherTfm> cipher_;
    GhashKey ghkey_;
};

}  // namespace

std::shared_ptr<Template> make_gcm_template() {
    return std::make_shared<aead_util::CipherAeadTemplate<GcmTfm>>("gcm", kIvSize, kMaxAuth);
}

}  // namespace blkcrypt
