// AES modes from OpenSSL's EVP as skciphers, named like the kernel's
// accelerated drivers: xts-aes-openssl, cbc-aes-openssl, ctr-aes-openssl,
// ecb-aes-openssl. Semantics are those of the kernel's generic templates
// (checked against our xts/cbc/ctr/ecb compositions by the differential tests):
//   ecb, cbc  whole blocks only; cbc's output IV is the last ciphertext block
//   ctr       any length; the IV is one 128-bit big-endian counter and the
//             output IV the next unused counter (a partial block uses one)
//   xts       one request = one data unit of 16 bytes or more, ciphertext
//             stealing for a partial last block; the IV is the tweak and is
//             left unchanged
#include "ossl_common.hpp"

#include <blkcrypt/internal/walk.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <climits>
#include <cstring>
#include <vector>

namespace blkcrypt::ossl {
namespace {

constexpr std::size_t kBlock = 16;
// EVP_CipherUpdate takes an int length: longer spans go in pieces.
constexpr std::size_t kMaxUpdate = std::size_t{1} << 30;
// OpenSSL refuses an XTS data unit over 2^20 blocks (IEEE 1619's limit).
constexpr std::size_t kXtsMaxLen = (std::size_t{1} << 20) * kBlock;

enum class Mode { Ecb, Cbc, Ctr, Xts };

// Sets a new IV and keeps the key and direction (enc = -1).
bool set_iv(EVP_CIPHER_CTX* ctx, const uint8_t* iv) {
    return EVP_CipherInit_ex2(ctx, nullptr, nullptr, iv, -1, nullptr) == 1;
}

bool update(EVP_CIPHER_CTX* ctx, uint8_t* out, const uint8_t* in, std::size_t n) {
    while (n) {
        const std::size_t k = n < kMaxUpdate ? n : kMaxUpdate;
        int outl = 0;
        if (EVP_CipherUpdate(ctx, out, &outl, in, static_cast<int>(k)) != 1 ||
            static_cast<std::size_t>(outl) != k)
            return false;
        in += k;
        out += k;
        n -= k;
    }
    return true;
}

const char* cipher_name(Mode m, std::size_t keylen) {
    switch (m) {
    case Mode::Xts:
        // No AES-192-XTS in OpenSSL, so no 48-byte keys (the kernel has them).
        return keylen == 32 ? "AES-128-XTS" : keylen == 64 ? "AES-256-XTS" : nullptr;
    case Mode::Ecb:
        return keylen == 16 ? "AES-128-ECB" : keylen == 24 ? "AES-192-ECB" : keylen == 32 ? "AES-256-ECB" : nullptr;
    case Mode::Cbc:
        return keylen == 16 ? "AES-128-CBC" : keylen == 24 ? "AES-192-CBC" : keylen == 32 ? "AES-256-CBC" : nullptr;
    case Mode::Ctr:
        return keylen == 16 ? "AES-128-CTR" : keylen == 24 ? "AES-192-CTR" : keylen == 32 ? "AES-256-CTR" : nullptr;
    }
    return nullptr;
}

void xor16(uint8_t* dst, const uint8_t* a, const uint8_t* b) noexcept {
    for (std::size_t i = 0; i < kBlock; ++i) dst[i] = static_cast<uint8_t>(a[i] ^ b[i]);
}

// ctr's output IV: the counter advanced by the blocks used, a partial one
// included (128-bit big-endian, as the kernel's crypto_inc).
void ctr_advance(uint8_t* ctr, std::size_t len) noexcept {
    uint64_t carry = (len + kBlock - 1) / kBlock;
    for (std::size_t i = kBlock; i-- > 0 && carry;) {
        carry += ctr[i];
        ctr[i] = static_cast<uint8_t>(carry);
        carry >>= 8;
    }
}

class AesTfm final : public SkcipherTfm {
public:
    explicit AesTfm(Mode m) : mode_(m) {}

    // OpenSSL 3 refuses an XTS key whose two halves are equal (the encryption
    // init fails with "xts duplicated keys"); the kernel allows such keys
    // outside FIPS mode. We report Invalid rather than emulate: callers that
    // need them can use driver "xts(aes-cryptopp)".
    Status setkey(ConstBytes key) override {
        const char* name = cipher_name(mode_, key.size());
        if (!name) return Status::Invalid;
        const bool block_mode = mode_ == Mode::Ecb || mode_ == Mode::Cbc;
        // ctr only ever encrypts (the key stream); the others need the
        // decryption key schedule for decrypt.
        return key_pools(name, key, block_mode, enc_, mode_ == Mode::Ctr ? nullptr : &dec_);
    }

    Status encrypt(SkcipherRequest& req) const override { return crypt(req, true); }
    Status decrypt(SkcipherRequest& req) const override { return crypt(req, false); }

private:
    Status crypt(SkcipherRequest& req, bool enc) const {
        // Length rules first: nothing is written for a refused request.
        switch (mode_) {
        case Mode::Ecb:
        case Mode::Cbc:
            if (req.len % kBlock) return Status::Invalid;
            break;
        case Mode::Xts:
            if (req.len < kBlock || req.len > kXtsMaxLen) return Status::Invalid;
            break;
        case Mode::Ctr:
            break;
        }
        if (req.len == 0) return Status::Ok;  // the IV too is unchanged
        CtxPool::Lease ctx = (enc || mode_ == Mode::Ctr ? enc_ : dec_).acquire();
        if (!ctx) return Status::NoMem;
        bool ok = false;
        switch (mode_) {
        case Mode::Ecb:
            ok = walk(ctx.get(), req, kBlock);
            break;
        case Mode::Cbc:
            ok = cbc(ctx, req, enc);
            break;
        case Mode::Ctr:
            // ctr's context also keeps a partial block's key stream, so its
            // spans need no alignment.
            ok = set_iv(ctx.get(), req.iv.data()) && walk(ctx.get(), req, 1);
            if (ok) ctr_advance(req.iv.data(), req.len);
            break;
        case Mode::Xts:
            ok = set_iv(ctx.get(), req.iv.data()) && xts(ctx.get(), req);
            break;
        }
        if (ok) return Status::Ok;
        ctx.discard();  // only a broken context fails; its state is unknown
        return Status::Invalid;
    }

