// The command line: the input is one word per line; the first picks a
// command, the rest go to it exactly as main() would pass them. Commands run
// for real, so the harness works in a private empty directory with stdin and
// stdout on /dev/null, refuses words naming other places ('/'), gives each
// run the same small files (data, key) and removes whatever a run created.
#include "commands.hpp"
#include "registry.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

struct Command {
    const char* name;
    int (*run)(cli::Args);
};
// bench and selftest are left out: they run for seconds whatever the options.
constexpr Command kCommands[] = {
    {"list", cli::run_list},   {"hash", cli::run_hash},         {"skcipher", cli::run_skcipher},
    {"aead", cli::run_aead},   {"crypt", cli::run_crypt},       {"verity", cli::run_verity},
    {"fsverity", cli::run_fsverity}, {"luks", cli::run_luks}, {"integrity", cli::run_integrity},
};

// luks actions that benchmark PBKDF2 (seconds, or hours with a large forced
// count) are left out the same way.
bool slow_luks(const std::vector<std::string>& words) {
    if (words.empty() || words[0] != "luks") return false;
    for (const auto& w : words)
        if (w == "format" || w == "add-key" || w == "change-key") return true;
    return false;
}

constexpr std::size_t kMaxWords = 32, kMaxWord = 256;

// Words the harness does not pass on: '/', paths outside the sandbox.
// (--threads is bounded at 256 and Boost placeholders no longer reach
// Boost's messages, so both are fuzzed.)
bool refused(const std::string& w) { return w.find('/') != std::string::npos; }

fs::path g_dir;

void reset_dir() {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(g_dir, ec)) fs::remove_all(e.path(), ec);
    std::ofstream("data", std::ios::binary) << std::string(8192, 'd');
    std::ofstream("key", std::ios::binary) << std::string(64, 'k');
    std::ofstream("keyhex") << std::string(64, 'a') << "\n";
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    char tmpl[] = "/tmp/blkcrypt-fuzz-cli-XXXXXX";
    if (!::mkdtemp(tmpl)) std::abort();
    g_dir = tmpl;
    fs::current_path(g_dir);
    const int null = ::open("/dev/null", O_RDWR);
    if (null < 0 || ::dup2(null, 0) < 0 || ::dup2(null, 1) < 0) std::abort();
    ::close(null);
    std::atexit([] {
        std::error_code ec;
        fs::remove_all(g_dir, ec);
    });
    (void)cli::registry();  // built once, before any --plugin word could matter
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    std::vector<std::string> words;
    std::string cur;
    for (std::size_t i = 0; i <= size; ++i) {
        if (i == size || data[i] == '\n') {
            if (cur.size() > kMaxWord || refused(cur)) return 0;
            words.push_back(std::move(cur));
            cur.clear();
            if (words.size() > kMaxWords) return 0;
        } else {
            cur.push_back(static_cast<char>(data[i]));
        }
    }
    if (words.empty() || slow_luks(words)) return 0;
    reset_dir();
    try {
        const std::size_t before = words.size();
        words = cli::take_plugin_options(std::move(words));
        if (words.size() != before || words.empty()) return 0;  // no plugins are loaded here
        for (const auto& c : kCommands)
            if (words[0] == c.name) {
                (void)c.run(cli::Args(words).subspan(1));
                break;
            }
    } catch (const std::exception&) {
        // UsageError, Failure, I/O: the exit codes 1 and 2 of main().
    }
    std::fflush(stdout);
    return 0;
}
