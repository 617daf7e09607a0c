// blkcrypt fsverity digest: fs-verity file digests, printed exactly as
// `fsverity digest` (fsverity-utils) prints them. The Merkle tree and the
// descriptor can be saved; each output goes to a temporary file renamed into
// place only when complete.
#include "commands.hpp"
#include "number_option.hpp"
#include "output_file.hpp"

#include <blkcrypt/verity/fsverity.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace cli {
namespace {

namespace fsv = blkcrypt::verity;

blkcrypt::Result<void> pwrite_all(const TempOutput& out, const std::string& name, uint64_t offset,
                                  blkcrypt::ConstBytes data) {
    for (std::size_t done = 0; done < data.size();) {
        const ssize_t n = ::pwrite(out.fd(), data.data() + done, data.size() - done,
                                   static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return blkcrypt::make_error(blkcrypt::Status::IoError, errno_message(name));
        done += static_cast<std::size_t>(n);
    }
    return {};
}

uint32_t parse_block_size(const std::string& s) {
    const bool digits = !s.empty() && s.size() <= 10 && s.find_first_not_of("0123456789") == std::string::npos;
    const uint64_t v = digits ? std::stoull(s) : 0;
    if (!digits || v > UINT32_MAX) throw UsageError("--block-size: '" + s + "' is not a power of two");
    return static_cast<uint32_t>(v);
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
        ("threads", threads_value()->value_name("N"), "hashing threads, at most 256 (default: all cores)");
    cl.hidden.add_options()("file", po::value<std::vector<std::string>>(), "input files");
    cl.positional.add("file", -1);
    // fsverity-utils takes "--salt=" as no salt; Boost refuses an empty "=".
    std::vector<std::string> words;
    for (const auto& a : args) {
        if (a == "--salt=") words.insert(words.end(), {"--salt", ""});
        else words.push_back(a);
    }
    auto vm = parse_command_line(cl, words);
    if (!vm) return 0;
    if (!vm->count("file")) throw UsageError("no FILE given");
    const auto files = (*vm)["file"].as<std::vector<std::string>>();

    fsv::FsverityParams p;
    if (vm->count("hash-alg")) p.hash = parse_hash((*vm)["hash-alg"].as<std::string>());
    if (vm->count("block-size")) p.block_size = parse_block_size((*vm)["block-size"].as<std::string>());
    if (vm->count("salt")) p.salt = decode_hex((*vm)["salt"].as<std::string>(), "--salt");
    if (vm->count("threads")) p.threads = (*vm)["threads"].as<unsigned>();
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

    blkcrypt::Registry& reg = registry();
    std::optional<SignalGuard> guard;
    if (!tree_path.empty() || !desc_path.empty()) guard.emplace();

    for (const auto& file : files) {
        const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) throw Failure(errno_message("cannot open '" + file + "'"));
        std::optional<TempOutput> tree, desc;
        if (!tree_path.empty()) tree.emplace(tree_path);
        if (!desc_path.empty()) desc.emplace(desc_path);
        fsv::FsverityTreeSink sink;
        if (tree) {
            sink = [&](uint64_t off, blkcrypt::ConstBytes block) -> blkcrypt::Result<void> {
                if (pending_signal()) return blkcrypt::make_error(blkcrypt::Status::IoError, "interrupted");
                return pwrite_all(*tree, tree_path, off, block);
            };
        }
        auto d = fsv::fsverity_compute_fd(reg, p, fd, std::move(sink));
        ::close(fd);
        if (const int sig = pending_signal())
            throw Failure(std::string("interrupted by ") + (sig == SIGINT ? "SIGINT" : "SIGTERM"));
        if (!d) throw Failure(file + ": " + d.error().message);
        if (desc) {
            if (auto r = pwrite_all(*desc, desc_path, 0, d->descriptor); !r) throw Failure(r.error().message);
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
