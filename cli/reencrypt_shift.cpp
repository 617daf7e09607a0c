// blkcrypt reencrypt --encrypt / --decrypt: encrypting a plain image in
// place (data shift, or a detached header) and removing the encryption.
// --encrypt --reduce-device-size N is cryptsetup 2.6.1's in-place
// encryption (src/utils_reencrypt.c encrypt_luks2_init): the header goes
// where the first N/2 bytes were, the data moves N/2 on; the library's
// reencrypt_shift.hpp writes its metadata, so either tool resumes it.
#include "commands.hpp"
#include "container_common.hpp"
#include "passphrase.hpp"
#include "reencrypt_cli.hpp"

#include <blkcrypt/luks/container.hpp>
#include <blkcrypt/luks/luks2.hpp>
#include <blkcrypt/luks/reencrypt_shift.hpp>

#include <cctype>
#include <csignal>
#include <iostream>
#include <optional>

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cli {

namespace luks = blkcrypt::luks;
namespace luks2 = blkcrypt::luks::luks2;

namespace {

// luksFormat's options as --encrypt takes them for the new header
// (cryptsetup formats it with its luksFormat): cipher, key size, sector
// size (512 unless given, as encrypt_luks2_init sets it), KDF, key slot,
// UUID, label, subsystem, metadata size; the data offset is the shift.
luks::FormatOptions encrypt_format_options(const po::variables_map& vm, uint64_t shift) {
    luks::FormatOptions o;
    if (vm.count("cipher")) o.cipher = vm["cipher"].as<std::string>();
    if (vm.count("key-size")) o.key_bits = vm["key-size"].as<unsigned>();
    if (vm.count("pbkdf")) o.kdf.pbkdf = vm["pbkdf"].as<std::string>();
    if (vm.count("hash")) o.kdf.hash = vm["hash"].as<std::string>();
    for (auto [name, to] : {std::pair{"pbkdf-force-iterations", &o.kdf.iterations}, {"iter-time", &o.kdf.iter_time_ms},
                            {"pbkdf-memory", &o.kdf.memory_kib}, {"pbkdf-parallel", &o.kdf.parallel}})
        if (vm.count(name)) *to = vm[name].as<unsigned>();
    if (vm.count("key-slot")) o.keyslot = static_cast<int>(vm["key-slot"].as<unsigned>());
    if (vm.count("uuid")) {
        std::string uuid = vm["uuid"].as<std::string>();
        if (!luks::valid_uuid(uuid)) throw UsageError("Wrong LUKS UUID format provided.");
        for (char& c : uuid) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        o.uuid = uuid;
    }
    o.sector_size = vm.count("sector-size") ? vm["sector-size"].as<unsigned>() : 512u;
    if (vm.count("label")) o.label = vm["label"].as<std::string>();
    if (vm.count("subsystem")) o.subsystem = vm["subsystem"].as<std::string>();
    if (vm.count("luks2-metadata-size")) o.metadata_size = vm["luks2-metadata-size"].as<uint64_t>();
    o.offset = shift / 512;
    return o;
}

// --volume-key-file for the new header: the key, of the format's size.
blkcrypt::SecureBuffer encrypt_volume_key(const po::variables_map& vm, const luks2::FormatOptions& f) {
    if (!vm.count("volume-key-file")) return {};
    return read_key_input(vm["volume-key-file"].as<std::string>(), 0, f.key_size, false);
}

// --device-size of --encrypt --header, checked before anything is written:
// only the first BYTES of IMAGE are encrypted, the header then declares all
// of it encrypted (cryptsetup's meaning: the plaintext beyond is lost).
void check_encrypt_device_size(const ReencryptRequest& rq, uint32_t sector_size, uint64_t data_offset) {
    const uint64_t want = rq.vm["device-size"].as<uint64_t>();
    if (want % 512) throw UsageError("Device size must be multiple of 512 bytes sector.");
    auto data = open_container_image(rq.image, false, "IMAGE");
    if (data->size() < data_offset || want > data->size() - data_offset)
        throw Failure("Reduced data size is larger than real device size.");
    if (want % sector_size)
        throw Failure("Data device is not aligned to encryption sector size (" + std::to_string(sector_size) +
                      " bytes).");
}

// A header that already says "encrypt": resumed as cryptsetup resumes it
// (its --encrypt then only checks the mode).
bool resume_if_marked(const ReencryptRequest& rq) {
    auto store = blkcrypt::open_file_store(rq.header_path, false);
    if (!store) throw Failure(store.error().message);
    auto v = luks::detect(**store);
    if (!v) return false;
    if (*v != luks::Version::Luks2) throw Failure("Device " + rq.header_path + " is already a LUKS1 device.");
    auto h = luks2::read_header(registry(), **store);
    if (!h) throw Failure(h.error().message);
    auto st = luks2::reencrypt_state(h->md);
    if (!st) throw Failure(st.error().message);
    if (!*st) throw Failure("Device " + rq.header_path + " is already a LUKS2 device (not in reencryption); nothing to encrypt.");
    if ((*st)->mode != "encrypt") throw Failure("Device is not in LUKS2 encryption. Conflicting option --encrypt.");
    if ((*st)->crashed) throw Failure("Device requires reencryption recovery. Run repair first.");
    if (rq.init_only) throw Failure("LUKS2 reencryption already initialized. Aborting operation.");
    store->reset();
    const blkcrypt::SecureBuffer pass = reencrypt_passphrase(rq);
    apply_resume_resilience(rq, pass);
    run_luks2_reencryption(rq, pass);
    return true;
}

// --encrypt --header HDR (cryptsetup's encrypt_luks2_init without a data
// shift): a new detached header, the data encrypted forward in place.
int encrypt_detached(const ReencryptRequest& rq) {
    const auto& vm = rq.vm;
    if (vm.count("reduce-device-size"))
        throw Failure("--reduce-device-size with a detached --header is not supported yet");
    luks2::EncryptDetachedOptions eo;
    if (vm.count("resilience")) eo.resilience = vm["resilience"].as<std::string>();
    if (vm.count("resilience-hash")) eo.hash = vm["resilience-hash"].as<std::string>();
    if (eo.resilience != "checksum" && eo.resilience != "journal" && eo.resilience != "none")
        throw Failure("Requested --resilience option cannot be applied to current reencryption operation.");
    // --offset / --align-payload: the data starts there in IMAGE, as
    // cryptsetup's luksFormat of a detached header places it.
    luks::FormatOptions fo = encrypt_format_options(vm, 0);
    fo.detached = true;
    fo.offset.reset();
    if (vm.count("offset")) fo.offset = vm["offset"].as<uint64_t>();
    if (vm.count("align-payload")) fo.align = vm["align-payload"].as<unsigned>();
    if (vm.count("luks2-keyslots-size")) fo.keyslots_size = vm["luks2-keyslots-size"].as<uint64_t>();
    auto f = luks2::resolve_format(registry(), fo);
    if (!f) {
        if (f.status() == blkcrypt::Status::Invalid) throw UsageError(f.error().message);
        throw Failure(f.error().message);
    }
    eo.format = std::move(*f);
    eo.data_offset = eo.format.data_offset;
    const blkcrypt::SecureBuffer vk = encrypt_volume_key(vm, eo.format);
    eo.format.volume_key = vk.span();
    if (vm.count("device-size")) check_encrypt_device_size(rq, eo.format.sector_size, eo.data_offset);
    const blkcrypt::SecureBuffer pass = reencrypt_passphrase(rq, vm["verify-passphrase"].as<bool>());
    {
        // The header file as cryptsetup makes it: new (0600) unless it
        // exists, grown to hold the header areas if it is a regular file.
        struct stat st {};
        if (::stat(rq.header_path.c_str(), &st) != 0) {
            const int fd = ::open(rq.header_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
            if (fd < 0) throw Failure(errno_message(rq.header_path));
            ::close(fd);
            ::stat(rq.header_path.c_str(), &st);
        }
        const uint64_t need = eo.format.keyslots_size ? 2 * eo.format.metadata_size + eo.format.keyslots_size
                              : eo.data_offset        ? eo.data_offset
                                                      : 16u << 20;
        if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) < need &&
            ::truncate(rq.header_path.c_str(), static_cast<off_t>(need)) != 0)
            throw Failure(errno_message(rq.header_path));
        auto hdr = blkcrypt::open_file_store(rq.header_path, true);
        if (!hdr) throw Failure(hdr.error().message);
        expect(luks2::encrypt_detached_init(registry(), **hdr, pass, eo));
    }
    if (vm["verbose"].as<bool>()) std::cout << "Reencryption initialized.\n";
    if (rq.init_only) return 0;
    return run_luks2_reencryption(rq, pass);
}

// --header NEW must be a header file: an existing one (the detached case)
// a regular file or a block device, never IMAGE itself; and while IMAGE
// holds its own LUKS header, an existing LUKS header in NEW that is not in
// reencryption belongs to something else (cryptsetup would decrypt IMAGE
// with its key): refused, nothing written.
void refuse_other_header(const ReencryptRequest& rq) {
    struct stat hs {}, is {};
    if (::stat(rq.header_path.c_str(), &hs) != 0) throw Failure(errno_message(rq.header_path));
    if (!S_ISREG(hs.st_mode) && !S_ISBLK(hs.st_mode))
        throw Failure("--header " + rq.header_path + " is not a regular file or a block device; nothing was changed");
    if (::stat(rq.image.c_str(), &is) == 0 && is.st_dev == hs.st_dev && is.st_ino == hs.st_ino)
        throw Failure("--header " + rq.header_path + " is IMAGE itself: to decrypt a header inside IMAGE, give --header "
                      "a new file (the header is exported to it); nothing was changed");
    auto image = blkcrypt::open_file_store(rq.image, false);
    if (!image) throw Failure(image.error().message);
    if (!luks::detect(**image)) return;
    auto hdr = blkcrypt::open_file_store(rq.header_path, false);
    if (!hdr) throw Failure(hdr.error().message);
    auto hv = luks::detect(**hdr);
    if (!hv || *hv != luks::Version::Luks2) return;
    auto h = luks2::read_header(registry(), **hdr);
    if (!h) return;
    auto rs = luks2::reencrypt_state(h->md);
    if (rs && *rs) return;
    throw Failure("Device " + rq.image + " holds its own LUKS header, and --header " + rq.header_path +
                  " is another LUKS header, not in reencryption: refusing to decrypt IMAGE with it. To decrypt IMAGE's "
                  "own header, give --header a file that does not exist yet; nothing was changed");
}

// SIGINT, SIGTERM and SIGHUP blocked over the init of a --decrypt --header
// NEW (NEW written, the head copied over IMAGE's header, NEW's metadata):
// one that came meanwhile stops the command after it (take()), with NEW
// whole and resumable, never half written.
class BlockedSignals {
public:
    BlockedSignals() {
        sigemptyset(&set_);
        for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set_, sig);
        ::pthread_sigmask(SIG_BLOCK, &set_, &old_);
    }
    ~BlockedSignals() { ::pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
    BlockedSignals(const BlockedSignals&) = delete;
    BlockedSignals& operator=(const BlockedSignals&) = delete;
    // The signal that came while blocked (consumed), 0 if none.
    int take() {
        const struct timespec now {};
        const int sig = ::sigtimedwait(&set_, nullptr, &now);
        return sig > 0 ? sig : 0;
    }

private:
    sigset_t set_ {}, old_ {};
};

// --decrypt --header NEW, NEW not existing, of an image holding its LUKS2
// header (cryptsetup's decrypt_luks2 exporting the header, then the data
// shifted back to offset 0): NEW is created (0600, never over anything),
// the init writes it and the moved segment, the run decrypts.
int decrypt_shift(const ReencryptRequest& rq) {
    const auto& vm = rq.vm;
    if (rq.resume_only) throw Failure("Device " + rq.header_path + " does not exist or access denied.");
    for (const char* o : {"device-size", "reduce-device-size"})
        if (vm.count(o)) throw Failure(std::string("--") + o + " with --decrypt is not supported yet");
    luks2::DecryptShiftOptions o;
    if (vm.count("resilience")) o.resilience = vm["resilience"].as<std::string>();
    if (vm.count("resilience-hash")) o.hash = vm["resilience-hash"].as<std::string>();
    uint64_t export_size = 0;
    {
        auto image = open_container_image(rq.image, false, "IMAGE");
        auto v = luks::detect(*image);
        if (!v) throw Failure("Device " + rq.image + " is not a valid LUKS device.");
        if (*v != luks::Version::Luks2) throw Failure("LUKS1 decryption in place is not supported; use luks decrypt");
        auto h = luks2::read_header(registry(), *image);
        if (!h) throw Failure(h.error().message);
        if (auto rs = luks2::reencrypt_state(h->md); rs && *rs)
            throw Failure("Device " + rq.image + " is in reencryption already; resume it with its own header");
        export_size = h->md.hdr_and_areas_size();
    }
    const blkcrypt::SecureBuffer pass = reencrypt_passphrase(rq);
    std::optional<BlockedSignals> blocked(std::in_place);
    const int fd = ::open(rq.header_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) throw Failure(errno_message(rq.header_path));
    const bool sized = ::ftruncate(fd, static_cast<off_t>(export_size)) == 0;
    ::close(fd);
    blkcrypt::Result<luks2::ReencryptState> r = blkcrypt::make_error(blkcrypt::Status::IoError, errno_message(rq.header_path));
    if (sized) {
        auto image = open_container_image(rq.image, true, "IMAGE");
        auto hdr = blkcrypt::open_file_store(rq.header_path, true);
        if (!hdr) r = hdr.error();
        else r = luks2::decrypt_shift_init(registry(), *image, **hdr, pass, o);
    }
    if (!r) {
        // NEW goes unless IMAGE lost its header to the moved data: NEW then
        // holds the only copy (it describes the ciphertext from the old
        // data offset on, untouched).
        auto image = blkcrypt::open_file_store(rq.image, false);
        if (image && luks::detect(**image)) {
            ::unlink(rq.header_path.c_str());
            throw Failure(r.error().message + "; nothing was changed");
        }
        throw Failure(r.error().message + "; IMAGE's header is now only in " + rq.header_path + ", keep it");
    }
    const int sig = blocked->take();
    blocked.reset();
    if (vm["verbose"].as<bool>()) std::cout << "Reencryption initialized.\n";
    if (sig)
        throw StatusFailure("Reencryption interrupted after its initialisation (resume with blkcrypt or cryptsetup "
                            "reencrypt --decrypt --resume-only --header " + rq.header_path + ")", 128 + sig);
    if (rq.init_only) return 0;
    return run_luks2_reencryption(rq, pass);
}

}  // namespace

