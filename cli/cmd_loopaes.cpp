// blkcrypt loopaes: loop-AES volumes as cryptsetup's loopaesOpen maps them,
// without root or device-mapper. There is no header: the key file and the
// options alone give the dm-crypt table (`loopaes table` prints it), which
// decrypt, encrypt and serve run in userspace.
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
#include <blkcrypt/loopaes/loopaes.hpp>
#include <blkcrypt/dm/block_device.hpp>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace cli {
namespace {

namespace loopaes = blkcrypt::loopaes;

constexpr uint64_t kSector = 512;

std::string key_file(const po::variables_map& vm) {
    if (!vm.count("key-file")) throw UsageError("Option --key-file is required.");
    return vm["key-file"].as<std::string>();
}

// The table as cryptsetup builds it; a key file it refuses is refused here
// with its message (exit 1, cryptsetup's "wrong parameters").
loopaes::Volume open_volume(const po::variables_map& vm) {
    loopaes::Params p;
    if (vm.count("cipher")) p.cipher = vm["cipher"].as<std::string>();
    const unsigned bits = vm["key-size"].as<unsigned>();
    if (bits % 8) throw UsageError("--key-size must be a multiple of 8 bits");
    p.key_size = bits / 8;
    if (vm.count("hash")) p.hash = vm["hash"].as<std::string>();
    p.offset = vm["offset"].as<uint64_t>();
    if (vm.count("skip")) p.skip = vm["skip"].as<uint64_t>();
    const uint64_t kf_offset = vm.count("keyfile-offset") ? vm["keyfile-offset"].as<uint64_t>() : 0;
    const std::size_t kf_size = vm.count("keyfile-size") ? vm["keyfile-size"].as<uint64_t>() : 0;
    const blkcrypt::SecureBuffer text = read_key_input(key_file(vm), kf_offset, kf_size, false);
    auto v = loopaes::open(registry(), p, text);
    if (!v) throw Failure(v.error().message);
    return std::move(v).value();
}

// The device's sectors after --offset: what loopaesOpen maps.
uint64_t mapped_sectors(const std::string& image, uint64_t offset) {
    const uint64_t sectors = open_container_image(image, false)->size() / kSector;
    if (offset >= sectors) throw Failure("Device " + image + " is too small.");
    return sectors - offset;
}

std::string one_file(const std::vector<std::string>& files, const std::string& action) {
    if (files.size() != 1) throw UsageError("loopaes " + action + " needs exactly one IMAGE");
    return files[0];
}

int run_table(const po::variables_map& vm, const std::vector<std::string>& files) {
    const std::string image = one_file(files, "table");
    const loopaes::Volume v = open_volume(vm);
    auto store = open_container_image(image, false);
    return print_table(vm, loopaes::dm_table(v, *store, image));
}

int run_copy(const po::variables_map& vm, bool enc, const std::vector<std::string>& files) {
    const std::string verb = enc ? "encrypt" : "decrypt";
    if (files.size() != 2) throw UsageError("loopaes " + verb + " needs " + (enc ? "IN and OUT" : "IMAGE and OUT"));
    const std::string& in = files[0];
    Output out(files[1], OutputOptions{.role = "OUT", .secret = !enc, .can_stream = true,
                                       .in_place = vm["in-place"].as<bool>(),
                                       .inputs = {{enc ? "IN" : "IMAGE", in}, {"the key file", key_file(vm)}}});
    const loopaes::Volume v = open_volume(vm);
    ImageCopy job{.encrypt = enc, .in_path = in, .out = out, .table = v.table, .keep_prefix = true};
    set_copy_options(vm, job, enc ? files[1] : in);
    copy_image(job);
    return 0;
}

// The mapping over NBD, read-write as loopaesOpen maps it unless --read-only.
int run_serve(const po::variables_map& vm, const std::vector<std::string>& files) {
    const std::string image = one_file(files, "serve");
    const bool read_only = vm["read-only"].as<bool>();
    const loopaes::Volume v = open_volume(vm);
    (void)mapped_sectors(image, v.table.offset);  // "too small" before anything is opened for writing
    block_stop_signals();  // before the target's threads exist
    auto data = open_container_image(image, !read_only);
    auto table = loopaes::dm_table(v, *data, image);
    if (!table) throw Failure(table.error().message);
    return serve_table(vm, *table, data,
                       {.description = "crypt " + v.table.cipher + " over " + data->name(), .usage_faults = true});
}

}  // namespace

