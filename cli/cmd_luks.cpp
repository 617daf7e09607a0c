// blkcrypt luks: LUKS containers as cryptsetup handles them, without root or
// device-mapper. The actions carry cryptsetup's names and options (luksDump
// is `luks dump`, `open --test-passphrase` is `luks test-passphrase`, ...);
// data moves through the dm-crypt engine and the copy loop `crypt` uses.
#include "commands.hpp"
#include "image_copy.hpp"
#include "number_option.hpp"
#include "output_file.hpp"
#include "passphrase.hpp"
#include "progress.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/luks/container.hpp>
#include <blkcrypt/luks/luks1.hpp>
#include <blkcrypt/random.hpp>

#include <algorithm>
#include <cerrno>
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

namespace luks = blkcrypt::luks;
namespace luks1 = blkcrypt::luks::luks1;

// cryptsetup's exit status for a passphrase that opens no keyslot (EPERM).
constexpr int kExitNoKey = 2;

struct Devices {
    std::string image;        // IMAGE as given
    std::string header_path;  // --header, or IMAGE
    std::shared_ptr<blkcrypt::BackingStore> header;
};

Devices open_devices(const po::variables_map& vm, const std::string& image) {
    Devices d;
    d.image = image;
    d.header_path = vm.count("header") ? vm["header"].as<std::string>() : image;
    auto s = blkcrypt::open_file_store(d.header_path, false);
    if (!s) throw Failure(s.error().message);
    d.header = *s;
    return d;
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

luks1::Header luks1_header(const Devices& d) {
    if (version_of(d) != luks::Version::Luks1)
        throw Failure(d.header_path + ": LUKS2 is not supported by this build yet");
    auto h = luks1::read_header(registry(), *d.header);
    if (!h) throw Failure(h.error().message);
    return std::move(h).value();
}

// The passphrase as cryptsetup reads it (tools_get_key): --key-file whole
// (or --keyfile-size bytes) after --keyfile-offset, '-' all of stdin; else a
// prompt on a terminal, or one line of piped stdin.
blkcrypt::SecureBuffer read_passphrase(const po::variables_map& vm, const std::string& device, bool verify = false) {
    if (vm.count("verify-passphrase") && vm["verify-passphrase"].as<bool>()) verify = true;
    const uint64_t offset = vm.count("keyfile-offset") ? vm["keyfile-offset"].as<uint64_t>() : 0;
    const std::size_t size = vm.count("keyfile-size") ? static_cast<std::size_t>(vm["keyfile-size"].as<uint64_t>()) : 0;
    if (vm.count("key-file")) return read_key_input(vm["key-file"].as<std::string>(), offset, size, false);
    if (::isatty(STDIN_FILENO)) {
        if (offset || size) throw UsageError("--keyfile-offset and --keyfile-size need --key-file or piped input");
        return prompt_passphrase("Enter passphrase for " + device + ": ", verify);
    }
    return read_key_input("-", offset, size, true);
}

luks::OpenOptions open_options(const po::variables_map& vm) {
    luks::OpenOptions o;
    if (vm.count("key-slot")) o.keyslot = static_cast<int>(vm["key-slot"].as<unsigned>());
    return o;
}

// Unlocks the container: exit 2 with cryptsetup's words for a passphrase
// that opens nothing, 1 for the rest.
// With --volume-key-file, the key itself (exactly the header's key size, as
// cryptsetup reads it) instead of a passphrase.
luks::Volume unlock(const po::variables_map& vm, const Devices& d) {
    version_of(d);
    blkcrypt::Result<luks::Volume> vol = blkcrypt::make_error(blkcrypt::Status::Invalid, "");
    if (vm.count("volume-key-file")) {
        refuse_given(vm, {"key-file", "keyfile-offset", "keyfile-size", "key-slot"}, "not with --volume-key-file");
        const blkcrypt::SecureBuffer vk =
            read_key_input(vm["volume-key-file"].as<std::string>(), 0, luks1_header(d).key_bytes, false);
        vol = luks::open_with_volume_key(registry(), *d.header, vk);
    } else {
        const blkcrypt::SecureBuffer pass = read_passphrase(vm, d.image);
        vol = luks::open(registry(), *d.header, pass, open_options(vm));
    }
    if (!vol) {
        if (vol.status() == blkcrypt::Status::NoKey) throw StatusFailure(vol.error().message, kExitNoKey);
        throw Failure(vol.error().message);
    }
    return std::move(vol).value();
}

void write_stdout(blkcrypt::ConstBytes b) {
    std::cout.flush();
    write_all(STDOUT_FILENO, b, "stdout");
}

// cryptsetup's yesDialog: asked only on a terminal and without --batch-mode.
void confirm(const po::variables_map& vm, const std::string& question) {
    if (vm["batch-mode"].as<bool>() || !::isatty(STDIN_FILENO)) return;
    std::cerr << question << "\nAre you sure? (Type 'yes' in capital letters): " << std::flush;
    std::string answer;
    if (!std::getline(std::cin, answer) || answer != "YES") throw Failure("Operation aborted.");
}

std::string one_file(const std::vector<std::string>& files, const std::string& action) {
    if (files.size() != 1) throw UsageError("luks " + action + " needs exactly one IMAGE");
    return files[0];
}

int run_dump(const po::variables_map& vm, const std::vector<std::string>& files) {
    const Devices d = open_devices(vm, one_file(files, "dump"));
    const luks1::Header h = luks1_header(d);
    if (!vm["dump-volume-key"].as<bool>()) {
        refuse_given(vm, {"key-file", "keyfile-offset", "keyfile-size", "key-slot"}, "only with --dump-volume-key");
        std::cout << luks1::dump(h, d.header_path);
        return 0;
    }
    confirm(vm, "Header dump with volume key is sensitive information\n"
                "which allows access to encrypted partition without a passphrase.\n"
                "This dump should be stored encrypted in a safe place.");
    const luks::Volume vol = unlock(vm, d);
    const blkcrypt::SecureBuffer text = luks1::dump_volume_key(h, d.header_path, vol.table.key);
    write_stdout(text);
    return 0;
}

int run_test_passphrase(const po::variables_map& vm, const std::vector<std::string>& files) {
    const Devices d = open_devices(vm, one_file(files, "test-passphrase"));
    const luks::Volume vol = unlock(vm, d);
    if (vm["verbose"].as<bool>()) std::cout << "Key slot " << vol.keyslot << " unlocked.\n";
    return 0;
}

int run_is_luks(const po::variables_map& vm, const std::vector<std::string>& files) {
    const std::string image = one_file(files, "is-luks");
    const std::string path = vm.count("header") ? vm["header"].as<std::string>() : image;
    auto s = blkcrypt::open_file_store(path, false);
    if (!s) throw Failure(s.error().message);
    // Silent as cryptsetup isLuks: the exit status is the answer.
    return luks::detect(**s) ? 0 : 1;
}

int run_uuid(const po::variables_map& vm, const std::vector<std::string>& files) {
    const Devices d = open_devices(vm, one_file(files, "uuid"));
    std::cout << luks1_header(d).uuid << "\n";
    return 0;
}

int run_decrypt(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.size() != 2) throw UsageError("luks decrypt needs IMAGE and OUT");
    const std::string& image = files[0];
    const std::string& out_path = files[1];
    const std::string header = vm.count("header") ? vm["header"].as<std::string>() : image;
    const std::string key_path = vm.count("key-file") ? vm["key-file"].as<std::string>() : "";
    // The header is read first, so IMAGE must be seekable unless it is detached.
    if (!vm.count("header") && image == "-") throw UsageError("IMAGE '-' needs a detached --header");
    if (image == "-" && key_path == "-") throw UsageError("IMAGE and --key-file cannot both be stdin");
    Output out(out_path, OutputOptions{.role = "OUT", .secret = true, .can_stream = true,
                                       .in_place = vm["in-place"].as<bool>(),
                                       .inputs = {{"IMAGE", image}, {"the header", header}, {"the key file", key_path}}});
    const Devices d = open_devices(vm, image);
    const luks::Volume vol = unlock(vm, d);
    ImageCopy job{.encrypt = false, .in_path = image, .out = out, .table = vol.table};
    if (vol.length_sectors) job.size_sectors = vol.length_sectors;
    if (vm.count("threads")) job.threads = vm["threads"].as<unsigned>();
    job.progress = progress_settings(vm);
    job.progress_name = image;
    job.progress_json = vm["progress-json"].as<bool>();
    copy_image(job);
    return 0;
}


