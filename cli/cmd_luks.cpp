// blkcrypt luks: LUKS containers as cryptsetup handles them, without root or
// device-mapper. The actions carry cryptsetup's names and options (luksDump
// is `luks dump`, `open --test-passphrase` is `luks test-passphrase`, ...);
// data moves through the dm-crypt engine and the copy loop `crypt` uses.
// dump, test-passphrase, serve and table are container_driver's (Opened is
// how a LUKS image opens); the rest are luks's own actions in kLuksFormat.
#include "commands.hpp"
#include "container_common.hpp"
#include "container_driver.hpp"
#include "cryptsetup_options.hpp"
#include "image_copy.hpp"
#include "json.hpp"
#include "luks_options.hpp"
#include "number_option.hpp"
#include "output_file.hpp"
#include "passphrase.hpp"
#include "progress.hpp"
#include "serve.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/luks/container.hpp>
#include <blkcrypt/random.hpp>
#include <blkcrypt/luks/convert.hpp>
#include <blkcrypt/luks/fs_probe.hpp>
#include <blkcrypt/luks/luks1.hpp>
#include <blkcrypt/dm/block_device.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cli {
namespace {

namespace luks = blkcrypt::luks;
namespace luks1 = blkcrypt::luks::luks1;

struct Devices {
    std::string image;        // IMAGE as given
    std::string header_path;  // --header, or IMAGE
    std::shared_ptr<blkcrypt::BackingStore> header;
};

// cryptsetup's status 4 (-ENODEV, kExitNoDevice) and words for a device it cannot open.
void check_device_exists(const std::string& path) {
    if (blkcrypt::is_nbd_uri(path)) return;  // opening it says what is wrong
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 && (errno == ENOENT || errno == EACCES || errno == ENOTDIR))
        throw StatusFailure("Device " + path + " does not exist or access denied.", kExitNoDevice);
}

Devices open_devices(const po::variables_map& vm, const std::string& image) {
    Devices d;
    d.image = image;
    d.header_path = vm.count("header") ? vm["header"].as<std::string>() : image;
    if (d.header_path == "-")
        throw UsageError(std::string(vm.count("header") ? "--header" : "IMAGE") + " cannot be stdin: the header is read first");
    d.header = open_container_image(d.header_path, false, vm.count("header") ? "--header" : "IMAGE");
    return d;
}

// The header device (--header, else IMAGE) is written in place by format and
// the keyslot actions: the output policy refuses a key file as it, and a
// detached header that is IMAGE. A key file that is the header would change
// with the write and never open the keyslot again. `keys` adds positional
// key files; a new detached header (format) can be an input by name only.
void refuse_inputs_as_header(const po::variables_map& vm, const std::string& image, std::vector<NamedPath> keys = {}) {
    for (const auto& [opt, role] : {std::pair{"key-file", "the key file"}, {"volume-key-file", "the volume key file"},
                                    {"json-file", "the token file"}})
        if (vm.count(opt)) keys.push_back({role, vm[opt].as<std::string>()});
    const bool detached = vm.count("header") > 0;
    const std::string header = detached ? vm["header"].as<std::string>() : image;
    const std::string role = detached ? "--header" : "IMAGE";
    if (header == "-") throw UsageError(role + " cannot be stdin: the header is read first");
    if (detached) keys.push_back({"IMAGE", image});
    struct stat st {};
    if (::stat(header.c_str(), &st) == 0) {
        Output(header, OutputOptions{.role = role, .in_place = true, .inputs = keys});
        return;
    }
    for (const auto& k : keys)
        if (k.path != "-" && !k.path.empty() && same_file(k.path, header))
            throw UsageError(role + " '" + header + "' is " + k.role + "; refusing to write an output over an input");
}

// The positional key file at files[i], if given.
std::vector<NamedPath> positional_keys(const std::vector<std::string>& files, std::size_t i, const std::string& role) {
    if (files.size() <= i) return {};
    return {{role, files[i]}};
}

[[noreturn]] void not_luks(const std::string& path) {
    throw Failure("Device " + path + " is not a valid LUKS device.");
}

// The LUKS version of the header device: Failure (exit 1) as cryptsetup's
// "Device ... is not a valid LUKS device." for anything else.
luks::Version version_of(const Devices& d) {
    auto v = luks::detect(*d.header);
    if (!v) {
        if (v.status() == blkcrypt::Status::IoError) throw Failure(v.error().message);
        not_luks(d.header_path);
    }
    return *v;
}

// Header warnings (one copy damaged, read from the other) go to stderr once
// per run, as cryptsetup prints them, however often the header is read.
void print_warnings(const std::vector<std::string>& warnings) {
    static bool printed = false;
    if (printed || warnings.empty()) return;
    printed = true;
    for (const std::string& w : warnings) std::cerr << "blkcrypt: " << w << "\n";
}

// A library refusal in cryptsetup's words, exit 1.
template <typename T>
T or_fail(blkcrypt::Result<T> r) {
    if (!r) throw Failure(r.error().message);
    if constexpr (!std::is_void_v<T>) return std::move(r).value();
}

// The container on the header device, its warnings printed: exit 1 with
// cryptsetup's words for anything else.
luks::Container load_container(const Devices& d) {
    version_of(d);
    luks::Container c = or_fail(luks::Container::load(registry(), d.header));
    print_warnings(c.warnings());
    return c;
}

// The header device reopened for writing (the header read stays).
void make_writable(luks::Container& c, const Devices& d) {
    auto w = blkcrypt::open_store(d.header_path, true);
    if (!w) throw Failure(w.error().message);
    c.use_store(*w);
}

// The container for a keyslot or header change: a LUKS2 header under
// requirements (a reencryption, unknown ones) is refused, as cryptsetup.
// luks2_only: an action that exists for LUKS2 only (config, token).
luks::Container open_writable(const Devices& d, bool luks2_only = false) {
    if (luks2_only && version_of(d) != luks::Version::Luks2)
        throw Failure("Device " + d.header_path + " is not a valid LUKS2 device.");
    luks::Container c = load_container(d);
    or_fail(c.check_requirements());
    make_writable(c, d);
    return c;
}

// --volume-key-file: exactly `size` bytes of the file, as cryptsetup reads it.
blkcrypt::SecureBuffer volume_key_file(const po::variables_map& vm, std::size_t size) {
    return read_key_input(vm["volume-key-file"].as<std::string>(), 0, size, false);
}

// A new passphrase: the positional key file, else a prompt asked twice, else
// one piped line.
blkcrypt::SecureBuffer new_passphrase(const std::optional<std::string>& file, const std::string& prompt) {
    if (file) return read_key_input(*file, 0, 0, false);
    if (::isatty(STDIN_FILENO)) return prompt_passphrase(prompt, true);
    return read_key_input("-", 0, 0, true);
}

int requested_keyslot(const po::variables_map& vm) {
    return vm.count("key-slot") ? static_cast<int>(vm["key-slot"].as<unsigned>()) : -1;
}

// Unlocks the container: exit 2 with cryptsetup's words for a passphrase
// that opens nothing, 1 for the rest.
// With --volume-key-file, the key itself (exactly the header's key size, as
// cryptsetup reads it) instead of a passphrase.
// test_only: a LUKS2 passphrase test ignores mandatory requirements, as
// cryptsetup open --test-passphrase does; the key must not touch data then.
luks::Volume unlock_volume(const po::variables_map& vm, const Devices& d, bool test_only = false) {
    version_of(d);
    std::vector<std::string> warnings;
    luks::OpenOptions o{.keyslot = requested_keyslot(vm)};
    o.warnings = &warnings;
    o.ignore_requirements = test_only;
    blkcrypt::Result<luks::Volume> vol = blkcrypt::make_error(blkcrypt::Status::Invalid, "");
    if (vm.count("volume-key-file")) {
        refuse_given(vm, {"key-file", "keyfile-offset", "keyfile-size", "key-slot"}, "not with --volume-key-file");
        const std::size_t size = or_fail(load_container(d).volume_key_size());
        const blkcrypt::SecureBuffer vk = volume_key_file(vm, size);
        vol = luks::open_with_volume_key(registry(), *d.header, vk, o);
    } else {
        vol = retry_passphrase<luks::Volume>(
            vm, d.image, [&](const blkcrypt::SecureBuffer& pass) { return luks::open(registry(), *d.header, pass, o); });
    }
    print_warnings(warnings);
    return expect(std::move(vol));
}

std::string one_file(const std::vector<std::string>& files, const std::string& action) {
    if (files.size() != 1) throw UsageError("luks " + action + " needs exactly one IMAGE");
    return files[0];
}


// IMAGE (the data) and the header device (--header, else IMAGE) opened, as
// the driver's actions use them; dump reads the header at once, so its
// refusals come in luksDump's order.
struct HeaderDevice {
    Devices d;
};

