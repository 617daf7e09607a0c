// For provider, template and plugin authors: the algorithm descriptors and
// the transform interfaces behind the public handles.
//
//   Alg        immutable description + factory; one per registered driver
//   *Tfm       a keyed transform made by the Alg (one per handle); its
//              operations are const and thread-safe after setkey
//   *State     per-computation hash state (ShashDesc / AhashRequest)
//
// The public handles validate arguments (key set, IV size, lengths within the
// scatter-gather lists) before calling a Tfm, so implementations may assume
// them. Mode-specific rules (e.g. cbc needs whole blocks) are the Tfm's.
#pragma once

#include <blkcrypt/aead.hpp>
#include <blkcrypt/ahash.hpp>
#include <blkcrypt/alg_info.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/skcipher.hpp>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace blkcrypt {

class Alg;
namespace detail {
// The registry's bookkeeping of one algorithm (its spawns, test name, users,
// superseded flag): defined inside the library only, so what a plugin author
// subclasses carries none of it as a field to get wrong.
struct AlgRecord;
AlgRecord& record_of(const Alg& alg) noexcept;
// Spawn<T> calls this: `spawn` becomes part of what `owner` was built from.
void record_spawn(Alg& owner, std::shared_ptr<const Alg> spawn);
// What an instance was built from, in the order its spawns were constructed
// (empty for a provider's driver): cryptd(X) -> {X}, essiv(M,H) -> {M, C, H}.
const std::vector<std::shared_ptr<const Alg>>& spawns_of(const Alg& alg) noexcept;
}  // namespace detail

class Alg {
public:
    explicit Alg(AlgInfo info);
    virtual ~Alg();
    Alg(const Alg&) = delete;
    Alg& operator=(const Alg&) = delete;

    const AlgInfo& info() const noexcept { return info_; }

    // Who registered it, as `blkcrypt list` shows (the plugin loader sets it).
    void set_module(std::string module) { info_.module = std::move(module); }

protected:
    // The generic name whose vectors test this algorithm, when it is not
    // info().name (cryptd(X) is tested with X's vectors).
    void set_test_name(std::string name);

    AlgInfo info_;

private:
    friend detail::AlgRecord& detail::record_of(const Alg&) noexcept;
    std::unique_ptr<detail::AlgRecord> rec_;
};

// ---- cipher: one block at a time (or n independent blocks) ---------------
class CipherTfm {
public:
    virtual ~CipherTfm() = default;
    virtual Status setkey(ConstBytes key) = 0;
    virtual void encrypt(const uint8_t* in, uint8_t* out, std::size_t nblocks) const = 0;
    virtual void decrypt(const uint8_t* in, uint8_t* out, std::size_t nblocks) const = 0;
};

class CipherAlg : public Alg {
public:
    using Alg::Alg;
    virtual std::unique_ptr<CipherTfm> create_tfm() const = 0;
};

// ---- skcipher ---------------------------------------------------------------
class SkcipherTfm {
public:
    virtual ~SkcipherTfm() = default;
    virtual Status setkey(ConstBytes key) = 0;
    virtual Status set_sector_params(const SectorParams&) { return Status::Unsupported; }
    virtual Status encrypt(SkcipherRequest& req) const = 0;
    virtual Status decrypt(SkcipherRequest& req) const = 0;
};

class SkcipherAlg : public Alg {
public:
    using Alg::Alg;
    virtual std::unique_ptr<SkcipherTfm> create_tfm() const = 0;
};

// ---- aead ---------------------------------------------------------------------
class AeadTfm {
public:
    virtual ~AeadTfm() = default;
    virtual Status setkey(ConstBytes key) = 0;
    virtual Status setauthsize(std::size_t n) = 0;
    // authsize is the value last accepted by setauthsize (the handle keeps it).
    virtual Status encrypt(AeadRequest& req, std::size_t authsize) const = 0;
    virtual Status decrypt(AeadRequest& req, std::size_t authsize) const = 0;
};

class AeadAlg : public Alg {
public:
    using Alg::Alg;
    virtual std::unique_ptr<AeadTfm> create_tfm() const = 0;
};

// ---- shash --------------------------------------------------------------------
class ShashState {
public:
    virtual ~ShashState() = default;
    virtual void init() = 0;
    virtual void update(ConstBytes data) = 0;
    virtual void final(Bytes out) = 0;  // out.size() == digestsize
    virtual void finup(ConstBytes data, Bytes out) { update(data); final(out); }
    virtual void export_state(Bytes out) const = 0;  // out.size() == statesize
    virtual Status import_state(ConstBytes in) = 0;  // Invalid on a malformed state
    // finup of n equal-length messages, each from the current state, which is
    // left unchanged. Drivers that interleave messages (multi-buffer SHA)
    // override this; false means "not accelerated" and ShashDesc runs the
    // messages one by one through export/import instead.
    virtual bool finup_mb(const ConstBytes*, const Bytes*, std::size_t) { return false; }
    // How many messages finup_mb processes at once (1 = no interleaving).
    virtual unsigned mb_width() const noexcept { return 1; }
    // ShashDesc::chain's loop in one call, for drivers that can keep the
    // chaining value in registers; false: ShashDesc runs it round by round.
    virtual bool chain(Bytes, uint64_t) { return false; }
};