// A UUID as libuuid's uuid_parse takes it: 8-4-4-4-12 hex digits.
bool valid_uuid(const std::string& u) {
    if (u.size() != 36) return false;
    for (std::size_t i = 0; i < u.size(); ++i) {
        const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash != (u[i] == '-')) return false;
        if (!dash && !std::isxdigit(static_cast<unsigned char>(u[i]))) return false;
    }
    return true;
}

// A regular file shorter than `bytes` grows to it (cryptsetup fallocates a
// header file so); devices and larger files are left alone.
void grow_file(const std::string& path, uint64_t bytes) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) >= bytes) return;
    if (::truncate(path.c_str(), static_cast<off_t>(bytes)) != 0) throw Failure(errno_message(path));
}

int run_format(const po::variables_map& vm, const std::vector<std::string>& files) {
    const std::string image = one_file(files, "format");
    const std::string type = vm.count("type") ? vm["type"].as<std::string>() : "luks2";
    if (type == "luks2" || type == "luks")
        throw UsageError("LUKS2 format is not in this build yet: use --type luks1");
    if (type != "luks1") throw UsageError("--type must be luks1 or luks2, not '" + type + "'");
    if (vm.count("pbkdf") && vm["pbkdf"].as<std::string>() != "pbkdf2")
        throw UsageError("LUKS1 keyslots use --pbkdf pbkdf2 only");
    if (vm.count("pbkdf-force-iterations") && vm.count("iter-time"))
        throw UsageError("--pbkdf-force-iterations and --iter-time exclude each other");
    const bool detached = vm.count("header") > 0;
    const std::string header_path = detached ? vm["header"].as<std::string>() : image;

    blkcrypt::luks::luks1::FormatParams p;
    if (vm.count("cipher")) p.cipher = vm["cipher"].as<std::string>();
    // cryptsetup's default key: 256 bits, doubled for XTS's two keys.
    unsigned bits = p.cipher.find("-xts-") != std::string::npos ? 512 : 256;
    if (vm.count("key-size")) bits = vm["key-size"].as<unsigned>();
    if (bits % 8) throw UsageError("--key-size must be a multiple of 8 bits");
    if (bits / 8 > luks1::kMaxKeyBytes) throw UsageError("--key-size: LUKS1 volume keys are at most 512 bits here");
    p.key_bytes = bits / 8;
    if (vm.count("hash")) p.hash = vm["hash"].as<std::string>();
    if (vm.count("iter-time")) p.iter_time_ms = vm["iter-time"].as<unsigned>();
    if (vm.count("pbkdf-force-iterations")) p.force_iterations = vm["pbkdf-force-iterations"].as<unsigned>();
    if (vm.count("key-slot")) {
        p.keyslot = vm["key-slot"].as<unsigned>();
        if (p.keyslot >= luks1::kNumKeyslots) throw UsageError("Key slot " + std::to_string(p.keyslot) + " is invalid.");
    }
    if (vm.count("offset")) p.offset = vm["offset"].as<unsigned>();
    if (vm.count("align-payload")) p.alignment = vm["align-payload"].as<unsigned>();
    else if (detached) p.alignment = 0;
    p.detached = detached;
    if (vm.count("uuid")) {
        p.uuid = vm["uuid"].as<std::string>();
        if (!valid_uuid(p.uuid)) throw UsageError("Wrong LUKS UUID format provided.");
        for (char& c : p.uuid) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }

    struct stat st {};
    if (::stat(image.c_str(), &st) != 0) throw Failure(errno_message(image));
    if (detached && ::stat(header_path.c_str(), &st) != 0) {  // a new header file, as cryptsetup creates it
        const int fd = ::open(header_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) throw Failure(errno_message(header_path));
        ::close(fd);
    }
    confirm(vm, "\nWARNING!\n========\nThis will overwrite data on " + header_path + " irrevocably.\n");

    blkcrypt::SecureBuffer vk(p.key_bytes);
    if (vm.count("volume-key-file")) {
        vk = read_key_input(vm["volume-key-file"].as<std::string>(), 0, p.key_bytes, false);
    } else if (auto r = blkcrypt::random_bytes(vk.span()); !r) {
        throw Failure(r.error().message);
    }
    const blkcrypt::SecureBuffer pass = read_passphrase(vm, header_path, true);

    // The layout first (no benchmark: forced 1000), to size the header device.
    luks1::FormatParams probe = p;
    probe.force_iterations = luks1::kMinIterations;
    auto layout = luks1::make_header(registry(), probe, vk, luks1::kMinIterations);
    if (!layout) throw UsageError(layout.error().message);
    // A file grows to hold the keyslots and, when it holds the data too, up to
    // the payload (what cryptsetup leaves).
    grow_file(header_path, std::max<uint64_t>(luks1::device_sectors(*layout), detached ? 0 : layout->payload_offset) *
                               luks1::kSector);
    auto store = blkcrypt::open_file_store(header_path, true);
    if (!store) throw Failure(store.error().message);
    auto h = luks1::format(registry(), **store, p, vk, pass);
    if (!h) {
        if (h.status() == blkcrypt::Status::IoError) throw Failure(h.error().message);
        throw UsageError(h.error().message);
    }
    if (!detached && uint64_t{h->payload_offset} * luks1::kSector >= (*store)->size())
        std::cerr << "Device " << image << " is too small for activation, there is no remaining space for data.\n";
    return 0;
}

