#include "passphrase.hpp"

#include "common.hpp"
#include "number_option.hpp"

#include <algorithm>
#include <cerrno>
#include <iostream>
#include <iterator>
#include <limits>
#include <typeinfo>
#include <csignal>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

namespace cli {

namespace {

// Drops offset bytes: lseek where possible, else (a pipe) by reading them.
void skip_input(int fd, uint64_t offset, const std::string& name) {
    if (offset == 0) return;
    // No file reaches past off_t (lseek would say EINVAL): the input's end is before.
    if (offset > static_cast<uint64_t>(std::numeric_limits<off_t>::max()))
        throw KeyInputError(name + ": --keyfile-offset " + std::to_string(offset) + " is past the end of the input");
    if (::lseek(fd, static_cast<off_t>(offset), SEEK_CUR) >= 0) return;
    if (errno != ESPIPE) throw Failure(errno_message(name));
    blkcrypt::SecureBuffer junk(4096);
    while (offset > 0) {
        const std::size_t want = offset < junk.size() ? static_cast<std::size_t>(offset) : junk.size();
        const ssize_t n = ::read(fd, junk.data(), want);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw Failure(errno_message(name));
        if (n == 0) throw KeyInputError(name + ": --keyfile-offset is past the end of the input");
        offset -= static_cast<uint64_t>(n);
    }
}

ssize_t read_some(int fd, uint8_t* p, std::size_t n) {
    for (;;) {
        const ssize_t r = ::read(fd, p, n);
        if (r >= 0 || errno != EINTR) return r;
    }
}

// The terminal being prompted on, for the signal handler.
volatile sig_atomic_t g_tty_fd = -1;
struct termios g_tty_saved;
volatile sig_atomic_t g_tty_signal = 0;
constexpr int kPromptSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

void on_prompt_signal(int sig) {
    if (g_tty_fd >= 0) ::tcsetattr(g_tty_fd, TCSAFLUSH, &g_tty_saved);
    g_tty_signal = sig;
}

// Echo off for one prompt; restores the terminal and the signal actions on
// destruction. A signal restores the terminal at once and makes the read
// return EINTR (no SA_RESTART); the caller then passes the signal on.
class NoEcho {
public:
    NoEcho(int fd) : fd_(fd) {
        if (::tcgetattr(fd, &g_tty_saved) != 0) throw Failure(errno_message("the terminal"));
        g_tty_signal = 0;
        g_tty_fd = fd;
        struct sigaction sa {};
        sa.sa_handler = on_prompt_signal;
        sigemptyset(&sa.sa_mask);
        for (std::size_t i = 0; i < std::size(kPromptSignals); ++i) ::sigaction(kPromptSignals[i], &sa, &old_[i]);
        struct termios t = g_tty_saved;
        t.c_lflag &= ~static_cast<tcflag_t>(ECHO);
        ::tcsetattr(fd, TCSAFLUSH, &t);
    }
    ~NoEcho() {
        restore();
    }
    // Restores, then delivers a signal that came during the prompt to the
    // action that was in place before (default: the process ends).
    void restore() {
        if (done_) return;
        done_ = true;
        ::tcsetattr(fd_, TCSAFLUSH, &g_tty_saved);
        g_tty_fd = -1;
        for (std::size_t i = 0; i < std::size(kPromptSignals); ++i) ::sigaction(kPromptSignals[i], &old_[i], nullptr);
        if (const int sig = g_tty_signal) ::raise(sig);
    }

private:
    int fd_;
    bool done_ = false;
    struct sigaction old_[std::size(kPromptSignals)] {};
};

// One interactive line as cryptsetup's untimed_read takes it: a single
// read() of at most kMaxPassphraseTty bytes whose last byte (the newline) is
// dropped; the passphrase ends at the first NUL.
blkcrypt::SecureBuffer read_tty_line(int in, int out, const std::string& prompt) {
    if (::write(out, prompt.data(), prompt.size()) < 0) throw Failure(errno_message("the terminal"));
    blkcrypt::SecureBuffer buf(kMaxPassphraseTty);
    ssize_t n;
    {
        NoEcho noecho(in);
        do {  // a signal at the prompt ends the read (EINTR), any other EINTR retries
            n = ::read(in, buf.data(), buf.size());
        } while (n < 0 && errno == EINTR && !g_tty_signal);
        const int saved = errno;
        noecho.restore();
        if (g_tty_signal) throw Failure("interrupted at the passphrase prompt");
        errno = saved;
    }
    (void)!::write(out, "\n", 1);
    if (n < 0) throw Failure(errno_message("reading the passphrase from the terminal"));
    if (n == 0) throw Failure("error reading the passphrase from the terminal (end of input)");
    buf[static_cast<std::size_t>(n) - 1] = 0;
    buf.resize(::strnlen(reinterpret_cast<const char*>(buf.data()), buf.size()));
    return buf;
}

// --key-file names the passphrase's file where the command takes one FILE;
// tcrypt's repeatable --key-file names keyfiles mixed into the passphrase.
bool key_file_is_passphrase(const po::variables_map& vm) {
    return vm.count("key-file") && vm["key-file"].value().type() == typeid(std::string);
}

}  // namespace

blkcrypt::SecureBuffer read_key_input(const std::string& path, uint64_t offset, std::size_t size,
                                      bool stop_at_newline) {
    const bool is_stdin = path == "-";
    const std::string name = is_stdin ? "stdin" : path;
    const int fd = is_stdin ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Failure(errno_message(path));
    struct Closer {
        int fd;
        bool own;
        ~Closer() { if (own) ::close(fd); }
    } closer{fd, !is_stdin};
    const bool unlimited = size == 0;
    const std::size_t limit = unlimited ? kMaxKeyFileSize + 1 : size;
    bool regular = false;
    if (!is_stdin) {
        struct stat st {};
        if (::fstat(fd, &st) != 0) throw Failure(errno_message(path));
        if (S_ISREG(st.st_mode)) {
            regular = true;
            if (offset > static_cast<uint64_t>(st.st_size))
                throw KeyInputError(name + ": --keyfile-offset " + std::to_string(offset) + " is past its end (" +
                                 std::to_string(st.st_size) + " bytes)");
        }
    }
    if (::isatty(fd)) throw UsageError("cannot read a key file from a terminal (" + name + ")");
    skip_input(fd, offset, name);
    // Grown in steps; each step copies into a new SecureBuffer and wipes the old one.
    blkcrypt::SecureBuffer key(std::min<std::size_t>(limit, 4096));
    std::size_t got = 0;
    bool newline = false;
    while (got < limit) {
        if (got == key.size()) key.resize(std::min(limit, key.size() * 2));
        const std::size_t want = stop_at_newline ? 1 : key.size() - got;  // never read past the newline
        const ssize_t n = read_some(fd, key.data() + got, want);
        if (n < 0) throw Failure(errno_message(name));
        if (n == 0) break;
        if (stop_at_newline && key[got] == '\n') {
            key[got] = 0;
            newline = true;
            break;
        }
        got += static_cast<std::size_t>(n);
    }
    if (got == 0 && !regular && !newline) throw KeyInputError("nothing to read on " + name);
    if (unlimited && got == limit)
        throw KeyInputError(name + ": more than the maximum key file size of " + std::to_string(kMaxKeyFileSize) +
                         " bytes");
    if (!unlimited && got != size)
        throw KeyInputError(name + ": cannot read the requested " + std::to_string(size) + " bytes" +
                         (offset ? " after --keyfile-offset " + std::to_string(offset) : std::string()) +
                         " (got " + std::to_string(got) + ")");
    key.resize(got);
    return key;
}

blkcrypt::SecureBuffer prompt_passphrase(const std::string& prompt, bool verify) {
    int in = ::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    const bool own = in >= 0;
    int out = in;
    if (!own) {
        in = STDIN_FILENO;
        out = STDERR_FILENO;
    }
    struct Closer {
        int fd;
        bool own;
        ~Closer() { if (own) ::close(fd); }
    } closer{in, own};
    blkcrypt::SecureBuffer pass = read_tty_line(in, out, prompt);
    if (verify) {
        const blkcrypt::SecureBuffer again = read_tty_line(in, out, "Verify passphrase: ");
        if (again.size() != pass.size() || std::memcmp(again.data(), pass.data(), pass.size()) != 0)
            throw UsageError("Passphrases do not match.");
    }
    return pass;
}

// The passphrase as cryptsetup reads it (tools_get_key): --key-file whole
// (or --keyfile-size bytes) after --keyfile-offset, '-' all of stdin; else a
// prompt on a terminal, or one line of piped stdin.
blkcrypt::SecureBuffer read_passphrase(const po::variables_map& vm, const std::string& device, bool verify) {
    if (vm.count("verify-passphrase") && vm["verify-passphrase"].as<bool>()) verify = true;
    const uint64_t offset = vm.count("keyfile-offset") ? vm["keyfile-offset"].as<uint64_t>() : 0;
    const std::size_t size = vm.count("keyfile-size") ? static_cast<std::size_t>(vm["keyfile-size"].as<uint64_t>()) : 0;
    if (vm.count("passphrase-file")) return read_key_input(vm["passphrase-file"].as<std::string>(), 0, 0, true);
    if (key_file_is_passphrase(vm)) return read_key_input(vm["key-file"].as<std::string>(), offset, size, false);
    if (::isatty(STDIN_FILENO)) {
        if (offset || size) throw UsageError("--keyfile-offset and --keyfile-size need --key-file or piped input");
        return prompt_passphrase("Enter passphrase for " + device + ": ", verify);
    }
    return read_key_input("-", offset, size, true);
}

void add_tries_option(po::options_description& opts) {
    opts.add_options()("tries,T", number_value<unsigned>(0, 1000)->value_name("N"),
                       "ask at most N times for a passphrase at the terminal (default: 3, 0: no limit)");
}

unsigned passphrase_tries(const po::variables_map& vm) {
    const bool prompted = !vm.count("passphrase-file") && !key_file_is_passphrase(vm) && ::isatty(STDIN_FILENO);
    return !prompted ? 1 : vm.count("tries") ? vm["tries"].as<unsigned>() : 3;
}

void report_retry(const std::string& message) { std::cerr << message << "\n"; }

void add_batch_mode_option(po::options_description& opts) {
    opts.add_options()("batch-mode,q", po::bool_switch(), "do not ask for confirmation");
}

void yes_dialog(const po::variables_map& vm, const std::string& question) {
    if (vm["batch-mode"].as<bool>() || !::isatty(STDIN_FILENO)) return;
    std::cerr << question << "\nAre you sure? (Type 'yes' in capital letters): " << std::flush;
    std::string answer;
    if (!std::getline(std::cin, answer) || answer != "YES") throw Failure("Operation aborted.");
}

void confirm_volume_key_dump(const po::variables_map& vm) {
    yes_dialog(vm, "Header dump with volume key is sensitive information\n"
                   "which allows access to encrypted partition without a passphrase.\n"
                   "This dump should be stored encrypted in a safe place.");
}

}  // namespace cli
