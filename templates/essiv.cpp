// essiv(S,H): Encrypted Salt-Sector IV (the kernel's crypto/essiv.c). The IV
// given with each request (for dm-crypt and fscrypt, the sector or block
// number) is enciphered with a key derived from the data key before S uses
// it, so IVs are unpredictable without the key. dm-crypt's
// "aes-cbc-essiv:sha256" is essiv(cbc(aes),sha256).
//
// Name: essiv(<skcipher>,<hash>), e.g. essiv(cbc(aes),sha256) or
// essiv(xts(aes),sha256). S is a mode whose IV is one block of the cipher it
// is built on; that cipher (the innermost first argument of S's name: "aes"
// for cbc(aes)) enciphers the IV. H is an unkeyed hash whose digest is a
// valid key for that cipher.
//
//   setkey(K):  S.setkey(K); salt = H(K); E.setkey(salt)
//   crypt:      IV' = E_salt(IV); run S with IV'
// The key and IV sizes are S's. The caller's IV is written only on success,
// with S's output IV (for cbc, the last ciphertext block), as in the kernel
// where S runs on req->iv itself.
#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <cstring>
#include <vector>

namespace blkcrypt {
namespace {

constexpr std::size_t kMaxBlock = 32;

class EssivTfm final : public SkcipherTfm {
public:
    EssivTfm(std::unique_ptr<SkcipherTfm> mode, std::unique_ptr<CipherTfm> essiv,
             std::unique_ptr<ShashTfm> hash, std::size_t digestsize, std::size_t ivsize)
        : mode_(std::move(mode)), essiv_(std::move(essiv)), hash_(std::move(hash)),
          ds_(digestsize), ivsize_(ivsize) {}

    Status setkey(ConstBytes key) override {
        if (mode_->setkey(key) != Status::Ok) return Status::Invalid;
        SecureBuffer salt(ds_);
        hash_->digest(key, salt.span());
        // A digest-sized key was checked at create time.
        return essiv_->setkey(salt) == Status::Ok ? Status::Ok : Status::Invalid;
    }
    Status encrypt(SkcipherRequest& req) const override { return crypt(req, true); }
    Status decrypt(SkcipherRequest& req) const override { return crypt(req, false); }

private:
    Status crypt(SkcipherRequest& req, bool enc) const {
        // IV' on the stack: the transform is shared between threads.
        uint8_t iv[kMaxBlock];
        essiv_->encrypt(req.iv.data(), iv, 1);
        SkcipherRequest sub;
        sub.src = req.src;
        sub.dst = req.dst;
        sub.len = req.len;
        sub.iv = Bytes(iv, ivsize_);
        sub.flags = req.flags;
        // S is synchronous (checked at create time), so no completion is needed.
        Status s = enc ? mode_->encrypt(sub) : mode_->decrypt(sub);
        if (s == Status::Ok) std::memcpy(req.iv.data(), iv, ivsize_);
        secure_wipe(iv, sizeof iv);
        return s;
    }

    std::unique_ptr<SkcipherTfm> mode_;
    std::unique_ptr<CipherTfm> essiv_;  // keyed with H(key)
    std::unique_ptr<ShashTfm> hash_;
    std::size_t ds_, ivsize_;
};

class EssivAlg final : public SkcipherAlg {
public:
    EssivAlg(AlgInfo info, std::shared_ptr<const Alg> mode, std::shared_ptr<const Alg> cipher,
             std::shared_ptr<const Alg> hash)
        : SkcipherAlg(std::move(info)), mode_(*this, std::move(mode)), cipher_(*this, std::move(cipher)),
          hash_(*this, std::move(hash)) {}
    std::unique_ptr<SkcipherTfm> create_tfm() const override {
        return std::make_unique<EssivTfm>(mode_.create_tfm(), cipher_.create_tfm(), hash_.create_tfm(),
                                          hash_.info().digestsize, info().ivsize);
    }

private:
    Spawn<SkcipherAlg> mode_;
    Spawn<CipherAlg> cipher_;
    Spawn<ShashAlg> hash_;
};

// The ESSIV cipher: the cipher of the mode's instance (cbc(aes-cryptopp) was
// built on aes-cryptopp). A whole-mode driver (cbc-aes-openssl) has no spawns;
// its generic name is all it says about its cipher: the innermost first
// argument of it.
Result<std::shared_ptr<const Alg>> essiv_cipher(Registry& reg, const Alg& mode) {
    for (const Alg* a = &mode; !detail::spawns_of(*a).empty();) {
        const auto& first = detail::spawns_of(*a).front();
        if (first->info().type == AlgType::Cipher) return first;
        a = first.get();
    }
    const std::string& n = mode.info().name;
    auto parsed = AlgName::parse(n);
    if (!parsed) return make_error(Status::Invalid, "essiv: " + parsed.error().message);
    if (!parsed->is_template())
        return make_error(Status::Invalid, "essiv: cannot tell which block cipher '" + n +
                                               "' uses; expected a mode such as cbc(aes)");
    const AlgName* c = &*parsed;
    while (c->is_template()) c = &c->args()[0];
    return grab_spawn(reg, "essiv", *c, AlgType::Cipher);
}

class EssivTemplate final : public Template {
public:
    std::string_view name() const override { return "essiv"; }

