#include "ossl_common.hpp"

#include <openssl/err.h>

#include <new>

namespace blkcrypt::ossl {

EVP_CIPHER_CTX* keyed_ctx(const char* cipher, ConstBytes key, int enc, bool block_mode) {
    // Fetched explicitly: the EVP_aes_*() getters fetch again on every init.
    // The context keeps its own reference, so ours is released at once.
    EVP_CIPHER* c = EVP_CIPHER_fetch(nullptr, cipher, nullptr);
    EVP_CIPHER_CTX* ctx = c ? EVP_CIPHER_CTX_new() : nullptr;
    static const uint8_t zero_iv[EVP_MAX_IV_LENGTH] = {};
    bool ok = ctx && static_cast<std::size_t>(EVP_CIPHER_get_key_length(c)) == key.size() &&
              EVP_CipherInit_ex2(ctx, c, key.data(), block_mode ? zero_iv : nullptr, enc, nullptr) == 1 &&
              (!block_mode || EVP_CIPHER_CTX_set_padding(ctx, 0) == 1);
    EVP_CIPHER_free(c);
    if (!ok) {
        EVP_CIPHER_CTX_free(ctx);  // cleanses any key schedule
        ctx = nullptr;
    }
    ERR_clear_error();  // a refused key must not linger in this thread's queue
    return ctx;
}

Status key_pools(const char* cipher, ConstBytes key, bool block_mode, CtxPool& enc, CtxPool* dec) {
    EVP_CIPHER_CTX* e = keyed_ctx(cipher, key, 1, block_mode);
    EVP_CIPHER_CTX* d = dec && e ? keyed_ctx(cipher, key, 0, block_mode) : nullptr;
    if (!e || (dec && !d)) {
        EVP_CIPHER_CTX_free(e);
        EVP_CIPHER_CTX_free(d);
        return Status::Invalid;
    }
    enc.reset(e);
    if (dec) dec->reset(d);
    return Status::Ok;
}

CtxPool::~CtxPool() { clear(); }

void CtxPool::destroy(Slot* slot) noexcept {
    if (!slot) return;
    EVP_CIPHER_CTX_free(slot->ctx);
    delete slot;
}

void CtxPool::clear() noexcept {
    for (Cell& c : free_) destroy(c.slot.exchange(nullptr));
    EVP_CIPHER_CTX_free(master_);
    master_ = nullptr;
}

void CtxPool::reset(EVP_CIPHER_CTX* master) noexcept {
    clear();
    master_ = master;
}

namespace {
// Where this thread starts looking: threads spread over the cells, so in the
// common case each finds its own context where it left it.
std::size_t home_cell(std::size_t cells) noexcept {
    static std::atomic<std::size_t> next{0};
    thread_local const std::size_t home = next.fetch_add(1, std::memory_order_relaxed);
    return home % cells;
}
}  // namespace

CtxPool::Lease CtxPool::acquire() const {
    const std::size_t home = home_cell(free_.size());
    for (std::size_t i = 0; i < free_.size(); ++i) {
        std::atomic<Slot*>& cell = free_[(home + i) % free_.size()].slot;
        // Look before taking: an exchange on an empty cell would still pull
        // its cache line away from the thread that owns it.
        if (!cell.load(std::memory_order_relaxed)) continue;
        if (Slot* s = cell.exchange(nullptr, std::memory_order_acquire)) return Lease(*this, s);
    }
    // Copying only reads the master, which no request uses: no lock needed.
    // A copy's chain is zero, like the master's IV.
    Slot* s = master_ ? new (std::nothrow) Slot : nullptr;
    if (s && (!(s->ctx = EVP_CIPHER_CTX_new()) || EVP_CIPHER_CTX_copy(s->ctx, master_) != 1)) {
        destroy(s);
        s = nullptr;
        ERR_clear_error();
    }
    return Lease(*this, s);
}

void CtxPool::put(Slot* slot) const noexcept {
    if (!slot) return;
    const std::size_t home = home_cell(free_.size());
    for (std::size_t i = 0; i < free_.size(); ++i) {
        std::atomic<Slot*>& cell = free_[(home + i) % free_.size()].slot;
        Slot* empty = nullptr;
        if (!cell.load(std::memory_order_relaxed) &&
            cell.compare_exchange_strong(empty, slot, std::memory_order_release, std::memory_order_relaxed))
            return;
    }
    destroy(slot);  // every cell full
}

}  // namespace blkcrypt::ossl
