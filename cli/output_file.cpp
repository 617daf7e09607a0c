#include "output_file.hpp"

#include "common.hpp"

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cli {

namespace {

constexpr char kTempTag[] = ".blkcrypt-tmp.";
constexpr std::size_t kSuffix = 6;

// The temporary files a signal handler must remove. A slot is "armed" only
// while its file exists and is ours, so the handler never unlinks a file it
// did not create; fixed storage, since the handler cannot allocate.
struct TempSlot {
    std::atomic<bool> used{false};
    std::atomic<bool> armed{false};
    char path[PATH_MAX] = {};
};
constexpr int kSlots = 16;
TempSlot g_slots[kSlots];
static_assert(std::atomic<bool>::is_always_lock_free, "used from a signal handler");

const char* signal_name(int sig) noexcept {
    switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
    case SIGQUIT: return "SIGQUIT";
    default: return "a signal";
    }
}

// A terminating signal is held while a thread is in a critical section
// (creating a temporary file and arming its slot, or renaming outputs into
// place): the handler records it and returns, and the thread leaving the
// section acts on it. Blocking the signal would not do: another thread, which
// does not block it, would take it. g_pending is stored before g_critical is
// read, and g_critical raised before g_pending is read (sequentially
// consistent), so either the handler sees the section or the section sees
// the signal.
std::atomic<int> g_critical{0};
std::atomic<int> g_pending{0};

// Async-signal-safe only: unlink, write, _exit.
[[noreturn]] void exit_on_signal(int sig) noexcept {
    for (auto& s : g_slots)
        if (s.armed.load()) ::unlink(s.path);
    char msg[64] = "blkcrypt: interrupted by ";
    std::size_t n = std::strlen(msg);
    for (const char* p = signal_name(sig); *p && n + 2 < sizeof msg; ++p) msg[n++] = *p;
    msg[n++] = '\n';
    // A progress line on a terminal is left open; end it first.
    if (::isatty(STDERR_FILENO)) (void)!::write(STDERR_FILENO, "\n", 1);
    (void)!::write(STDERR_FILENO, msg, n);
    ::_exit(128 + sig);
}

extern "C" void on_terminating_signal(int sig) {
    int none = 0;
    g_pending.compare_exchange_strong(none, sig);
    if (g_critical.load() > 0) return;  // the section's thread exits for us
    exit_on_signal(g_pending.load());
}

// Holds the terminating signals for a scope. leave() returns the signal
// that arrived meanwhile (0: none); the caller acts on it.
class CriticalSection {
public:
    CriticalSection() { g_critical.fetch_add(1); }
    ~CriticalSection() {  // left by an exception: a held signal still ends the run
        if (in_ && leave()) exit_if_pending();
    }
    CriticalSection(const CriticalSection&) = delete;
    CriticalSection& operator=(const CriticalSection&) = delete;
    int leave() noexcept {
        if (in_) {
            in_ = false;
            g_critical.fetch_sub(1);
        }
        return g_pending.load();
    }
    // A signal that arrived before or during the section: exit as the handler would.
    static void exit_if_pending() noexcept {
        if (const int sig = g_pending.load()) exit_on_signal(sig);
    }

private:
    bool in_ = true;
};

int acquire_slot(const std::string& path) {
    if (path.size() >= PATH_MAX) return -1;
    for (int i = 0; i < kSlots; ++i) {
        bool expected = false;
        if (g_slots[i].used.compare_exchange_strong(expected, true)) {
            std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
            return i;
        }
    }
    return -1;
}

void release_slot(int& slot) noexcept {
    if (slot < 0) return;
    g_slots[slot].armed.store(false);
    g_slots[slot].used.store(false);
    slot = -1;
}

std::string dir_of(const std::string& path) {
    const auto slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

std::string base_of(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string join(const std::string& dir, const std::string& name) {
    return dir == "/" ? "/" + name : dir + "/" + name;
}

// The prefix of our temporary names for a file: ".NAME.blkcrypt-tmp.",
// with NAME cut so the whole name fits in NAME_MAX.
std::string temp_prefix(const std::string& base) {
    std::string name = base;
    const std::size_t room = NAME_MAX - 1 - (sizeof kTempTag - 1) - kSuffix;
    if (name.size() > room) name.resize(room);
    return "." + name + kTempTag;
}

// One stderr line when an earlier run left temporary files next to the output.
void warn_stale(const std::string& dir, const std::string& prefix) {
    DIR* d = ::opendir(dir.c_str());
    if (!d) return;
    std::string first;
    std::size_t count = 0;
    while (const dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n.size() == prefix.size() + kSuffix && n.compare(0, prefix.size(), prefix) == 0) {
            if (first.empty()) first = join(dir, n);
            ++count;
        }
    }
    ::closedir(d);
    if (!count) return;
    std::string more = count > 1 ? " (and " + std::to_string(count - 1) + " more)" : "";
    std::fprintf(stderr, "blkcrypt: warning: %s%s is left from an interrupted run; remove it\n",
                 first.c_str(), more.c_str());
}

std::string random_suffix() {
    static constexpr char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    static std::mt19937_64 rng{std::random_device{}()};
    std::string s(kSuffix, 'x');
    for (auto& c : s) c = chars[rng() % (sizeof chars - 1)];
    return s;
}

const char* kind_of(mode_t m) {
    if (S_ISBLK(m)) return "a block device";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISLNK(m)) return "a symlink";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISSOCK(m)) return "a socket";
    return "a special file";
}

