#include <blkcrypt/secure_buffer.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <new>

#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

namespace blkcrypt {

void secure_wipe(void* p, std::size_t n) noexcept {
    if (p && n) explicit_bzero(p, n);
}

namespace {

// Secrets live in memory that is locked (never swapped out) and left out of
// core dumps. Small buffers (keys, IVs, key schedules) come from size classes
// carved out of locked 64 KiB slabs, so a key costs no system call; larger ones
// get pages of their own. Locking is best effort: past RLIMIT_MEMLOCK the
// memory is still wiped and excluded from dumps, only not locked.
constexpr std::size_t kMinClass = 32, kMaxClass = 4096, kSlab = 64 * 1024;
constexpr std::size_t kClasses = 8;  // 32, 64, ..., 4096

struct FreeBlock {
    FreeBlock* next;
};

std::size_t class_of(std::size_t n) {
    std::size_t c = 0;
    for (std::size_t sz = kMinClass; sz < n; sz <<= 1) ++c;
    return c;
}

void* map_locked(std::size_t bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    (void)::mlock(p, bytes);                   // best effort, see above
    (void)::madvise(p, bytes, MADV_DONTDUMP);  // advice; kernels without it ignore it
    return p;
}

std::size_t page_round(std::size_t n) {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    return (n + page - 1) / page * page;
}

class LockedPool {
public:
    void* allocate(std::size_t n) {
        if (n > kMaxClass) {
            void* p = map_locked(page_round(n));
            if (!p) throw std::bad_alloc();
            return p;  // fresh anonymous pages are zero
        }
        const std::size_t c = class_of(n);
        std::lock_guard lk(mu_);
        if (!free_[c] && !refill(c)) throw std::bad_alloc();
        FreeBlock* b = free_[c];
        free_[c] = b->next;
        b->next = nullptr;  // the block is handed out zeroed (it was wiped when freed)
        return b;
    }

    // p was wiped by the caller (n bytes); the link word is cleared on reuse.
    void deallocate(void* p, std::size_t n) noexcept {
        if (n > kMaxClass) {
            ::munmap(p, page_round(n));
            return;
        }
        const std::size_t c = class_of(n);
        std::lock_guard lk(mu_);
        auto* b = static_cast<FreeBlock*>(p);
        b->next = free_[c];
        free_[c] = b;
    }

private:
    bool refill(std::size_t c) {
        auto* slab = static_cast<uint8_t*>(map_locked(kSlab));
        if (!slab) return false;
        const std::size_t size = kMinClass << c;
        for (std::size_t off = 0; off + size <= kSlab; off += size) {
            auto* b = reinterpret_cast<FreeBlock*>(slab + off);
            b->next = free_[c];
            free_[c] = b;
        }
        return true;  // slabs are kept for reuse: secrets are few and small
    }

    std::mutex mu_;
    std::array<FreeBlock*, kClasses> free_{};
};

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BLKCRYPT_PLAIN_SECRET_HEAP 1  // sanitizers watch the ordinary heap only
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define BLKCRYPT_PLAIN_SECRET_HEAP 1
#endif
#endif

#ifdef BLKCRYPT_PLAIN_SECRET_HEAP
// Under sanitizers secrets use the heap, so out-of-bounds access to a key is
// still caught; the locking is what is given up there.
struct HeapPool {
    void* allocate(std::size_t n) { return new uint8_t[n](); }
    void deallocate(void* p, std::size_t) noexcept { delete[] static_cast<uint8_t*>(p); }
};
HeapPool& pool() {
    static HeapPool p;
    return p;
}
#else
LockedPool& pool() {
    static LockedPool* p = new LockedPool;  // never destroyed: buffers may outlive statics
    return *p;
}
#endif

}  // namespace

void detail::SecretDeleter::operator()(uint8_t* p) const noexcept { pool().deallocate(p, n); }

SecureBuffer::SecureBuffer(std::size_t n)
    : p_(n ? static_cast<uint8_t*>(pool().allocate(n)) : nullptr, detail::SecretDeleter{n}), n_(n) {}

SecureBuffer::SecureBuffer(ConstBytes src) { assign(src); }

SecureBuffer::SecureBuffer(const SecureBuffer& o) { assign(o.span()); }

SecureBuffer& SecureBuffer::operator=(const SecureBuffer& o) {
    if (this != &o) assign(o.span());
    return *this;
}

SecureBuffer::SecureBuffer(SecureBuffer&& o) noexcept : p_(std::move(o.p_)), n_(o.n_) { o.n_ = 0; }

SecureBuffer& SecureBuffer::operator=(SecureBuffer&& o) noexcept {
    if (this != &o) {
        clear();
        p_ = std::move(o.p_);
        n_ = o.n_;
        o.n_ = 0;
    }
    return *this;
}

SecureBuffer::~SecureBuffer() { clear(); }

void SecureBuffer::clear() noexcept {
    // The whole block is wiped, so the pool hands out zeroed memory.
    secure_wipe(p_.get(), n_);
    p_.reset();
    n_ = 0;
}

void SecureBuffer::assign(ConstBytes src) {
    SecureBuffer tmp(src.size());
    if (!src.empty()) std::memcpy(tmp.data(), src.data(), src.size());
    *this = std::move(tmp);
}

void SecureBuffer::resize(std::size_t n) {
    SecureBuffer tmp(n);
    if (n_ && n) std::memcpy(tmp.data(), data(), std::min(n, n_));
    *this = std::move(tmp);
}

}  // namespace blkcrypt
