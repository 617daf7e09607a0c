// cascade(S1,S2[,S3]): two or three skciphers applied one after the other to
// the same data with the same IV, as TrueCrypt/VeraCrypt cipher chains
// ("serpent-twofish-aes" in xts mode). cryptsetup maps such a chain as stacked
// dm-crypt devices, one per cipher, all with the same sector numbers; one
// composition gives the same bytes in a single pass.
//
// Name: cascade(<skcipher>,<skcipher>[,<skcipher>]), e.g.
// cascade(xts(serpent),xts(twofish)). All arguments must have the same IV
// size and block size. Key = K1 || K2 [|| K3], equal shares, each a valid key
// of its skcipher. Encryption runs S1 first, then S2 (then S3); decryption
// the reverse. Each stage gets its own copy of the request IV, and req.iv is
// left unchanged (a chain has no single chaining value to hand back).
//
// When every argument is a single block cipher of one block size,
// cascade(aes,twofish) is itself a block cipher: each block through S1, then
// S2 (then S3). That is TrueCrypt's legacy "outer CBC" (cryptsetup's
// cbci-tcrypt): one CBC chain over the whole cascade, cbc(cascade(aes,twofish)),
// which no stack of devices can compute. Key as above.
#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <array>
#include <cstring>
#include <string>
#include <vector>

namespace blkcrypt {
namespace {

constexpr std::size_t kMinStages = 2;
constexpr std::size_t kMaxStages = 3;
constexpr std::size_t kMaxIv = 32;

// Equal key shares, each a valid key of its stage.
template <class Tfm>
Status split_setkey(std::vector<std::unique_ptr<Tfm>>& stages, ConstBytes key) {
    const std::size_t n = stages.size();
    if (key.empty() || key.size() % n) return Status::Invalid;
    const std::size_t share = key.size() / n;
    for (std::size_t i = 0; i < n; ++i)
        if (stages[i]->setkey(key.subspan(i * share, share)) != Status::Ok) return Status::Invalid;
    return Status::Ok;
}

class CascadeTfm final : public SkcipherTfm {
public:
    CascadeTfm(std::vector<std::unique_ptr<SkcipherTfm>> stages, std::size_t ivsize)
        : stages_(std::move(stages)), ivsize_(ivsize) {}

    Status setkey(ConstBytes key) override { return split_setkey(stages_, key); }

    Status encrypt(SkcipherRequest& req) const override { return crypt(req, true); }
    Status decrypt(SkcipherRequest& req) const override { return crypt(req, false); }

private:
    Status crypt(SkcipherRequest& req, bool enc) const {
        const std::size_t n = stages_.size();
        uint8_t iv[kMaxIv];
        for (std::size_t k = 0; k < n; ++k) {
            const std::size_t i = enc ? k : n - 1 - k;
            std::memcpy(iv, req.iv.data(), ivsize_);
            SkcipherRequest sub;
            // The first stage reads src; the later ones work in place in dst.
            sub.src = k == 0 ? req.src : req.dst;
            sub.dst = req.dst;
            sub.len = req.len;
            sub.iv = Bytes(iv, ivsize_);
            sub.flags = req.flags;
            const Status s = enc ? stages_[i]->encrypt(sub) : stages_[i]->decrypt(sub);
            if (s != Status::Ok) {
                secure_wipe(iv, sizeof iv);
                return s;
            }
        }
        secure_wipe(iv, sizeof iv);
        return Status::Ok;
    }