// One file under two names: the same inode, or two nodes of one block device.
bool same_file(const struct stat& a, const struct stat& b) {
    if (a.st_dev == b.st_dev && a.st_ino == b.st_ino) return true;
    return S_ISBLK(a.st_mode) && S_ISBLK(b.st_mode) && a.st_rdev == b.st_rdev;
}

// What an input names; "-" is stdin, compared only where it is a regular
// file or a block device (a terminal or pipe shared with stdout is no overlap).
bool stat_input(const std::string& path, struct stat& st) {
    if (path.empty()) return false;
    if (path != "-") return ::stat(path.c_str(), &st) == 0;
    return ::fstat(STDIN_FILENO, &st) == 0 && (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode));
}

std::string g_stdout_report;  // set_stdout_report

}  // namespace

void set_stdout_report(std::string option) { g_stdout_report = std::move(option); }

void install_signal_cleanup() {
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction sa {};
        sa.sa_handler = on_terminating_signal;
        sigfillset(&sa.sa_mask);  // one handler at a time: it exits
        // It returns only while a critical section holds the signal; the
        // interrupted system calls of other threads then carry on.
        sa.sa_flags = SA_RESTART;
        for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT}) {
            struct sigaction old {};
            ::sigaction(sig, nullptr, &old);
            // A signal the caller ignores (nohup, `trap '' PIPE`) stays ignored.
            if (old.sa_handler == SIG_IGN) continue;
            ::sigaction(sig, &sa, nullptr);
        }
    });
}

std::string resolve_links(const std::string& path) {
    std::string p = path;
    for (int depth = 0; depth < 40; ++depth) {  // the kernel's MAXSYMLINKS
        struct stat st {};
        if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
        std::vector<char> buf(PATH_MAX);
        const ssize_t n = ::readlink(p.c_str(), buf.data(), buf.size() - 1);
        if (n < 0) return p;
        const std::string link(buf.data(), static_cast<std::size_t>(n));
        p = !link.empty() && link[0] == '/' ? link : join(dir_of(p), link);
    }
    return p;  // a loop: the open reports ELOOP
}

bool same_file(const std::string& a, const std::string& b) {
    if (a == b) return true;
    struct stat sa {}, sb {};
    if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0) return same_file(sa, sb);
    std::error_code ea, eb;
    const auto ca = std::filesystem::weakly_canonical(a, ea), cb = std::filesystem::weakly_canonical(b, eb);
    return ea || eb ? resolve_links(a) == resolve_links(b) : ca == cb;
}

Output::Output(const std::string& path, OutputOptions opts) : opts_(std::move(opts)), name_(path) {
    install_signal_cleanup();
    if (path.empty()) throw UsageError(opts_.role + ": empty file name");
    if (path == "-") {
        open_stdout();
        return;
    }
    if (blkcrypt::is_nbd_uri(path)) {
        open_remote();
        return;
    }
    resolve_target();
    struct stat st {};
    const bool exists = ::stat(target_.c_str(), &st) == 0;
    if (!exists && errno != ENOENT) throw Failure(error_text(errno));
    if (exists && open_existing(st)) return;
    if (!exists && opts_.in_place) throw Failure(error_text(ENOENT));
    create_temp();
    try {
        take_over(exists ? &st : nullptr);
    } catch (...) {
        discard();
        throw;
    }
}

