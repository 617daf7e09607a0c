// LD_PRELOAD shim for tests/cli/inputs.sh: a process near its thread limit.
// BLKCRYPT_SHIM_THREADS=N lets the first N pthread_create calls through and
// makes every later one fail with EAGAIN, as the kernel does at RLIMIT_NPROC
// or threads-max (which cannot be used here: root is exempt from the first,
// the second is machine-wide). BLKCRYPT_SHIM_FAIL=N fails only the Nth call.
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include <atomic>

namespace {
using CreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
std::atomic<long> g_calls{0};
}  // namespace

// noexcept: as glibc declares it for C++.
extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*),
                              void* arg) noexcept {
    static const CreateFn real = reinterpret_cast<CreateFn>(dlsym(RTLD_NEXT, "pthread_create"));
    static const long allowed = [] {
        const char* s = getenv("BLKCRYPT_SHIM_THREADS");
        return s ? atol(s) : -1;
    }();
    static const long fail_only = [] {
        const char* s = getenv("BLKCRYPT_SHIM_FAIL");
        return s ? atol(s) : 0;
    }();
    const long call = g_calls.fetch_add(1) + 1;
    if ((allowed >= 0 && call > allowed) || call == fail_only) return EAGAIN;
    return real(thread, attr, start, arg);
}
