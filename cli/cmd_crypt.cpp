// blkcrypt crypt: encrypt or decrypt a whole image through the userspace
// dm-crypt target, as the kernel would store it, and print dm table lines.
//
// Encryption writes the plaintext IN through a CryptTarget whose backing
// store is (a temporary) OUT; decryption reads through a target over IN and
// writes OUT. Data moves in 1 MiB bios, several in flight, so memory stays
// bounded whatever the image size.
#include "commands.hpp"
#include "container_common.hpp"
#include "cryptsetup_options.hpp"
#include "image_copy.hpp"
#include "json.hpp"
#include "number_option.hpp"
#include "output_file.hpp"
#include "passphrase.hpp"
#include "progress.hpp"
#include "serve.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/bio.hpp>
#include <blkcrypt/dm/bio_ring.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/dm/plain_key.hpp>
#include <blkcrypt/dm/table.hpp>
#include <blkcrypt/dm/block_device.hpp>
#include <blkcrypt/registry.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cli {
namespace {

namespace dm = blkcrypt::dm;
constexpr uint64_t kSector = 512;
constexpr std::size_t kMaxKeyBytes = 1024;  // more than any cipher needs (8192 bits)

// cryptsetup's compiled-in plain-mode defaults (cryptsetup --help).
constexpr const char* kPlainCipher = "aes-cbc-essiv:sha256";
constexpr unsigned kPlainKeyBits = 256;
constexpr const char* kPlainHash = "ripemd160";

void warn(const std::string& msg) {
    std::cout.flush();
    std::cerr << "blkcrypt: " << msg << "\n";
}

// The volume key as `cryptsetup open --type plain` makes it (cryptsetup 2.6,
// action_open_plain): a key file is the key itself, exactly key_size bytes
// after --keyfile-offset, and --hash/--keyfile-size do not apply to it; a
// passphrase (terminal prompt, one line of piped stdin, or all of stdin for
// --key-file -) is hashed with --hash into key_size bytes. `device` names the
// encrypted image in the prompt.
blkcrypt::SecureBuffer plain_mode_key(const po::variables_map& vm, std::size_t key_size,
                                      const std::string& device) {
    const bool has_file = vm.count("key-file") > 0;
    const std::string file = has_file ? vm["key-file"].as<std::string>() : "-";
    const bool from_stdin = file == "-";
    std::optional<std::string> hash = vm.count("hash") ? vm["hash"].as<std::string>() : std::string(kPlainHash);
    if (!from_stdin) {
        if (vm.count("hash")) warn("WARNING: The --hash parameter is being ignored in plain mode with keyfile specified.");
        hash.reset();
    }
    if (hash && blkcrypt::dm::plain_hash_alg(*hash) == "plain") hash.reset();
    if (!from_stdin && vm.count("keyfile-size"))
        warn("WARNING: The --keyfile-size option is being ignored, the read size is the same as the encryption key size.");
    const uint64_t offset = vm.count("keyfile-offset") ? vm["keyfile-offset"].as<uint64_t>() : 0;
    std::size_t size = 0;  // 0: all (up to the maximum)
    if (vm.count("keyfile-size")) {
        const uint64_t n = vm["keyfile-size"].as<uint64_t>();
        if (n == 0 || n > kMaxKeyFileSize)
            throw UsageError("--keyfile-size must be 1.." + std::to_string(kMaxKeyFileSize) + " bytes");
        size = static_cast<std::size_t>(n);
    }
    if (!hash && has_file) size = key_size;  // read as the key itself
    blkcrypt::SecureBuffer pass;
    if (from_stdin && ::isatty(STDIN_FILENO)) {
        if (offset) throw UsageError("cannot use --keyfile-offset with terminal input");
        pass = prompt_passphrase("Enter passphrase for " + device + ": ", vm["verify-passphrase"].as<bool>());
    } else {
        // Piped stdin without --key-file is one line, as typed at a prompt.
        pass = read_key_input(file, offset, size, !has_file);
    }
    auto key = blkcrypt::dm::plain_key(registry(), hash, key_size, pass);
    if (!key) throw UsageError("--hash: " + key.error().message);
    return std::move(key).value();
}

const char* const kCryptOnlyOpts[] = {"cipher", "key-file", "key-size", "sector-size", "skip",
                                      "hash", "keyfile-offset", "keyfile-size"};

// The table from --table, or built as cryptsetup's plain mode builds it from
// --cipher/--key-size/--hash and a key file or passphrase.
dm::CryptTable build_table(const po::variables_map& vm, const std::string& device) {
    if (vm.count("table")) {
        for (const char* o : kCryptOnlyOpts)
            if (vm.count(o)) throw UsageError(std::string("--table and --") + o + " exclude each other");
        if (vm["iv-large-sectors"].as<bool>())
            throw UsageError("--table and --iv-large-sectors exclude each other");
        if (vm["verify-passphrase"].as<bool>())
            throw UsageError("--table and --verify-passphrase exclude each other");
        auto t = dm::parse_crypt_args(vm["table"].as<std::string>());
        if (!t) throw UsageError("--table: " + t.error().message);
        return std::move(t).value();
    }
    const std::string cipher = vm.count("cipher") ? vm["cipher"].as<std::string>() : kPlainCipher;
    // The key stays out of the string: "-" is the parser's "no key", filled in below.
    std::string args = cipher + " - " + std::to_string(vm.count("skip") ? vm["skip"].as<uint64_t>() : 0);
    std::vector<std::string> opts;
    if (vm.count("sector-size")) {
        const unsigned ss = vm["sector-size"].as<unsigned>();
        if (ss & (ss - 1)) throw UsageError("--sector-size " + std::to_string(ss) + " is not a power of two from 512 to 4096");
    }
    if (vm.count("sector-size")) opts.push_back("sector_size:" + std::to_string(vm["sector-size"].as<unsigned>()));
    if (vm["iv-large-sectors"].as<bool>()) opts.push_back("iv_large_sectors");
    if (!opts.empty()) {
        args += " " + std::to_string(opts.size());
        for (const auto& o : opts) args += " " + o;
    }
    if (args.find_first_of("\n\t") != std::string::npos || cipher.find(' ') != std::string::npos)
        throw UsageError("--cipher: no spaces allowed");
    auto t = dm::parse_crypt_args(args);
    if (!t) throw UsageError("--cipher: " + t.error().message);
    const unsigned bits = vm.count("key-size") ? vm["key-size"].as<unsigned>() : kPlainKeyBits;
    if (bits == 0 || bits % 8) throw UsageError("--key-size must be a positive multiple of 8 bits");
    if (bits / 8 > kMaxKeyBytes) throw UsageError("--key-size is more than " + std::to_string(kMaxKeyBytes * 8) + " bits");
    t->key = plain_mode_key(vm, bits / 8, device);
    return std::move(t).value();
}

uint64_t store_size(const std::string& path) {
    auto s = blkcrypt::open_store(path, false);
    if (!s) throw Failure(s.error().message);
    return (*s)->size();
}

int run_table(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.size() > 1) throw UsageError("crypt table takes at most one DEVICE");
    const std::string device = vm.count("device") ? vm["device"].as<std::string>() : files.empty() ? "" : files[0];
    // Required: the line names the device, and is as long as it without --size.
    if (device.empty()) throw UsageError("crypt table needs --device PATH");
    dm::CryptTable t = build_table(vm, device);
    t.device = device;
    t.offset = vm["offset"].as<uint64_t>();
    if (vm.count("size")) {
        t.length = vm["size"].as<uint64_t>();
    } else {
        const uint64_t sz = store_size(t.device) / kSector;  // like cryptsetup: the rest of the device
        if (sz <= t.offset) throw UsageError("--offset is past the end of " + t.device);
        t.length = sz - t.offset;
    }
    const uint64_t step = t.sector_size / kSector;
    if (t.length == 0 || t.length % step)
        throw UsageError("--size must be a non-zero multiple of the sector size (" +
                         std::to_string(step) + " sectors)");
    // Check the cipher and key length on one sector of memory, as the kernel's crypt_ctr would.
    blkcrypt::Registry& reg = registry();
    dm::CryptTargetOptions opts;
    opts.threads = 1;
    dm::CryptTable probe = t;  // one sector at the start of the memory store
    probe.offset = probe.length = 0;
    make_crypt_target(reg, probe, std::make_shared<dm::MemoryStore>(t.sector_size), step, opts);
    const std::string line = t.table_line(vm["show-key"].as<bool>());
    if (vm["json"].as<bool>()) {
        JsonWriter w(std::cout);
        w.begin_object();
        w.key("table"), w.string(line);
        w.key("cipher"), w.string(t.cipher);
        w.key("key_bits"), w.number(static_cast<int64_t>(t.key.size() * 8));
        w.key("iv_offset"), w.number(static_cast<int64_t>(t.iv_offset));
        w.key("sector_size"), w.number(static_cast<int64_t>(t.sector_size));
        w.key("device"), w.string(t.device);
        w.key("offset"), w.number(static_cast<int64_t>(t.offset));
        w.key("length"), w.number(static_cast<int64_t>(t.length));
        w.end_object();
    } else {
        std::cout << line << "\n";
    }
    return 0;
}

