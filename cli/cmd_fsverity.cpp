// blkcrypt fsverity digest: fs-verity file digests, printed exactly as
// `fsverity digest` (fsverity-utils) prints them. The Merkle tree and the
// descriptor can be saved, through the output policy (output_file.hpp); both
// appear together or not at all.
#include "commands.hpp"
#include "fsverity_sig.hpp"
#include "json.hpp"
#include "number_option.hpp"
#include "output_file.hpp"
#include "progress.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/verity/fsverity.hpp>

#include <memory>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace cli {
namespace {

namespace fsv = blkcrypt::verity;

uint32_t parse_block_size(const std::string& s) {
    const bool digits = !s.empty() && s.size() <= 10 && s.find_first_not_of("0123456789") == std::string::npos;
    const uint64_t v = digits ? std::stoull(s) : 0;
    if (!digits || v > UINT32_MAX)
        throw UsageError("--block-size: '" + s + "' is not a block size (a power of two such as 4096)");
    return static_cast<uint32_t>(v);
}

// fsverity-utils also takes the algorithm numbers.
std::string parse_hash(const std::string& s) {
    if (s == "1") return "sha256";
    if (s == "2") return "sha512";
    return lowercase_hash_name(s);  // "SHA256" too, as veritysetup takes it
}

void print_help() {
    std::cout << "Usage: blkcrypt fsverity digest FILE... [OPTIONS]\n"
                 "       blkcrypt fsverity sign FILE SIG --key KEY [--cert CERT] [OPTIONS]\n"
                 "       blkcrypt fsverity verify-sig FILE SIG --cert CERT [OPTIONS]\n\n"
                 "Compute fs-verity file digests, as 'fsverity digest' does; make and check\n"
                 "built-in signatures, as 'fsverity sign' does.\n"
                 "Run 'blkcrypt fsverity ACTION --help' for the options.\n";
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
        ("threads", threads_value()->value_name("N"), "hashing threads, at most 256 (default: all cores)")
        ("json", po::bool_switch(), "print one JSON object per FILE (docs/json.md)");
    add_progress_options(cl.options);
    cl.actions = {{"digest", "print the fs-verity digest of files"}};
    cl.hidden.add_options()("file", po::value<std::vector<std::string>>(), "input files");
    cl.positional.add("file", -1);
    auto vm = parse_command_line(cl, fsverity_salt_words(args));
    if (!vm) return 0;
    if (!vm->count("file")) throw UsageError("no FILE given");
    const auto files = (*vm)["file"].as<std::vector<std::string>>();

    fsv::FsverityParams p = fsverity_params(*vm);
    const bool compact = (*vm)["compact"].as<bool>(), builtin = (*vm)["for-builtin-sig"].as<bool>();
    const bool json = (*vm)["json"].as<bool>();
    if (json && compact) throw UsageError("--json and --compact exclude each other");
    const ProgressSettings progress_opts = progress_settings(*vm);
    const std::string tree_path = vm->count("out-merkle-tree") ? (*vm)["out-merkle-tree"].as<std::string>() : "";
    const std::string desc_path = vm->count("out-descriptor") ? (*vm)["out-descriptor"].as<std::string>() : "";
    // fsverity-utils would write every file's tree over the previous one.
    if ((!tree_path.empty() || !desc_path.empty()) && files.size() != 1)
        throw UsageError("--out-merkle-tree and --out-descriptor take a single FILE");
    if (!tree_path.empty() && tree_path == desc_path)
        throw UsageError("--out-merkle-tree and --out-descriptor name the same file");
    if (desc_path == "-") throw UsageError("--out-descriptor cannot be stdout: the digest is printed there");
    blkcrypt::Registry& reg = registry();
    for (const auto& file : files) {
        // An NBD URI is read through its store (docs/remote.md), a file by its fd.
        std::shared_ptr<blkcrypt::BackingStore> remote;
        int fd = -1;
        if (blkcrypt::is_nbd_uri(file)) {
            auto s = blkcrypt::open_store(file, false);
            if (!s) throw Failure(s.error().message);
            remote = std::move(s).value();
        } else {
            fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
            if (fd < 0) throw Failure(errno_message("cannot open '" + file + "'"));
        }
        struct FdCloser {
            int fd;
            ~FdCloser() {
                if (fd >= 0) ::close(fd);
            }
        } closer{fd};
        // The tree is written out of order (each level as it completes);
        // the descriptor in one go at the end, so it may be a stream.
        std::optional<Output> tree, desc;
        if (!tree_path.empty())
            tree.emplace(tree_path, OutputOptions{.role = "--out-merkle-tree", .inputs = {{"FILE", file}}});
        if (!desc_path.empty())
            desc.emplace(desc_path, OutputOptions{.role = "--out-descriptor", .can_stream = true,
                                                  .inputs = {{"FILE", file}, {"--out-merkle-tree", tree_path}}});
        fsv::FsverityTreeSink sink;
        std::string sink_error;  // the output's own message (final name, errno)
        if (tree) {
            sink = [&](uint64_t off, blkcrypt::ConstBytes block) -> blkcrypt::Result<void> {
                try {
                    tree->pwrite(block, off);
                } catch (const Failure& e) {
                    sink_error = e.what();
                    return blkcrypt::make_error(blkcrypt::Status::IoError, sink_error);
                }
                return {};
            };
        }
        struct stat st {};
        const uint64_t size = remote ? remote->size() : ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
        Progress progress(progress_opts, file, size);
        p.progress = [&progress](uint64_t done, uint64_t) {
            progress.update(done);
            return true;  // signals end the process (output_file.cpp)
        };
        uint64_t pos = 0;
        const fsv::FsverityReadFn read_remote = [&](blkcrypt::Bytes buf) -> blkcrypt::Result<void> {
            if (remote->read(pos, buf) != blkcrypt::Status::Ok)
                return blkcrypt::make_error(blkcrypt::Status::IoError, "read error at byte " + std::to_string(pos));
            pos += buf.size();
            progress.update(pos);
            return {};
        };
        auto d = remote ? fsv::fsverity_compute(reg, p, size, read_remote, std::move(sink))
                        : fsv::fsverity_compute_fd(reg, p, fd, std::move(sink));
        if (!sink_error.empty()) throw Failure(sink_error);
        if (!d) throw Failure(file + ": " + d.error().message);
        // Both outputs appear together: the descriptor is written (a stream
        // at once) before either temporary file is renamed.
        if (desc) desc->write(d->descriptor);
        Output::commit_all({tree ? &*tree : nullptr, desc ? &*desc : nullptr});
        progress.finish();

        if (json) {
            JsonWriter w(std::cout);
            w.begin_object();
            w.key("file"), w.string(file);
            w.key("algorithm"), w.string(d->alg->name);
            w.key("block_size"), w.number(p.block_size);
            w.key("salt"), w.string(encode_hex(p.salt));
            w.key("size"), w.number(static_cast<int64_t>(size));
            w.key("digest"), w.string(encode_hex(d->digest));
            if (builtin) w.key("formatted_digest"), w.string(encode_hex(fsv::fsverity_formatted_digest(*d)));
            w.key("tree_size"), w.number(static_cast<int64_t>(d->tree_size));
            w.end_object();
            continue;
        }
        const std::string hex = encode_hex(builtin ? fsv::fsverity_formatted_digest(*d) : d->digest);
        if (compact) std::cout << hex << '\n';
        else if (builtin) std::cout << hex << ' ' << file << '\n';
        else std::cout << d->alg->name << ':' << hex << ' ' << file << '\n';
    }
    return 0;
}

}  // namespace

