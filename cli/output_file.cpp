#include "output_file.hpp"

#include "common.hpp"

#include <cerrno>
#include <filesystem>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cli {

namespace {

std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "used from a signal handler");

extern "C" void on_signal(int sig) { g_signal.store(sig); }

void copy_contents(const std::string& from, int to_fd, const std::string& to_name) {
    const int fd = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Failure(errno_message(from));
    std::vector<uint8_t> buf(1 << 20);
    for (;;) {
        const ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const std::string msg = errno_message(from);
            ::close(fd);
            throw Failure(msg);
        }
        if (n == 0) break;
        write_all(to_fd, blkcrypt::ConstBytes(buf).first(static_cast<std::size_t>(n)), to_name);
    }
    ::close(fd);
}

}  // namespace

int pending_signal() noexcept { return g_signal.load(); }

// No SA_RESTART: a blocked read/write returns EINTR (the I/O loops retry)
// and the flag is seen soon.
SignalGuard::SignalGuard() {
    g_signal.store(0);
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &old_int_);
    ::sigaction(SIGTERM, &sa, &old_term_);
}

SignalGuard::~SignalGuard() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
}

TempOutput::TempOutput(const std::string& final_path, bool copy_existing) : final_(final_path) {
    namespace fs = std::filesystem;
    const fs::path target(final_path);
    if (!target.has_filename()) throw UsageError("'" + final_path + "' is not a file name");
    const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
    path_ = (dir / ("." + target.filename().string() + ".XXXXXX")).string();
    fd_ = ::mkstemp(path_.data());
    if (fd_ < 0) throw Failure(errno_message(final_path + ": cannot create a temporary file"));
    try {
        // mkstemp makes the file 0600; give it the mode a plain create would.
        const mode_t m = ::umask(0);
        ::umask(m);
        if (::fchmod(fd_, 0666 & ~m) != 0) throw Failure(errno_message(path_));
        struct stat st {};
        if (copy_existing && ::stat(final_path.c_str(), &st) == 0 && S_ISREG(st.st_mode))
            copy_contents(final_path, fd_, path_);
    } catch (...) {
        cleanup();
        throw;
    }
}

TempOutput::~TempOutput() { cleanup(); }

void TempOutput::commit() {
    if (::fsync(fd_) != 0) throw Failure(errno_message(path_));
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) throw Failure(errno_message(path_));
    if (::rename(path_.c_str(), final_.c_str()) != 0) throw Failure(errno_message(final_));
    path_.clear();
}

void TempOutput::cleanup() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (!path_.empty()) ::unlink(path_.c_str());
    path_.clear();
}

}  // namespace cli