int run_copy(const po::variables_map& vm, bool enc, const std::vector<std::string>& files) {
    const std::string verb = enc ? "encrypt" : "decrypt";
    if (files.size() != 2) throw UsageError("crypt " + verb + " needs IN and OUT");
    const std::string& in_path = files[0];
    const std::string& out_path = files[1];
    if (vm.count("device")) throw UsageError("--device is for crypt table");
    if (vm["show-key"].as<bool>()) throw UsageError("--show-key is for crypt table");
    const std::string key_path = vm.count("key-file") ? vm["key-file"].as<std::string>() : "";
    if (in_path == "-" && key_path == "-") throw UsageError("IN and --key-file cannot both be stdin");

    // OUT, through the output policy; IN and the key file may not be it (the
    // target would read ciphertext it has just overwritten).
    Output out(out_path, OutputOptions{.role = "OUT", .secret = !enc, .can_stream = true,
                                       .in_place = vm["in-place"].as<bool>(),
                                       .inputs = {{"IN", in_path}, {"the key file", key_path}}});

    dm::CryptTable table = build_table(vm, enc ? out_path : in_path);  // the encrypted image names the prompt
    table.offset = vm["offset"].as<uint64_t>();
    const uint64_t step = table.sector_size / kSector;
    if (table.offset % step)
        throw UsageError("--offset must be a multiple of the sector size (" + std::to_string(step) + " sectors)");
    if (vm.count("size") && (vm["size"].as<uint64_t>() == 0 || vm["size"].as<uint64_t>() % step))
        throw UsageError("--size must be a non-zero multiple of the sector size (" + std::to_string(step) + " sectors)");

    ImageCopy job{.encrypt = enc, .in_path = in_path, .out = out, .table = table, .keep_prefix = true};
    if (vm.count("size")) job.size_sectors = vm["size"].as<uint64_t>();
    if (vm.count("start")) job.start_sectors = vm["start"].as<uint64_t>();
    set_copy_options(vm, job, enc ? out_path : in_path);
    const CopyResult done = copy_image(job);
    if (vm["json"].as<bool>()) {
        JsonWriter w(std::cout);
        w.begin_object();
        w.key("action"), w.string(enc ? "encrypt" : "decrypt");
        w.key("input"), w.string(in_path);
        w.key("output"), w.string(out_path);
        w.key("cipher"), w.string(table.cipher);  // never the key
        w.key("key_bits"), w.number(static_cast<int64_t>(table.key.size() * 8));
        w.key("iv_offset"), w.number(static_cast<int64_t>(table.iv_offset));
        w.key("sector_size"), w.number(static_cast<int64_t>(table.sector_size));
        w.key("offset"), w.number(static_cast<int64_t>(table.offset));
        w.key("sectors"), w.number(static_cast<int64_t>(done.bytes / kSector));
        w.key("bytes"), w.number(static_cast<int64_t>(done.bytes));
        w.key("seconds"), w.decimal(done.seconds);
        w.end_object();
    }
    return 0;
}