    std::vector<std::unique_ptr<SkcipherTfm>> stages_;
    std::size_t ivsize_;
};

class CascadeAlg final : public SkcipherAlg {
public:
    CascadeAlg(AlgInfo info, const std::vector<std::shared_ptr<const Alg>>& stages) : SkcipherAlg(std::move(info)) {
        for (const auto& s : stages) stages_.push_back(std::make_unique<Spawn<SkcipherAlg>>(*this, s));
    }
    std::unique_ptr<SkcipherTfm> create_tfm() const override {
        std::vector<std::unique_ptr<SkcipherTfm>> tfms;
        for (const auto& s : stages_) tfms.push_back(s->create_tfm());
        return std::make_unique<CascadeTfm>(std::move(tfms), info().ivsize);
    }

private:
    std::vector<std::unique_ptr<Spawn<SkcipherAlg>>> stages_;
};

class CascadeCipherTfm final : public CipherTfm {
public:
    explicit CascadeCipherTfm(std::vector<std::unique_ptr<CipherTfm>> stages) : stages_(std::move(stages)) {}
    Status setkey(ConstBytes key) override { return split_setkey(stages_, key); }
    void encrypt(const uint8_t* in, uint8_t* out, std::size_t nblocks) const override {
        stages_.front()->encrypt(in, out, nblocks);
        for (std::size_t i = 1; i < stages_.size(); ++i) stages_[i]->encrypt(out, out, nblocks);
    }
    void decrypt(const uint8_t* in, uint8_t* out, std::size_t nblocks) const override {
        stages_.back()->decrypt(in, out, nblocks);
        for (std::size_t i = stages_.size() - 1; i-- > 0;) stages_[i]->decrypt(out, out, nblocks);
    }

private:
    std::vector<std::unique_ptr<CipherTfm>> stages_;
};

class CascadeCipherAlg final : public CipherAlg {
public:
    CascadeCipherAlg(AlgInfo info, const std::vector<std::shared_ptr<const Alg>>& stages) : CipherAlg(std::move(info)) {
        for (const auto& s : stages) stages_.push_back(std::make_unique<Spawn<CipherAlg>>(*this, s));
    }
    std::unique_ptr<CipherTfm> create_tfm() const override {
        std::vector<std::unique_ptr<CipherTfm>> tfms;
        for (const auto& s : stages_) tfms.push_back(s->create_tfm());
        return std::make_unique<CascadeCipherTfm>(std::move(tfms));
    }

private:
    std::vector<std::unique_ptr<Spawn<CipherAlg>>> stages_;
};

void name_instance(AlgInfo& info, const std::vector<std::shared_ptr<const Alg>>& stages) {
    if (stages.size() == 2) set_instance_names(info, "cascade", {stages[0].get(), stages[1].get()});
    else set_instance_names(info, "cascade", {stages[0].get(), stages[1].get(), stages[2].get()});
}

// The block-cipher cascade, or nothing when an argument is not a block cipher.
Result<std::shared_ptr<Alg>> create_cipher_cascade(Registry& reg, const AlgName& name, std::string_view module) {
    std::vector<std::shared_ptr<const Alg>> stages;
    for (const auto& arg : name.args()) {
        auto s = grab_spawn(reg, "cascade", arg, AlgType::Cipher);
        if (!s || (*s)->info().type != AlgType::Cipher) return std::shared_ptr<Alg>();
        if (!stages.empty() && (*s)->info().blocksize != stages.front()->info().blocksize)
            return make_error(Status::Invalid, "cascade: '" + (*s)->info().name + "' and '" +
                                                   stages.front()->info().name + "' differ in block size");
        stages.push_back(std::move(*s));
    }
    AlgInfo info;
    info.module = std::string(module);
    name_instance(info, stages);
    info.type = AlgType::Cipher;
    info.needs_key = true;
    info.blocksize = stages.front()->info().blocksize;
    for (const auto& s : stages) {
        info.min_keysize += s->info().min_keysize;
        info.max_keysize += s->info().max_keysize;
    }
    return std::shared_ptr<Alg>(std::make_shared<CascadeCipherAlg>(std::move(info), stages));
}

class CascadeTemplate final : public Template {
public:
    std::string_view name() const override { return "cascade"; }

    Result<std::shared_ptr<Alg>> create(Registry& reg, const AlgName& name) const override {
        const std::size_t n = name.args().size();
        if (n < kMinStages || n > kMaxStages)
            return make_error(Status::Invalid, "cascade: takes 2 or 3 skciphers, not " + std::to_string(n));
        if (auto c = create_cipher_cascade(reg, name, module); !c || *c) return c;
        std::vector<std::shared_ptr<const Alg>> stages;
        for (const auto& arg : name.args()) {
            auto s = grab_spawn(reg, "cascade", arg, AlgType::Skcipher);
            if (!s) return s.error();
            const AlgInfo& a = (*s)->info();
            // A stage works in place on the previous stage's output: each
            // must complete before the next starts.
            if (a.async)
                return make_error(Status::Invalid,
                                  "cascade: '" + a.driver + "' is asynchronous; wrap cascade in cryptd instead");
            if (a.ivsize > kMaxIv)
                return make_error(Status::Invalid, "cascade: '" + a.name + "' has a " + std::to_string(a.ivsize) +
                                                       "-byte IV; cascade supports up to 32");
            if (!stages.empty()) {
                const AlgInfo& f = stages.front()->info();
                if (a.ivsize != f.ivsize || a.blocksize != f.blocksize)
                    return make_error(Status::Invalid, "cascade: '" + a.name + "' and '" + f.name +
                                                           "' differ in IV or block size");
            }
            stages.push_back(std::move(*s));
        }
        AlgInfo info;
        info.module = module;
        name_instance(info, stages);
        info.type = AlgType::Skcipher;
        info.needs_key = true;
        const AlgInfo& f = stages.front()->info();
        info.blocksize = f.blocksize;
        info.ivsize = f.ivsize;
        info.chunksize = f.chunksize;
        for (const auto& s : stages) {
            info.min_keysize += s->info().min_keysize;
            info.max_keysize += s->info().max_keysize;
            if (s->info().chunksize > info.chunksize) info.chunksize = s->info().chunksize;
        }
        return std::shared_ptr<Alg>(std::make_shared<CascadeAlg>(std::move(info), stages));
    }
};

}  // namespace

std::shared_ptr<Template> make_cascade_template() { return std::make_shared<CascadeTemplate>(); }

}  // namespace blkcrypt