void Output::refuse_inputs(const struct stat& st) const {
    for (const auto& in : opts_.inputs) {
        struct stat is {};
        if (stat_input(in.path, is) && same_file(is, st))
            throw UsageError(opts_.role + " '" + name_ + "' is " + in.role +
                             "; refusing to write an output over an input");
    }
}

void Output::open_stdout() {
    if (opts_.regular_only) throw UsageError(opts_.role + " cannot be stdout: it must be a regular file");
    if (!opts_.can_stream) throw UsageError(opts_.role + " cannot be stdout: it is not written in order");
    if (!g_stdout_report.empty())
        throw UsageError(opts_.role + " '-' and " + g_stdout_report + " both write to stdout; give " + opts_.role +
                         " a file");
    // Stdout may be redirected onto an input (1<>IMAGE, >>KEY): the same check as a name.
    struct stat st {};
    if (::fstat(STDOUT_FILENO, &st) != 0) throw Failure("stdout: " + std::string(std::strerror(errno)));
    refuse_inputs(st);
    name_ = "stdout";
    kind_ = Kind::Stream;
    fd_ = STDOUT_FILENO;
    owns_fd_ = false;
}

void Output::open_remote() {
    if (opts_.regular_only) throw UsageError(opts_.role + " '" + name_ + "' is an NBD URI; it must be a regular file");
    for (const auto& in : opts_.inputs)
        if (in.path == name_)
            throw UsageError(opts_.role + " '" + name_ + "' is " + in.role + "; refusing to write an output over an input");
    auto s = blkcrypt::open_store(name_, true);
    if (!s) throw Failure(s.error().message);
    remote_ = std::move(s).value();
    kind_ = Kind::Remote;
    target_ = write_path_ = name_;
}

std::shared_ptr<blkcrypt::BackingStore> Output::store() {
    if (remote_) return remote_;
    auto s = blkcrypt::open_store(write_path_, true);
    if (!s) throw Failure(s.error().message);
    return std::move(s).value();
}

