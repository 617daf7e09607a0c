// pcbc(C): propagating cipher block chaining (the kernel's crypto/pcbc.c):
//   C[i] = E(P[i] ^ P[i-1] ^ C[i-1]),  with P[-1] ^ C[-1] = IV
// An error in one ciphertext block garbles every later block. Kept for
// compatibility with formats that use it (Kerberos 4, the kernel's rxrpc with
// pcbc(fcrypt)); nothing new should choose it.
//
// Name: pcbc(<cipher>), e.g. pcbc(aes). The argument is a single block cipher
// of at most 32-byte blocks. IV = one block; whole blocks only. On completion
// req.iv holds P[last] ^ C[last], the chaining value for a following request,
// as the kernel leaves it.
#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/internal/walk.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <cstring>

namespace blkcrypt {
namespace {

constexpr std::size_t kMaxBlock = 32;

class PcbcTfm final : public SkcipherTfm {
public:
    PcbcTfm(std::unique_ptr<CipherTfm> cipher, std::size_t bs)
        : cipher_(std::move(cipher)), bs_(bs) {}

    Status setkey(ConstBytes key) override {
        return cipher_->setkey(key) == Status::Ok ? Status::Ok : Status::Invalid;
    }
    Status encrypt(SkcipherRequest& req) const override { return crypt(req, true); }
    Status decrypt(SkcipherRequest& req) const override { return crypt(req, false); }

private:
    Status crypt(SkcipherRequest& req, bool enc) const {
        if (req.len % bs_) return Status::Invalid;  // checked before any output
        uint8_t iv[kMaxBlock], in[kMaxBlock], tmp[kMaxBlock];
        std::memcpy(iv, req.iv.data(), bs_);
        for (SgWalk w(req.src, req.dst, req.len, bs_); w.next(); w.done()) {
            const uint8_t* src = w.in();
            uint8_t* dst = w.out();
            for (std::size_t off = 0; off < w.len(); off += bs_) {
                // Copy the input block first: in place, dst overwrites it.
                std::memcpy(in, src + off, bs_);
                if (enc) {
                    xor_into(tmp, in, iv, bs_);
                    cipher_->encrypt(tmp, dst + off, 1);
                } else {
                    cipher_->decrypt(in, tmp, 1);
                    xor_into(dst + off, tmp, iv, bs_);
                }
                xor_into(iv, in, dst + off, bs_);  // P ^ C either way
            }
        }
        std::memcpy(req.iv.data(), iv, bs_);
        secure_wipe(in, sizeof in);
        secure_wipe(tmp, sizeof tmp);
        secure_wipe(iv, sizeof iv);
        return Status::Ok;
    }

    std::unique_ptr<CipherTfm> cipher_;
    std::size_t bs_;
};

class PcbcAlg final : public SkcipherAlg {
public:
    PcbcAlg(AlgInfo info, std::shared_ptr<const Alg> cipher)
        : SkcipherAlg(std::move(info)), cipher_(std::move(cipher)) {}
    std::unique_ptr<SkcipherTfm> create_tfm() const override {
        return std::make_unique<PcbcTfm>(static_cast<const CipherAlg&>(*cipher_).create_tfm(),
                                         cipher_->info().blocksize);
    }

private:
    std::shared_ptr<const Alg> cipher_;
};

class PcbcTemplate final : public Template {
public:
    std::string_view name() const override { return "pcbc"; }

    Result<std::shared_ptr<Alg>> create(Registry& reg, const AlgName& name) const override {
        if (auto r = check_arg_count(name, 1); !r) return r.error();
        auto cipher = grab_spawn(reg, "pcbc", name.args()[0], AlgType::Cipher);
        if (!cipher) return cipher.error();
        const AlgInfo& c = (*cipher)->info();
        if (c.blocksize == 0 || c.blocksize > kMaxBlock)
            return make_error(Status::Invalid, "pcbc: cipher '" + c.name + "' has " +
                                                   block_phrase(c.blocksize) +
                                                   "; pcbc supports 1 to 32");
        AlgInfo info;
        info.module = module;
        set_instance_names(info, "pcbc", {cipher->get()});
        info.type = AlgType::Skcipher;
        info.needs_key = true;
        info.blocksize = c.blocksize;
        info.chunksize = c.blocksize;
        info.ivsize = c.blocksize;
        info.min_keysize = c.min_keysize;
        info.max_keysize = c.max_keysize;
        auto alg = std::make_shared<PcbcAlg>(info, *cipher);
        alg->spawns = {*cipher};
        return std::shared_ptr<Alg>(alg);
    }
};

}  // namespace

std::shared_ptr<Template> make_pcbc_template() { return std::make_shared<PcbcTemplate>(); }

}  // namespace blkcrypt