// luksUUID --uuid: a new UUID written into the header (asked for on a terminal).
int run_set_uuid(const po::variables_map& vm, const std::vector<std::string>& files) {
    const std::string image = one_file(files, "uuid");
    std::string uuid = vm["uuid"].as<std::string>();
    if (!valid_uuid(uuid)) throw UsageError("Wrong LUKS UUID format provided.");
    for (char& c : uuid) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    Devices d = open_devices(vm, image);
    luks1::Header h = luks1_header(d);
    confirm(vm, "Do you really want to change UUID of device?");
    auto w = blkcrypt::open_file_store(d.header_path, true);
    if (!w) throw Failure(w.error().message);
    h.uuid = uuid;
    if (auto r = luks1::write_header(**w, h); !r) throw Failure(r.error().message);
    return 0;
}

int run_encrypt(const po::variables_map& vm, const std::vector<std::string>& files) {
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
    const luks::Volume vol = unlock(vm, d);
    auto data = blkcrypt::open_file_store(image, false);
    if (!data) throw Failure(data.error().message);
    const uint64_t start = vol.table.offset * luks1::kSector;
    const uint64_t room = (*data)->size() > start ? (*data)->size() - start : 0;
    ImageCopy job{.encrypt = true, .in_path = in_path, .out = out, .table = vol.table};
    if (in_stream) {
        job.max_sectors = room / luks1::kSector;
    } else {
        auto in = blkcrypt::open_file_store(in_path, false);
        if (!in) throw Failure(in.error().message);
        if ((*in)->size() > room)
            throw UsageError(in_path + ": " + std::to_string((*in)->size()) + " bytes do not fit the " +
                             std::to_string(room) + " bytes of the data segment of " + image);
    }
    if (vm.count("threads")) job.threads = vm["threads"].as<unsigned>();
    job.progress = progress_settings(vm);
    job.progress_name = image;
    job.progress_json = vm["progress-json"].as<bool>();
    copy_image(job);
    return 0;
}