    // ecb, ctr: each span contiguous in src and dst is one update; the
    // context carries the state across spans.
    static bool walk(EVP_CIPHER_CTX* ctx, SkcipherRequest& req, std::size_t unit) {
        for (SgWalk w(req.src, req.dst, req.len, unit); w.next(); w.done())
            if (!update(ctx, w.out(), w.in(), w.len())) return false;
        return true;
    }

    // cbc without re-initialising the context: in OpenSSL 3 an EVP init (to
    // set the IV) costs more than enciphering 16 blocks. The context chains
    // from ctx.chain(), the last ciphertext block it processed, so only the
    // first block needs steering, by delta = chain ^ IV:
    //   encrypt  C1 = E(P1 ^ IV) = E((P1 ^ delta) ^ chain)   (adjust the input)
    //   decrypt  P1 = D(C1) ^ IV = (D(C1) ^ chain) ^ delta   (adjust the output)
    // The last ciphertext block becomes the new chain and the output IV.
    static bool cbc(const CtxPool::Lease& ctx, SkcipherRequest& req, bool enc) {
        uint8_t delta[kBlock], last[kBlock] = {};  // len >= 16: set by the walk
        xor16(delta, ctx.chain(), req.iv.data());
        bool first = true;
        // Unit = one block: every span is whole blocks, at least one.
        for (SgWalk w(req.src, req.dst, req.len, kBlock); w.next(); w.done()) {
            const uint8_t* in = w.in();
            uint8_t* out = w.out();
            std::size_t n = w.len();
            if (!enc) std::memcpy(last, in + n - kBlock, kBlock);  // before an in-place update
            if (first && enc) {
                uint8_t b[kBlock];
                xor16(b, in, delta);  // in is read before out (maybe the same) is written
                if (!update(ctx.get(), out, b, kBlock)) return false;
                in += kBlock;
                out += kBlock;
                n -= kBlock;
                secure_wipe(b, sizeof b);
            }
            if (n && !update(ctx.get(), out, in, n)) return false;
            if (first && !enc) xor16(w.out(), w.out(), delta);
            if (enc) std::memcpy(last, w.out() + w.len() - kBlock, kBlock);
            first = false;
        }
        std::memcpy(ctx.chain(), last, kBlock);
        std::memcpy(req.iv.data(), last, kBlock);
        return true;
    }

    // xts: the whole data unit in one call (ciphertext stealing and the
    // tweak chain do not continue across calls), gathered when split.
    static bool xts(EVP_CIPHER_CTX* ctx, SkcipherRequest& req) {
        const uint8_t* in = sg_contiguous(req.src, req.len);
        uint8_t* out = sg_contiguous(req.dst, req.len);
        if (in && out) return update(ctx, out, in, req.len);
        uint8_t small[4096];  // a 4 KiB sector without allocating
        std::vector<uint8_t> big;
        uint8_t* buf = small;
        if (req.len > sizeof small) {
            big.resize(req.len);
            buf = big.data();
        }
        sg_gather(req.src, 0, Bytes(buf, req.len));
        const bool ok = update(ctx, buf, buf, req.len);
        if (ok) sg_scatter(req.dst, 0, ConstBytes(buf, req.len));
        secure_wipe(buf, req.len);  // plaintext either way
        return ok;
    }

    Mode mode_;
    CtxPool enc_, dec_;
};

class AesAlg final : public SkcipherAlg {
public:
    AesAlg(AlgInfo info, Mode m) : SkcipherAlg(std::move(info)), mode_(m) {}
    std::unique_ptr<SkcipherTfm> create_tfm() const override { return std::make_unique<AesTfm>(mode_); }

private:
    Mode mode_;
};

std::shared_ptr<Alg> aes_mode(const char* mode, Mode m) {
    const std::string name = std::string(mode) + "(aes)";
    AlgInfo info = provider_info(name, std::string(mode) + "-aes-openssl", AlgType::Skcipher);
    info.needs_key = true;
    info.min_keysize = 16;
    info.max_keysize = 32;
    info.blocksize = kBlock;
    info.chunksize = kBlock;
    info.ivsize = kBlock;
    switch (m) {
    case Mode::Ecb:
        info.ivsize = 0;
        break;
    case Mode::Cbc:
        break;
    case Mode::Ctr:
        info.blocksize = 1;  // a stream cipher, processed in 16-byte chunks
        break;
    case Mode::Xts:
        info.min_keysize = 32;  // two AES-128 keys
        info.max_keysize = 64;  // two AES-256 keys
        break;
    }
    return std::make_shared<AesAlg>(std::move(info), m);
}

}  // namespace

std::vector<std::shared_ptr<Alg>> make_skciphers() {
    return {
        aes_mode("xts", Mode::Xts),
        aes_mode("cbc", Mode::Cbc),
        aes_mode("ctr", Mode::Ctr),
        aes_mode("ecb", Mode::Ecb),
    };
}

}  // namespace blkcrypt::ossl