int reencrypt_encrypt(const ReencryptRequest& rq) {
    const auto& vm = rq.vm;
    struct stat st {};
    if (::stat(rq.image.c_str(), &st) != 0)
        throw StatusFailure("Device " + rq.image + " does not exist or access denied.", kExitNoDevice);
    const bool have_header = ::stat(rq.header_path.c_str(), &st) == 0;
    if (have_header && resume_if_marked(rq)) return 0;
    if (rq.resume_only) throw Failure("Device reencryption not in progress.");
    if (vm.count("type") && vm["type"].as<std::string>() == "luks1")
        throw Failure("LUKS1 encryption in place (cryptsetup's legacy path) is not supported; use --type luks2");
    if (rq.detached) return encrypt_detached(rq);
    if (!vm.count("reduce-device-size"))
        throw Failure("Encryption without detached header (--header) is not possible without data device size "
                      "reduction (--reduce-device-size).");
    for (const char* o : {"device-size", "luks2-keyslots-size", "align-payload"})
        if (vm.count(o)) throw Failure(std::string("--") + o + " with --encrypt is not supported yet");
    uint64_t reduce = vm["reduce-device-size"].as<uint64_t>();
    // cryptsetup's --offset against the reduction (encrypt_luks2_init).
    if (vm.count("offset")) {
        const uint64_t off = vm["offset"].as<uint64_t>();
        if (off > reduce / (2 * 512))
            throw Failure("Requested data offset must be less than or equal to half of --reduce-device-size parameter.");
        if (off && off < reduce / (2 * 512)) {
            reduce = off * 2 * 512;
            std::cout << "Adjusting --reduce-device-size value to twice the --offset " << off * 2 << " (sectors).\n";
        }
    }
    if (vm.count("resilience") && vm["resilience"].as<std::string>().rfind("datashift-", 0) == 0)
        throw Failure("Requested --resilience option cannot be applied to current reencryption operation.");

    luks2::EncryptShiftOptions eo;
    eo.reduce_size = reduce;
    auto f = luks2::resolve_format(registry(), encrypt_format_options(vm, reduce / 2));
    if (!f) {
        if (f.status() == blkcrypt::Status::Invalid) throw UsageError(f.error().message);
        throw Failure(f.error().message);
    }
    eo.format = std::move(*f);
    const blkcrypt::SecureBuffer vk = encrypt_volume_key(vm, eo.format);
    eo.format.volume_key = vk.span();
    const blkcrypt::SecureBuffer pass = reencrypt_passphrase(rq, vm["verify-passphrase"].as<bool>());
    {
        auto dev = open_container_image(rq.image, true, "IMAGE");
        expect(luks2::encrypt_shift_init(registry(), *dev, pass, eo));
    }
    if (vm["verbose"].as<bool>()) std::cout << "Reencryption initialized.\n";
    if (rq.init_only) return 0;
    return run_luks2_reencryption(rq, pass);
}