// crypt serve: the plaintext view of IMAGE over NBD, read-write unless
// --read-only, as `cryptsetup open` would make it a device.
int run_serve(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.size() != 1) throw UsageError("crypt serve needs one IMAGE");
    const std::string& image = files[0];
    if (vm.count("device")) throw UsageError("--device is for crypt table");
    if (vm["show-key"].as<bool>()) throw UsageError("--show-key is for crypt table");
    const bool read_only = vm["read-only"].as<bool>();
    dm::CryptTable table = build_table(vm, image);
    table.offset = vm["offset"].as<uint64_t>();
    const uint64_t step = table.sector_size / kSector;
    if (table.offset % step)
        throw UsageError("--offset must be a multiple of the sector size (" + std::to_string(step) + " sectors)");
    block_stop_signals();  // before any thread exists
    std::shared_ptr<dm::BackingStore> store = open_container_image(image, !read_only);
    if (store->size() / kSector <= table.offset) throw UsageError("--offset is past the end of " + image);
    const uint64_t avail = (store->size() / kSector - table.offset) / step * step;
    uint64_t length = avail;
    if (vm.count("size")) {
        length = vm["size"].as<uint64_t>();
        if (length % step)
            throw UsageError("--size must be a multiple of the sector size (" + std::to_string(step) + " sectors)");
        if (length > avail)
            throw UsageError("--size " + std::to_string(length) + " is more than the " + std::to_string(avail) +
                             " sectors of " + image);
    }
    if (length == 0) throw UsageError(image + ": smaller than one sector after --offset");
    dm::CryptTargetOptions opts;
    if (vm.count("threads")) opts.threads = vm["threads"].as<unsigned>();
    std::shared_ptr<dm::CryptTarget> target = make_crypt_target(registry(), table, store, length, opts);
    return serve_device(vm, blkcrypt::dm::make_crypt_device(std::move(target), std::move(store), read_only));
}

}  // namespace