class Opened final : private HeaderDevice, public OpenedContainer {
public:
    Opened(const po::variables_map& vm, const std::string& image, bool writable)
        : HeaderDevice{open_devices(vm, image)}, OpenedContainer(image, open_container_image(image, writable)), vm_(vm) {
        if (vm["action"].as<std::string>() != "dump") return;
        const bool key = vm["dump-volume-key"].as<bool>(), metadata = vm["dump-json-metadata"].as<bool>();
        if (vm["json"].as<bool>()) {
            refuse_given(vm, {"key-file", "keyfile-offset", "keyfile-size", "key-slot", "passphrase-file"},
                         "not with --json");
            if (key || metadata) throw UsageError("--json excludes --dump-volume-key and --dump-json-metadata");
        }
        c_.emplace(load_container(d));
        if (metadata && c_->version() == luks::Version::Luks1)
            throw Failure("LUKS1 has no JSON metadata (--dump-json-metadata is for LUKS2)");
        if (metadata && key) throw UsageError("--dump-json-metadata and --dump-volume-key exclude each other");
    }
    void unlock(const po::variables_map& vm) override { vol_.emplace(unlock_volume(vm, d)); }
    void test_passphrase(const po::variables_map& vm) override {
        vol_.emplace(unlock_volume(vm, d, true));
        if (vm["verbose"].as<bool>()) std::cout << "Key slot " << vol_->keyslot << " unlocked.\n";
    }
    blkcrypt::Result<blkcrypt::dm::DmTable> table() const override {
        if (vol_->integrity) return luks::dm_table(*vol_, *store, "/dev/mapper/" + mapping_name() + "_dif");
        return luks::dm_table(*vol_, *store, path);
    }
    // LUKS2 --integrity: NAME_dif, the dm-integrity device on the data device.
    blkcrypt::Result<std::vector<NamedTable>> lower_tables() const override {
        if (!vol_ || !vol_->integrity) return std::vector<NamedTable>{};
        auto line = luks::integrity_table_line(*vol_, *store, path);
        if (!line) return line.error();
        return std::vector<NamedTable>{{mapping_name() + "_dif", *line}};
    }
    // As systemd-cryptsetup names a LUKS mapping: luks-UUID.
    std::string mapping_name() const override { return "luks-" + vol_->uuid; }
    // luksDump, --dump-json-metadata's JSON, or --json's object (docs/json.md).
    std::string dump() const override {
        refuse_given(vm_, {"key-slot"}, "only with --dump-volume-key");
        if (vm_["json"].as<bool>()) return or_fail(c_->dump_summary_json(d.header_path)) + "\n";
        return vm_["dump-json-metadata"].as<bool>() ? or_fail(c_->dump_json_metadata()) : c_->dump(d.header_path);
    }
    blkcrypt::SecureBuffer dump_volume_key() const override {
        return c_->dump_volume_key(d.header_path, vol_->table.key);
    }
    TableDevice serve_how(const blkcrypt::dm::DmTable&) const override {
        return {.description = "crypt " + vol_->table.cipher + " over " + store->name()};
    }

private:
    const po::variables_map& vm_;
    std::optional<luks::Container> c_;  // dump's
    std::optional<luks::Volume> vol_;
};

int run_is_luks(const po::variables_map& vm, const std::vector<std::string>& files) {
    const std::string image = one_file(files, "is-luks");
    const std::string path = vm.count("header") ? vm["header"].as<std::string>() : image;
    check_device_exists(path);
    auto s = blkcrypt::open_store(path, false);
    if (!s) throw Failure(s.error().message);
    // Silent as cryptsetup isLuks: the exit status is the answer.
    return luks::detect(**s) ? 0 : 1;
}

int run_uuid(const po::variables_map& vm, const std::vector<std::string>& files) {
    const Devices d = open_devices(vm, one_file(files, "uuid"));
    std::cout << load_container(d).uuid() << "\n";
    return 0;
}

// --start/--size: a range of the data segment (segment_sectors long, 0:
// unknown). Without --size a LUKS2 fixed-size segment ends the range.
void set_range(const po::variables_map& vm, ImageCopy& job, uint64_t segment_sectors) {
    const uint64_t step = job.table.sector_size / luks1::kSector;
    if (vm.count("start")) job.start_sectors = vm["start"].as<uint64_t>();  // copy_image checks its alignment
    if (segment_sectors && job.start_sectors >= segment_sectors)
        throw UsageError("--start " + std::to_string(job.start_sectors) + " is past the " +
                         std::to_string(segment_sectors) + " sectors of the data segment");
    if (vm.count("size")) {
        const uint64_t n = vm["size"].as<uint64_t>();
        if (n % step)
            throw UsageError("--size must be a multiple of the sector size (" + std::to_string(step) + " sectors)");
        if (segment_sectors && n > segment_sectors - job.start_sectors)
            throw UsageError("--size " + std::to_string(n) + " is more than the " +
                             std::to_string(segment_sectors - job.start_sectors) +
                             " sectors of the data segment" + (job.start_sectors ? " after --start" : ""));
        job.size_sectors = n;
    } else if (segment_sectors && !job.encrypt) {
        job.size_sectors = segment_sectors - job.start_sectors;
    }
}

// decrypt / encrypt: the copy with --threads and the progress options.
int run_copy(const po::variables_map& vm, ImageCopy& job, const std::string& image) {
    set_copy_options(vm, job, image);
    copy_image(job);
    return 0;
}

// LUKS2 --integrity: the plaintext read through the two stacked targets
// (luks::integrity_device), --start/--size in 512-byte sectors of it, by the
// shared ring (copy_device). A block whose tag fails (tampered, or never
// written since a format with --integrity-no-wipe) fails the command naming
// the sector, as the kernel's read fails with EIO; OUT is then left as it was.
int decrypt_integrity(const po::variables_map& vm, const luks::Volume& vol, const std::string& image, Output& out) {
    constexpr uint64_t kSec = 512;  // --start and --size units
    auto data = blkcrypt::open_store(image, false);
    if (!data) throw Failure(data.error().message);
    const unsigned threads = vm.count("threads") ? vm["threads"].as<unsigned>() : 0u;
    auto dev = luks::integrity_device(registry(), vol, *data, {.read_only = true, .threads = threads});
    if (!dev) throw Failure(image + ": " + dev.error().message);
    const uint64_t total = (*dev)->size() / kSec;
    const uint64_t step = vol.table.sector_size / kSec;
    const uint64_t start = vm.count("start") ? vm["start"].as<uint64_t>() : 0;
    if (start % step)
        throw UsageError("--start must be a multiple of the sector size (" + std::to_string(step) + " sectors)");
    if (start >= total)
        throw UsageError("--start " + std::to_string(start) + " is past the " + std::to_string(total) +
                         " sectors of the data segment");
    uint64_t n = total - start;
    if (vm.count("size")) {
        n = vm["size"].as<uint64_t>();
        if (n % step)
            throw UsageError("--size must be a multiple of the sector size (" + std::to_string(step) + " sectors)");
        if (n > total - start)
            throw UsageError("--size " + std::to_string(n) + " is more than the " + std::to_string(total - start) +
                             " sectors of the data segment" + (start ? " after --start" : ""));
    }
    blkcrypt::dm::BlockDevice& d = **dev;
    // A failed bio: the engine's status names no sector, so its blocks are
    // read again one by one for the first that fails, and its words.
    auto failed = [&](uint64_t at, std::size_t len, blkcrypt::Status st) {
        std::string why = blkcrypt::to_string(st);
        blkcrypt::SecureBuffer one(vol.table.sector_size);
        for (uint64_t b = 0; b < len; b += vol.table.sector_size) {
            if (blkcrypt::dm::read_sync(d, at + b, one.span()) != blkcrypt::Status::Ok) {
                why = "sector " + std::to_string((at + b) / kSec) +
                      " fails its integrity check (never written since a format with --integrity-no-wipe, "
                      "or changed since)";
                break;
            }
        }
        throw Failure(image + ": " + why);
    };
    copy_device({.device = d, .start = start * kSec, .bytes = n * kSec, .out = &out, .failed = failed,
                 .name = image, .threads = threads, .progress = progress_settings(vm)});
    out.commit();
    return 0;
}

int run_decrypt(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.size() != 2) throw UsageError("luks decrypt needs IMAGE and OUT");
    const std::string& image = files[0];
    const std::string& out_path = files[1];
    const std::string header = vm.count("header") ? vm["header"].as<std::string>() : image;
    const std::string key_path = vm.count("key-file") ? vm["key-file"].as<std::string>() : "";
    const std::string passphrase_path = vm.count("passphrase-file") ? vm["passphrase-file"].as<std::string>() : "";
    // The header is read first, so IMAGE must be seekable unless it is detached.
    if (!vm.count("header") && image == "-") throw UsageError("IMAGE '-' needs a detached --header");
    if (image == "-" && key_path == "-") throw UsageError("IMAGE and --key-file cannot both be stdin");
    Output out(out_path, OutputOptions{.role = "OUT", .secret = true, .can_stream = true,
                                       .in_place = vm["in-place"].as<bool>(),
                                       .inputs = {{"IMAGE", image}, {"the header", header}, {"the key file", key_path},
                                                  {"the passphrase file", passphrase_path}}});
    const Devices d = open_devices(vm, image);
    const luks::Volume vol = unlock_volume(vm, d);
    if (vol.integrity) return decrypt_integrity(vm, vol, image, out);
    ImageCopy job{.encrypt = false, .in_path = image, .out = out, .table = vol.table, .offset_from_header = true};
    set_range(vm, job, vol.length_sectors);
    return run_copy(vm, job, image);
}


