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

// The first non-empty segment when it holds all len bytes, else nullptr.
uint8_t* contiguous(SgList sg, std::size_t len) noexcept {
    for (const auto& e : sg) {
        if (e.len == 0) continue;
        return e.len >= len ? e.data : nullptr;
    }
    return nullptr;
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
        EVP_CIPHER_CTX* enc = keyed_ctx(name, key, 1);
        // ctr only ever encrypts (the key stream); the others need the
        // decryption key schedule for decrypt.
        EVP_CIPHER_CTX* dec = mode_ == Mode::Ctr || !enc ? nullptr : keyed_ctx(name, key, 0);
        if (!enc || (mode_ != Mode::Ctr && !dec)) {
            EVP_CIPHER_CTX_free(enc);
            EVP_CIPHER_CTX_free(dec);
            return Status::Invalid;
        }
        enc_.reset(enc);
        dec_.reset(dec);
        return Status::Ok;
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
        const CtxPool& pool = (enc || mode_ == Mode::Ctr) ? enc_ : dec_;
        CtxPool::Lease ctx = pool.acquire();
        if (!ctx) return Status::NoMem;
        if (mode_ != Mode::Ecb && !set_iv(ctx.get(), req.iv.data())) return Status::Invalid;
        const bool ok = mode_ == Mode::Xts ? xts(ctx.get(), req) : walk(ctx.get(), req);
        // Only a broken context fails here; the lease returns it regardless,
        // and the next request re-initialises its IV.
        if (!ok) return Status::Invalid;
        if (mode_ == Mode::Cbc || mode_ == Mode::Ctr) {
            // OpenSSL kept the chaining value: cbc's last ciphertext block,
            // ctr's next counter (the kernel's output IV in both cases).
            if (EVP_CIPHER_CTX_get_updated_iv(ctx.get(), req.iv.data(), kBlock) != 1)
                return Status::Invalid;
        }
        return Status::Ok;
    }

    // ecb, cbc, ctr: the context carries the chaining state across calls, so
    // each span contiguous in src and dst is one update. ctr's context also
    // keeps a partial block's key stream, so its spans need no alignment.
    bool walk(EVP_CIPHER_CTX* ctx, SkcipherRequest& req) const {
        const std::size_t unit = mode_ == Mode::Ctr ? 1 : kBlock;
        for (SgWalk w(req.src, req.dst, req.len, unit); w.next(); w.done())
            if (!update(ctx, w.out(), w.in(), w.len())) return false;
        return true;
    }

    // xts: the whole data unit in one call (ciphertext stealing and the
    // tweak chain do not continue across calls), gathered when split.
    bool xts(EVP_CIPHER_CTX* ctx, SkcipherRequest& req) const {
        const uint8_t* in = contiguous(req.src, req.len);
        uint8_t* out = contiguous(req.dst, req.len);
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