int run_crypt(Args args) {
    CommandLine cl{"blkcrypt crypt encrypt|decrypt [--table ARGS | --cipher SPEC [--key-size BITS]\n"
                   "                              [--key-file FILE | --hash HASH] [...]] IN OUT\n"
                   "       blkcrypt crypt table [--table ARGS | --cipher SPEC ...]\n"
                   "                            --device PATH [--size SECTORS] [--show-key]\n"
                   "       blkcrypt crypt serve [--table ARGS | --cipher SPEC ...]\n"
                   "                            (--socket PATH | --port N) [--read-only] IMAGE",
                   "Encrypt a plain image IN into OUT as dm-crypt stores it, or decrypt such an\n"
                   "image, or print the dm table line. ARGS is '<cipher> <key> <iv_offset> [<#opts>\n"
                   "<opts>...]'. Without --table the key is made as `cryptsetup open --type plain`\n"
                   "makes it: a key file is the key; a passphrase (prompted for on a terminal, or\n"
                   "one line of stdin) is hashed with --hash. IN and OUT may be '-' (stdin/stdout),\n"
                   "FIFOs or devices; a stream without --size is read to its end. OUT follows the\n"
                   "output policy (docs/outputs.md). Sizes and offsets are 512-byte sectors.\n"
                   "serve makes the plaintext view of IMAGE a network block device (NBD) for\n"
                   "nbdcopy, nbdinfo, nbdfuse, qemu-img and qemu (docs/nbd.md)."};
    cl.options.add_options()
        ("table", po::value<std::string>()->value_name("ARGS"), "dm-crypt target arguments (key in hex)")
        ("cipher,c", po::value<std::string>()->value_name("SPEC"),
         "cipher, e.g. aes-xts-plain64 (default: aes-cbc-essiv:sha256)")
        ("key-size,s", number_value<unsigned>(8, 8 * 8192)->value_name("BITS"), "key size in bits (default: 256)")
        ("key-file,d", po::value<std::string>()->value_name("FILE"),
         "the key itself, key-size bits of FILE; '-': all of stdin, hashed as a passphrase")
        ("keyfile-offset", number_value<uint64_t>(0, UINT64_MAX)->value_name("BYTES"), "skip BYTES of the key file or passphrase input")
        ("keyfile-size,l", number_value<uint64_t>(1, 8 << 20)->value_name("BYTES"), "read exactly BYTES of passphrase input")
        ("hash,h", po::value<std::string>()->value_name("HASH"),
         "passphrase hash, e.g. sha256, sha256:16 or plain (default: ripemd160)")
        ("verify-passphrase,y", po::bool_switch(), "ask for the passphrase twice")
        ("sector-size", number_value<unsigned>(512, 4096)->value_name("BYTES"), "encryption sector size, 512..4096")
        ("iv-large-sectors", po::bool_switch(), "IVs count sector_size units, not 512-byte sectors")
        ("skip,p", number_value<uint64_t>(0, UINT64_MAX)->value_name("SECTORS"), "IV offset (iv_offset in the table)")
        ("offset,o", number_value<uint64_t>(0, UINT64_MAX / kSector)->default_value(0)->value_name("SECTORS"), "where the ciphertext starts in the encrypted file")
        ("size,b", number_value<uint64_t>(1, UINT64_MAX / kSector)->value_name("SECTORS"), "sectors to process (default: all)")
        ("start", number_value<uint64_t>(0, UINT64_MAX / kSector)->value_name("SECTORS"),
         "encrypt/decrypt: begin at plaintext sector SECTORS (IVs count from sector 0)")
        ("threads,t", threads_value()->value_name("N"), "crypt worker threads, at most 256 (default: one per core)")
        ("in-place", po::bool_switch(), "write into the existing regular file OUT directly (devices always are)")
        ("json", po::bool_switch(), "print the result as one JSON object (docs/json.md)")
        ("device", po::value<std::string>()->value_name("PATH"), "crypt table: the device of the line")
        ("show-key", po::bool_switch(), "crypt table: print the key instead of zeros");
    add_serve_options(cl.options);
    add_progress_options(cl.options);
    add_action_arguments(cl, {{"encrypt", "encrypt the plain image IN into OUT"},
                              {"decrypt", "decrypt the image IN into the plain image OUT"},
                              {"table", "print the dm-crypt table line for dmsetup"},
                              {"serve", "serve the plaintext view of IMAGE over NBD"}});
    only_for(cl, {"encrypt", "decrypt", "serve"}, {"threads"});
    only_for(cl, {"encrypt", "decrypt"}, {"in-place", "start"});
    only_for(cl, {"encrypt", "decrypt", "table", "serve"}, {"json"});
    only_for(cl, {"serve"}, serve_option_names());
    only_for(cl, {"encrypt", "decrypt"}, progress_option_names());
    only_for(cl, {"table"}, {"device", "show-key"});
    add_cryptsetup_options(cl, "plain");
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;
    const auto [action, files] = action_arguments(*vm);
    if (action == "table") return run_table(*vm, files);
    if (action == "encrypt" || action == "decrypt") return run_copy(*vm, action == "encrypt", files);
    if (action == "serve") return run_serve(*vm, files);
    throw UsageError("unknown action '" + action + "': use encrypt, decrypt, table or serve");
}

}  // namespace cli