int run_loopaes(Args args) {
    CommandLine cl{"blkcrypt loopaes table [OPTIONS] --key-file FILE IMAGE\n"
                   "       blkcrypt loopaes decrypt [OPTIONS] --key-file FILE IMAGE OUT\n"
                   "       blkcrypt loopaes encrypt [OPTIONS] --key-file FILE IN OUT\n"
                   "       blkcrypt loopaes serve (--socket PATH | --port N) [OPTIONS] --key-file FILE IMAGE",
                   "loop-AES volumes as cryptsetup loopaesOpen maps them, without root or\n"
                   "device-mapper. The key file (decrypted, not GPG armoured) holds 1, 64 or 65\n"
                   "keys, one a line, each hashed into a key: 1 key maps aes-cbc-plain64, 64 keys\n"
                   "aes:64-cbc-lmk, 65 keys the same with the 65th as the lmk seed. table prints\n"
                   "the dm table cryptsetup loads; decrypt writes the plaintext to OUT; encrypt\n"
                   "writes plaintext IN as loop-AES ciphertext; serve exports the mapping over\n"
                   "NBD. loop-AES has no header: a wrong key file cannot be detected and gives\n"
                   "garbage, as with cryptsetup. OUT follows the output policy (docs/outputs.md)."};
    cl.options.add_options()
        ("key-file,d", po::value<std::string>()->value_name("FILE"), "the key file ('-': all of stdin); required")
        ("keyfile-offset", number_value<uint64_t>(0, UINT64_MAX)->value_name("BYTES"), "skip BYTES of the key file")
        ("keyfile-size,l", number_value<uint64_t>(1, kMaxKeyFileSize)->value_name("BYTES"), "read exactly BYTES of the key file")
        ("key-size,s", number_value<unsigned>(8, 8192)->default_value(256)->value_name("BITS"), "bits per key: 128, 192 or 256 for aes (default 256, as cryptsetup 2.6)")
        ("hash,h", po::value<std::string>()->value_name("HASH"), "hash of each key line (default: sha256, sha384, sha512 by key size)")
        ("cipher,c", po::value<std::string>()->value_name("CIPHER"), "the block cipher (default: aes)")
        ("offset,o", number_value<uint64_t>(0, UINT64_MAX / kSector)->default_value(0)->value_name("SECTORS"), "where the ciphertext starts in the image")
        ("skip,p", number_value<uint64_t>(0, UINT64_MAX)->value_name("SECTORS"), "IV offset: the sector number of the first sector (default: --offset)")
        ("show-key", po::bool_switch(), "table: print the key (dmsetup table --showkeys) instead of zeros")
        ("threads,t", threads_value()->value_name("N"), "crypt worker threads, at most 256 (default: one per core)")
        ("in-place", po::bool_switch(), "write into the existing regular file OUT directly");
    add_progress_options(cl.options);
    add_serve_options(cl.options);
    add_action_arguments(cl, {{"table", "print the dm table cryptsetup loopaesOpen loads"},
                              {"decrypt", "write the plaintext loopaesOpen maps to OUT"},
                              {"encrypt", "encrypt the plain image IN into the loop-AES image OUT"},
                              {"serve", "serve the mapping over NBD"}});
    only_for(cl, {"table"}, {"show-key"});
    only_for(cl, {"decrypt", "encrypt", "serve"}, {"threads"});
    only_for(cl, {"decrypt", "encrypt"}, {"in-place"});
    only_for(cl, {"decrypt", "encrypt"}, progress_option_names());
    only_for(cl, {"serve"}, serve_option_names());
    add_cryptsetup_options(cl, "loopaes");
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;
    const auto [action, files] = action_arguments(*vm);
    if (action == "table") return run_table(*vm, files);
    if (action == "decrypt" || action == "encrypt") return run_copy(*vm, action == "encrypt", files);
    if (action == "serve") return run_serve(*vm, files);
    throw UsageError("unknown action '" + action + "': use table, decrypt, encrypt or serve");
}

}  // namespace cli
