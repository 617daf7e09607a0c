#include "alloc_count.hpp"

#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BLKCRYPT_COUNT_ALLOCS 0
#else
#define BLKCRYPT_COUNT_ALLOCS 1
#endif

namespace alloc_count {
namespace {
thread_local std::size_t count = 0;  // trivial: no allocation to reach it
}
bool available() noexcept { return BLKCRYPT_COUNT_ALLOCS; }
std::size_t here() noexcept { return count; }
}  // namespace alloc_count

#if BLKCRYPT_COUNT_ALLOCS
// The other forms (arrays, nothrow) forward to these in libstdc++; the aligned
// ones keep their own pair.
void* operator new(std::size_t n) {
    ++alloc_count::count;
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#endif