// A regular file shorter than `bytes` grows to it (cryptsetup fallocates a
// header file so); devices and larger files are left alone.
void grow_file(const std::string& path, uint64_t bytes) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) >= bytes) return;
    if (::truncate(path.c_str(), static_cast<off_t>(bytes)) != 0) throw Failure(errno_message(path));
}

// A library refusal of options (container.hpp's statuses): Invalid is a
// usage error (exit 2), the rest exit 1 with cryptsetup's words.
template <typename T>
T usage_or_fail(blkcrypt::Result<T> r) {
    if (!r && r.status() == blkcrypt::Status::Invalid) throw UsageError(r.error().message);
    return or_fail(std::move(r));
}

// --uuid, checked as libuuid parses it and written lower-case (exit 2 otherwise).
std::string uuid_option(const po::variables_map& vm) {
    std::string uuid = vm["uuid"].as<std::string>();
    if (!blkcrypt::luks::valid_uuid(uuid)) throw UsageError("Wrong LUKS UUID format provided.");
    for (char& c : uuid) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return uuid;
}

// encrypt --format: the container is made in the output's file (its
// temporary name) with a passphrase already read, without a confirmation;
// messages still name IMAGE.
struct FormatInto {
    std::string path;  // where the header goes: IMAGE's, or a detached --header's, temporary file
    const blkcrypt::SecureBuffer* passphrase = nullptr;
};

// Before format writes: IMAGE exists, a detached header file is created as
// cryptsetup creates it (new, 0600), and the overwrite is confirmed.
void start_format(const po::variables_map& vm, const std::string& image, bool detached, const std::string& header_path,
                  const FormatInto* into) {
    struct stat st {};
    if (!into && ::stat(image.c_str(), &st) != 0) throw Failure(errno_message(image));
    // encrypt --format makes a detached header through its own Output.
    if (detached && !into && ::stat(header_path.c_str(), &st) != 0) {
        const int fd = ::open(header_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) throw Failure(errno_message(header_path));
        ::close(fd);
    }
    if (into) return;
    // cryptsetup 2.6.1 names a signature it finds (through blkid) on stdout
    // before asking, unless --batch-mode; of those we know LUKS headers.
    if (!vm["batch-mode"].as<bool>()) {
        if (auto h = blkcrypt::open_store(header_path, false); h && luks::detect(**h))
            std::cout << "WARNING: Device " << header_path << " already contains a 'crypto_LUKS' superblock signature.\n"
                      << std::flush;
    }
    yes_dialog(vm, "\nWARNING!\n========\nThis will overwrite data on " + header_path + " irrevocably.\n");
}

// luksFormat's options, parsed once for either version: --type picks it
// ("luks" is luks2, as cryptsetup), the library checks the rest.
luks::FormatOptions format_options(const po::variables_map& vm, bool detached) {
    const std::string type = vm.count("type") ? vm["type"].as<std::string>() : "luks2";
    if (type != "luks1" && type != "luks2" && type != "luks")
        throw UsageError("--type must be luks1 or luks2, not '" + type + "'");
    luks::FormatOptions o;
    if (type == "luks1") {
        o.version = luks::Version::Luks1;
        refuse_given(vm, {"sector-size", "label", "subsystem", "luks2-metadata-size", "luks2-keyslots-size",
                          "pbkdf-memory", "pbkdf-parallel"},
                     "not with --type luks1");
    }
    if (vm.count("cipher")) o.cipher = vm["cipher"].as<std::string>();
    if (vm.count("key-size")) o.key_bits = vm["key-size"].as<unsigned>();
    o.kdf = kdf_request(vm);
    o.keyslot = requested_keyslot(vm);
    if (vm.count("uuid")) o.uuid = uuid_option(vm);
    if (vm.count("offset")) o.offset = vm["offset"].as<unsigned>();
    if (vm.count("align-payload")) o.align = vm["align-payload"].as<unsigned>();
    o.detached = detached;
    if (vm.count("sector-size")) o.sector_size = vm["sector-size"].as<unsigned>();
    if (vm.count("label")) o.label = vm["label"].as<std::string>();
    if (vm.count("subsystem")) o.subsystem = vm["subsystem"].as<std::string>();
    if (vm.count("luks2-metadata-size")) o.metadata_size = vm["luks2-metadata-size"].as<uint64_t>();
    if (vm.count("luks2-keyslots-size")) o.keyslots_size = vm["luks2-keyslots-size"].as<uint64_t>();
    if (vm.count("integrity")) o.integrity = vm["integrity"].as<std::string>();
    for (const char* opt : {"integrity-no-wipe", "integrity-legacy-padding"})
        if (vm[opt].as<bool>() && o.integrity.empty()) throw UsageError(std::string("--") + opt + " needs --integrity");
    return o;
}

// luksFormat --integrity's second half: the dm-integrity superblock and
// journal at the data offset of the data device, then (without
// --integrity-no-wipe) every block's AEAD of zeros, as cryptsetup's wipe.
void format_integrity_data(const po::variables_map& vm, blkcrypt::BackingStore& header, const std::string& data_path,
                           const blkcrypt::SecureBuffer& vk) {
    auto vol = luks::open_with_volume_key(registry(), header, vk);
    if (!vol) throw Failure(vol.error().message);
    auto data = blkcrypt::open_store(data_path, true);
    if (!data) throw Failure(data.error().message);
    luks::IntegrityFormatOptions io;
    io.no_wipe = vm["integrity-no-wipe"].as<bool>();
    io.legacy_padding = vm["integrity-legacy-padding"].as<bool>();
    // The two header magics are cleared while the data is laid out, and put
    // back last: a run interrupted (or failing) half-way leaves no LUKS
    // header over a device whose sectors do not all read yet.
    // (cryptsetup leaves one; its wipe warns that CTRL+C leaves bad sectors.)
    std::array<uint8_t, 16> hdr_size_be{};
    if (header.read(0, hdr_size_be) != blkcrypt::Status::Ok) throw Failure(header.name() + ": cannot read the new header");
    uint64_t second = 0;
    for (int i = 8; i < 16; ++i) second = second << 8 | hdr_size_be[static_cast<std::size_t>(i)];
    constexpr std::size_t kMagic = 6;
    std::array<uint8_t, kMagic> magic1{}, magic2{};
    const std::array<uint8_t, kMagic> none{};
    const bool has_second = second >= 4096 && second <= header.size() - kMagic;
    auto io_or_fail = [&](blkcrypt::Status s, const char* what) {
        if (s != blkcrypt::Status::Ok) throw Failure(header.name() + ": " + what + " (" + blkcrypt::to_string(s) + ")");
    };
    io_or_fail(header.read(0, magic1), "cannot read the new header");
    if (has_second) io_or_fail(header.read(second, magic2), "cannot read the new header");
    io_or_fail(header.write(0, none), "cannot write the header");
    if (has_second) io_or_fail(header.write(second, none), "cannot write the header");
    io_or_fail(header.flush(), "cannot flush the header");
    if (auto r = luks::format_integrity(registry(), *vol, *data, io); !r) throw Failure(data_path + ": " + r.error().message);
    if (auto f = (*data)->flush(); f != blkcrypt::Status::Ok) throw Failure(data_path + ": flush (" + blkcrypt::to_string(f) + ")");
    if (has_second) io_or_fail(header.write(second, magic2), "cannot write the header");
    io_or_fail(header.write(0, magic1), "cannot write the header");
    io_or_fail(header.flush(), "cannot flush the header");
}