    Result<std::shared_ptr<Alg>> create(Registry& reg, const AlgName& name) const override {
        if (auto r = check_arg_count(name, 2); !r) return r.error();
        auto mode = grab_spawn(reg, "essiv", name.args()[0], AlgType::Skcipher);
        if (!mode) return mode.error();
        auto hash = grab_spawn(reg, "essiv", name.args()[1], AlgType::Shash);
        if (!hash) return hash.error();
        const AlgInfo& s = (*mode)->info();
        const AlgInfo& h = (*hash)->info();
        auto fail = [](const std::string& msg) { return make_error(Status::Invalid, "essiv: " + msg); };

        if (s.type != AlgType::Skcipher)
            return fail("'" + s.name + "' is a bare block cipher without an IV; use a mode such as cbc(" +
                        s.name + ")");
        if (s.async)
            return fail("'" + s.driver + "' is asynchronous; wrap the whole instance instead (cryptd(essiv(...)))");
        if (h.type != AlgType::Shash) return fail("'" + h.name + "' is not a synchronous hash");
        if (h.needs_key) return fail("'" + h.name + "' is keyed");

        auto cipher = essiv_cipher(reg, **mode);
        if (!cipher) return cipher.error();
        const AlgInfo& ci = (*cipher)->info();
        if (ci.type != AlgType::Cipher) return fail("'" + ci.name + "' is not a block cipher");
        if (ci.blocksize == 0 || ci.blocksize > kMaxBlock)
            return fail("cipher '" + ci.name + "' has a " + std::to_string(ci.blocksize) +
                        "-byte block; essiv supports 1 to 32");
        if (s.ivsize != ci.blocksize)
            return fail("'" + s.name + "' takes a " + std::to_string(s.ivsize) + "-byte IV but " +
                        ci.name + "'s block is " + std::to_string(ci.blocksize) +
                        " bytes; essiv needs them equal");
        // The salt keys the cipher: try a zero key of the digest's size.
        std::vector<uint8_t> zero(h.digestsize, 0);
        if (h.digestsize == 0 ||
            create_cipher_tfm(**cipher)->setkey(zero) != Status::Ok)
            return fail(h.name + "'s " + std::to_string(h.digestsize) +
                        "-byte digest is not a valid key for " + ci.name);

        AlgInfo info;
        info.module = module;
        set_instance_names(info, "essiv", {mode->get(), hash->get()});
        info.type = AlgType::Skcipher;
        info.needs_key = true;
        info.blocksize = s.blocksize;
        info.chunksize = s.chunksize;
        info.ivsize = s.ivsize;
        info.min_keysize = s.min_keysize;
        info.max_keysize = s.max_keysize;
        auto alg = std::make_shared<EssivAlg>(info, *mode, *cipher, *hash);
        return std::shared_ptr<Alg>(alg);
    }
};

}  // namespace

std::shared_ptr<Template> make_essiv_template() { return std::make_shared<EssivTemplate>(); }

}  // namespace blkcrypt
