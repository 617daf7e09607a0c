// Private to the OpenSSL provider: the factories provider.cpp registers and
// the pool of keyed cipher contexts the skciphers and gcm share. OpenSSL
// types appear only in this folder.
//
// No file here may be named like an OpenSSL header (evp.h, sha.h...):
// crypto/providers is on the include path, so <openssl/evp.h> would find it.
#pragma once

#include <blkcrypt/internal/alg.hpp>

#include <openssl/evp.h>

#include <cstddef>
#include <cstdint>
#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace blkcrypt::ossl {

std::vector<std::shared_ptr<Alg>> make_skciphers();  // skciphers.cpp
std::vector<std::shared_ptr<Alg>> make_aeads();      // gcm.cpp
std::vector<std::shared_ptr<Alg>> make_hashes();     // hashes.cpp

// Above the Crypto++ primitives (100) and the template compositions built on
// them, which inherit 100: a generic lookup gets OpenSSL, driver names still
// reach the compositions.
constexpr int kPriority = 300;

inline AlgInfo provider_info(std::string name, std::string driver, AlgType type) {
    AlgInfo info;
    info.name = std::move(name);
    info.driver = std::move(driver);
    info.module = "openssl";
    info.priority = kPriority;
    info.type = type;
    return info;
}

// A context of `cipher` (an OpenSSL name such as "AES-256-XTS") keyed with
// key for encryption (enc = 1) or decryption (0). For the block modes (ecb,
// cbc: block_mode) padding is turned off and the IV set to zero, so a cbc
// context starts with a known chaining value. nullptr when OpenSSL refuses
// the key; the error queue is cleared either way.
EVP_CIPHER_CTX* keyed_ctx(const char* cipher, ConstBytes key, int enc, bool block_mode);

// EVP_CIPHER_CTX holds per-operation state (IV, counter, GHASH) and cannot be
// shared between threads, while our transforms must be. So each transform
// keeps one keyed master that is never used for data, and free copies in a
// row of cells: acquire() takes one (or copies the master when all are
// empty), the Lease puts it back. Lock-free, each thread starting at its own
// cell: the dm-crypt workers take a context per sector, and a shared mutex
// there made them wait on each other. Each copy carries `chain`, the chaining value its
// context holds (cbc: the last ciphertext block it processed; zero when
// fresh), so cbc can steer it to a new IV without a costly re-init.
class CtxPool {
public:
    static constexpr std::size_t kChain = 16;

    struct Slot {
        EVP_CIPHER_CTX* ctx = nullptr;
        uint8_t chain[kChain] = {};
    };

    CtxPool() = default;
    ~CtxPool();
    CtxPool(const CtxPool&) = delete;
    CtxPool& operator=(const CtxPool&) = delete;

    // Takes ownership of a keyed master; frees the old one and its copies.
    // Not concurrent with acquire() (setkey is not concurrent with requests).
    void reset(EVP_CIPHER_CTX* master) noexcept;

    class Lease {
    public:
        Lease(const CtxPool& pool, Slot* slot) noexcept : pool_(pool), slot_(slot) {}
        ~Lease() { pool_.put(slot_); }
        Lease(const Lease&) = delete;
        Lease& operator=(const Lease&) = delete;
        EVP_CIPHER_CTX* get() const noexcept { return slot_->ctx; }
        uint8_t* chain() const noexcept { return slot_->chain; }
        explicit operator bool() const noexcept { return slot_ != nullptr; }
        // After a failed operation the context's state is unknown: free it
        // instead of returning it to the pool.
        void discard() noexcept {
            pool_.destroy(slot_);
            slot_ = nullptr;
        }

    private:
        const CtxPool& pool_;
        Slot* slot_;
    };

    // A context keyed like the master; false (operator bool) when out of memory.
    Lease acquire() const;

private:
    void put(Slot* slot) const noexcept;
    static void destroy(Slot* slot) noexcept;
    void clear() noexcept;

    // Enough for every core of a busy machine; more are freed on return
    // rather than kept (each holds a key schedule).
    static constexpr std::size_t kMaxFree = 64;
    // One cache line per cell: threads at different cells never share one.
    struct alignas(64) Cell {
        std::atomic<Slot*> slot{nullptr};
    };

    EVP_CIPHER_CTX* master_ = nullptr;
    mutable std::array<Cell, kMaxFree> free_;
};

// Keys a transform's pools: `enc` always, `dec` unless it is null (ctr only
// encrypts). Both take the new key or neither does, so a refused key leaves
// the transform as it was. Invalid when OpenSSL refuses the key.
Status key_pools(const char* cipher, ConstBytes key, bool block_mode, CtxPool& enc, CtxPool* dec);

}  // namespace blkcrypt::ossl