// The options are checked and the layout known before anything is asked or
// written; the header device (an image file grown as cryptsetup leaves it)
// then gets the new header and the first keyslot.
int run_format(const po::variables_map& vm, const std::vector<std::string>& files, const FormatInto* into = nullptr) {
    const std::string image = one_file(files, "format");
    if (!into) refuse_inputs_as_header(vm, image);
    const bool detached = vm.count("header") > 0;
    const std::string header_path = detached ? vm["header"].as<std::string>() : image;
    const luks::FormatOptions o = format_options(vm, detached);
    const luks::FormatLayout layout = usage_or_fail(luks::format_layout(registry(), o));

    start_format(vm, image, detached, header_path, into);

    blkcrypt::SecureBuffer vk;
    if (vm.count("volume-key-file")) vk = volume_key_file(vm, layout.key_size);
    blkcrypt::SecureBuffer read;
    if (!into) read = read_passphrase(vm, header_path, true);
    const blkcrypt::SecureBuffer& pass = into ? *into->passphrase : read;
    const std::string& target = into ? into->path : header_path;
    grow_file(target, layout.file_size);
    auto store = blkcrypt::open_store(target, true);
    if (!store) throw Failure(store.error().message);
    // --integrity: the volume key is made here, to open the new header with
    // and lay the dm-integrity device out on the data device.
    if (!o.integrity.empty() && vk.size() == 0) {
        vk = blkcrypt::SecureBuffer(layout.key_size);
        if (auto r = blkcrypt::random_bytes(vk.span()); !r) throw Failure(r.error().message);
    }
    usage_or_fail(luks::format(registry(), **store, o, vk, pass));
    if (!o.integrity.empty()) format_integrity_data(vm, **store, into ? into->path : image, vk);
    if (!into && !detached && layout.data_offset >= (*store)->size())
        std::cerr << "Device " << image << " is too small for activation, there is no remaining space for data.\n";
    return 0;
}

// luksUUID --uuid: a new UUID written into the header (asked for on a terminal).
int run_set_uuid(const po::variables_map& vm, const std::vector<std::string>& files) {
    const std::string image = one_file(files, "uuid");
    const std::string uuid = uuid_option(vm);
    const Devices d = open_devices(vm, image);
    luks::Container c = load_container(d);
    or_fail(c.check_requirements());
    yes_dialog(vm, "Do you really want to change UUID of device?");
    make_writable(c, d);
    or_fail(c.set_uuid(uuid));
    return 0;
}

// dm's unit: table offsets and lengths, --start and --size count 512-byte sectors.
constexpr uint64_t kSector = 512;

// cryptsetup reencrypt --encrypt --sector-size's check (src/utils_reencrypt.c,
// the superblock found by libblkid): a filesystem in IN whose block size is
// below the encryption sector size could not be mounted from the container.
// --force writes it anyway. A stream IN is not probed (it is read once).
// `what` names the sector size, cryptsetup's "Requested --sector-size N"
// when the option gave it.
void check_fs_block_size(const po::variables_map& vm, const std::string& in_path, uint32_t sector_size,
                         const std::string& what) {
    if (sector_size <= kSector || vm["force"].as<bool>()) return;
    auto in = blkcrypt::open_store(in_path, false);
    if (!in) throw Failure(in.error().message);
    auto fs = luks::probe_fs_block_size(**in);
    if (!fs) throw Failure(fs.error().message);
    if (!*fs || (*fs)->block_size >= sector_size) return;
    throw Failure(what + " is incompatible with " + (*fs)->type +
                  " superblock (block size: " + std::to_string((*fs)->block_size) + " bytes) detected on device " +
                  in_path + ". (--force encrypts it anyway.)");
}

// encrypt --format IN IMAGE: a new container sized for IN (its data offset
// plus IN), made in IMAGE's temporary file and filled from IN there, then
// renamed into place (docs/outputs.md): an interrupted or failed run leaves
// no half image, as qemu-img convert -O luks. With a detached --header the
// whole of IMAGE is data (offset 0 unless --offset), as `cryptsetup
// reencrypt --encrypt --header` leaves a device, and the header is a second
// output committed with IMAGE: neither appears unless both are complete.
int run_encrypt_format(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.size() != 2) throw UsageError("luks encrypt needs IN and IMAGE");
    const std::string& in_path = files[0];
    const std::string& image = files[1];
    const std::string header = vm.count("header") ? vm["header"].as<std::string>() : "";
    refuse_given(vm, {"start", "size"}, "not with --format (the new container is filled whole)");
    const std::string key_path = vm.count("key-file") ? vm["key-file"].as<std::string>() : "";
    const std::string vk_path = vm.count("volume-key-file") ? vm["volume-key-file"].as<std::string>() : "";
    if (in_path == "-" || key_path == "-" || vk_path == "-")
        throw UsageError("--format needs IN of known size, read as a file (and no key from stdin)");
    if (header == "-") throw UsageError("--header '-': the new header must be a file or a block device");
    // An HDR that holds a LUKS header already (the only way in to a device
    // encrypted with it) is refused as cryptsetup 2.6.1's reencrypt
    // --encrypt --header refuses it, --batch-mode or not; HDR that cannot be
    // read is left to the output checks.
    if (!header.empty()) {
        if (auto h = blkcrypt::open_store(header, false); h && luks::detect(**h))
            throw Failure("Device " + header + " is already LUKS device. Aborting operation.");
    }
    auto in = blkcrypt::open_store(in_path, false);
    if (!in) throw Failure(in.error().message);
    struct stat st {};
    if (::stat(in_path.c_str(), &st) != 0 || (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)))
        throw UsageError("--format needs IN of known size (a regular file or a block device)");
    // The options are checked before any output exists; the layout names the sector size.
    const uint32_t sector = usage_or_fail(luks::format_layout(registry(), format_options(vm, !header.empty()))).sector_size;
    check_fs_block_size(vm, in_path, sector,
                        (vm.count("sector-size") ? "Requested" : "The default") + std::string(" --sector-size ") +
                            std::to_string(sector));
    const std::vector<NamedPath> inputs{{"IN", in_path}, {"the key file", key_path}, {"the volume key file", vk_path}};
    Output out(image, OutputOptions{.role = "IMAGE", .can_stream = false, .inputs = inputs});
    // The header holds the keyslots: 0600 when new, as cryptsetup makes it.
    std::optional<Output> hdr;
    if (!header.empty()) {
        std::vector<NamedPath> hdr_inputs = inputs;
        hdr_inputs.push_back({"IMAGE", image});  // a header of its own
        hdr.emplace(header, OutputOptions{.role = "--header", .secret = true, .can_stream = false, .inputs = hdr_inputs});
    }
    // One passphrase for the new keyslot (asked twice on a terminal, as format).
    const blkcrypt::SecureBuffer pass = read_passphrase(vm, image, true);
    const std::string header_tmp = hdr ? hdr->write_path() : out.write_path();
    const FormatInto into{header_tmp, &pass};
    run_format(vm, {image}, &into);
    auto store = blkcrypt::open_store(header_tmp, false);
    if (!store) throw Failure(store.error().message);
    auto vol = luks::open(registry(), **store, pass);
    if (!vol) throw Failure(vol.error().message);
    store->reset();
    ImageCopy job{.encrypt = true, .in_path = in_path, .out = out, .table = vol->table};
    if (hdr) job.commit_with = &*hdr;
    return run_copy(vm, job, image);
}