// The header device for a keyslot change, writable, and its LUKS1 header.
struct Writable {
    std::shared_ptr<blkcrypt::BackingStore> store;
    luks1::Header header;
};

Writable open_writable(const po::variables_map& vm, const std::string& image) {
    Devices d = open_devices(vm, image);
    luks1::Header h = luks1_header(d);
    auto w = blkcrypt::open_file_store(d.header_path, true);
    if (!w) throw Failure(w.error().message);
    return {*w, std::move(h)};
}

// A passphrase of one of the keyslots (the existing one, for add-key and
// kill-slot): exit 2 when none opens.
luks1::Unlocked unlock_any(const Writable& w, const blkcrypt::SecureBuffer& pass, int slot = -1) {
    auto u = luks1::open_any(registry(), *w.store, w.header, pass, slot);
    if (!u) {
        if (u.status() == blkcrypt::Status::NoKey) throw StatusFailure(u.error().message, kExitNoKey);
        throw Failure(u.error().message);
    }
    return std::move(u).value();
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

uint32_t keyslot_iterations(const po::variables_map& vm, const luks1::Header& h) {
    if (vm.count("pbkdf-force-iterations")) return vm["pbkdf-force-iterations"].as<unsigned>();
    const uint32_t ms = vm.count("iter-time") ? vm["iter-time"].as<unsigned>() : 2000;
    auto it = luks1::benchmark_pbkdf2(registry(), h.hash_spec, h.key_bytes, ms);
    if (!it) throw Failure(it.error().message);
    return *it;
}

void check(blkcrypt::Result<void> r) {
    if (!r) {
        if (r.status() == blkcrypt::Status::IoError) throw Failure(r.error().message);
        throw UsageError(r.error().message);
    }
}

int run_add_key(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.empty() || files.size() > 2) throw UsageError("luks add-key needs IMAGE [NEW_KEY_FILE]");
    Writable w = open_writable(vm, files[0]);
    int slot = -1;  // the new keyslot: --key-slot, else the first free one
    if (vm.count("key-slot")) {
        slot = static_cast<int>(vm["key-slot"].as<unsigned>());
        if (slot >= static_cast<int>(luks1::kNumKeyslots)) throw UsageError("Key slot " + std::to_string(slot) + " is invalid.");
        if (w.header.keyslots[slot].enabled())
            throw UsageError("Key slot " + std::to_string(slot) + " is full, please select another one.");
    } else {
        for (unsigned i = 0; i < luks1::kNumKeyslots && slot < 0; ++i)
            if (!w.header.keyslots[i].enabled()) slot = static_cast<int>(i);
        if (slot < 0) throw UsageError("All key slots full.");
    }
    if (vm.count("pbkdf-force-iterations") && vm.count("iter-time"))
        throw UsageError("--pbkdf-force-iterations and --iter-time exclude each other");
    blkcrypt::SecureBuffer vk;
    if (vm.count("volume-key-file")) {  // no existing passphrase needed
        refuse_given(vm, {"key-file", "keyfile-offset", "keyfile-size"}, "not with --volume-key-file");
        vk = read_key_input(vm["volume-key-file"].as<std::string>(), 0, w.header.key_bytes, false);
        auto ok = luks1::check_volume_key(registry(), w.header, vk);
        if (!ok) throw Failure(ok.error().message);
        if (!*ok) throw StatusFailure("Volume key does not match the volume.", kExitNoKey);
    } else {
        const blkcrypt::SecureBuffer old = positional_or_prompt(vm, std::nullopt, "Enter any existing passphrase: ", false);
        vk = unlock_any(w, old).volume_key;
    }
    std::optional<std::string> new_file;
    if (files.size() == 2) new_file = files[1];
    blkcrypt::SecureBuffer fresh;
    if (new_file) fresh = read_key_input(*new_file, 0, 0, false);
    else if (::isatty(STDIN_FILENO)) fresh = prompt_passphrase("Enter new passphrase for key slot: ", true);
    else fresh = read_key_input("-", 0, 0, true);
    check(luks1::add_keyslot(registry(), *w.store, w.header, static_cast<unsigned>(slot), vk, fresh,
                             keyslot_iterations(vm, w.header)));
    if (vm["verbose"].as<bool>()) std::cout << "Key slot " << slot << " created.\n";
    return 0;
}

