// hmac(H): the keyed-hash MAC of RFC 2104 over any unkeyed shash H (the
// kernel's crypto/hmac.c). Used by authenc-style AEADs, dm-integrity and
// dm-verity's HMAC options, PBKDF2 and anyone wanting a MAC from a hash.
//
// Name: hmac(<hash>), e.g. hmac(sha256), hmac(sha3-256), hmac(rmd160). The
// argument is the generic name of an shash whose digest is no longer than its
// block. Keys of any length are accepted; longer than H's block, they are
// hashed first (RFC 2104 section 2).
//
// setkey hashes (key ^ ipad) and (key ^ opad) once and keeps H's exported
// state after each, so a digest costs two imports instead of two extra block
// compressions. An exported hmac state is the inner hash's state (statesize
// = H's). If H cannot export (statesize 0) the padded keys are kept instead
// and hashed on every init.
#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <algorithm>

namespace blkcrypt {
namespace {

constexpr std::size_t kMaxDigest = 64;  // the kernel's HASH_MAX_DIGESTSIZE
constexpr uint8_t kIpad = 0x36;
constexpr uint8_t kOpad = 0x5c;

class HmacTfm;

class HmacState final : public ShashState {
public:
    HmacState(const HmacTfm& tfm, std::unique_ptr<ShashState> inner)
        : tfm_(tfm), inner_(std::move(inner)) {}
    void init() override;
    void update(ConstBytes data) override { inner_->update(data); }
    void final(Bytes out) override;
    void finup(ConstBytes data, Bytes out) override {
        inner_->update(data);
        final(out);
    }
    void export_state(Bytes out) const override { inner_->export_state(out); }
    Status import_state(ConstBytes in) override { return inner_->import_state(in); }

private:
    const HmacTfm& tfm_;
    std::unique_ptr<ShashState> inner_;
};

class HmacTfm final : public ShashTfm {
public:
    HmacTfm(std::unique_ptr<ShashTfm> hash, const AlgInfo& h)
        : hash_(std::move(hash)), bs_(h.blocksize), ds_(h.digestsize), ss_(h.statesize) {
        // Defined behaviour even if used unkeyed; the handle refuses that (NoKey).
        (void)setkey({});
    }

    Status setkey(ConstBytes key) override {
        SecureBuffer k(bs_);  // the key zero-padded to one block
        if (key.size() > bs_) hash_->digest(key, k.span().first(ds_));
        else std::copy(key.begin(), key.end(), k.data());
        SecureBuffer pad(bs_);
        if (ss_) {
            auto st = hash_->new_state();
            ipad_.resize(ss_);
            opad_.resize(ss_);
            for (auto [fill, out] : {std::pair{kIpad, &ipad_}, std::pair{kOpad, &opad_}}) {
                for (std::size_t i = 0; i < bs_; ++i) pad[i] = static_cast<uint8_t>(k[i] ^ fill);
                st->init();
                st->update(pad);
                st->export_state(out->span());
            }
            // The last state held the opad block: leave nothing behind.
            st->init();
        } else {
            ipad_.resize(bs_);
            opad_.resize(bs_);
            for (std::size_t i = 0; i < bs_; ++i) {
                ipad_[i] = static_cast<uint8_t>(k[i] ^ kIpad);
                opad_[i] = static_cast<uint8_t>(k[i] ^ kOpad);
            }
        }
        return Status::Ok;
    }

    std::unique_ptr<ShashState> new_state() const override {
        return std::make_unique<HmacState>(*this, hash_->new_state());
    }

    // Start `st` after the (key ^ pad) block.
    void start(ShashState& st, bool outer) const {
        const SecureBuffer& p = outer ? opad_ : ipad_;
        if (ss_) {
            (void)st.import_state(p);  // exported by H itself in setkey
        } else {
            st.init();
            st.update(p);
        }
    }
    std::size_t digestsize() const noexcept { return ds_; }

private:
    std::unique_ptr<ShashTfm> hash_;
    std::size_t bs_, ds_, ss_;
    SecureBuffer ipad_, opad_;  // exported states after the pad block, or the pad blocks
};

void HmacState::init() { tfm_.start(*inner_, false); }

void HmacState::final(Bytes out) {
    uint8_t ihash[kMaxDigest];
    const std::size_t ds = tfm_.digestsize();
    inner_->final(Bytes(ihash, ds));
    tfm_.start(*inner_, true);
    inner_->finup(ConstBytes(ihash, ds), out);
    secure_wipe(ihash, sizeof ihash);
}

class HmacAlg final : public ShashAlg {
public:
    HmacAlg(AlgInfo info, std::shared_ptr<const Alg> hash)
        : ShashAlg(std::move(info)), hash_(*this, std::move(hash)) {}
    std::unique_ptr<ShashTfm> create_tfm() const override {
        return std::make_unique<HmacTfm>(hash_.create_tfm(), hash_.info());
    }

private:
    Spawn<ShashAlg> hash_;
};

class HmacTemplate final : public Template {
public:
    std::string_view name() const override { return "hmac"; }

    Result<std::shared_ptr<Alg>> create(Registry& reg, const AlgName& name) const override {
        if (auto r = check_arg_count(name, 1); !r) return r.error();
        auto hash = grab_spawn(reg, "hmac", name.args()[0], AlgType::Shash);
        if (!hash) return hash.error();
        const AlgInfo& h = (*hash)->info();
        if (h.type != AlgType::Shash)
            return make_error(Status::Invalid, "hmac: '" + h.name + "' is not a synchronous hash");
        if (h.needs_key)
            return make_error(Status::Invalid, "hmac: '" + h.name + "' is keyed");
        if (h.digestsize == 0 || h.digestsize > kMaxDigest)
            return make_error(Status::Invalid, "hmac: '" + h.name + "' has a " +
                                                   std::to_string(h.digestsize) +
                                                   "-byte digest; hmac supports 1 to 64");
        if (h.digestsize > h.blocksize)
            return make_error(Status::Invalid,
                              "hmac: '" + h.name + "' has a digest (" + std::to_string(h.digestsize) +
                                  " bytes) longer than its block (" + std::to_string(h.blocksize) +
                                  " bytes)");
        AlgInfo info;
        info.module = module;
        set_instance_names(info, "hmac", {hash->get()});
        info.type = AlgType::Shash;
        info.needs_key = true;
        info.blocksize = h.blocksize;
        info.digestsize = h.digestsize;
        info.statesize = h.statesize;
        info.min_keysize = 0;  // any length: RFC 2104 hashes long keys
        auto alg = std::make_shared<HmacAlg>(info, *hash);
        return std::shared_ptr<Alg>(alg);
    }
};

}  // namespace

std::shared_ptr<Template> make_hmac_template() { return std::make_shared<HmacTemplate>(); }

}  // namespace blkcrypt