// LUKS2 --integrity: IN written through the two stacked targets (the
// integrity one in journal mode, as cryptsetup loads it, so an interrupted
// run leaves every block old or new with a valid tag), from --start
// (512-byte sectors of the mapping). IN must be whole sectors and fit.
int encrypt_integrity(const po::variables_map& vm, const luks::Volume& vol, const std::string& in_path,
                      const std::string& image, Output& out) {
    constexpr uint64_t kSec = 512;
    const uint32_t ss = vol.table.sector_size;
    auto data = out.store();
    const unsigned threads = vm.count("threads") ? vm["threads"].as<unsigned>() : 0u;
    auto dev = luks::integrity_device(registry(), vol, data, {.read_only = false, .threads = threads});
    if (!dev) throw Failure(image + ": " + dev.error().message);
    const uint64_t total = (*dev)->size();
    const uint64_t start = (vm.count("start") ? vm["start"].as<uint64_t>() : 0) * kSec;
    if (start % ss) throw UsageError("--start must be a multiple of the sector size (" + std::to_string(ss / kSec) + " sectors)");
    if (start >= total) throw UsageError("--start is past the " + std::to_string(total / kSec) + " sectors of the data segment");
    const uint64_t limit = vm.count("size") ? vm["size"].as<uint64_t>() * kSec : total - start;
    if (limit % ss) throw UsageError("--size must be a multiple of the sector size (" + std::to_string(ss / kSec) + " sectors)");
    if (limit > total - start)
        throw UsageError("--size is more than the " + std::to_string((total - start) / kSec) + " sectors of the data segment");
    const int fd = in_path == "-" ? STDIN_FILENO : ::open(in_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Failure(in_path + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw Failure(in_path + ": " + std::strerror(errno));
    if (!vm.count("size") && S_ISREG(st.st_mode) && uint64_t(st.st_size) > limit)
        throw UsageError(in_path + ": " + std::to_string(st.st_size) + " bytes do not fit the " +
                         std::to_string(limit) + " bytes of the data segment of " + image);
    // A regular IN is encrypted from its mapping (the engine only reads a
    // write's memory: no copy into a buffer of ours); other INs in order
    // into each bio's own buffer. Several bios in flight (copy_device): the
    // crypt workers encrypt while the next is read.
    std::shared_ptr<blkcrypt::BackingStore> in_store;
    blkcrypt::ConstBytes in_map;
    if (S_ISREG(st.st_mode))
        if (auto m = blkcrypt::open_file_store(in_path, false); m) {
            in_store = *m;
            in_map = in_store->mapped();
        }
    auto fill = [&](uint64_t pos, uint8_t* slot, std::size_t want) {
        if (!in_map.empty()) {
            const std::size_t have =
                pos >= in_map.size() ? 0 : static_cast<std::size_t>(std::min<uint64_t>(want, in_map.size() - pos));
            if (have % ss)
                throw Failure(in_path + ": its size is not a multiple of the sector size " + std::to_string(ss));
            // Read-only mapping, never written (see above).
            return blkcrypt::Bytes(const_cast<uint8_t*>(in_map.data() + pos), have);
        }
        std::size_t have = 0;
        while (have < want) {
            const ssize_t n = ::read(fd, slot + have, want - have);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) throw Failure(in_path + ": " + std::strerror(errno));
            if (n == 0) break;
            have += static_cast<std::size_t>(n);
        }
        if (have % ss)
            throw Failure(in_path + ": its size is not a multiple of the sector size " + std::to_string(ss));
        return blkcrypt::Bytes(slot, have);
    };
    auto failed = [&](uint64_t at, std::size_t, blkcrypt::Status) {
        throw Failure(image + ": cannot write at byte " + std::to_string(at) + " of the mapping");
    };
    auto written = [&](uint64_t pos, std::size_t len) {
        if (!in_store) return;
        in_store->release_mapped(pos, len);  // bounded memory
        // Truncated under us: the mapping read zeros, not the file.
        if (in_store->changed()) throw Failure(in_path + ": changed size while being read");
    };
    const uint64_t done = copy_device({.device = **dev, .start = start, .bytes = limit, .write = true, .fill = fill,
                                       .written = written, .failed = failed, .name = image, .threads = threads,
                                       .progress = progress_settings(vm)})
                              .bytes;
    if (in_store && in_store->changed()) throw Failure(in_path + ": changed size while being read");
    if (!vm.count("size") && done == limit) {
        char extra = 0;
        if (in_store ? in_map.size() > done : ::read(fd, &extra, 1) == 1) throw UsageError(in_path + ": does not fit the data segment of " + image);
    }
    if (fd != STDIN_FILENO) ::close(fd);
    if ((*dev)->flush() != blkcrypt::Status::Ok) throw Failure(image + ": cannot flush");
    dev->reset();
    out.commit();
    return 0;
}

int run_encrypt(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (vm["format"].as<bool>()) return run_encrypt_format(vm, files);
    refuse_given(vm, {"type", "cipher", "key-size", "offset", "align-payload", "verify-passphrase", "sector-size",
                      "luks2-metadata-size", "luks2-keyslots-size", "label", "subsystem", "uuid", "iter-time",
                      "pbkdf-force-iterations", "pbkdf", "pbkdf-memory", "pbkdf-parallel", "hash"},
                 "only with --format");
    if (files.size() != 2) throw UsageError("luks encrypt needs IN and IMAGE");
    const std::string& in_path = files[0];
    const std::string& image = files[1];
    // The header may be IMAGE itself; a detached one must not be IMAGE.
    const std::string header = vm.count("header") ? vm["header"].as<std::string>() : "";
    const std::string key_path = vm.count("key-file") ? vm["key-file"].as<std::string>() : "";
    if (in_path == "-" && key_path == "-") throw UsageError("IN and --key-file cannot both be stdin");
    // IN '-', a FIFO or a character device is read to its end.
    struct stat st {};
    const bool in_stream = in_path == "-" || (::stat(in_path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode));
    // The container is written in place: its header and keyslots stay.
    Output out(image, OutputOptions{.role = "IMAGE", .can_stream = false, .in_place = true,
                                    .inputs = {{"IN", in_path}, {"the header", header}, {"the key file", key_path}}});
    const Devices d = open_devices(vm, image);
    const luks::Volume vol = unlock_volume(vm, d);
    if (vol.integrity) return encrypt_integrity(vm, vol, in_path, image, out);
    auto data = blkcrypt::open_store(image, false);
    if (!data) throw Failure(data.error().message);
    const uint64_t start = vol.table.offset * kSector;
    uint64_t room = (*data)->size() > start ? (*data)->size() - start : 0;
    if (vol.length_sectors) room = std::min(room, vol.length_sectors * kSector);  // a LUKS2 fixed-size segment
    ImageCopy job{.encrypt = true, .in_path = in_path, .out = out, .table = vol.table};
    set_range(vm, job, room / kSector);
    room -= std::min(room, job.start_sectors * kSector);  // what follows --start
    const std::string where = job.start_sectors ? " after --start" : "";
    if (job.size_sectors && *job.size_sectors * kSector > room)
        throw UsageError("--size " + std::to_string(*job.size_sectors) + " is more than the " +
                         std::to_string(room / kSector) + " sectors of the data segment of " + image + where);
    if (!in_stream && job.start_sectors == 0)
        check_fs_block_size(vm, in_path, vol.table.sector_size,
                            "The sector size " + std::to_string(vol.table.sector_size) + " of " + image);
    if (in_stream) {
        job.max_sectors = room / kSector;
    } else if (!job.size_sectors) {
        auto in = blkcrypt::open_store(in_path, false);
        if (!in) throw Failure(in.error().message);
        if ((*in)->size() > room)
            throw UsageError(in_path + ": " + std::to_string((*in)->size()) + " bytes do not fit the " +
                             std::to_string(room) + " bytes of the data segment of " + image + where);
    }
    return run_copy(vm, job, image);
}

// A passphrase from a positional key file (cryptsetup's [<key file>]), else
// --key-file or a prompt / piped line.
blkcrypt::SecureBuffer positional_or_prompt(const po::variables_map& vm, const std::optional<std::string>& file,
                                            const std::string& prompt, bool verify) {
    if (file) return read_key_input(*file, 0, 0, false);
    if (vm.count("key-file")) return read_passphrase(vm, "");
    if (::isatty(STDIN_FILENO)) return prompt_passphrase(prompt, verify);
    return read_key_input("-", 0, 0, true);
}

// An existing passphrase (positional key file, --key-file, prompt or piped
// line) and what `check` makes of it; a wrong one (check throws exit 2) at
// the terminal prompt is said so and asked for again, --tries times.
template <typename F>
auto checked_passphrase(const po::variables_map& vm, const std::optional<std::string>& file, const std::string& prompt,
                        F check) {
    // cryptsetup's --tries (set_tries_tty): how often a passphrase typed at the
    // terminal prompt is asked for after a wrong one (default 3, 0: no limit);
    // a key file (positional or --key-file) and piped input are tried once.
    const unsigned tries = file ? 1 : passphrase_tries(vm);
    for (unsigned t = 1;; ++t) {
        const blkcrypt::SecureBuffer pass = positional_or_prompt(vm, file, prompt, false);
        try {
            return check(pass);
        } catch (const StatusFailure& e) {
            if (e.status() != kExitNoKey || (tries && t >= tries)) throw;
            std::cerr << e.what() << "\n";
        }
    }
}

// The key file given as positional argument i, if any.
std::optional<std::string> positional_file(const std::vector<std::string>& files, std::size_t i) {
    if (files.size() > i) return files[i];
    return std::nullopt;
}

// A keyslot change the library refused for its arguments is a usage error
// (cryptsetup's EINVAL); the rest maps as everywhere (expect).
template <typename T>
T value_or_exit(blkcrypt::Result<T> r) {
    if (!r && r.status() != blkcrypt::Status::NoKey && r.status() != blkcrypt::Status::IoError)
        throw UsageError(r.error().message);
    return expect(std::move(r));
}


// The KDF options of a new keyslot, checked for the container's version
// before any passphrase is asked for.
luks::KeyslotOptions kdf_options(const po::variables_map& vm, luks::Version version) {
    return usage_or_fail(luks::keyslot_options(version, kdf_request(vm)));
}

// luksAddKey IMAGE [NEW_KEY_FILE]: an existing passphrase (or
// --volume-key-file) and the new one into --key-slot or the first free one.
int run_add_key(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.empty() || files.size() > 2) throw UsageError("luks add-key needs IMAGE [NEW_KEY_FILE]");
    refuse_inputs_as_header(vm, files[0], positional_keys(files, 1, "the new key file"));
    luks::Container c = open_writable(open_devices(vm, files[0]));
    luks::KeyslotOptions ko = kdf_options(vm, c.version());
    ko.keyslot = requested_keyslot(vm);
    or_fail(c.free_keyslot(ko.keyslot));  // "All key slots full." before any passphrase
    blkcrypt::SecureBuffer vk;
    if (vm.count("volume-key-file")) {  // no existing passphrase needed
        refuse_given(vm, {"key-file", "keyfile-offset", "keyfile-size"}, "not with --volume-key-file");
        vk = volume_key_file(vm, or_fail(c.volume_key_size()));
        value_or_exit(c.check_volume_key(vk));
    } else {
        vk = checked_passphrase(vm, std::nullopt, "Enter any existing passphrase: ", [&](const blkcrypt::SecureBuffer& p) {
            return std::move(value_or_exit(c.unlock(p)).volume_key);
        });
    }
    const blkcrypt::SecureBuffer fresh = new_passphrase(positional_file(files, 1), "Enter new passphrase for key slot: ");
    const int slot = value_or_exit(c.add_keyslot(vk, fresh, ko));
    if (vm["verbose"].as<bool>()) std::cout << "Key slot " << slot << " created.\n";
    return 0;
}

