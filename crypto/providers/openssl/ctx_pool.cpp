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

CtxPool::~CtxPool() { clear(); }

void CtxPool::destroy(Slot* slot) noexcept {
    if (!slot) return;
    EVP_CIPHER_CTX_free(slot->ctx);
    delete slot;
}

void CtxPool::clear() noexcept {
    for (Slot* s : free_) destroy(s);
    free_.clear();
    EVP_CIPHER_CTX_free(master_);
    master_ = nullptr;
}

void CtxPool::reset(EVP_CIPHER_CTX* master) noexcept {
    std::lock_guard lk(mu_);
    clear();
    master_ = master;
}

CtxPool::Lease CtxPool::acquire() const {
    {
        std::lock_guard lk(mu_);
        if (!free_.empty()) {
            Slot* s = free_.back();
            free_.pop_back();
            return Lease(*this, s);
        }
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
    {
        std::lock_guard lk(mu_);
        if (free_.size() < kMaxFree) {
            try {
                free_.push_back(slot);
                return;
            } catch (...) {  // out of memory: free it instead
            }
        }
    }
    destroy(slot);
}

}  // namespace blkcrypt::ossl