// luksChangeKey IMAGE [NEW_KEY_FILE]: the old passphrase (--key-file or a
// prompt), the new one into the first free keyslot (or --key-slot), then the
// old keyslot removed.
int run_change_key(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.empty() || files.size() > 2) throw UsageError("luks change-key needs IMAGE [NEW_KEY_FILE]");
    Writable w = open_writable(vm, files[0]);
    if (vm.count("pbkdf-force-iterations") && vm.count("iter-time"))
        throw UsageError("--pbkdf-force-iterations and --iter-time exclude each other");
    const blkcrypt::SecureBuffer old = positional_or_prompt(vm, std::nullopt, "Enter passphrase to be changed: ", false);
    const luks1::Unlocked u = unlock_any(w, old);
    int slot = -1;
    if (vm.count("key-slot")) {
        slot = static_cast<int>(vm["key-slot"].as<unsigned>());
        if (slot >= static_cast<int>(luks1::kNumKeyslots)) throw UsageError("Key slot " + std::to_string(slot) + " is invalid.");
    } else {
        for (unsigned i = 0; i < luks1::kNumKeyslots && slot < 0; ++i)
            if (!w.header.keyslots[i].enabled()) slot = static_cast<int>(i);
        if (slot < 0) throw UsageError("All key slots full: a crash-safe change needs a free keyslot.");
    }
    blkcrypt::SecureBuffer fresh;
    if (files.size() == 2) fresh = read_key_input(files[1], 0, 0, false);
    else if (::isatty(STDIN_FILENO)) fresh = prompt_passphrase("Enter new passphrase: ", true);
    else fresh = read_key_input("-", 0, 0, true);
    check(luks1::change_keyslot(registry(), *w.store, w.header, u.keyslot, static_cast<unsigned>(slot), u.volume_key,
                                fresh, keyslot_iterations(vm, w.header)));
    if (vm["verbose"].as<bool>()) std::cout << "Key slot " << u.keyslot << " changed to key slot " << slot << ".\n";
    return 0;
}

