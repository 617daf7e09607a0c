// blkcrypt fsverity digest: fs-verity file digests, printed exactly as
// `fsverity digest` (fsverity-utils) prints them. The Merkle tree and the
// descriptor can be saved; each output goes to a temporary file renamed into
// place only when complete.
#include "commands.hpp"

#include <blkcrypt/verity/fsverity.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace cli {
namespace {

namespace fsv = blkcrypt::verity;

std::string sys_error(const std::string& what) { return what + ": " + std::strerror(errno); }

// SIGINT/SIGTERM only set a flag, so an interrupted run still unwinds and
// removes its temporary files.
std::atomic<int> g_signal{0};
extern "C" void fsverity_on_signal(int sig) { g_signal = sig; }

class SignalGuard {
public:
    SignalGuard() {
        struct sigaction sa {};
        sa.sa_handler = fsverity_on_signal;
        ::sigemptyset(&sa.sa_mask);
        ::sigaction(SIGINT, &sa, &old_int_);
        ::sigaction(SIGTERM, &sa, &old_term_);
    }
    ~SignalGuard() {
        ::sigaction(SIGINT, &old_int_, nullptr);
        ::sigaction(SIGTERM, &old_term_, nullptr);
    }
    SignalGuard(const SignalGuard&) = delete;
    SignalGuard& operator=(const SignalGuard&) = delete;

private:
    struct sigaction old_int_ {}, old_term_ {};
};

// A file written at arbitrary offsets under a temporary name next to its
// target; commit() renames it, the destructor otherwise removes it.
class TempOutput {
public:
    explicit TempOutput(const std::string& path) : path_(path) {
        namespace fs = std::filesystem;
        const fs::path target(path);
        if (!target.has_filename()) throw UsageError("'" + path + "' is not a file name");
        const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
        tmp_ = (dir / ("." + target.filename().string() + ".XXXXXX")).string();
        fd_ = ::mkstemp(tmp_.data());
        if (fd_ < 0) throw Failure(sys_error(path + ": cannot create a temporary file"));
        const mode_t mask = ::umask(0);
        ::umask(mask);
        ::fchmod(fd_, 0666 & ~mask);  // mkstemp's 0600 is not what a plain create gives
    }
    ~TempOutput() {
        if (fd_ >= 0) ::close(fd_);
        if (!committed_) ::unlink(tmp_.c_str());
    }
    TempOutput(const TempOutput&) = delete;
    TempOutput& operator=(const TempOutput&) = delete;

