// blkcrypt fvault2: FileVault 2 (Core Storage) volumes as cryptsetup's
// FVAULT2 reads them, without root or device-mapper: `fvault2 dump` is
// fvault2Dump, `fvault2 decrypt` writes what `cryptsetup open --type fvault2`
// maps (one aes-xts-plain64 segment, through the copy loop `crypt` uses),
// `fvault2 serve` exports it read-only over NBD.
#include "commands.hpp"
#include "container_common.hpp"
#include "cryptsetup_options.hpp"
#include "image_copy.hpp"
#include "number_option.hpp"
#include "output_file.hpp"
#include "passphrase.hpp"
#include "progress.hpp"
#include "serve.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/fvault2/fvault2.hpp>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

namespace cli {
namespace {

namespace fvault2 = blkcrypt::fvault2;

struct Image {
    std::string path;
    std::shared_ptr<blkcrypt::BackingStore> store;
    fvault2::Metadata md;
};

Image open_image(const std::string& path, bool writable = false) {
    auto s = open_container_image(path, writable);
    auto md = fvault2::read_metadata(registry(), *s);
    // cryptsetup's line, then why.
    if (!md) throw Failure("Device " + path + " is not a valid FVAULT2 device: " + md.error().message);
    return Image{path, s, std::move(md).value()};
}

// The passphrase: --passphrase-file (a blkcrypt extension: its first line),
// else as cryptsetup reads it (--key-file, a prompt, one line of stdin).
blkcrypt::SecureBuffer unlock(const po::variables_map& vm, const Image& im) {
    return unlock_with_tries<blkcrypt::SecureBuffer>(
        vm, im.path, [&](const blkcrypt::SecureBuffer& pass) { return fvault2::unlock(registry(), im.md, pass); });
}

std::string one_file(const std::vector<std::string>& files, const std::string& action) {
    if (files.size() != 1) throw UsageError("fvault2 " + action + " needs exactly one IMAGE");
    return files[0];
}

int run_dump(const po::variables_map& vm, const std::vector<std::string>& files) {
    const Image im = open_image(one_file(files, "dump"));
    if (!vm["dump-volume-key"].as<bool>()) {
        refuse_given(vm, {"key-file", "keyfile-offset", "keyfile-size", "passphrase-file"}, "only with --dump-volume-key");
        std::cout << fvault2::dump(im.md, im.path);
        return 0;
    }
    confirm_volume_key_dump(vm);
    const blkcrypt::SecureBuffer key = unlock(vm, im);
    const blkcrypt::SecureBuffer text = fvault2::dump_volume_key(im.md, im.path, key);
    std::cout.flush();
    write_all(STDOUT_FILENO, text, "stdout");
    return 0;
}

int run_test_passphrase(const po::variables_map& vm, const std::vector<std::string>& files) {
    const Image im = open_image(one_file(files, "test-passphrase"));
    (void)unlock(vm, im);
    return 0;
}

std::vector<NamedPath> secret_inputs(const po::variables_map& vm, const std::string& image) {
    std::vector<NamedPath> in = {{"IMAGE", image}};
    if (vm.count("key-file")) in.push_back({"the key file", vm["key-file"].as<std::string>()});
    if (vm.count("passphrase-file")) in.push_back({"the passphrase file", vm["passphrase-file"].as<std::string>()});
    return in;
}

int run_decrypt(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.size() != 2) throw UsageError("fvault2 decrypt needs IMAGE and OUT");
    const std::string& image = files[0];
    Output out(files[1], OutputOptions{.role = "OUT", .secret = true, .can_stream = true,
                                       .in_place = vm["in-place"].as<bool>(), .inputs = secret_inputs(vm, image)});
    const Image im = open_image(image);
    // Refuse what the activation refuses before asking for the passphrase.
    if (auto r = fvault2::dm_table(im.md, {}, im.store->size(), image); !r) throw Failure(r.error().message);
    const blkcrypt::SecureBuffer key = unlock(vm, im);
    auto table = fvault2::dm_table(im.md, key, im.store->size(), image);
    if (!table) throw Failure(table.error().message);
    ImageCopy job{.encrypt = false, .in_path = image, .out = out, .table = *table->front().crypt, .offset_from_header = true};
    job.size_sectors = table->front().length;
    set_copy_options(vm, job, image);
    copy_image(job);
    return 0;
}

// The plaintext over NBD, read-write unless --read-only, as cryptsetup maps
// it (one crypt segment: writes land encrypted in the data area).
int run_serve(const po::variables_map& vm, const std::vector<std::string>& files) {
    const bool read_only = vm["read-only"].as<bool>();
    const Image im = open_image(one_file(files, "serve"), !read_only);
    if (auto r = fvault2::dm_table(im.md, {}, im.store->size(), im.path); !r) throw Failure(r.error().message);
    const blkcrypt::SecureBuffer key = unlock(vm, im);
    block_stop_signals();  // before the target's threads exist
    auto table = fvault2::dm_table(im.md, key, im.store->size(), im.path);
    if (!table) throw Failure(im.path + ": " + table.error().message);
    return serve_table(vm, *table, im.store,
                       {.description = "crypt " + table->front().crypt->cipher + " over " + im.store->name(),
                        .what_failed = im.path + ": "});
}

// fvault2 table: the dm table the activation loads, key hidden unless --show-key.
int run_table(const po::variables_map& vm, const std::vector<std::string>& files) {
    const Image im = open_image(one_file(files, "table"));
    if (auto r = fvault2::dm_table(im.md, {}, im.store->size(), im.path); !r) throw Failure(r.error().message);
    const blkcrypt::SecureBuffer key = unlock(vm, im);
    return print_table(vm, fvault2::dm_table(im.md, key, im.store->size(), im.path));
}

}  // namespace