int run_header_backup(const po::variables_map& vm, const std::vector<std::string>& files) {
    const Devices d = open_devices(vm, one_file(files, "header-backup"));
    if (!vm.count("header-backup-file")) throw UsageError("luks header-backup needs --header-backup-file FILE");
    const std::string file = vm["header-backup-file"].as<std::string>();
    luks1_header(d);  // "not a valid LUKS device" first
    struct stat st {};
    if (::lstat(file.c_str(), &st) == 0) throw Failure("Requested header backup file " + file + " already exists.");
    auto b = luks1::header_backup(registry(), *d.header);
    if (!b) throw Failure(b.error().message);
    write_output(file, *b, OutputOptions{.role = "--header-backup-file", .secret = true,
                                         .inputs = {{"IMAGE", d.image}, {"the header", d.header_path}}});
    return 0;
}

int run_header_restore(const po::variables_map& vm, const std::vector<std::string>& files) {
    const std::string image = one_file(files, "header-restore");
    if (!vm.count("header-backup-file")) throw UsageError("luks header-restore needs --header-backup-file FILE");
    const std::string path = vm.count("header") ? vm["header"].as<std::string>() : image;
    const std::vector<uint8_t> backup = read_all(vm["header-backup-file"].as<std::string>());
    auto store = blkcrypt::open_file_store(path, true);
    if (!store) throw Failure(store.error().message);
    const bool has = luks::detect(**store).ok();
    confirm(vm, "Device " + path + (has ? " already contains LUKS header. Replacing header will destroy existing keyslots."
                                        : " does not contain LUKS header. Replacing header can destroy data on that device."));
    if (auto r = luks1::header_restore(registry(), **store, backup); !r) throw Failure(r.error().message);
    return 0;
}

// luksErase: every active keyslot removed (its area overwritten), as
// cryptsetup erases them; the header stays, without a way to open it.
int run_erase(const po::variables_map& vm, const std::vector<std::string>& files) {
    Writable w = open_writable(vm, one_file(files, "erase"));
    confirm(vm, "\nWARNING!\n========\nThis operation will erase all keyslots on device " + files[0] +
                    ".\nDevice will become unusable after this operation.");
    for (unsigned i = 0; i < luks1::kNumKeyslots; ++i)
        if (w.header.keyslots[i].enabled()) check(luks1::remove_keyslot(*w.store, w.header, i));
    return 0;
}

unsigned enabled_count(const luks1::Header& h) {
    unsigned n = 0;
    for (const auto& k : h.keyslots) n += k.enabled();
    return n;
}

void confirm_last(const po::variables_map& vm, const luks1::Header& h) {
    if (enabled_count(h) == 1)
        confirm(vm, "\nWARNING!\n========\nThis is the last keyslot. Device will become unusable after purging this key.");
}

int run_remove_key(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.empty() || files.size() > 2) throw UsageError("luks remove-key needs IMAGE [KEY_FILE]");
    Writable w = open_writable(vm, files[0]);
    std::optional<std::string> file;
    if (files.size() == 2) file = files[1];
    const blkcrypt::SecureBuffer pass = positional_or_prompt(vm, file, "Enter passphrase to be deleted: ", false);
    const luks1::Unlocked u = unlock_any(w, pass, vm.count("key-slot") ? static_cast<int>(vm["key-slot"].as<unsigned>()) : -1);
    confirm_last(vm, w.header);
    check(luks1::remove_keyslot(*w.store, w.header, u.keyslot));
    if (vm["verbose"].as<bool>()) std::cout << "Key slot " << u.keyslot << " removed.\n";
    return 0;
}

int run_kill_slot(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.size() < 2 || files.size() > 3) throw UsageError("luks kill-slot needs IMAGE SLOT [KEY_FILE]");
    Writable w = open_writable(vm, files[0]);
    const std::string& n = files[1];
    if (n.empty() || n.size() > 2 || n.find_first_not_of("0123456789") != std::string::npos)
        throw UsageError("kill-slot: '" + n + "' is not a keyslot number");
    const unsigned slot = static_cast<unsigned>(std::stoul(n));
    if (slot >= luks1::kNumKeyslots) throw UsageError("Key slot " + n + " is invalid.");
    if (!w.header.keyslots[slot].enabled()) throw UsageError("Keyslot " + n + " is not active.");
    confirm_last(vm, w.header);
    // cryptsetup asks for a remaining passphrase unless --batch-mode on a terminal.
    std::optional<std::string> file;
    if (files.size() == 3) file = files[2];
    if (!vm["batch-mode"].as<bool>() || file || vm.count("key-file") || !::isatty(STDIN_FILENO))
        unlock_any(w, positional_or_prompt(vm, file, "Enter any remaining passphrase: ", false));
    check(luks1::remove_keyslot(*w.store, w.header, slot));
    return 0;
}

}  // namespace

