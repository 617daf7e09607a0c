// Shash: a synchronous hash or MAC ("sha256", "hmac(sha256)", "crc32c").
// The handle holds the key; a ShashDesc holds one running computation, so
// many descs (one per thread) can share one keyed Shash.
#pragma once

#include <blkcrypt/alg_ref.hpp>
#include <blkcrypt/bytes.hpp>
#include <blkcrypt/status.hpp>

#include <memory>
#include <span>
#include <string_view>

namespace blkcrypt {

class Registry;
class ShashTfm;
class ShashState;
class ShashDesc;

class Shash {
public:
    static Result<Shash> alloc(Registry& reg, std::string_view name);
    Shash(Shash&&) noexcept;
    Shash& operator=(Shash&&) noexcept;
    ~Shash();

    const AlgInfo& info() const noexcept { return ref_.info(); }
    std::size_t digestsize() const noexcept { return info().digestsize; }
    std::size_t statesize() const noexcept { return info().statesize; }
    std::size_t blocksize() const noexcept { return info().blocksize; }

    Status setkey(ConstBytes key);
    // One-shot digest; out must hold digestsize() bytes. Thread-safe.
    Status digest(ConstBytes data, Bytes out) const;
    // A new running computation on this (keyed) transform. It must not
    // outlive the Shash. Fails with NoKey for a keyed hash without a key.
    Result<ShashDesc> new_desc() const;

private:
    friend class ShashDesc;
    Shash(AlgRef ref, std::unique_ptr<ShashTfm> tfm);
    AlgRef ref_;
    std::unique_ptr<ShashTfm> tfm_;
    bool keyed_ = false;
};

class ShashDesc {
public:
    ShashDesc(ShashDesc&&) noexcept;
    ShashDesc& operator=(ShashDesc&&) noexcept;
    ~ShashDesc();

    // Cannot fail (the desc exists only for a keyed transform): no Status.
    void init();
    void update(ConstBytes data);
    Status final(Bytes out);                    // out: digestsize bytes
    Status finup(ConstBytes data, Bytes out);   // update + final
    Status digest(ConstBytes data, Bytes out);  // init + update + final
    // The intermediate state as statesize() bytes, and back. For md5, sha1
    // and sha2 the layout is the kernel's (struct md5_state, sha256_state...).
    Status export_state(Bytes out) const;
    Status import_state(ConstBytes in);

    // Finishes data.size() messages of equal length, each continuing from
    // the current state (a shared salted prefix, as verity uses): out[i] =
    // finup(data[i]) from this state. The state itself is left unchanged.
    // Drivers may interleave messages; needs an exportable state.
    Status finup_mb(std::span<const ConstBytes> data, std::span<const Bytes> out);
    // The number of messages the driver hashes at once (1: no interleaving).
    unsigned mb_width() const noexcept;

    // A counter-chained digest, as BitLocker stretches a password: rounds
    // times, msg (its first digestsize() bytes the previous digest, its last
    // 8 a little-endian counter, i in round i) is hashed from init and its
    // digest written over its head. msg then starts with the last digest and
    // ends with the counter `rounds`. A driver may run the loop as one call.
    // The desc's own state is left undefined.
    Status chain(Bytes msg, uint64_t rounds);

    std::size_t digestsize() const noexcept;
    std::size_t statesize() const noexcept;

private:
    friend class Shash;
    explicit ShashDesc(std::unique_ptr<ShashState> st, const AlgInfo* info);
    std::unique_ptr<ShashState> st_;
    const AlgInfo* info_;
};

}  // namespace blkcrypt