    blkcrypt::Result<void> pwrite_all(uint64_t offset, blkcrypt::ConstBytes data) {
        for (std::size_t done = 0; done < data.size();) {
            const ssize_t n = ::pwrite(fd_, data.data() + done, data.size() - done,
                                       static_cast<off_t>(offset + done));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return blkcrypt::make_error(blkcrypt::Status::IoError, sys_error(path_));
            done += static_cast<std::size_t>(n);
        }
        return {};
    }
    void commit() {
        if (::fsync(fd_) != 0) throw Failure(sys_error(path_));
        const int rc = ::close(fd_);
        fd_ = -1;
        if (rc != 0) throw Failure(sys_error(path_));
        if (::rename(tmp_.c_str(), path_.c_str()) != 0) throw Failure(sys_error(path_));
        committed_ = true;
    }

private:
    std::string path_, tmp_;
    int fd_ = -1;
    bool committed_ = false;
};

uint32_t parse_block_size(const std::string& s) {
    const bool digits = !s.empty() && s.size() <= 10 && s.find_first_not_of("0123456789") == std::string::npos;
    const uint64_t v = digits ? std::stoull(s) : 0;
    if (!digits || v > UINT32_MAX) throw UsageError("--block-size: '" + s + "' is not a power of two");
    return static_cast<uint32_t>(v);
}

unsigned parse_threads(const std::string& s) {
    const bool digits = !s.empty() && s.size() <= 4 && s.find_first_not_of("0123456789") == std::string::npos;
    if (!digits) throw UsageError("--threads: '" + s + "' is not a number from 0 to 9999");
    return static_cast<unsigned>(std::stoul(s));
}

// fsverity-utils also takes the algorithm numbers.
std::string parse_hash(const std::string& s) {
    if (s == "1") return "sha256";
    if (s == "2") return "sha512";
    return s;
}

void print_help() {
    std::cout << "Usage: blkcrypt fsverity digest FILE... [OPTIONS]\n\n"
                 "Compute fs-verity file digests, as 'fsverity digest' does.\n"
                 "Run 'blkcrypt fsverity digest --help' for the options.\n";
}

int run_digest(Args args) {
    CommandLine cl{"blkcrypt fsverity digest FILE... [--hash-alg sha256|sha512] [--block-size N]\n"
                   "       [--salt HEX] [--compact] [--for-builtin-sig] [--out-merkle-tree F]\n"
                   "       [--out-descriptor F] [--threads N]",
                   "Print the fs-verity digest of each FILE as '<alg>:<hex> <file>', exactly as\n"
                   "'fsverity digest' (fsverity-utils) does."};
    cl.options.add_options()
        ("hash-alg", po::value<std::string>()->value_name("ALG"), "sha256 (default) or sha512")
        ("block-size", po::value<std::string>()->value_name("N"), "Merkle tree block size (default 4096)")
        ("salt", po::value<std::string>()->value_name("HEX"), "salt, up to 32 bytes in hex")
        ("compact", po::bool_switch(), "print only the hex digest")
        ("for-builtin-sig", po::bool_switch(), "print the formatted digest a built-in signature signs")
        ("out-merkle-tree", po::value<std::string>()->value_name("F"), "write the Merkle tree (root level first) to F")
        ("out-descriptor", po::value<std::string>()->value_name("F"), "write the 256-byte descriptor to F")
        ("threads", po::value<std::string>()->value_name("N"), "hashing threads (default: all cores)");
    cl.hidden.add_options()("file", po::value<std::vector<std::string>>(), "input files");
    cl.positional.add("file", -1);
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;
    if (!vm->count("file")) throw UsageError("no FILE given");
    const auto files = (*vm)["file"].as<std::vector<std::string>>();

    fsv::FsverityParams p;
    if (vm->count("hash-alg")) p.hash = parse_hash((*vm)["hash-alg"].as<std::string>());
    if (vm->count("block-size")) p.block_size = parse_block_size((*vm)["block-size"].as<std::string>());
    if (vm->count("salt")) p.salt = decode_hex((*vm)["salt"].as<std::string>(), "--salt");
    if (vm->count("threads")) p.threads = parse_threads((*vm)["threads"].as<std::string>());
    if (auto r = fsv::fsverity_check_params(p); !r) throw UsageError(r.error().message);
    const bool compact = (*vm)["compact"].as<bool>(), builtin = (*vm)["for-builtin-sig"].as<bool>();
    const std::string tree_path = vm->count("out-merkle-tree") ? (*vm)["out-merkle-tree"].as<std::string>() : "";
    const std::string desc_path = vm->count("out-descriptor") ? (*vm)["out-descriptor"].as<std::string>() : "";
    // fsverity-utils would write every file's tree over the previous one.
    if ((!tree_path.empty() || !desc_path.empty()) && files.size() != 1)
        throw UsageError("--out-merkle-tree and --out-descriptor take a single FILE");
    if (!tree_path.empty() && tree_path == desc_path)
        throw UsageError("--out-merkle-tree and --out-descriptor name the same file");
    for (const auto* out : {&tree_path, &desc_path})
        if (!out->empty()) refuse_same_file(files[0], *out);

    blkcrypt::Registry reg;
    blkcrypt::register_defaults(reg);
    std::optional<SignalGuard> guard;
    if (!tree_path.empty() || !desc_path.empty()) guard.emplace();

    for (const auto& file : files) {
        const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) throw Failure(sys_error("cannot open '" + file + "'"));
        std::optional<TempOutput> tree, desc;
        if (!tree_path.empty()) tree.emplace(tree_path);
        if (!desc_path.empty()) desc.emplace(desc_path);
        fsv::FsverityTreeSink sink;
        if (tree) {
            sink = [&](uint64_t off, blkcrypt::ConstBytes block) -> blkcrypt::Result<void> {
                if (g_signal) return blkcrypt::make_error(blkcrypt::Status::IoError, "interrupted");
                return tree->pwrite_all(off, block);
            };
        }
        auto d = fsv::fsverity_compute_fd(reg, p, fd, std::move(sink));
        ::close(fd);
        if (g_signal) throw Failure(std::string("interrupted by ") + (g_signal == SIGINT ? "SIGINT" : "SIGTERM"));
        if (!d) throw Failure(file + ": " + d.error().message);
        if (desc) {
            if (auto r = desc->pwrite_all(0, d->descriptor); !r) throw Failure(r.error().message);
            desc->commit();
        }
        if (tree) tree->commit();

        const std::string hex = encode_hex(builtin ? fsv::fsverity_formatted_digest(*d) : d->digest);
        if (compact) std::cout << hex << '\n';
        else if (builtin) std::cout << hex << ' ' << file << '\n';
        else std::cout << d->alg->name << ':' << hex << ' ' << file << '\n';
    }
    return 0;
}

}  // namespace

int run_fsverity(Args args) {
    if (args.empty()) throw UsageError("fsverity: no subcommand given (digest; see blkcrypt fsverity --help)");
    if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
        print_help();
        return 0;
    }
    if (args[0] == "digest") return run_digest(args.subspan(1));
    throw UsageError("fsverity: unknown subcommand '" + args[0] + "' (digest)");
}

}  // namespace cli
