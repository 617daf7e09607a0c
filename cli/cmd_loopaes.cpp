// blkcrypt loopaes: loop-AES volumes as cryptsetup's loopaesOpen maps them,
// without root or device-mapper. There is no header: the key file and the
// options alone give the dm-crypt table (`loopaes table` prints it), which
// decrypt, encrypt and serve run in userspace. table, decrypt and serve are
// container_driver's; encrypt is loop-AES's own.
#include "commands.hpp"
#include "container_common.hpp"
#include "container_driver.hpp"
#include "image_copy.hpp"
#include "number_option.hpp"
#include "passphrase.hpp"
#include "progress.hpp"

#include <blkcrypt/loopaes/loopaes.hpp>

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

// The key file is the whole secret: unlock() has nothing to ask.
class Volume final : public OpenedContainer {
public:
    Volume(const std::string& path, std::shared_ptr<blkcrypt::BackingStore> s, loopaes::Volume v)
        : OpenedContainer(path, std::move(s)), v_(std::move(v)) {}
    void unlock(const po::variables_map&) override {}
    blkcrypt::Result<blkcrypt::dm::DmTable> table() const override { return loopaes::dm_table(v_, *store, path); }
    std::string dump() const override { return {}; }
    blkcrypt::SecureBuffer dump_volume_key() const override { return {}; }
    TableDevice serve_how(const blkcrypt::dm::DmTable&) const override {
        return {.description = "crypt " + v_.table.cipher + " over " + store->name(), .usage_faults = true};
    }

private:
    loopaes::Volume v_;
};

std::unique_ptr<OpenedContainer> open(const po::variables_map& vm, const std::string& image, bool writable) {
    loopaes::Volume v = open_volume(vm);
    auto store = open_container_image(image, false);
    if (writable) {  // "too small" before anything is opened for writing
        if (auto t = loopaes::dm_table(v, *store, image); !t) throw Failure(t.error().message);
        store = open_container_image(image, true);
    }
    return std::make_unique<Volume>(image, std::move(store), std::move(v));
}

int run_encrypt(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.size() != 2) throw UsageError("loopaes encrypt needs IN and OUT");
    Output out(files[1], OutputOptions{.role = "OUT", .secret = false, .can_stream = true,
                                         .in_place = vm["in-place"].as<bool>(),
                                         .inputs = {{"IN", files[0]}, {"the key file", key_file(vm)}}});
    const loopaes::Volume v = open_volume(vm);
    ImageCopy job{.encrypt = true, .in_path = files[0], .out = out, .table = v.table, .keep_prefix = true};
    set_copy_options(vm, job, files[1]);
    copy_image(job);
    return 0;
}

void add_options(CommandLine& cl) {
    cl.options.add_options()
        ("key-size,s", number_value<unsigned>(8, 8192)->default_value(256)->value_name("BITS"), "bits per key: 128, 192 or 256 for aes (default 256, as cryptsetup 2.6)")
        ("hash,h", po::value<std::string>()->value_name("HASH"), "hash of each key line (default: sha256, sha384, sha512 by key size)")
        ("cipher,c", po::value<std::string>()->value_name("CIPHER"), "the block cipher (default: aes)")
        ("offset,o", number_value<uint64_t>(0, UINT64_MAX / kSector)->default_value(0)->value_name("SECTORS"), "where the ciphertext starts in the image")
        ("skip,p", number_value<uint64_t>(0, UINT64_MAX)->value_name("SECTORS"), "IV offset: the sector number of the first sector (default: --offset)");
    only_for(cl, {"encrypt"}, {"threads", "in-place", "key-file", "keyfile-offset", "keyfile-size"});
    only_for(cl, {"encrypt"}, progress_option_names());
}

}  // namespace

const ContainerFormat kLoopaesFormat{
    .name = "loopaes",
    .summary = "loop-AES volumes as cryptsetup loopaesOpen maps them, without root or\n"
               "device-mapper. The key file (decrypted, not GPG armoured) holds 1, 64 or 65\n"
               "keys, one a line, each hashed into a key: 1 key maps aes-cbc-plain64, 64 keys\n"
               "aes:64-cbc-lmk, 65 keys the same with the 65th as the lmk seed. table prints\n"
               "the dm table cryptsetup loads; decrypt writes the plaintext to OUT; encrypt\n"
               "writes plaintext IN as loop-AES ciphertext; serve exports the mapping over\n"
               "NBD. loop-AES has no header: a wrong key file cannot be detected and gives\n"
               "garbage, as with cryptsetup.",
    .actions = {"table", "decrypt", "serve", "encrypt"},
    .open_name = "loopaesOpen",
    .usage_options = "[OPTIONS] --key-file FILE",
    .key_file_help = "the key file ('-': all of stdin); required",
    .passphrase = false,
    .add_options = add_options,
    .open = open,
    .own = {{{"encrypt", "encrypt the plain image IN into the loop-AES image OUT"},
             "encrypt [OPTIONS] --key-file FILE IN OUT",
             run_encrypt}},
};

int run_loopaes(Args args) { return run_container(kLoopaesFormat, args); }

}  // namespace cli