class ShashTfm {
public:
    virtual ~ShashTfm() = default;
    virtual Status setkey(ConstBytes) { return Status::Unsupported; }
    virtual std::unique_ptr<ShashState> new_state() const = 0;
    // One-shot; override to avoid the allocation of new_state().
    virtual void digest(ConstBytes data, Bytes out) const {
        auto st = new_state();
        st->init();
        st->finup(data, out);
    }
};

class ShashAlg : public Alg {
public:
    using Alg::Alg;
    virtual std::unique_ptr<ShashTfm> create_tfm() const = 0;
};

// ---- ahash --------------------------------------------------------------------
// Base of a request's private state; implementations derive from it.
class AhashState {
public:
    virtual ~AhashState() = default;
};

class AhashTfm {
public:
    virtual ~AhashTfm() = default;
    virtual Status setkey(ConstBytes) { return Status::Unsupported; }
    virtual std::unique_ptr<AhashState> new_state() const = 0;
    virtual Status init(AhashRequest& req) const = 0;
    virtual Status update(AhashRequest& req) const = 0;
    virtual Status final(AhashRequest& req) const = 0;
    virtual Status finup(AhashRequest& req) const = 0;
    virtual Status digest(AhashRequest& req) const = 0;
    virtual Status export_state(const AhashRequest& req, Bytes out) const = 0;
    virtual Status import_state(AhashRequest& req, ConstBytes in) const = 0;
};

class AhashAlg : public Alg {
public:
    using Alg::Alg;
    virtual std::unique_ptr<AhashTfm> create_tfm() const = 0;
};

// A handle's move-assignment: the old transform goes before its algorithm,
// so a plugin's code stays mapped while its transform is destroyed.
template <class Tfm>
void rebind(AlgRef& ref, std::unique_ptr<Tfm>& tfm, AlgRef&& new_ref, std::unique_ptr<Tfm>&& new_tfm) noexcept {
    tfm.reset();
    ref = std::move(new_ref);
    tfm = std::move(new_tfm);
}

// The same algorithm, in a shared_ptr that keeps `module` (a plugin's shared
// object) loaded until the algorithm is destroyed. Its control block lives in
// libblkcrypt, so the plugin's code is never unmapped while it still runs.
std::shared_ptr<Alg> bind_module(std::shared_ptr<Alg> alg, std::shared_ptr<void> module);

// ---- type adaptation: the one place that turns an Alg into a transform ----
// `alg` must be usable as the type asked for (Registry::lookup guarantees it):
// a cipher serves as an ECB skcipher (ivsize 0, whole blocks only) and any
// shash as a synchronous ahash; otherwise the types must match.
std::unique_ptr<CipherTfm> create_cipher_tfm(const Alg& alg);
std::unique_ptr<SkcipherTfm> create_skcipher_tfm(const Alg& alg);
std::unique_ptr<AeadTfm> create_aead_tfm(const Alg& alg);
std::unique_ptr<ShashTfm> create_shash_tfm(const Alg& alg);
std::unique_ptr<AhashTfm> create_ahash_tfm(const Alg& alg);

// The same by algorithm class: AlgKind<SkcipherAlg>::type == AlgType::Skcipher, ...
template <class T> struct AlgKind;
template <AlgType T, class TfmT, std::unique_ptr<TfmT> (*Create)(const Alg&)>
struct AlgKindOf {
    static constexpr AlgType type = T;
    using Tfm = TfmT;
    static std::unique_ptr<Tfm> create(const Alg& a) { return Create(a); }
};
template <> struct AlgKind<CipherAlg> : AlgKindOf<AlgType::Cipher, CipherTfm, create_cipher_tfm> {};
template <> struct AlgKind<SkcipherAlg> : AlgKindOf<AlgType::Skcipher, SkcipherTfm, create_skcipher_tfm> {};
template <> struct AlgKind<AeadAlg> : AlgKindOf<AlgType::Aead, AeadTfm, create_aead_tfm> {};
template <> struct AlgKind<ShashAlg> : AlgKindOf<AlgType::Shash, ShashTfm, create_shash_tfm> {};
template <> struct AlgKind<AhashAlg> : AlgKindOf<AlgType::Ahash, AhashTfm, create_ahash_tfm> {};

}  // namespace blkcrypt
