// The null algorithms of the kernel's crypto/crypto_null.c: no protection at
// all, for testing and for dm-crypt's "cipher_null-ecb" (a mapping that only
// copies). Registered under the kernel's names and drivers:
//   cipher_null       cipher, 1-byte blocks, key of 0 bytes; copies
//   ecb(cipher_null)  skcipher "ecb-cipher_null", no IV, any length, an
//                     empty key (the kernel's 0..0 key size range)
//   digest_null       shash "digest_null-generic", 0-byte digest
// ecb(cipher_null) is a driver of its own, as in the kernel, so the ecb
// template is not needed to instantiate it.
#include "generic/generic.hpp"

#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/sg.hpp>

#include <cstring>

namespace blkcrypt {
namespace {

using generic::provider_info;

class NullCipherTfm final : public CipherTfm {
public:
    Status setkey(ConstBytes key) override { return key.empty() ? Status::Ok : Status::Invalid; }
    void encrypt(const uint8_t* in, uint8_t* out, std::size_t n) const override { copy(in, out, n); }
    void decrypt(const uint8_t* in, uint8_t* out, std::size_t n) const override { copy(in, out, n); }

private:
    static void copy(const uint8_t* in, uint8_t* out, std::size_t n) {
        if (n && in != out) std::memmove(out, in, n);
    }
};

class NullCipherAlg final : public CipherAlg {
public:
    using CipherAlg::CipherAlg;
    std::unique_ptr<CipherTfm> create_tfm() const override { return std::make_unique<NullCipherTfm>(); }
};

class NullSkcipherTfm final : public SkcipherTfm {
public:
    Status setkey(ConstBytes key) override { return key.empty() ? Status::Ok : Status::Invalid; }
    Status encrypt(SkcipherRequest& req) const override { return copy(req); }
    Status decrypt(SkcipherRequest& req) const override { return copy(req); }

private:
    // src to dst, segment by segment (nothing to do in place).
    static Status copy(SkcipherRequest& req) {
        if (sg_same(req.src, req.dst)) return Status::Ok;
        std::size_t off = 0;
        for (const SgEntry& e : req.src) {
            if (off >= req.len) break;
            const std::size_t n = std::min(e.len, req.len - off);
            sg_scatter(req.dst, off, ConstBytes(e.data, n));
            off += n;
        }
        return Status::Ok;
    }
};

class NullSkcipherAlg final : public SkcipherAlg {
public:
    using SkcipherAlg::SkcipherAlg;
    std::unique_ptr<SkcipherTfm> create_tfm() const override { return std::make_unique<NullSkcipherTfm>(); }
};

class NullShashState final : public ShashState {
public:
    void init() override {}
    void update(ConstBytes) override {}
    void final(Bytes) override {}
    void export_state(Bytes) const override {}
    Status import_state(ConstBytes) override { return Status::Ok; }
};

class NullShashTfm final : public ShashTfm {
public:
    std::unique_ptr<ShashState> new_state() const override { return std::make_unique<NullShashState>(); }
    void digest(ConstBytes, Bytes) const override {}
};

class NullShashAlg final : public ShashAlg {
public:
    using ShashAlg::ShashAlg;
    std::unique_ptr<ShashTfm> create_tfm() const override { return std::make_unique<NullShashTfm>(); }
};

}  // namespace

Result<void> register_generic_null(Registry& reg) {
    AlgInfo c = provider_info("cipher_null", "cipher_null-generic", AlgType::Cipher);
    c.blocksize = 1;
    c.min_keysize = c.max_keysize = 0;
    AlgInfo s = provider_info("ecb(cipher_null)", "ecb-cipher_null", AlgType::Skcipher);
    s.blocksize = 1;
    s.min_keysize = s.max_keysize = 0;
    s.ivsize = 0;
    AlgInfo d = provider_info("digest_null", "digest_null-generic", AlgType::Shash);
    d.blocksize = 1;
    d.digestsize = 0;
    d.statesize = 0;
    const std::shared_ptr<Alg> algs[] = {std::make_shared<NullCipherAlg>(c), std::make_shared<NullSkcipherAlg>(s),
                                         std::make_shared<NullShashAlg>(d)};
    return reg.register_algs(algs);
}

}  // namespace blkcrypt
