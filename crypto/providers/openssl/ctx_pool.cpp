#include "ossl_common.hpp"

#include <openssl/err.h>

namespace blkcrypt::ossl {

EVP_CIPHER_CTX* keyed_ctx(const char* cipher, ConstBytes key, int enc) {
    // Fetched explicitly: the EVP_aes_*() getters fetch again on every init.
    // The context keeps its own reference, so ours is released at once.
    EVP_CIPHER* c = EVP_CIPHER_fetch(nullptr, cipher, nullptr);
    EVP_CIPHER_CTX* ctx = c ? EVP_CIPHER_CTX_new() : nullptr;
    bool ok = ctx && static_cast<std::size_t>(EVP_CIPHER_get_key_length(c)) == key.size() &&
              EVP_CipherInit_ex2(ctx, c, key.data(), nullptr, enc, nullptr) == 1 &&
              EVP_CIPHER_CTX_set_padding(ctx, 0) == 1;
    EVP_CIPHER_free(c);
    if (!ok) {
        EVP_CIPHER_CTX_free(ctx);  // cleanses any key schedule
        ctx = nullptr;
    }
    ERR_clear_error();  // a refused key must not linger in this thread's queue
    return ctx;
}

CtxPool::~CtxPool() { clear(); }

void CtxPool::clear() noexcept {
    for (EVP_CIPHER_CTX* c : free_) EVP_CIPHER_CTX_free(c);
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
            EVP_CIPHER_CTX* c = free_.back();
            free_.pop_back();
            return Lease(*this, c);
        }
    }
    // Copying only reads the master, which no request uses: no lock needed.
    EVP_CIPHER_CTX* c = master_ ? EVP_CIPHER_CTX_new() : nullptr;
    if (c && EVP_CIPHER_CTX_copy(c, master_) != 1) {
        EVP_CIPHER_CTX_free(c);
        c = nullptr;
        ERR_clear_error();
    }
    return Lease(*this, c);
}

void CtxPool::put(EVP_CIPHER_CTX* ctx) const noexcept {
    if (!ctx) return;
    {
        std::lock_guard lk(mu_);
        if (free_.size() < kMaxFree) {
            try {
                free_.push_back(ctx);
                return;
            } catch (...) {  // out of memory: free it instead
            }
        }
    }
    EVP_CIPHER_CTX_free(ctx);
}

}  // namespace blkcrypt::ossl