std::vector<std::string> fsverity_salt_words(Args args) {
    // fsverity-utils takes "--salt=" as no salt; Boost refuses an empty "=".
    std::vector<std::string> words;
    for (const auto& a : args) {
        if (a == "--salt=") words.insert(words.end(), {"--salt", ""});
        else words.push_back(a);
    }
    return words;
}

fsv::FsverityParams fsverity_params(const po::variables_map& vm) {
    fsv::FsverityParams p;
    if (vm.count("hash-alg")) p.hash = parse_hash(vm["hash-alg"].as<std::string>());
    if (vm.count("block-size")) p.block_size = parse_block_size(vm["block-size"].as<std::string>());
    if (vm.count("salt")) p.salt = decode_hex(vm["salt"].as<std::string>(), "--salt");
    if (vm.count("threads")) p.threads = vm["threads"].as<unsigned>();
    if (auto r = fsv::fsverity_check_params(p); !r) throw UsageError(r.error().message);
    return p;
}

int run_fsverity(Args args) {
    if (args.empty())
        throw UsageError("fsverity: no subcommand given (digest, sign, verify-sig; see blkcrypt fsverity --help)");
    if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
        print_help();
        return 0;
    }
    if (args[0] == "digest") return run_digest(args.subspan(1));
    if (args[0] == "sign") return run_fsverity_sign(args.subspan(1));
    if (args[0] == "verify-sig") return run_fsverity_verify_sig(args.subspan(1));
    throw UsageError("fsverity: unknown subcommand '" + args[0] + "' (digest, sign, verify-sig)");
}

}  // namespace cli