// luksChangeKey IMAGE [NEW_KEY_FILE]: the old passphrase (--key-file or a
// prompt), then the new one; the library picks the keyslot it goes to and
// keeps every step crash-safe.
int run_change_key(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.empty() || files.size() > 2) throw UsageError("luks change-key needs IMAGE [NEW_KEY_FILE]");
    refuse_inputs_as_header(vm, files[0], positional_keys(files, 1, "the new key file"));
    luks::Container c = open_writable(open_devices(vm, files[0]));
    const luks::KeyslotOptions ko = kdf_options(vm, c.version());
    const int requested = requested_keyslot(vm);
    // A wrong passphrase stops here, before the new one is asked for.
    auto [old, u] = checked_passphrase(vm, std::nullopt, "Enter passphrase to be changed: ", [&](const blkcrypt::SecureBuffer& p) {
        return std::pair{p, value_or_exit(c.unlock_to_change(p, requested))};
    });
    const int target = or_fail(c.change_target(u, requested));
    const blkcrypt::SecureBuffer fresh = new_passphrase(positional_file(files, 1), "Enter new passphrase: ");
    value_or_exit(c.change_keyslot(u, target, old, fresh, ko));
    if (vm["verbose"].as<bool>()) {
        std::cout << "Key slot " << u.keyslot << " changed";
        if (target != u.keyslot) std::cout << " to key slot " << target;
        std::cout << ".\n";
    }
    return 0;
}

int run_header_backup(const po::variables_map& vm, const std::vector<std::string>& files) {
    const Devices d = open_devices(vm, one_file(files, "header-backup"));
    if (!vm.count("header-backup-file")) throw UsageError("luks header-backup needs --header-backup-file FILE");
    const std::string file = vm["header-backup-file"].as<std::string>();
    const luks::Container c = load_container(d);  // "not a valid LUKS device" first
    struct stat st {};
    if (::lstat(file.c_str(), &st) == 0) throw Failure("Requested header backup file " + file + " already exists.");
    const std::vector<uint8_t> b = or_fail(c.header_backup());
    write_output(file, b, OutputOptions{.role = "--header-backup-file", .secret = true,
                                        .inputs = {{"IMAGE", d.image}, {"the header", d.header_path}}});
    // Read-only for its owner, as cryptsetup creates it (0400).
    if (::chmod(file.c_str(), 0400) != 0) throw Failure(errno_message(file));
    return 0;
}

int run_header_restore(const po::variables_map& vm, const std::vector<std::string>& files) {
    const std::string image = one_file(files, "header-restore");
    if (!vm.count("header-backup-file")) throw UsageError("luks header-restore needs --header-backup-file FILE");
    const std::string path = vm.count("header") ? vm["header"].as<std::string>() : image;
    auto backup = blkcrypt::open_store(vm["header-backup-file"].as<std::string>(), false);
    if (!backup) throw Failure(backup.error().message);
    auto store = blkcrypt::open_store(path, true);
    if (!store) throw Failure(store.error().message);
    const bool has = luks::detect(**store).ok();
    yes_dialog(vm, "Device " + path + (has ? " already contains LUKS header. Replacing header will destroy existing keyslots."
                                        : " does not contain LUKS header. Replacing header can destroy data on that device."));
    or_fail(luks::header_restore(registry(), **store, **backup));
    return 0;
}

// luksErase: every active keyslot removed (its area overwritten), as
// cryptsetup erases them; the header stays, without a way to open it.
int run_erase(const po::variables_map& vm, const std::vector<std::string>& files) {
    const Devices d = open_devices(vm, one_file(files, "erase"));
    version_of(d);  // "not a valid LUKS device" before the question
    yes_dialog(vm, "\nWARNING!\n========\nThis operation will erase all keyslots on device " + files[0] +
                    ".\nDevice will become unusable after this operation.");
    value_or_exit(open_writable(d).erase());
    return 0;
}

void confirm_last(const po::variables_map& vm, const luks::Container& c) {
    if (c.active_keyslots().size() == 1)
        yes_dialog(vm, "\nWARNING!\n========\nThis is the last keyslot. Device will become unusable after purging this key.");
}

int run_remove_key(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.empty() || files.size() > 2) throw UsageError("luks remove-key needs IMAGE [KEY_FILE]");
    refuse_inputs_as_header(vm, files[0], positional_keys(files, 1, "the key file"));
    luks::Container c = open_writable(open_devices(vm, files[0]));
    const int only = requested_keyslot(vm);
    const int slot = checked_passphrase(vm, positional_file(files, 1), "Enter passphrase to be deleted: ",
                                        [&](const blkcrypt::SecureBuffer& p) { return value_or_exit(c.unlock(p, only)).keyslot; });
    confirm_last(vm, c);
    value_or_exit(c.remove_keyslot(slot));
    if (vm["verbose"].as<bool>()) std::cout << "Key slot " << slot << " removed.\n";
    return 0;
}

int run_kill_slot(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.size() < 2 || files.size() > 3) throw UsageError("luks kill-slot needs IMAGE SLOT [KEY_FILE]");
    const std::string& n = files[1];
    if (n.empty() || n.size() > 2 || n.find_first_not_of("0123456789") != std::string::npos)
        throw UsageError("kill-slot: '" + n + "' is not a keyslot number");
    const int slot = std::stoi(n);
    refuse_inputs_as_header(vm, files[0], positional_keys(files, 2, "the key file"));
    luks::Container c = open_writable(open_devices(vm, files[0]));
    or_fail(c.check_removable(slot));
    confirm_last(vm, c);
    // cryptsetup asks for a remaining passphrase unless --batch-mode on a terminal.
    const std::optional<std::string> file = positional_file(files, 2);
    if (!vm["batch-mode"].as<bool>() || file || vm.count("key-file") || !::isatty(STDIN_FILENO))
        checked_passphrase(vm, file, "Enter any remaining passphrase: ",
                           [&](const blkcrypt::SecureBuffer& p) { return value_or_exit(c.unlock(p)).keyslot; });
    value_or_exit(c.remove_keyslot(slot));
    return 0;
}

// cryptsetup convert --type luks1|luks2: the library checks what cryptsetup
// checks and rewrites the header in place, crash-safe.
int run_convert(const po::variables_map& vm, const std::vector<std::string>& files) {
    const std::string type = vm.count("type") ? vm["type"].as<std::string>() : "";
    if (type != "luks1" && type != "luks2") throw Failure("Invalid LUKS type, only luks1 and luks2 are supported.");
    const Devices d = open_devices(vm, one_file(files, "convert"));
    const luks::Version to = type == "luks1" ? luks::Version::Luks1 : luks::Version::Luks2;
    const std::string name = type == "luks1" ? "LUKS1" : "LUKS2";
    if (version_of(d) == to) throw Failure("Device is already " + name + " type.");
    if (to == luks::Version::Luks1) load_container(d);  // prints a damaged copy's warning
    // cryptsetup's words, blank lines and exit status (2) when not confirmed.
    try {
        yes_dialog(vm, "\nWARNING!\n========\nThis operation will convert " + d.header_path + " to " + name + " format.\n\n");
    } catch (const Failure&) {
        throw StatusFailure("Operation aborted, device was NOT converted.", 2);
    }
    auto w = blkcrypt::open_store(d.header_path, true);
    if (!w) throw Failure(w.error().message);
    or_fail(luks::convert(registry(), **w, to));
    return 0;
}

// cryptsetup config (LUKS2 only): --priority with --key-slot, --label,
// --subsystem; each change one crash-safe header rewrite.
int run_config(const po::variables_map& vm, const std::vector<std::string>& files) {
    int priority = -1;
    if (vm.count("priority")) {
        const std::string p = vm["priority"].as<std::string>();
        priority = p == "ignore" ? 0 : p == "normal" ? 1 : p == "prefer" ? 2 : -1;
        // cryptsetup exits 1 for these, as for every config error.
        if (priority < 0) throw Failure("Option --priority can be only ignore/normal/prefer.");
        if (!vm.count("key-slot")) throw Failure("Keyslot specification is required.");
    } else if (!vm.count("label") && !vm.count("subsystem")) {
        throw Failure("Option --priority, --label or --subsystem is missing.");
    }
    luks::Container c = open_writable(open_devices(vm, one_file(files, "config")), true);
    if (priority >= 0) or_fail(c.set_priority(requested_keyslot(vm), priority));
    if (vm.count("label") || vm.count("subsystem")) {
        // As cryptsetup: the one not given is cleared.
        const std::string label = vm.count("label") ? vm["label"].as<std::string>() : "";
        const std::string subsystem = vm.count("subsystem") ? vm["subsystem"].as<std::string>() : "";
        or_fail(c.set_labels(label, subsystem));
    }
    return 0;
}

