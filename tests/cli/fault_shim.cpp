// LD_PRELOAD shim for tests/cli/outputs_faults.sh: faults at the exact
// moments of the output policy (cli/output_file.cpp) that a test cannot hit
// by timing. Each is off unless its variable is set:
//  BLKCRYPT_SHIM_SIGNAL_ON_TEMP=SIG  kill(getpid(), SIG) right after a
//      temporary output file (".NAME.blkcrypt-tmp.XXXXXX") is created;
//  BLKCRYPT_SHIM_DIR_FSYNC_ERRNO=E   fsync of a directory fails with errno E;
//  BLKCRYPT_SHIM_DIR_FSYNC_SIGNAL=SIG  kill(getpid(), SIG) during the fsync of
//      a directory (after it, as a signal that lands while it runs);
//  BLKCRYPT_SHIM_KILL_AFTER_RENAME=N  SIGKILL (a crash) after the Nth rename.
// Fortified headers define open() inline; the shim defines the symbol.
#undef _FORTIFY_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>

namespace {

int env_int(const char* name) {
    const char* s = getenv(name);
    return s ? atoi(s) : 0;
}

template <class Fn>
Fn next(const char* name) {
    return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

int after_open(int fd, const char* path, int flags) {
    static const int sig = env_int("BLKCRYPT_SHIM_SIGNAL_ON_TEMP");
    if (fd >= 0 && sig && (flags & O_CREAT) && strstr(path, ".blkcrypt-tmp.")) {
        const int saved = errno;
        kill(getpid(), sig);
        errno = saved;
    }
    return fd;
}

std::atomic<int> g_renames{0};

}  // namespace

extern "C" int open(const char* path, int flags, ...) {
    static const auto real = next<int (*)(const char*, int, ...)>("open");
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    return after_open(real(path, flags, mode), path, flags);
}

extern "C" int open64(const char* path, int flags, ...) {
    static const auto real = next<int (*)(const char*, int, ...)>("open64");
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    return after_open(real(path, flags, mode), path, flags);
}

extern "C" int fsync(int fd) {
    static const auto real = next<int (*)(int)>("fsync");
    static const int err = env_int("BLKCRYPT_SHIM_DIR_FSYNC_ERRNO");
    static const int sig = env_int("BLKCRYPT_SHIM_DIR_FSYNC_SIGNAL");
    struct stat st {};
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        if (sig) kill(getpid(), sig);
        if (err) {
            errno = err;
            return -1;
        }
    }
    return real(fd);
}

extern "C" int rename(const char* from, const char* to) noexcept {
    static const auto real = next<int (*)(const char*, const char*)>("rename");
    static const int kill_after = env_int("BLKCRYPT_SHIM_KILL_AFTER_RENAME");
    const int rc = real(from, to);
    if (rc == 0 && kill_after && g_renames.fetch_add(1) + 1 == kill_after) kill(getpid(), SIGKILL);
    return rc;
}
