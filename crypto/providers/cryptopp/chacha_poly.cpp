// ChaCha20 and Poly1305 (RFC 7539) from Crypto++'s ChaChaTLS and
// Poly1305TLS, with the kernel's conventions, for rfc7539(chacha20,poly1305):
//
//   chacha20  skcipher, 32-byte key, 16-byte IV = the initial block counter
//             (32-bit little-endian) || the 96-bit nonce, as the kernel's
//             crypto/chacha_generic.c; any length. req.iv is left as given.
//   poly1305  unkeyed shash, as the kernel's crypto/poly1305_generic.c: the
//             first 32 bytes fed in are the one-time key r || s, the rest is
//             the message; 16-byte digest. No state export (statesize 0).
//
// Drivers chacha20-cryptopp and poly1305-cryptopp, priority 100.
#include "cryptopp_algs.hpp"

#include <blkcrypt/internal/walk.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <crypto++/chacha.h>
#include <crypto++/poly1305.h>

#include <algorithm>
#include <cstring>

namespace blkcrypt {
namespace {

using cryptopp::provider_info;

constexpr std::size_t kKey = 32;
constexpr std::size_t kIv = 16;
constexpr std::size_t kNonce = 12;
constexpr std::size_t kPolyKey = 32;
constexpr std::size_t kTag = 16;

class ChachaTfm final : public SkcipherTfm {
public:
    Status setkey(ConstBytes key) override {
        if (key.size() != kKey) return Status::Invalid;
        key_.assign(key);
        return Status::Ok;
    }
    Status encrypt(SkcipherRequest& req) const override { return crypt(req); }
    Status decrypt(SkcipherRequest& req) const override { return crypt(req); }

private:
    Status crypt(SkcipherRequest& req) const {
        // A cipher object per request: Crypto++ keeps the stream position in
        // it, and one transform serves many requests at once.
        try {
            CryptoPP::ChaChaTLS::Encryption c;
            const CryptoPP::word64 block = get_le<uint32_t>(req.iv.data());
            const CryptoPP::byte* nonce = req.iv.data() + 4;
            const CryptoPP::ConstByteArrayParameter iv(nonce, kNonce, false);
            c.SetKey(key_.data(), kKey,
                     CryptoPP::MakeParameters(CryptoPP::Name::IV(), iv)("InitialBlock", block));
            for (SgWalk w(req.src, req.dst, req.len, 1); w.next(); w.done())
                c.ProcessData(w.out(), w.in(), w.len());
        } catch (const CryptoPP::Exception&) {
            return Status::Invalid;
        }
        return Status::Ok;
    }

    SecureBuffer key_;
};

class ChachaAlg final : public SkcipherAlg {
public:
    using SkcipherAlg::SkcipherAlg;
    std::unique_ptr<SkcipherTfm> create_tfm() const override {
        return std::make_unique<ChachaTfm>();
    }
};

class Poly1305State final : public ShashState {
public:
    void init() override {
        nkey_ = 0;
        mac_.reset();
    }
    void update(ConstBytes data) override {
        if (nkey_ < kPolyKey) {  // still collecting the one-time key
            const std::size_t n = std::min(kPolyKey - nkey_, data.size());
            if (n) std::memcpy(key_.data() + nkey_, data.data(), n);  // an empty span may be null
            nkey_ += n;
            data = data.subspan(n);
            if (nkey_ < kPolyKey) return;
            mac_ = std::make_unique<CryptoPP::Poly1305TLS>(key_.data(), kPolyKey);
            secure_wipe(key_.data(), key_.size());
        }
        if (!data.empty()) mac_->Update(data.data(), data.size());
    }
    void final(Bytes out) override {
        // Without a whole key there is no MAC; the kernel fails with ENOKEY.
        if (!mac_)
            std::fill(out.begin(), out.end(), uint8_t{0});
        else
            mac_->TruncatedFinal(out.data(), kTag);
        init();
    }
    void export_state(Bytes) const override {}  // statesize 0: never called
    Status import_state(ConstBytes) override { return Status::Unsupported; }

private:
    SecureBuffer key_{kPolyKey};
    std::size_t nkey_ = 0;
    std::unique_ptr<CryptoPP::Poly1305TLS> mac_;  // wipes its key on destruction
};

class Poly1305Tfm final : public ShashTfm {
public:
    std::unique_ptr<ShashState> new_state() const override {
        return std::make_unique<Poly1305State>();
    }
};

class Poly1305Alg final : public ShashAlg {
public:
    using ShashAlg::ShashAlg;
    std::unique_ptr<ShashTfm> create_tfm() const override {
        return std::make_unique<Poly1305Tfm>();
    }
};

}  // namespace

Result<void> register_cryptopp_chacha_poly(Registry& reg) {
    AlgInfo c = provider_info("chacha20", AlgType::Skcipher);
    c.needs_key = true;
    c.blocksize = 1;  // a stream cipher
    c.min_keysize = c.max_keysize = kKey;
    c.ivsize = kIv;
    c.chunksize = 64;  // one ChaCha block
    AlgInfo p = provider_info("poly1305", AlgType::Shash);
    p.blocksize = 16;
    p.digestsize = kTag;
    p.statesize = 0;
    const std::shared_ptr<Alg> algs[] = {std::make_shared<ChachaAlg>(c),
                                         std::make_shared<Poly1305Alg>(p)};
    return reg.register_algs(algs);
}

}  // namespace blkcrypt