int run_luks(Args args) {
    CommandLine cl{"blkcrypt luks format|dump|uuid|is-luks|test-passphrase [OPTIONS] IMAGE\n"
                   "       blkcrypt luks decrypt [OPTIONS] IMAGE OUT\n"
                   "       blkcrypt luks encrypt [OPTIONS] IN IMAGE\n"
                   "       blkcrypt luks add-key|change-key|remove-key [OPTIONS] IMAGE [KEY_FILE]\n"
                   "       blkcrypt luks kill-slot [OPTIONS] IMAGE SLOT [KEY_FILE] | erase [-q] IMAGE\n"
                   "       blkcrypt luks header-backup|header-restore --header-backup-file FILE IMAGE",
                   "LUKS containers as cryptsetup reads and writes them, without root or\n"
                   "device-mapper (LUKS1). cryptsetup's names work at the top level too:\n"
                   "blkcrypt luksFormat, luksDump, luksAddKey, luksChangeKey, luksRemoveKey,\n"
                   "luksKillSlot, luksErase, luksHeaderBackup, luksHeaderRestore, isLuks, luksUUID.\n"
                   "A passphrase is prompted for on a terminal, else one line of stdin; --key-file\n"
                   "reads the whole file ('-': all of stdin). A passphrase that opens no keyslot\n"
                   "exits 2 (\"No key available with this passphrase.\"). OUT follows the output\n"
                   "policy (docs/outputs.md); the other actions write IMAGE in place."};
    cl.options.add_options()
        ("header", po::value<std::string>()->value_name("FILE"), "the LUKS header is in FILE (detached), not IMAGE")
        ("key-file,d", po::value<std::string>()->value_name("FILE"), "read the passphrase from FILE ('-': all of stdin)")
        ("keyfile-offset", number_value<uint64_t>(0, UINT64_MAX)->value_name("BYTES"), "skip BYTES of the key file")
        ("keyfile-size,l", number_value<uint64_t>(1, kMaxKeyFileSize)->value_name("BYTES"), "read exactly BYTES of the key file")
        ("key-slot,S", number_value<unsigned>(0, 31)->value_name("N"), "try only keyslot N")
        ("dump-volume-key", po::bool_switch(), "dump: also print the volume key (asks for the passphrase)")
        ("batch-mode,q", po::bool_switch(), "do not ask for confirmation")
        ("verbose,v", po::bool_switch(), "name the keyslot opened, created or removed")
        ("threads,t", threads_value()->value_name("N"), "crypt worker threads, at most 256 (default: one per core)")
        ("in-place", po::bool_switch(), "write into the existing regular file OUT directly")
        ("type", po::value<std::string>()->value_name("TYPE"), "format: luks1 or luks2 (default: luks2, as cryptsetup)")
        ("cipher,c", po::value<std::string>()->value_name("SPEC"), "format: cipher (default: aes-xts-plain64)")
        ("key-size,s", number_value<unsigned>(8, 4096)->value_name("BITS"), "format: volume key bits (default: 512 for XTS, else 256)")
        ("hash,h", po::value<std::string>()->value_name("HASH"), "format: PBKDF2 and anti-forensic hash (default: sha256)")
        ("pbkdf", po::value<std::string>()->value_name("KDF"), "format: pbkdf2 (LUKS1's only one)")
        ("iter-time,i", number_value<unsigned>(1, 3600000)->value_name("MS"), "format: PBKDF2 time to aim for (default: 2000)")
        ("pbkdf-force-iterations", number_value<unsigned>(1000, UINT32_MAX)->value_name("N"),
         "format: N keyslot iterations, no benchmark")
        ("volume-key-file", po::value<std::string>()->value_name("FILE"),
         "the volume key from FILE instead of a passphrase (format: instead of a random one)")
        ("offset,o", number_value<unsigned>(0, UINT32_MAX)->value_name("SECTORS"), "format: data offset, 512-byte sectors")
        ("align-payload", number_value<unsigned>(0, UINT32_MAX)->value_name("SECTORS"),
         "format: align the data to SECTORS (default: 2048, 1 MiB)")
        ("header-backup-file", po::value<std::string>()->value_name("FILE"), "header-backup/-restore: the backup file")
        ("uuid", po::value<std::string>()->value_name("UUID"), "format: this UUID (default: random); uuid: set it")
        ("verify-passphrase,y", po::bool_switch(), "format: ask for the passphrase twice (always on a terminal)");
    add_progress_options(cl.options);
    add_action_arguments(cl, {{"format", "create a container, as cryptsetup luksFormat (--type luks1)"},
                              {"dump", "print the header as cryptsetup luksDump does"},
                              {"uuid", "print the UUID, as cryptsetup luksUUID"},
                              {"is-luks", "exit 0 for a LUKS container, 1 otherwise (cryptsetup isLuks)"},
                              {"test-passphrase", "check a passphrase (cryptsetup open --test-passphrase)"},
                              {"decrypt", "write the plaintext of the data segment of IMAGE to OUT"},
                              {"encrypt", "write the plain image IN into the data segment of IMAGE"},
                              {"add-key", "add a passphrase in a new keyslot (cryptsetup luksAddKey)"},
                              {"change-key", "move a passphrase's volume key under a new one (cryptsetup luksChangeKey)"},
                              {"remove-key", "remove the keyslot a passphrase opens (cryptsetup luksRemoveKey)"},
                              {"kill-slot", "remove keyslot SLOT (cryptsetup luksKillSlot)"},
                              {"erase", "remove every keyslot (cryptsetup luksErase)"},
                              {"header-backup", "save the header and keyslots (cryptsetup luksHeaderBackup)"},
                              {"header-restore", "write a saved header back (cryptsetup luksHeaderRestore)"}});
    only_for(cl, {"format", "dump", "test-passphrase", "decrypt", "encrypt", "add-key", "change-key", "remove-key",
                  "kill-slot"},
             {"key-file", "keyfile-offset", "keyfile-size"});
    only_for(cl, {"format", "dump", "test-passphrase", "decrypt", "encrypt", "add-key", "change-key", "remove-key"},
             {"key-slot"});
    only_for(cl, {"dump"}, {"dump-volume-key"});
    only_for(cl, {"dump", "format", "remove-key", "kill-slot", "uuid", "header-restore", "erase"}, {"batch-mode"});
    only_for(cl, {"header-backup", "header-restore"}, {"header-backup-file"});
    only_for(cl, {"test-passphrase", "add-key", "change-key", "remove-key"}, {"verbose"});
    only_for(cl, {"add-key", "change-key"}, {"iter-time", "pbkdf-force-iterations"});
    only_for(cl, {"decrypt"}, {"in-place"});
    only_for(cl, {"decrypt", "encrypt"}, {"threads"});
    only_for(cl, {"decrypt", "encrypt"}, progress_option_names());
    only_for(cl, {"format"}, {"type", "cipher", "key-size", "hash", "pbkdf", "iter-time", "pbkdf-force-iterations",
                              "offset", "align-payload", "verify-passphrase"});
    only_for(cl, {"format", "test-passphrase", "decrypt", "encrypt", "add-key"}, {"volume-key-file"});
    only_for(cl, {"format", "uuid"}, {"uuid"});
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;
    const auto [action, files] = action_arguments(*vm);
    if (action == "format") return run_format(*vm, files);
    if (action == "add-key") return run_add_key(*vm, files);
    if (action == "remove-key") return run_remove_key(*vm, files);
    if (action == "change-key") return run_change_key(*vm, files);
    if (action == "erase") return run_erase(*vm, files);
    if (action == "header-backup") return run_header_backup(*vm, files);
    if (action == "header-restore") return run_header_restore(*vm, files);
    if (action == "kill-slot") return run_kill_slot(*vm, files);
    if (action == "encrypt") return run_encrypt(*vm, files);
    if (action == "dump") return run_dump(*vm, files);
    if (action == "uuid") return vm->count("uuid") ? run_set_uuid(*vm, files) : run_uuid(*vm, files);
    if (action == "is-luks") return run_is_luks(*vm, files);
    if (action == "test-passphrase") return run_test_passphrase(*vm, files);
    if (action == "decrypt") return run_decrypt(*vm, files);
    throw UsageError("unknown action '" + action + "': use format, dump, uuid, is-luks, test-passphrase, decrypt, encrypt, add-key, change-key, remove-key, kill-slot, erase, header-backup or header-restore");
}

}  // namespace cli