// cryptsetup token add|remove|import|export (LUKS2): tokens of any type,
// kept as given; --key-slot assigns one in a second rewrite, as cryptsetup.
int run_token(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.size() != 2) throw UsageError("luks token needs add|remove|import|export and IMAGE");
    const std::string& sub = files[0];
    if (sub != "add" && sub != "remove" && sub != "import" && sub != "export") throw Failure("Invalid token action.");
    const int id = vm.count("token-id") ? static_cast<int>(vm["token-id"].as<unsigned>()) : -1;
    if ((sub == "remove" || sub == "export") && id < 0)
        throw Failure("Action requires specific token. Use --token-id parameter.");
    if (sub == "add" && !vm.count("key-description"))
        throw Failure("--key-description parameter is mandatory for token add action.");
    if (sub != "add") refuse_given(vm, {"key-description"}, "only for token add");
    if (sub != "import") refuse_given(vm, {"json-file", "token-replace"}, "only for token import");
    if (sub == "remove" || sub == "export") refuse_given(vm, {"key-slot"}, "only for token add and import");
    if (sub != "export") refuse_inputs_as_header(vm, files[1]);
    const Devices d = open_devices(vm, files[1]);
    if (sub == "export") {
        // Compact, no newline: what cryptsetup prints. LUKS1: "not a valid LUKS2 device".
        std::cout << or_fail(load_container(d).export_token(id));
        return 0;
    }
    luks::Container c = open_writable(d, true);
    if (sub == "remove") {
        or_fail(c.remove_token(id));
        return 0;
    }
    std::string token;
    if (sub == "add") {
        // cryptsetup's luks2-keyring token, built as its handler builds it.
        token = "{\"type\":\"luks2-keyring\",\"keyslots\":[],\"key_description\":" +
                json_quote(vm["key-description"].as<std::string>()) + "}";
    } else {
        const std::vector<uint8_t> raw = read_all(vm.count("json-file") ? vm["json-file"].as<std::string>() : "-");
        token.assign(raw.begin(), raw.end());
    }
    blkcrypt::Result<int> made = c.import_token(token, id, vm["token-replace"].as<bool>());
    if (!made) {
        const std::string& m = made.error().message;
        if (made.status() == blkcrypt::Status::Invalid && m.find(" in use.") == std::string::npos && sub == "import")
            throw Failure("Failed to import token from file.");  // cryptsetup's words; ours say why
        throw Failure(m);
    }
    if (vm.count("key-slot")) or_fail(c.assign_token(*made, requested_keyslot(vm)));
    if (vm["verbose"].as<bool>()) std::cout << "Token " << *made << " created.\n";
    return 0;
}

// luks's own options, and the scopes of the shared ones in its own actions.
void add_options(CommandLine& cl) {
    cl.options.add_options()
        ("header", po::value<std::string>()->value_name("FILE"), "the LUKS header is in FILE (detached), not IMAGE")
        ("key-slot,S", number_value<unsigned>(0, 31)->value_name("N"), "try only keyslot N")
        ("dump-json-metadata", po::bool_switch(), "dump: print the LUKS2 JSON metadata, as cryptsetup")
        ("json", po::bool_switch(), "dump: one JSON object for scripts; serve: events as JSON lines (docs/json.md)")
        ("verbose,v", po::bool_switch(), "name the keyslot opened, created or removed")
        ("start", number_value<uint64_t>(0, UINT64_MAX / 512)->value_name("SECTORS"),
         "decrypt/encrypt: begin at 512-byte sector SECTORS of the data segment (default: 0)")
        ("size,b", number_value<uint64_t>(1, UINT64_MAX / 512)->value_name("SECTORS"),
         "decrypt/encrypt: process SECTORS 512-byte sectors (default: to the end of the segment or IN)")
        ("format", po::bool_switch(), "encrypt: create IMAGE first, sized for IN, with the format options (with --header: the new header in FILE, all of IMAGE data)")
        ("type", po::value<std::string>()->value_name("luks1|luks2"), "format: luks1 or luks2 (default: luks2, as cryptsetup)")
        ("cipher,c", po::value<std::string>()->value_name("SPEC"), "format: cipher (default: aes-xts-plain64)")
        ("key-size,s", number_value<unsigned>(8, 4096)->value_name("BITS"), "format: volume key bits (default: 512 for XTS, else 256)")
        ("hash,h", po::value<std::string>()->value_name("HASH"), "format: PBKDF2 and anti-forensic hash (default: sha256)")
        ("pbkdf", po::value<std::string>()->value_name("pbkdf2|argon2i|argon2id"),
         "keyslot KDF: pbkdf2, argon2i, argon2id (LUKS2 default: argon2id; LUKS1: pbkdf2 only)")
        ("iter-time,i", number_value<unsigned>(1, 3600000)->value_name("MS"), "keyslot KDF time to aim for (default: 2000)")
        ("pbkdf-force-iterations", number_value<unsigned>(1, UINT32_MAX)->value_name("N"),
         "N keyslot iterations (Argon2: passes), no benchmark (minimum: 1000 for pbkdf2, 4 for Argon2)")
        ("pbkdf-memory", number_value<unsigned>(32, 4194304)->value_name("KIB"),
         "Argon2 memory cost (default: benchmarked, at most 1 GiB)")
        ("pbkdf-parallel", number_value<unsigned>(1, 4)->value_name("N"), "Argon2 threads (default: up to 4, one per core)")
        ("sector-size", number_value<unsigned>(512, 4096)->value_name("BYTES"),
         "format: LUKS2 encryption sector size (default: 4096, as cryptsetup picks for an image file)")
        ("integrity", po::value<std::string>()->value_name("ALG"),
         "format: LUKS2 with dm-integrity under dm-crypt: hmac-sha256, hmac-sha512, hmac-sha1, cmac-aes (with an "
         "XTS or CBC cipher), aead (aes-gcm-random, aes-ccm-random, aegis128-random), poly1305 (chacha20-random)")
        ("integrity-legacy-padding", po::bool_switch(),
         "format --integrity: dm-integrity without fix_padding, as kernels before 4.19 laid it out")
        ("integrity-no-wipe", po::bool_switch(),
         "format --integrity: leave the data and tags unwritten (every sector fails to read until written)")
        ("label", po::value<std::string>()->value_name("LABEL"), "format: LUKS2 label")
        ("subsystem", po::value<std::string>()->value_name("NAME"), "format: LUKS2 subsystem")
        ("priority", po::value<std::string>()->value_name("ignore|normal|prefer"), "config: keyslot priority ignore, normal or prefer (with --key-slot)")
        ("token-id", number_value<unsigned>(0, 31)->value_name("N"), "token: the token (import, add: default the lowest free one)")
        ("json-file", po::value<std::string>()->value_name("FILE"), "token import: the token's JSON (default: stdin)")
        ("token-replace", po::bool_switch(), "token import: replace the token --token-id names")
        ("key-description", po::value<std::string>()->value_name("DESC"), "token add: the kernel keyring description (luks2-keyring)")
        ("luks2-metadata-size", bytes_value<uint64_t>(16384, 4194304)->value_name("BYTES"),
         "format: each LUKS2 header copy, 16 KiB..4 MiB, a power of two (default: 16 KiB)")
        ("luks2-keyslots-size", bytes_value<uint64_t>(4096, 128u << 20)->value_name("BYTES"),
         "format: the LUKS2 keyslots area (default: up to the data offset, at most 128 MiB)")
        ("volume-key-file", po::value<std::string>()->value_name("FILE"),
         "the volume key from FILE instead of a passphrase (format: instead of a random one)")
        ("offset,o", number_value<unsigned>(0, UINT32_MAX)->value_name("SECTORS"), "format: data offset, 512-byte sectors")
        ("align-payload", number_value<unsigned>(0, UINT32_MAX)->value_name("SECTORS"),
         "format: align the data to SECTORS (LUKS1 default: 2048, 1 MiB)")
        ("header-backup-file", po::value<std::string>()->value_name("FILE"), "header-backup/-restore: the backup file")
        ("uuid", po::value<std::string>()->value_name("UUID"), "format: this UUID (default: random); uuid: set it")
        ("verify-passphrase,y", po::bool_switch(), "format: ask for the passphrase twice (always on a terminal)")
        ("force", po::bool_switch(), "encrypt: write IN even if its filesystem's block size is below the sector size");
    only_for(cl, {"format", "encrypt", "add-key", "change-key", "remove-key", "kill-slot"},
             {"key-file", "keyfile-offset", "keyfile-size"});
    only_for(cl, {"encrypt", "add-key", "change-key", "remove-key", "kill-slot"}, {"tries"});
    only_for(cl, {"format", "remove-key", "kill-slot", "uuid", "header-restore", "erase", "convert"}, {"batch-mode"});
    only_for(cl, {"encrypt"}, {"threads"});
    only_for(cl, {"encrypt"}, progress_option_names());
    only_for(cl, {"format", "dump", "test-passphrase", "decrypt", "serve", "table", "encrypt", "add-key", "change-key",
                  "remove-key", "config", "token"},
             {"key-slot"});
    only_for(cl, {"config"}, {"priority"});
    only_for(cl, {"token"}, {"token-id", "json-file", "token-replace", "key-description"});
    only_for(cl, {"dump"}, {"dump-json-metadata"});
    only_for(cl, {"dump", "serve"}, {"json"});
    only_for(cl, {"header-backup", "header-restore"}, {"header-backup-file"});
    only_for(cl, {"test-passphrase", "add-key", "change-key", "remove-key", "token"}, {"verbose"});
    only_for(cl, {"format", "add-key", "change-key", "encrypt"},
             {"iter-time", "pbkdf-force-iterations", "pbkdf", "pbkdf-memory", "pbkdf-parallel", "hash"});
    only_for(cl, {"decrypt", "encrypt"}, {"start", "size"});
    only_for(cl, {"format", "convert", "encrypt"}, {"type"});
    only_for(cl, {"encrypt"}, {"format", "force"});
    only_for(cl, {"format", "encrypt"}, {"cipher", "key-size", "offset", "align-payload", "verify-passphrase",
                                         "sector-size", "luks2-metadata-size", "luks2-keyslots-size"});
    only_for(cl, {"format", "config", "encrypt"}, {"label", "subsystem"});
    only_for(cl, {"format"}, {"integrity", "integrity-no-wipe", "integrity-legacy-padding"});
    only_for(cl, {"format", "test-passphrase", "decrypt", "serve", "table", "encrypt", "add-key"}, {"volume-key-file"});
    only_for(cl, {"format", "uuid", "encrypt"}, {"uuid"});
}