void Output::resolve_target() {
    if (opts_.regular_only) {
        // Never follow: a link's target (an image, /dev/...) is not ours to replace or delete.
        struct stat st {};
        if (::lstat(name_.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
            throw UsageError(opts_.role + " '" + name_ + "' is a symlink; give the file itself");
        target_ = name_;
    } else {
        target_ = resolve_links(name_);
    }
    // Same resolved name: caught even when neither exists yet.
    for (const auto& in : opts_.inputs)
        if (in.path != "-" && !in.path.empty() && resolve_links(in.path) == target_)
            throw UsageError(opts_.role + " '" + name_ + "' is " + in.role +
                             "; refusing to write an output over an input");
}

bool Output::open_existing(const struct stat& st) {
    refuse_inputs(st);
    const std::string& path = name_;
    if (S_ISDIR(st.st_mode)) throw UsageError(opts_.role + " '" + path + "' is a directory");
    if (opts_.regular_only && !S_ISREG(st.st_mode))
        throw UsageError(opts_.role + " '" + path + "' is " + kind_of(st.st_mode) + "; it must be a regular file");
    if (S_ISBLK(st.st_mode)) {
        // O_EXCL on a block device: refused while mounted or held by dm.
        fd_ = ::open(target_.c_str(), O_WRONLY | O_EXCL | O_CLOEXEC);
        if (fd_ < 0) throw Failure(error_text(errno));
        kind_ = Kind::Device;
        write_path_ = target_;
        return true;
    }
    if (!S_ISREG(st.st_mode)) {
        if (!opts_.can_stream || S_ISSOCK(st.st_mode))
            throw UsageError(opts_.role + " '" + path + "' is " + kind_of(st.st_mode) +
                             "; this output needs a regular file or a block device");
        fd_ = ::open(target_.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd_ < 0) throw Failure(error_text(errno));
        kind_ = Kind::Stream;
        return true;
    }
    if (opts_.in_place) {
        fd_ = ::open(target_.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd_ < 0) throw Failure(error_text(errno));
        kind_ = Kind::InPlace;
        write_path_ = target_;
        return true;
    }
    return false;  // a regular file to replace
}

void Output::create_temp() {
    kind_ = Kind::Temp;
    const std::string dir = dir_of(target_);
    const std::string prefix = temp_prefix(base_of(target_));
    warn_stale(dir, prefix);
    // From the open to the armed slot, a signal must not end the process
    // (the file would be left behind): it is acted on once the slot is armed.
    CriticalSection held;
    CriticalSection::exit_if_pending();
    for (int attempt = 0; fd_ < 0; ++attempt) {
        write_path_ = join(dir, prefix + random_suffix());
        slot_ = acquire_slot(write_path_);
        if (slot_ < 0) throw Failure(name_ + ": too many outputs or too long a path");
        // 0600 from the start: plaintext is never readable by others, even briefly.
        fd_ = ::open(write_path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd_ >= 0) break;
        const int err = errno;
        release_slot(slot_);
        if (err == EINTR) continue;
        if (err != EEXIST || attempt > 100)
            throw Failure(name_ + ": cannot create a file in " + dir + ": " + std::strerror(err));
    }
    g_slots[slot_].armed.store(true);
    if (held.leave()) CriticalSection::exit_if_pending();
}

void Output::take_over(const struct stat* replaced) {
    if (!replaced) {
        if (opts_.secret) return;  // stays 0600
        const mode_t m = ::umask(0);
        ::umask(m);
        if (::fchmod(fd_, opts_.create_mode & 0777 & ~m) != 0) throw Failure(error_text(errno));
        return;
    }
    // Keep what the replaced file had; chown first, as it clears set-id bits.
    // Not being allowed to chown (not root) keeps our own owner, as cp does.
    (void)::fchown(fd_, replaced->st_uid, replaced->st_gid);
    if (::fchmod(fd_, replaced->st_mode & 07777) != 0) throw Failure(error_text(errno));
    if (!opts_.keep_content) return;
    const int in = ::open(target_.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) throw Failure(errno_message(name_));
    std::vector<uint8_t> buf(1 << 20);
    for (;;) {
        const ssize_t n = ::read(in, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int err = errno;
            ::close(in);
            throw Failure(error_text(err));
        }
        if (n == 0) break;
        try {
            write(blkcrypt::ConstBytes(buf).first(static_cast<std::size_t>(n)));
        } catch (...) {
            ::close(in);
            throw;
        }
    }
    ::close(in);
}

Output::~Output() { discard(); }

std::string Output::error_text(int err) const { return name_ + ": " + std::strerror(err); }

void Output::reserve(uint64_t bytes) {
    if (kind_ == Kind::Stream) return;
    if (kind_ == Kind::Remote) {
        if (remote_->size() < bytes)
            throw Failure(name_ + ": the NBD export holds " + std::to_string(remote_->size()) + " bytes; " +
                          std::to_string(bytes) + " are needed");
        return;
    }
    if (kind_ == Kind::Device) {
        uint64_t size = 0;
        if (::ioctl(fd_, BLKGETSIZE64, &size) != 0) throw Failure(error_text(errno));
        if (size < bytes)
            throw Failure(name_ + ": the device holds " + std::to_string(size) + " bytes; " +
                          std::to_string(bytes) + " are needed");
        return;
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw Failure(error_text(errno));
    if (static_cast<uint64_t>(st.st_size) >= bytes) return;
    // Allocating now reports a full disk or quota here, with its errno.
    if (::fallocate(fd_, 0, 0, static_cast<off_t>(bytes)) == 0) return;
    if (errno != EOPNOTSUPP && errno != ENOSYS && errno != EINVAL) throw Failure(error_text(errno));
    if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) throw Failure(error_text(errno));
}

void Output::write(blkcrypt::ConstBytes data) {
    if (kind_ == Kind::Remote) {
        pwrite(data, pos_);
        pos_ += data.size();
        return;
    }
    while (!data.empty()) {
        const ssize_t n = ::write(fd_, data.data(), data.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw Failure(error_text(errno));
        if (n == 0) throw Failure(error_text(ENOSPC));  // the end of a device
        data = data.subspan(static_cast<std::size_t>(n));
        pos_ += static_cast<uint64_t>(n);
    }
}

void Output::pwrite(blkcrypt::ConstBytes data, uint64_t offset) {
    if (kind_ == Kind::Stream) {
        // Streams take data in order only; callers keep to it.
        if (offset != pos_) throw Failure(name_ + ": out-of-order write to a stream");
        write(data);
        return;
    }
    if (kind_ == Kind::Remote) {
        if (remote_->size() < offset || remote_->size() - offset < data.size())
            throw Failure(name_ + ": the NBD export ends at byte " + std::to_string(remote_->size()));
        if (remote_->write(offset, data) != blkcrypt::Status::Ok)
            throw Failure(name_ + ": write error at byte " + std::to_string(offset));
        return;
    }
    while (!data.empty()) {
        const ssize_t n = ::pwrite(fd_, data.data(), data.size(), static_cast<off_t>(offset));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw Failure(error_text(errno));
        if (n == 0) throw Failure(error_text(ENOSPC));
        data = data.subspan(static_cast<std::size_t>(n));
        offset += static_cast<uint64_t>(n);
    }
}

void Output::finish() {
    if (finished_) return;
    finished_ = true;
    if (remote_) {
        const blkcrypt::Status st = remote_->flush();
        remote_.reset();
        if (st != blkcrypt::Status::Ok) throw Failure(name_ + ": the NBD server failed the flush");
        return;
    }
    if (fd_ < 0) return;
    int err = 0;
    // fsync is meaningless (EINVAL) on pipes and character devices.
    if (::fsync(fd_) != 0 && !(kind_ == Kind::Stream && (errno == EINVAL || errno == EROFS))) err = errno;
    if (owns_fd_ && ::close(fd_) != 0 && !err) err = errno;
    fd_ = -1;
    if (err) throw Failure(error_text(err));
}

// The rename, then the directory sync that makes it durable. A failed sync
// is an error: the output is in place, but may not survive a crash.
std::string Output::rename_into_place() {
    if (kind_ != Kind::Temp || slot_ < 0) return {};
    if (::rename(write_path_.c_str(), target_.c_str()) != 0) throw Failure(error_text(errno));
    release_slot(slot_);
    const std::string dir = dir_of(target_);
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int err = dfd < 0 ? errno : 0;
    if (dfd >= 0) {
        while (::fsync(dfd) != 0) {
            if (errno == EINTR) continue;
            // Some file systems cannot sync a directory; the rename is then as durable as they make it.
            if (errno != EINVAL) err = errno;
            break;
        }
        ::close(dfd);
    }
    if (!err) return {};
    return name_ + " is in place, but syncing its directory " + dir + " failed (" + std::strerror(err) +
           "): it may not survive a crash";
}

void Output::commit_all(std::initializer_list<Output*> outputs) {
    for (Output* o : outputs)
        if (o) o->finish();
    // A signal before the first rename cancels the commit (nothing replaced);
    // one during the renames and directory syncs is held until all are done,
    // and the run then completes: its outputs are in place. Only SIGKILL or a
    // crash can split the renames; callers order them (docs/outputs.md).
    CriticalSection held;
    CriticalSection::exit_if_pending();
    std::string sync_error;
    for (Output* o : outputs) {
        if (!o) continue;
        std::string e = o->rename_into_place();
        if (sync_error.empty()) sync_error = std::move(e);
    }
    if (const int sig = held.leave()) {
        g_pending.store(0);
        std::fprintf(stderr, "blkcrypt: %s arrived after the outputs were renamed into place; completing\n",
                     signal_name(sig));
    }
    if (!sync_error.empty()) throw Failure(sync_error);
}

void Output::discard() noexcept {
    if (fd_ >= 0 && owns_fd_) ::close(fd_);
    fd_ = -1;
    if (slot_ >= 0) {
        ::unlink(write_path_.c_str());
        release_slot(slot_);
    }
}

void write_output(const std::string& path, blkcrypt::ConstBytes data, OutputOptions opts) {
    opts.can_stream = true;  // written in one go, in order
    Output out(path, std::move(opts));
    out.write(data);
    out.commit();
}

}  // namespace cli