int run_fvault2(Args args) {
    CommandLine cl{"blkcrypt fvault2 dump|test-passphrase [OPTIONS] IMAGE\n"
                   "       blkcrypt fvault2 decrypt [OPTIONS] IMAGE OUT\n"
                   "       blkcrypt fvault2 serve (--socket PATH | --port N) [OPTIONS] IMAGE\n"
                   "       blkcrypt fvault2 table [OPTIONS] [--show-key] IMAGE",
                   "FileVault 2 (Core Storage) volumes as cryptsetup's FVAULT2 reads them, without\n"
                   "root or device-mapper: dump is fvault2Dump (also blkcrypt fvault2Dump), decrypt\n"
                   "writes the plaintext `cryptsetup open --type fvault2` maps, serve exports it\n"
                   "over NBD (docs/nbd.md), read-write unless --read-only. The passphrase is prompted\n"
                   "for on a terminal (--tries times), else one line of stdin; --key-file reads it\n"
                   "as cryptsetup does, --passphrase-file takes the first line of a file. A\n"
                   "passphrase that opens nothing exits 2 (\"No key available with this\n"
                   "passphrase.\"). OUT follows the output policy (docs/outputs.md). IMAGE must be\n"
                   "a regular file or a block device."};
    cl.options.add_options()
        ("key-file,d", po::value<std::string>()->value_name("FILE"), "read the passphrase from FILE ('-': all of stdin)")
        ("keyfile-offset", number_value<uint64_t>(0, UINT64_MAX)->value_name("BYTES"), "skip BYTES of the key file")
        ("keyfile-size,l", number_value<uint64_t>(1, kMaxKeyFileSize)->value_name("BYTES"), "read exactly BYTES of the key file")
        ("passphrase-file", po::value<std::string>()->value_name("FILE"), "the passphrase: the first line of FILE")
        ("dump-volume-key", po::bool_switch(), "dump: also print the volume key (asks for the passphrase)")
        ("show-key", po::bool_switch(), "table: print the key (dmsetup table --showkeys) instead of zeros")
        ("threads,t", threads_value()->value_name("N"), "crypt worker threads, at most 256 (default: one per core)")
        ("in-place", po::bool_switch(), "write into the existing regular file OUT directly");
    add_batch_mode_option(cl.options);
    add_tries_option(cl.options);
    add_progress_options(cl.options);
    add_serve_options(cl.options);
    add_action_arguments(cl, {{"dump", "print the metadata as cryptsetup fvault2Dump does"},
                              {"test-passphrase", "check a passphrase (cryptsetup open --type fvault2 --test-passphrase)"},
                              {"decrypt", "write the plaintext cryptsetup open --type fvault2 maps to OUT"},
                              {"serve", "serve that plaintext over NBD, read-write unless --read-only"},
                              {"table", "print the dm table cryptsetup open --type fvault2 loads"}});
    only_for(cl, {"dump"}, {"dump-volume-key", "batch-mode"});
    only_for(cl, {"table"}, {"show-key"});
    only_for(cl, {"decrypt", "serve"}, {"threads"});
    only_for(cl, {"decrypt"}, {"in-place"});
    only_for(cl, {"decrypt"}, progress_option_names());
    only_for(cl, {"serve"}, serve_option_names());
    add_cryptsetup_options(cl, "fvault2");
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;
    const auto [action, files] = action_arguments(*vm);
    if (vm->count("key-file") && vm->count("passphrase-file"))
        throw UsageError("--key-file and --passphrase-file exclude each other");
    if (action == "dump") return run_dump(*vm, files);
    if (action == "test-passphrase") return run_test_passphrase(*vm, files);
    if (action == "decrypt") return run_decrypt(*vm, files);
    if (action == "serve") return run_serve(*vm, files);
    if (action == "table") return run_table(*vm, files);
    throw UsageError("unknown action '" + action + "': use dump, test-passphrase, decrypt, serve or table");
}

}  // namespace cli