using Files = std::vector<std::string>;

}  // namespace

const ContainerFormat kLuksFormat{
    .name = "luks",
    .summary = "LUKS containers as cryptsetup reads and writes them, without root or\n"
               "device-mapper (LUKS1 and LUKS2). cryptsetup's names work at the top level too:\n"
               "blkcrypt luksFormat, luksDump, luksAddKey, luksChangeKey, luksRemoveKey,\n"
               "luksKillSlot, luksErase, luksHeaderBackup, luksHeaderRestore, isLuks, luksUUID,\n"
               "convert, config, token.\n"
               "A passphrase is prompted for on a terminal (--tries times), else one line of\n"
               "stdin; --key-file reads the whole file ('-': all of stdin). A passphrase that\n"
               "opens no keyslot exits 2 (\"No key available with this passphrase.\"). The\n"
               "keyslot and header actions write IMAGE in place. serve makes the plaintext a\n"
               "network block device (NBD) for nbdcopy, nbdfuse, qemu (docs/nbd.md).",
    .actions = {"format", "dump", "uuid", "is-luks", "test-passphrase", "decrypt", "serve", "table", "encrypt",
                "add-key", "change-key", "remove-key", "kill-slot", "erase", "header-backup", "header-restore",
                "convert", "config", "token"},
    .usage = "blkcrypt luks format|dump|uuid|is-luks|test-passphrase [OPTIONS] IMAGE\n"
             "       blkcrypt luks decrypt [OPTIONS] IMAGE OUT\n"
             "       blkcrypt luks serve [OPTIONS] (--socket PATH | --port N) [--read-only] IMAGE\n"
             "       blkcrypt luks table [OPTIONS] [--show-key] IMAGE\n"
             "       blkcrypt luks encrypt [OPTIONS] IN IMAGE\n"
             "       blkcrypt luks add-key|change-key|remove-key [OPTIONS] IMAGE [KEY_FILE]\n"
             "       blkcrypt luks kill-slot [OPTIONS] IMAGE SLOT [KEY_FILE] | erase [-q] IMAGE\n"
             "       blkcrypt luks header-backup|header-restore --header-backup-file FILE IMAGE\n"
             "       blkcrypt luks convert --type luks1|luks2 [OPTIONS] IMAGE\n"
             "       blkcrypt luks config [--label L] [--subsystem S] [--priority P --key-slot N] IMAGE\n"
             "       blkcrypt luks token add|remove|import|export [OPTIONS] IMAGE\n"
             "       blkcrypt luks reencrypt|repair [OPTIONS] IMAGE (blkcrypt reencrypt, blkcrypt repair)",
    .open_name = "open",
    .dump_name = "luksDump",
    .key_file_help = "read the passphrase from FILE ('-': all of stdin)",
    .dump_volume_key_help = "dump: also print the volume key (asks for the passphrase)",
    .add_options = add_options,
    .open = [](const po::variables_map& vm, const std::string& image,
               bool writable) -> std::unique_ptr<OpenedContainer> { return std::make_unique<Opened>(vm, image, writable); },
    .own = {{{"format", "create a container, as cryptsetup luksFormat (--type luks1|luks2, default luks2)"}, "",
             [](const po::variables_map& vm, const Files& f) { return run_format(vm, f); }},
            {{"uuid", "print the UUID, as cryptsetup luksUUID"}, "",
             [](const po::variables_map& vm, const Files& f) {
                 return vm.count("uuid") ? run_set_uuid(vm, f) : run_uuid(vm, f);
             }},
            {{"is-luks", "exit 0 for a LUKS container, 1 otherwise (cryptsetup isLuks)"}, "", run_is_luks},
            {{"decrypt", "write the plaintext of the data segment of IMAGE to OUT (--start, --size: a range)"}, "",
             run_decrypt},
            {{"encrypt", "write the plain image IN into the data segment of IMAGE"}, "", run_encrypt},
            {{"add-key", "add a passphrase in a new keyslot (cryptsetup luksAddKey)"}, "", run_add_key},
            {{"change-key", "move a passphrase's volume key under a new one (cryptsetup luksChangeKey)"}, "",
             run_change_key},
            {{"remove-key", "remove the keyslot a passphrase opens (cryptsetup luksRemoveKey)"}, "", run_remove_key},
            {{"kill-slot", "remove keyslot SLOT (cryptsetup luksKillSlot)"}, "", run_kill_slot},
            {{"erase", "remove every keyslot (cryptsetup luksErase)"}, "", run_erase},
            {{"header-backup", "save the header and keyslots (cryptsetup luksHeaderBackup)"}, "", run_header_backup},
            {{"header-restore", "write a saved header back (cryptsetup luksHeaderRestore)"}, "", run_header_restore},
            {{"convert", "rewrite the header as --type luks1|luks2 (cryptsetup convert)"}, "", run_convert},
            {{"config", "set a LUKS2 --label, --subsystem or keyslot --priority (cryptsetup config)"}, "", run_config},
            {{"token", "add|remove|import|export a LUKS2 token (cryptsetup token)"}, "", run_token}},
};

// A key file too short, empty or too long exits 1, as in cryptsetup.
int run_luks(Args args) {
    // cryptsetup's reencrypt and repair actions have a command of their own,
    // with cryptsetup's reencrypt options (cmd_reencrypt.cpp).
    if (!args.empty() && args[0] == "reencrypt") return run_reencrypt(args.subspan(1));
    if (!args.empty() && args[0] == "repair") return run_repair(args.subspan(1));
    try {
        return run_container(kLuksFormat, args);
    } catch (const KeyInputError& e) {
        throw Failure(e.what());
    }
}

bool kdf_given(const po::variables_map& vm) {
    for (const char* o : {"pbkdf", "hash", "iter-time", "pbkdf-force-iterations", "pbkdf-memory", "pbkdf-parallel"})
        if (vm.count(o)) return true;
    return false;
}

blkcrypt::luks::KdfRequest kdf_request(const po::variables_map& vm) {
    blkcrypt::luks::KdfRequest r;
    if (vm.count("pbkdf")) r.pbkdf = vm["pbkdf"].as<std::string>();
    if (vm.count("hash")) r.hash = vm["hash"].as<std::string>();
    for (auto [name, to] : {std::pair{"pbkdf-force-iterations", &r.iterations}, {"iter-time", &r.iter_time_ms},
                            {"pbkdf-memory", &r.memory_kib}, {"pbkdf-parallel", &r.parallel}})
        if (vm.count(name)) *to = vm[name].as<unsigned>();
    return r;
}

}  // namespace cli
