// Template: builds an algorithm instance from a name such as "cbc(aes)".
//
// create() looks its arguments up in the registry (grab_spawn<T>), checks the
// combination and returns a new Alg whose names are derived mechanically:
// generic "tmpl(inner generic names)", driver "tmpl(inner driver names)".
// The instance keeps each argument as a Spawn<T> member, which records itself
// with the instance (so the registry can supersede it) and makes transforms
// of the argument's type. The registry self-tests and registers what
// create() returns.
//
// A mode over one block cipher (ecb, cbc, ctr, xts, cmac...) needs only its
// transform and a CipherMode: make_cipher_mode<Tfm>() does the rest.
#pragma once

#include <blkcrypt/alg_name.hpp>
#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/registry.hpp>

#include <cassert>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace blkcrypt {

class Template {
public:
    virtual ~Template() = default;
    virtual std::string_view name() const = 0;
    virtual Result<std::shared_ptr<Alg>> create(Registry& reg, const AlgName& name) const = 0;

    std::string module = "blkcrypt";  // shown by `blkcrypt list`
    std::shared_ptr<void> module_handle;  // a plugin's shared object
};

// Fill name/driver/module/priority of an instance from its spawns, in order.
// Priority is the first spawn's (the kernel's rule for most templates).
void set_instance_names(AlgInfo& info, std::string_view tmpl,
                        std::initializer_list<const Alg*> spawns);

// Look up `name` as `type` for use as a spawn: a Result with a message that
// names the template asking ("cbc: ...").
Result<std::shared_ptr<const Alg>> grab_spawn(Registry& reg, std::string_view tmpl,
                                              const AlgName& name, AlgType type);

// Require exactly n arguments.
Result<void> check_arg_count(const AlgName& name, std::size_t n);

// ---- typed spawns -------------------------------------------------------------

template <class T> class Spawn;

// An argument looked up for a template (grab_spawn<T>) and not yet part of an
// instance: enough to check it and to probe it.
template <class T>
class SpawnRef {
public:
    const Alg& alg() const noexcept { return *alg_; }
    const AlgInfo& info() const noexcept { return alg_->info(); }
    std::unique_ptr<typename AlgKind<T>::Tfm> create_tfm() const { return AlgKind<T>::create(*alg_); }

private:
    explicit SpawnRef(std::shared_ptr<const Alg> a) : alg_(std::move(a)) {}
    template <class U>
    friend Result<SpawnRef<U>> spawn_ref(std::string_view, std::shared_ptr<const Alg>);
    friend class Spawn<T>;
    std::shared_ptr<const Alg> alg_;
};

// Whether an algorithm of type `have` serves as `want` (a cipher as an ECB
// skcipher, an shash as an ahash).
bool usable_as(AlgType have, AlgType want) noexcept;

// An algorithm already looked up (cryptd looks up any type first) as a T.
template <class T>
Result<SpawnRef<T>> spawn_ref(std::string_view tmpl, std::shared_ptr<const Alg> alg) {
    if (!usable_as(alg->info().type, AlgKind<T>::type))
        return make_error(Status::Invalid, std::string(tmpl) + ": '" + alg->info().name + "' is " +
                                               to_string(alg->info().type) + ", not " +
                                               to_string(AlgKind<T>::type));
    return SpawnRef<T>(std::move(alg));
}

// Look `name` up as a T (CipherAlg, SkcipherAlg, ...): an error names the
// template asking ("cbc: ...").
template <class T>
Result<SpawnRef<T>> grab_spawn(Registry& reg, std::string_view tmpl, const AlgName& name) {
    auto r = grab_spawn(reg, tmpl, name, AlgKind<T>::type);
    if (!r) return r.error();
    return spawn_ref<T>(tmpl, std::move(r.value()));
}

// An instance's argument: constructed in the instance's member initialisers
// with the instance itself, it records itself as one of its spawns; there is
// nothing else to remember. alg() may be of a type usable as T (a cipher in
// a Spawn<SkcipherAlg>); create_tfm() adapts it.
template <class T>
class Spawn {
public:
    Spawn(Alg& owner, SpawnRef<T> ref) : alg_(std::move(ref.alg_)) { detail::record_spawn(owner, alg_); }
    // From grab_spawn(reg, tmpl, name, AlgKind<T>::type) (the untyped lookup).
    Spawn(Alg& owner, std::shared_ptr<const Alg> looked_up) : alg_(std::move(looked_up)) {
        assert(usable_as(alg_->info().type, AlgKind<T>::type));
        detail::record_spawn(owner, alg_);
    }
    Spawn(const Spawn&) = delete;
    Spawn& operator=(const Spawn&) = delete;