// --decrypt --header HDR (cryptsetup's decrypt_luks2 with a detached
// header): the data decrypted in place, backward; HDR is left holding a
// linear segment and no keyslots, as cryptsetup leaves it.
int reencrypt_decrypt(const ReencryptRequest& rq) {
    const auto& vm = rq.vm;
    if (!rq.detached) throw Failure("LUKS2 decryption requires --header option.");
    struct stat st {};
    if (::lstat(rq.header_path.c_str(), &st) != 0 && errno == ENOENT) return decrypt_shift(rq);
    refuse_other_header(rq);
    for (const std::string& p : {rq.image, rq.header_path})
        if (::stat(p.c_str(), &st) != 0)
            throw StatusFailure("Device " + p + " does not exist or access denied.", kExitNoDevice);
    for (const char* o : {"device-size", "reduce-device-size"})
        if (vm.count(o)) throw Failure(std::string("--") + o + " with --decrypt is not supported yet");
    {
        auto store = blkcrypt::open_file_store(rq.header_path, false);
        if (!store) throw Failure(store.error().message);
        auto v = luks::detect(**store);
        if (!v) throw Failure("Device " + rq.header_path + " is not a valid LUKS device.");
        if (*v != luks::Version::Luks2) throw Failure("LUKS1 decryption in place is not supported; use luks decrypt");
        auto h = luks2::read_header(registry(), **store);
        if (!h) throw Failure(h.error().message);
        auto rs = luks2::reencrypt_state(h->md);
        if (!rs) throw Failure(rs.error().message);
        if (*rs) {
            if ((*rs)->mode != "decrypt") throw Failure("Device is not in LUKS2 decryption. Conflicting option --decrypt.");
            if ((*rs)->crashed) throw Failure("Device requires reencryption recovery. Run repair first.");
            if (rq.init_only) throw Failure("LUKS2 reencryption already initialized. Aborting operation.");
            store->reset();
            const blkcrypt::SecureBuffer pass = reencrypt_passphrase(rq);
            return run_luks2_reencryption(rq, pass);
        }
    }
    if (rq.resume_only) throw Failure("Device reencryption not in progress.");
    luks2::DecryptDetachedOptions o;
    if (vm.count("resilience")) o.resilience = vm["resilience"].as<std::string>();
    if (vm.count("resilience-hash")) o.hash = vm["resilience-hash"].as<std::string>();
    if (o.resilience != "checksum" && o.resilience != "journal" && o.resilience != "none")
        throw Failure("Requested --resilience option cannot be applied to current reencryption operation.");
    const blkcrypt::SecureBuffer pass = reencrypt_passphrase(rq);
    {
        auto hdr = blkcrypt::open_file_store(rq.header_path, true);
        if (!hdr) throw Failure(hdr.error().message);
        expect(luks2::decrypt_detached_init(registry(), **hdr, pass, o));
    }
    if (vm["verbose"].as<bool>()) std::cout << "Reencryption initialized.\n";
    if (rq.init_only) return 0;
    return run_luks2_reencryption(rq, pass);
}

}  // namespace cli