    const Alg& alg() const noexcept { return *alg_; }
    const AlgInfo& info() const noexcept { return alg_->info(); }
    const std::shared_ptr<const Alg>& ptr() const noexcept { return alg_; }
    std::unique_ptr<typename AlgKind<T>::Tfm> create_tfm() const { return AlgKind<T>::create(*alg_); }

private:
    std::shared_ptr<const Alg> alg_;
};

// ---- a mode over one block cipher (the kernel's skcipher_alloc_instance_simple)

// "NAME(cipher)": what differs between such modes. The instance's names,
// priority and module are derived; its sizes default to the cipher's block
// (blocksize, chunksize, ivsize; digestsize for a MAC) and key sizes.
struct CipherMode {
    std::string_view name;              // "cbc"
    std::size_t min_block = 1;          // accepted cipher block sizes
    std::size_t max_block = 32;
    std::size_t block_step = 1;         // block size a multiple of this
    std::string_view accepted;          // the refusal's end: "cbc supports 1 to 32"
    // Sizes that differ from the defaults (ecb: no IV; xts: a double key).
    void (*adjust)(AlgInfo& instance, const AlgInfo& cipher) = nullptr;
    // A further check of the cipher (xcbc: it takes a 16-byte key).
    Result<void> (*check)(const SpawnRef<CipherAlg>& cipher) = nullptr;
};

// The derived description of mode(cipher) as `type` (Skcipher or Shash), or
// why the cipher does not fit.
Result<AlgInfo> cipher_mode_info(const CipherMode& mode, AlgType type, const AlgInfo& cipher);

// A MAC's transform derives from ShashTfm; any other mode is an skcipher.
template <class Tfm>
using CipherModeBase = std::conditional_t<std::is_base_of_v<ShashTfm, Tfm>, ShashAlg, SkcipherAlg>;

template <class Tfm, class Base>
class CipherModeAlg final : public Base {
public:
    CipherModeAlg(AlgInfo info, SpawnRef<CipherAlg> cipher)
        : Base(std::move(info)), cipher_(*this, std::move(cipher)) {}
    // Tfm is constructed from the spawn and makes its cipher transform(s).
    decltype(std::declval<const Base&>().create_tfm()) create_tfm() const override {
        return std::make_unique<Tfm>(cipher_);
    }

private:
    Spawn<CipherAlg> cipher_;
};

template <class Tfm>
class CipherModeTemplate final : public Template {
public:
    explicit CipherModeTemplate(CipherMode mode) : mode_(mode) {}
    std::string_view name() const override { return mode_.name; }

    Result<std::shared_ptr<Alg>> create(Registry& reg, const AlgName& name) const override {
        if (auto r = check_arg_count(name, 1); !r) return r.error();
        auto cipher = grab_spawn<CipherAlg>(reg, mode_.name, name.args()[0]);
        if (!cipher) return cipher.error();
        using Base = CipherModeBase<Tfm>;
        auto info = cipher_mode_info(mode_, AlgKind<Base>::type, cipher->info());
        if (!info) return info.error();
        if (mode_.check)
            if (auto r = mode_.check(*cipher); !r) return r.error();
        info->module = module;
        return std::shared_ptr<Alg>(
            std::make_shared<CipherModeAlg<Tfm, Base>>(std::move(*info), std::move(*cipher)));
    }

private:
    CipherMode mode_;
};

// The usual shape of such a mode's transform: one cipher transform keyed with
// the whole key (a refused key is Invalid), whose block size is bs_, and one
// crypt(req, enc) for both directions.
class CipherModeTfm : public SkcipherTfm {
public:
    explicit CipherModeTfm(const Spawn<CipherAlg>& c) : cipher_(c.create_tfm()), bs_(c.info().blocksize) {}
    Status setkey(ConstBytes key) override {
        return cipher_->setkey(key) == Status::Ok ? Status::Ok : Status::Invalid;
    }
    Status encrypt(SkcipherRequest& req) const final { return crypt(req, true); }
    Status decrypt(SkcipherRequest& req) const final { return crypt(req, false); }

protected:
    virtual Status crypt(SkcipherRequest& req, bool enc) const = 0;

    std::unique_ptr<CipherTfm> cipher_;
    const std::size_t bs_;
};

// Tfm: an SkcipherTfm (or a ShashTfm, for a MAC) constructible from
// const Spawn<CipherAlg>&, e.g. a CipherModeTfm.
template <class Tfm>
std::shared_ptr<Template> make_cipher_mode(CipherMode mode) {
    return std::make_shared<CipherModeTemplate<Tfm>>(mode);
}

}  // namespace blkcrypt
