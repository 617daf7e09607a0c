// blkcrypt reencrypt IMAGE and blkcrypt repair IMAGE (also `luks reencrypt`,
// `luks repair`): cryptsetup 2.6.1's reencrypt and repair actions on image
// files, offline, without root or device-mapper. The options are
// cryptsetup's (src/cryptsetup_arg_list.h, src/utils_reencrypt.c): every
// name it accepts with reencrypt is accepted here, those that mean nothing
// offline as no-ops. The metadata and the data are moved by the library
// (luks/reencrypt.hpp, reencrypt_luks1.hpp), so either tool resumes what
// the other started. --encrypt and --decrypt are reencrypt_shift.cpp's.
#include "commands.hpp"
#include "container_common.hpp"
#include "cryptsetup_options.hpp"
#include "luks_options.hpp"
#include "number_option.hpp"
#include "passphrase.hpp"
#include "progress.hpp"
#include "reencrypt_cli.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/luks/container.hpp>
#include <blkcrypt/luks/luks2.hpp>
#include <blkcrypt/luks/reencrypt.hpp>
#include <blkcrypt/luks/reencrypt_luks1.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <iostream>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace cli {

namespace luks = blkcrypt::luks;
namespace luks2 = blkcrypt::luks::luks2;
namespace legacy = blkcrypt::luks::luks1::legacy;

// ---------------------------------------------------------------- locking

void ImageLock::add(const std::string& path, const std::string& role) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT) return;
        throw Failure(errno_message(path));
    }
    // The same file twice (--header IMAGE) is held already: the command
    // then says what is wrong with it, not that it is in use.
    struct stat st {}, held {};
    if (::fstat(fd, &st) == 0)
        for (int h : fds_)
            if (::fstat(h, &held) == 0 && held.st_dev == st.st_dev && held.st_ino == st.st_ino) {
                ::close(fd);
                return;
            }
    fds_.push_back(fd);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK)
            throw Failure(role + " " + path + " is in use by another reencryption or repair (it holds the lock); "
                          "nothing was changed");
        throw Failure(errno_message(path + ": cannot lock"));
    }
}

ImageLock::~ImageLock() {
    for (int fd : fds_) ::close(fd);  // closing releases the flock
}

// ---------------------------------------------------------------- shared

blkcrypt::SecureBuffer reencrypt_passphrase(const ReencryptRequest& rq, bool verify) {
    return read_passphrase(rq.vm, rq.image, verify);
}

namespace {

std::atomic<int> g_stop_signal{0};

extern "C" void on_stop_signal(int sig) { g_stop_signal.store(sig); }

// SIGINT/SIGTERM/SIGHUP stop the run between steps (the header then says
// how far it got, resumable); restored on destruction.
class StopSignals {
public:
    StopSignals() {
        struct sigaction sa {};
        sa.sa_handler = on_stop_signal;
        sigemptyset(&sa.sa_mask);
        for (std::size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], &sa, &old_[i]);
    }
    ~StopSignals() {
        for (std::size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
    }

private:
    static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction old_[3] {};
};

// Whether the file system holding path has no block left for its user: a
// write into a sparse image then failed with ENOSPC (the store's status
// does not carry errno).
bool file_system_full(const std::string& path) {
    struct statvfs fs {};
    return ::statvfs(path.c_str(), &fs) == 0 && fs.f_bavail == 0;
}

std::shared_ptr<blkcrypt::BackingStore> open_rw(const std::string& path, const std::string& role) {
    return open_container_image(path, true, role);
}

}  // namespace

int run_luks2_reencryption(const ReencryptRequest& rq, const blkcrypt::SecureBuffer& passphrase) {
    // A detached header: the metadata and the resilience area in it, the
    // data in IMAGE.
    auto dev = open_rw(rq.header_path, rq.detached ? "--header" : "IMAGE");
    std::shared_ptr<blkcrypt::BackingStore> data;
    if (rq.detached) data = open_rw(rq.image, "IMAGE");
    std::optional<Progress> progress;
    StopSignals stop;
    luks2::ReencryptRunOptions o;
    o.data = data.get();
    if (rq.vm.count("hotzone-size")) o.hotzone_size = rq.vm["hotzone-size"].as<uint64_t>();
    if (rq.vm.count("device-size")) o.device_size = rq.vm["device-size"].as<uint64_t>();
    o.progress = [&](uint64_t done, uint64_t total) {
        if (!progress) progress.emplace(rq.progress, rq.image, total);
        progress->update(done);
        return g_stop_signal.load() == 0;
    };
    auto r = luks2::reencrypt_run(registry(), *dev, passphrase, o);
    if (!r) {
        progress.reset();
        // A step that failed mid-way (a full disk, an I/O error) left its
        // hotzone marked; say how to go on, in words either tool takes.
        std::string why = r.error().message;
        if (r.status() == blkcrypt::Status::IoError && file_system_full(rq.image))
            why += " (No space left on device: the file system holding " + rq.image + " is full)";
        r = blkcrypt::make_error(r.status(), why);
        auto h = luks2::read_header(registry(), *dev);
        if (h) {
            auto st = luks2::reencrypt_state(h->md);
            // cryptsetup cannot repair an integrity profile's hotzone (it
            // refuses the device), so it is not offered then.
            const bool integ = std::any_of(h->md.segments.begin(), h->md.segments.end(),
                                           [](const auto& e) { return e.second.integrity.has_value(); });
            if (st && *st && (*st)->crashed)
                throw Failure(r.error().message + (integ ? "; nothing is lost: run blkcrypt repair, "
                                                         : "; nothing is lost: run blkcrypt repair (or cryptsetup repair), ") +
                              "then resume with reencrypt --resume-only");
            if (st && *st && r.status() != blkcrypt::Status::NoKey)
                throw Failure(r.error().message + "; the reencryption can be resumed with reencrypt --resume-only");
        }
        expect(std::move(r));
    }
    if (!r->finished) {
        progress.reset();
        const int sig = g_stop_signal.load();
        std::cerr << "blkcrypt: Reencryption interrupted (resume with blkcrypt reencrypt --resume-only or "
                     "cryptsetup reencrypt --resume-only).\n";
        throw StatusFailure("stopped by signal " + std::to_string(sig), 128 + sig);
    }
    if (progress) progress->finish();
    return 0;
}

void apply_resume_resilience(const ReencryptRequest& rq, const blkcrypt::SecureBuffer& passphrase) {
    if (!rq.vm.count("resilience")) return;
    auto header = open_rw(rq.header_path, rq.detached ? "--header" : "IMAGE");
    const std::string hash = rq.vm.count("resilience-hash") ? rq.vm["resilience-hash"].as<std::string>() : "";
    expect(luks2::reencrypt_set_resilience(registry(), *header, passphrase, rq.vm["resilience"].as<std::string>(), hash));
}

namespace {

// ---------------------------------------------------------------- options

// What reencrypt and repair share: -q, --tries, --progress, the IMAGE
// operand, and cryptsetup's common options.
void add_image_options(CommandLine& cl) {
    add_batch_mode_option(cl.options);
    add_tries_option(cl.options);
    add_progress_options(cl.options);
    cl.hidden.add_options()("image", po::value<std::vector<std::string>>(), "IMAGE");
    cl.positional.add("image", -1);
    add_cryptsetup_options(cl, "luks");
}

// cryptsetup 2.6.1's reencrypt options, with their meaning here.
void add_reencrypt_options(CommandLine& cl) {
    cl.options.add_options()
        // What to do.
        ("encrypt", po::bool_switch(), "encrypt a plain IMAGE in place as LUKS2: the header in its first --reduce-device-size/2 bytes (the data "
         "moved), or in a detached --header FILE; with --type luks1 as cryptsetup's legacy tool (the header in the "
         "first --reduce-device-size bytes)")
        ("new,N", po::bool_switch(), "cryptsetup's name for --encrypt")
        ("decrypt", po::bool_switch(), "decrypt IMAGE in place (LUKS2): with a detached --header FILE, or with --header NEW (a file that does not exist "
         "yet) for a header inside IMAGE: the header is exported to NEW and the data shifted back to offset 0; LUKS1 in place, the data "
         "moved back to offset 0")
        ("init-only", po::bool_switch(), "LUKS2: write the reencryption metadata only; resume it later")
        ("resume-only", po::bool_switch(), "LUKS2: resume a reencryption already initialised (by either tool)")
        // The new data segment.
        ("cipher,c", po::value<std::string>()->value_name("SPEC"), "the new cipher (default: the current one)")
        ("key-size,s", number_value<unsigned>(8, 4096)->value_name("BITS"),
         "the new volume key size (default: the current one; with a new cipher its default)")
        ("sector-size", number_value<unsigned>(512, 4096)->value_name("BYTES"),
         "LUKS2: the new encryption sector size (default: the current one)")
        ("keep-key", po::bool_switch(),
         "keep the volume key (LUKS2: and its keyslots; the data rewritten for a new cipher or sector size only; LUKS1: "
         "rewrite only the header and keyslot, e.g. a new --hash or --iter-time, the data untouched)")
        ("volume-key-file", po::value<std::string>()->value_name("FILE"), "the new volume key, from FILE")
        // How.
        ("resilience", po::value<std::string>()->value_name("MODE"),
         "LUKS2 hotzone protection: checksum (default), journal, none; datashift with --reduce-device-size; "
         "datashift-checksum (default) or datashift-journal with --decrypt --header NEW; "
         "with --resume-only, a new one for the rest of the run (not for a data shift)")
        ("resilience-hash", po::value<std::string>()->value_name("HASH"), "checksum resilience: the hash (default: sha256)")
        ("hotzone-size", bytes_value<uint64_t>(512, UINT64_MAX)->value_name("BYTES"),
         "LUKS2: at most BYTES rewritten per step (default: as much as the resilience area covers)")
        ("device-size", bytes_value<uint64_t>(512, UINT64_MAX)->value_name("BYTES"),
         "LUKS2 re-key, --encrypt --header, LUKS1: convert only the first BYTES of the data; as with cryptsetup, the "
         "data beyond is lost (read with the new key)")
        ("reduce-device-size", bytes_value<uint64_t>(512, UINT64_MAX)->value_name("BYTES"),
         "--encrypt: the plaintext ends BYTES before the device's end; the header takes the first BYTES/2 and "
         "the data moves BYTES/2 on (a multiple of 8 KiB); LUKS1 re-key: the data offset grows by BYTES, the "
         "data moves BYTES on and its last BYTES are lost")
        ("offset,o", number_value<uint64_t>(0, UINT64_MAX / 512)->value_name("SECTORS"),
         "--encrypt: the data offset of the new header, 512-byte sectors")
        ("header", po::value<std::string>()->value_name("FILE"),
         "the LUKS header is in FILE (detached), not IMAGE; --decrypt with a FILE that does not exist: IMAGE's own header "
         "is exported to it")
        ("type,M", po::value<std::string>()->value_name("luks|luks1|luks2"),
         "the LUKS version IMAGE must have (--encrypt: the one made; default luks2)")
        // The passphrase.
        ("key-file,d", po::value<std::string>()->value_name("FILE"), "read the passphrase from FILE ('-': all of stdin)")
        ("keyfile-offset", number_value<uint64_t>(0, UINT64_MAX)->value_name("BYTES"), "skip BYTES of the key file")
        ("keyfile-size,l", number_value<uint64_t>(1, kMaxKeyFileSize)->value_name("BYTES"),
         "read exactly BYTES of the key file")
        ("passphrase-file", po::value<std::string>()->value_name("FILE"), "the passphrase: the first line of FILE")
        ("key-slot,S", number_value<unsigned>(0, 31)->value_name("N"),
         "the keyslot to unlock and carry over (the others are removed at the end, as cryptsetup does)")
        ("verify-passphrase,y", po::bool_switch(), "--encrypt: ask for the new passphrase twice")
        ("timeout", number_value<unsigned>(0, UINT32_MAX)->value_name("SECONDS"), "no effect: the prompt waits")
        // The new keyslots' KDF (default: the old keyslot's, not benchmarked, as cryptsetup).
        ("pbkdf", po::value<std::string>()->value_name("pbkdf2|argon2i|argon2id"), "the new keyslot's KDF")
        ("hash,h", po::value<std::string>()->value_name("HASH"), "the new keyslot's PBKDF2 hash (LUKS1: the header's hash)")
        ("iter-time,i", number_value<unsigned>(1, 3600000)->value_name("MS"), "the new keyslot's KDF time to aim for")
        ("pbkdf-force-iterations", number_value<unsigned>(1, UINT32_MAX)->value_name("N"),
         "N iterations (Argon2: passes) for the new keyslot, no benchmark")
        ("pbkdf-memory", number_value<unsigned>(32, 4194304)->value_name("KIB"), "the new keyslot's Argon2 memory cost")
        ("pbkdf-parallel", number_value<unsigned>(1, 4)->value_name("N"), "the new keyslot's Argon2 threads")
        ("keyslot-cipher", po::value<std::string>()->value_name("SPEC"),
         "the new keyslot's area cipher (with --keyslot-key-size)")
        ("keyslot-key-size", number_value<unsigned>(8, 4096)->value_name("BITS"),
         "the new keyslot's area key size (with --keyslot-cipher)")
        // --encrypt's new header.
        ("uuid", po::value<std::string>()->value_name("UUID"), "--encrypt: the new header's UUID; LUKS1 --decrypt: resume the "
         "decryption of UUID")
        ("label", po::value<std::string>()->value_name("LABEL"), "--encrypt: the new LUKS2 label")
        ("subsystem", po::value<std::string>()->value_name("NAME"), "--encrypt: the new LUKS2 subsystem")
        ("luks2-metadata-size", bytes_value<uint64_t>(16384, 4194304)->value_name("BYTES"),
         "--encrypt: each LUKS2 header copy")
        ("luks2-keyslots-size", bytes_value<uint64_t>(4096, 128u << 20)->value_name("BYTES"),
         "--encrypt --header: the LUKS2 keyslots area")
        ("align-payload", number_value<unsigned>(0, UINT32_MAX)->value_name("SECTORS"),
         "--encrypt --header: the data starts at SECTORS in IMAGE (as --offset)")
        ("integrity,I", po::value<std::string>()->value_name("ALG"),
         "refused: a reencryption keeps the device's integrity profile (a device with one is re-keyed, its tags "
         "rewritten)")
        ("integrity-no-wipe", po::bool_switch(), "no effect: no integrity profile is made")
        ("veracrypt-query-pim", po::bool_switch(), "no effect: LUKS only")
        ("use-random", po::bool_switch(), "no effect: new keys come from getrandom(2)")
        ("use-urandom", po::bool_switch(), "no effect: new keys come from getrandom(2)")
        // LUKS1 (cryptsetup's legacy path).
        ("block-size,B", number_value<unsigned>(1, 64)->value_name("MIB"), "LUKS1: MiB rewritten per step (default: 4)")
        ("use-directio", po::bool_switch(), "no effect: every step is flushed (fdatasync) before the next")
        ("use-fsync", po::bool_switch(), "no effect: every step is flushed (fdatasync) before the next")
        ("write-log", po::bool_switch(), "no effect: LUKS1's log is rewritten after every block")
        // Online reencryption and locks.
        ("active-name", po::value<std::string>()->value_name("NAME"),
         "refused: no online reencryption through device-mapper here (IMAGE is reencrypted offline)")
        ("force-offline-reencrypt", po::bool_switch(), "no effect: always offline, never asks")
        ("disable-locks", po::bool_switch(),
         "no effect on blkcrypt's own lock (an flock on IMAGE, no root needed); cryptsetup's lock is not taken")
        ("readonly,r", po::bool_switch(), "no effect: reencryption writes IMAGE")
        ("verbose,v", po::bool_switch(), "say what is done");
    add_image_options(cl);
}

void add_repair_options(CommandLine& cl) {
    cl.options.add_options()
        ("header", po::value<std::string>()->value_name("FILE"), "the LUKS header is in FILE (detached), not IMAGE")
        ("key-file,d", po::value<std::string>()->value_name("FILE"), "read the passphrase from FILE ('-': all of stdin)")
        ("keyfile-offset", number_value<uint64_t>(0, UINT64_MAX)->value_name("BYTES"), "skip BYTES of the key file")
        ("keyfile-size,l", number_value<uint64_t>(1, kMaxKeyFileSize)->value_name("BYTES"),
         "read exactly BYTES of the key file")
        ("passphrase-file", po::value<std::string>()->value_name("FILE"), "the passphrase: the first line of FILE")
        ("type,M", po::value<std::string>()->value_name("luks|luks1|luks2"), "the LUKS version IMAGE must have")
        ("resilience", po::value<std::string>()->value_name("MODE"), "no effect: the header names the resilience")
        ("resilience-hash", po::value<std::string>()->value_name("HASH"), "no effect: the header names the hash")
        ("disable-locks", po::bool_switch(),
         "no effect on blkcrypt's own lock (an flock on IMAGE); cryptsetup's lock is not taken")
        ("verbose,v", po::bool_switch(), "say what is done");
    add_image_options(cl);
}

std::string the_image(const po::variables_map& vm) {
    if (!vm.count("image") || vm["image"].as<std::vector<std::string>>().empty())
        throw UsageError("Command requires device as argument.");
    const auto& files = vm["image"].as<std::vector<std::string>>();
    if (files.size() != 1) throw UsageError("give exactly one IMAGE");
    if (files[0] == "-") throw UsageError("IMAGE cannot be stdin: it is rewritten in place");
    return files[0];
}

// The checks cryptsetup makes on the command line alone (exit 1 in its words
// where it has them, a usage error for ours).
void check_reencrypt_options(const po::variables_map& vm) {
    if (vm["encrypt"].as<bool>() && vm["decrypt"].as<bool>())
        throw UsageError("--encrypt and --decrypt exclude each other");
    if (vm["init-only"].as<bool>() && vm["resume-only"].as<bool>())
        throw UsageError("--init-only and --resume-only exclude each other");
    if (vm.count("key-file") && vm.count("passphrase-file"))
        throw UsageError("--key-file and --passphrase-file exclude each other");
    if (vm.count("keyslot-cipher") != vm.count("keyslot-key-size"))
        throw Failure("Options --keyslot-cipher and --keyslot-key-size must be used together.");
    if (vm.count("active-name"))
        throw UsageError("--active-name: blkcrypt reencrypts the image offline; there is no device-mapper device "
                         "to reencrypt online (deactivate it and run on the image)");
    if (vm.count("integrity"))
        throw Failure("--integrity: a reencryption keeps the device's integrity profile; it cannot add or change one");
    if (vm.count("resilience")) {
        const std::string r = vm["resilience"].as<std::string>();
        if (r != "checksum" && r != "journal" && r != "none" && r != "datashift" && r != "datashift-checksum" &&
            r != "datashift-journal")
            throw Failure("Unsupported resilience mode " + r);
    }
    if (vm.count("type")) {
        const std::string t = vm["type"].as<std::string>();
        if (t != "luks" && t != "luks1" && t != "luks2") throw UsageError("--type must be luks, luks1 or luks2");
    }
}

// ---------------------------------------------------------------- re-key

// cryptsetup's status 4 and words for a header device that is not there.
void check_device_exists_or_fail(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        throw StatusFailure("Device " + path + " does not exist or access denied.", kExitNoDevice);
}

// What the header device holds.
enum class Kind { Luks1, Luks1Unusable, Luks2, Luks2Reencrypt, NotLuks };

Kind kind_of(blkcrypt::BackingStore& store) {
    if (auto u = legacy::unusable_uuid(store); u && *u) return Kind::Luks1Unusable;
    auto v = luks::detect(store);
    if (!v) {
        if (v.status() == blkcrypt::Status::IoError) throw Failure(v.error().message);
        return Kind::NotLuks;
    }
    if (*v == luks::Version::Luks1) return Kind::Luks1;
    auto h = luks2::read_header(registry(), store);
    if (!h) throw Failure(h.error().message);
    auto st = luks2::reencrypt_state(h->md);
    if (!st) throw Failure(st.error().message);
    return *st ? Kind::Luks2Reencrypt : Kind::Luks2;
}

void check_type(const po::variables_map& vm, Kind k, const std::string& dev) {
    if (!vm.count("type")) return;
    const std::string t = vm["type"].as<std::string>();
    if (t == "luks2" && k == Kind::Luks1) throw Failure("Conflicting versions. Device " + dev + " is LUKS1.");
    if (t == "luks2" && k == Kind::Luks1Unusable)
        throw Failure("Conflicting versions. Device " + dev + " is in LUKS1 reencryption.");
    if (t == "luks1" && k == Kind::Luks2) throw Failure("Conflicting versions. Device " + dev + " is LUKS2.");
    if (t == "luks1" && k == Kind::Luks2Reencrypt)
        throw Failure("Conflicting versions. Device " + dev + " is in LUKS2 reencryption.");
}

// The header's metadata, read for the checks made before any passphrase.
luks2::Header luks2_header(const std::string& path, const std::string& role) {
    auto store = open_container_image(path, false, role);
    auto h = luks2::read_header(registry(), *store);
    if (!h) throw Failure(h.error().message);
    return std::move(*h);
}

// The keyslots that open the data segment (bound to its digest).
std::vector<int> active_keyslots(const luks2::Metadata& md) {
    std::vector<int> out;
    for (const auto& [id, ks] : md.keyslots) {
        if (ks.type != "luks2") continue;
        for (const auto& [did, d] : md.digests)
            if (std::count(d.keyslots.begin(), d.keyslots.end(), id) && std::count(d.segments.begin(), d.segments.end(), 0))
                out.push_back(id);
    }
    return out;
}

// The new keyslot's KDF: as asked, else the unlocked keyslot's own costs,
// not benchmarked (cryptsetup's set_keyslot_params).
luks::KeyslotOptions new_keyslot_kdf(const po::variables_map& vm, const luks2::Keyslot& old) {
    if (kdf_given(vm)) {
        auto k = luks::keyslot_options(luks::Version::Luks2, kdf_request(vm));
        if (!k) {
            if (k.status() == blkcrypt::Status::Invalid) throw UsageError(k.error().message);
            throw Failure(k.error().message);
        }
        return *k;
    }
    luks::KeyslotOptions k;
    k.pbkdf = old.kdf.type == "argon2" ? "argon2i" : old.kdf.type;
    if (k.pbkdf == "pbkdf2") {
        k.hash = old.kdf.hash;
        k.iterations = old.kdf.iterations;
    } else {
        k.iterations = old.kdf.time;
        k.memory_kib = old.kdf.memory;
        k.parallel = old.kdf.cpus;
    }
    return k;
}

// --keep-key (LUKS2): what cryptsetup 2.6.1 refuses, in its words, and
// what it would run for nothing (a --key-size the kept key does not have:
// cryptsetup then rewrites every sector with the same key and cipher).
void check_keep_key(const po::variables_map& vm, const luks2::ReencryptInitOptions& o, const luks2::Metadata& md) {
    if (vm.count("volume-key-file")) throw UsageError("--keep-key and --volume-key-file exclude each other");
    const auto seg = md.segments.find(0);
    if (seg == md.segments.end()) return;  // reencrypt_init names what is wrong
    const auto ks = active_keyslots(md);
    if (o.key_size && !ks.empty() && o.key_size != md.keyslots.at(ks.front()).key_size)
        throw Failure("--keep-key keeps the " + std::to_string(md.keyslots.at(ks.front()).key_size * 8) +
                      "-bit volume key: --key-size cannot change it");
    if ((o.cipher.empty() || o.cipher == seg->second.encryption) &&
        (!o.sector_size || o.sector_size == seg->second.sector_size))
        throw Failure("No data segment parameters changed. Reencryption aborted.");
}

// --device-size at the start of a re-key, as cryptsetup checks it before it
// writes anything: within the data, a multiple of the sector sizes.
void check_device_size(const ReencryptRequest& rq, const luks2::Metadata& md, uint32_t new_sector) {
    const uint64_t want = rq.vm["device-size"].as<uint64_t>();
    if (want % 512) throw UsageError("Device size must be multiple of 512 bytes sector.");
    const auto seg = md.segments.find(0);
    if (seg == md.segments.end()) return;
    if (seg->second.integrity)
        throw Failure("--device-size cannot be used with an integrity profile (its dm-integrity device has one size)");
    uint64_t have = 0;
    if (seg->second.size) {
        have = *seg->second.size;
    } else {
        auto data = open_container_image(rq.image, false, "IMAGE");
        have = data->size() > seg->second.offset ? data->size() - seg->second.offset : 0;
    }
    if (want > have) throw Failure("Reduced data size is larger than real device size.");
    const uint32_t align = std::max(seg->second.sector_size, new_sector);
    if (want % align)
        throw Failure("Data device is not aligned to encryption sector size (" + std::to_string(align) + " bytes).");
}

int rekey_luks2(const ReencryptRequest& rq) {
    const auto& vm = rq.vm;
    const std::string role = rq.detached ? "--header" : "IMAGE";
    luks2::ReencryptInitOptions o;
    if (vm.count("resilience")) o.resilience = vm["resilience"].as<std::string>();
    if (o.resilience == "datashift" || o.resilience.rfind("datashift-", 0) == 0 || vm.count("reduce-device-size"))
        throw Failure("reencrypt with a data shift (--reduce-device-size, --resilience datashift) is not supported yet");
    o.keep_key = vm["keep-key"].as<bool>();
    if (vm.count("resilience-hash")) o.hash = vm["resilience-hash"].as<std::string>();
    if (vm.count("cipher")) o.cipher = vm["cipher"].as<std::string>();
    if (vm.count("key-size")) {
        if (vm["key-size"].as<unsigned>() % 8) throw UsageError("--key-size must be a multiple of 8 bits");
        o.key_size = vm["key-size"].as<unsigned>() / 8;
    }
    if (vm.count("sector-size")) o.sector_size = vm["sector-size"].as<unsigned>();
    if (o.keep_key) {
        check_keep_key(vm, o, luks2_header(rq.header_path, role).md);
        o.key_size = 0;
    }

    // What cryptsetup refuses before it asks for anything.
    const luks2::Header h = luks2_header(rq.header_path, role);
    // An integrity profile (cryptsetup 2.6.1 refuses these): the hotzone is
    // journaled by default, data and tags, since checksums cannot recover a
    // block torn between the two; -s is the cipher's part of the key, as
    // luksFormat --integrity takes it, the integrity key added after it.
    if (auto seg = h.md.segments.find(0); seg != h.md.segments.end() && seg->second.integrity) {
        if (!vm.count("resilience")) o.resilience = "journal";
        if (o.key_size) {
            auto p = luks::integrity_profile(o.cipher.empty() ? seg->second.encryption : o.cipher,
                                             seg->second.integrity->type);
            if (!p) throw Failure(p.error().message);
            o.key_size += seg->second.integrity->key_size.value_or(p->key_size);
        }
    }
    if (auto r = luks2::check_requirements(h.md); !r) throw Failure(r.error().message);
    const std::vector<int> active = active_keyslots(h.md);
    const int slot = vm.count("key-slot") ? static_cast<int>(vm["key-slot"].as<unsigned>()) : -1;
    if (slot >= 0 && std::find(active.begin(), active.end(), slot) == active.end())
        throw Failure("Keyslot " + std::to_string(slot) + " is not active.");
    if (vm.count("device-size")) check_device_size(rq, h.md, o.sector_size);
    // --keep-key keeps every keyslot: any one of them unlocks.
    if (slot < 0 && active.size() > 1 && !o.keep_key)
        throw Failure(std::string(vm.count("key-file") ? "Key file can be used only with --key-slot or with exactly one key slot active."
                                                     : "More than one keyslot is active: give --key-slot N (blkcrypt "
                                                       "carries one passphrase over; the other keyslots are removed at the end).")
                      );
    blkcrypt::SecureBuffer new_key;
    if (vm.count("volume-key-file")) {
        const std::size_t bytes = o.key_size ? o.key_size : h.md.keyslots.at(active.front()).key_size;
        new_key = read_key_input(vm["volume-key-file"].as<std::string>(), 0, bytes, false);
        o.new_key = new_key.span();
    }

    auto header = open_rw(rq.header_path, role);
    const blkcrypt::SecureBuffer pass = [&] {
        return unlock_with_tries<blkcrypt::SecureBuffer>(vm, rq.image, [&](const blkcrypt::SecureBuffer& p)
                                                                      -> blkcrypt::Result<blkcrypt::SecureBuffer> {
            luks::OpenOptions oo{.keyslot = slot};
            auto v = luks2::open(registry(), *header, p, oo);
            if (!v) return v.error();
            if (!o.keep_key) o.keyslot = new_keyslot_kdf(vm, h.md.keyslots.at(v->keyslot));
            if (vm.count("volume-key-file") && std::ranges::equal(v->table.key.span(), o.new_key))
                return blkcrypt::make_error(blkcrypt::Status::Invalid,
                                            "No data segment parameters changed. Reencryption aborted.");
            blkcrypt::SecureBuffer copy(p.size());
            copy.assign(p.span());
            return copy;
        });
    }();
    expect(luks2::reencrypt_init(registry(), *header, pass, o));
    header.reset();
    if (vm["verbose"].as<bool>()) std::cout << "Reencryption initialized.\n";
    if (rq.init_only) return 0;
    return run_luks2_reencryption(rq, pass);
}

// A decryption whose data is all plaintext (every live segment linear):
// only the finish's metadata is left to write, and it needs no key (the old
// keyslots may be gone, or listed with their areas already wiped, when
// cryptsetup was killed in its finish).
bool decryption_done_keyless(const luks2::Metadata& md, const luks2::ReencryptState& st) {
    if (st.mode != "decrypt" || st.direction != "backward" || st.seg_moved >= 0 || st.crashed) return false;
    for (const auto& [id, seg] : md.segments)
        if (seg.flags.empty() && seg.type != "linear") return false;
    return true;
}

int resume_luks2(const ReencryptRequest& rq) {
    if (rq.init_only) throw Failure("LUKS2 reencryption already initialized. Aborting operation.");
    const luks2::Header h = luks2_header(rq.header_path, rq.detached ? "--header" : "IMAGE");
    auto st = luks2::reencrypt_state(h.md);
    if (!st) throw Failure(st.error().message);
    if ((*st)->crashed) throw Failure("Device requires reencryption recovery. Run repair first.");
    if ((*st)->repair_needed) throw Failure("Reencryption metadata is invalid; run repair first.");
    if (rq.vm["encrypt"].as<bool>() && (*st)->mode != "encrypt")
        throw Failure("Device is not in LUKS2 encryption. Conflicting option --encrypt.");
    if (rq.vm["decrypt"].as<bool>() && (*st)->mode != "decrypt")
        throw Failure("Device is not in LUKS2 decryption. Conflicting option --decrypt.");
    if (!rq.vm["batch-mode"].as<bool>() && !rq.resume_only)
        yes_dialog(rq.vm, "Device " + rq.header_path +
                              " is already in LUKS2 reencryption. Do you wish to resume previously initialised operation?");
    if (decryption_done_keyless(h.md, **st)) {
        // Killed in the finish of a decryption after the old keyslots were
        // wiped (cryptsetup 2.6.1 leaves this; no key opens it any more):
        // every byte is plaintext, so the finish completes without one.
        auto header = open_rw(rq.header_path, rq.detached ? "--header" : "IMAGE");
        expect(luks2::reencrypt_finish(registry(), *header, h.md, **st));
        return 0;
    }
    const blkcrypt::SecureBuffer pass = reencrypt_passphrase(rq);
    apply_resume_resilience(rq, pass);
    return run_luks2_reencryption(rq, pass);
}

// cryptsetup's LUKS1-only readings of the options: --hash defaults to
// sha256 for the new header ("default hash algorithm is always used"),
// --keep-key rewrites the header and keyslot only, --reduce-device-size
// moves the data offset on (its checks are cryptsetup's).
legacy::ReencryptParams luks1_params(const po::variables_map& vm) {
    legacy::ReencryptParams p;
    p.hash = vm.count("hash") ? vm["hash"].as<std::string>() : "sha256";
    p.keep_key = vm["keep-key"].as<bool>();
    if (vm.count("device-size") && vm["device-size"].as<uint64_t>() % 512)
        throw Failure("Device size must be multiple of 512 bytes sector.");
    if (vm.count("reduce-device-size")) {
        p.reduce_bytes = vm["reduce-device-size"].as<uint64_t>();
        if (p.reduce_bytes % 512) throw Failure("Reduce size must be multiple of 512 bytes sector.");
        if (p.reduce_bytes > (uint64_t{1} << 30)) throw Failure("Maximum device reduce size is 1 GiB.");
    }
    return p;
}

legacy::RunOptions luks1_run_options(const ReencryptRequest& rq, std::optional<Progress>& progress) {
    legacy::RunOptions o;
    if (rq.vm.count("device-size")) {
        o.device_size = rq.vm["device-size"].as<uint64_t>();
        if (o.device_size % 512) throw Failure("Device size must be multiple of 512 bytes sector.");
    }
    o.block_size = static_cast<std::size_t>(rq.vm.count("block-size") ? rq.vm["block-size"].as<unsigned>() : 4u) << 20;
    o.progress = [&progress, &rq](uint64_t done, uint64_t total) {
        if (!progress) progress.emplace(rq.progress, rq.image, total);
        progress->update(done);
        return g_stop_signal.load() == 0;
    };
    return o;
}

// The end of a LUKS1 run: finished, or stopped by a signal (the log says
// how far; rerunning resumes).
int luks1_result(blkcrypt::Result<void> r, std::optional<Progress>& progress) {
    if (!r && r.status() == blkcrypt::Status::Interrupted && g_stop_signal.load()) {
        progress.reset();
        const int sig = g_stop_signal.load();
        std::cerr << "blkcrypt: Reencryption interrupted (run blkcrypt reencrypt again in this directory to resume).\n";
        throw StatusFailure("stopped by signal " + std::to_string(sig), 128 + sig);
    }
    expect(std::move(r));
    if (progress) progress->finish();
    return 0;
}

// The LUKS1 stores: the header (IMAGE, or --header FILE) and, with a
// detached header, the data (IMAGE), as cryptsetup's hdr_device and device.
struct Luks1Stores {
    std::shared_ptr<blkcrypt::BackingStore> header, data;
};
Luks1Stores luks1_stores(const ReencryptRequest& rq) {
    Luks1Stores s;
    s.header = open_rw(rq.header_path, rq.detached ? "--header" : "IMAGE");
    if (rq.detached) s.data = open_rw(rq.image, "IMAGE");
    return s;
}

int rekey_luks1(const ReencryptRequest& rq) {
    const auto& vm = rq.vm;
    if (rq.init_only) throw Failure("--init-only is for LUKS2 reencryption only");
    for (const char* o : {"resilience", "resilience-hash", "hotzone-size", "sector-size", "volume-key-file", "pbkdf",
                          "pbkdf-memory", "pbkdf-parallel"})
        if (vm.count(o)) throw Failure(std::string("--") + o + " is not supported for LUKS1 reencryption");
    legacy::ReencryptParams p = luks1_params(vm);
    if (vm.count("cipher")) p.cipher = vm["cipher"].as<std::string>();
    if (vm.count("key-size")) p.key_bytes = vm["key-size"].as<unsigned>() / 8;
    if (vm.count("iter-time")) p.iter_time_ms = vm["iter-time"].as<unsigned>();
    if (vm.count("pbkdf-force-iterations")) p.force_iterations = vm["pbkdf-force-iterations"].as<unsigned>();
    if (vm.count("key-slot")) p.keyslot = static_cast<int>(vm["key-slot"].as<unsigned>());
    const Luks1Stores st = luks1_stores(rq);
    const blkcrypt::SecureBuffer pass = reencrypt_passphrase(rq);
    StopSignals stop;
    std::optional<Progress> progress;
    legacy::RunOptions ro = luks1_run_options(rq, progress);
    ro.data = st.data.get();
    return luks1_result(legacy::reencrypt(registry(), *st.header, pass, p, ro), progress);
}

// A LUKS1 image marked LUKS\xde\xad: the reencryption its files describe, finished.
int resume_luks1(const ReencryptRequest& rq) {
    if (rq.init_only) throw Failure("--init-only is for LUKS2 reencryption only");
    const Luks1Stores st = luks1_stores(rq);
    const legacy::Leftover lo = expect(legacy::find(registry(), *st.header));
    const blkcrypt::SecureBuffer pass = reencrypt_passphrase(rq);
    StopSignals stop;
    std::optional<Progress> progress;
    legacy::RunOptions ro = luks1_run_options(rq, progress);
    ro.data = st.data.get();
    return luks1_result(legacy::finish(registry(), *st.header, lo, pass, ro), progress);
}

// --encrypt --type luks1 (cryptsetup's legacy encryption): in place with
// --reduce-device-size; an encryption whose LUKS-cafecafe-...log is in the
// working directory is resumed instead, as cryptsetup does.
int encrypt_luks1(const ReencryptRequest& rq) {
    const auto& vm = rq.vm;
    if (rq.detached) throw Failure("LUKS1 encryption with a detached --header is not supported yet");
    if (rq.init_only) throw Failure("--init-only is for LUKS2 reencryption only");
    for (const char* o : {"resilience", "resilience-hash", "hotzone-size", "sector-size", "volume-key-file", "pbkdf",
                          "pbkdf-memory", "pbkdf-parallel", "offset", "align-payload"})
        if (vm.count(o)) throw Failure(std::string("--") + o + " is not supported for LUKS1 encryption");
    auto store = open_rw(rq.image, "IMAGE");
    std::optional<Progress> progress;
    const std::string log = std::string("LUKS-") + legacy::kEncryptUuid + ".log";
    if (::access(log.c_str(), F_OK) == 0) {
        std::cout << "Log file " << log << " exists, resuming encryption.\n";
        const legacy::Leftover lo = expect(legacy::find_unmarked(registry(), legacy::kEncryptUuid));
        const blkcrypt::SecureBuffer pass = reencrypt_passphrase(rq);
        StopSignals stop;
        return luks1_result(legacy::finish(registry(), *store, lo, pass, luks1_run_options(rq, progress)), progress);
    }
    if (rq.resume_only) throw Failure("Device reencryption not in progress.");
    legacy::EncryptParams p;
    if (vm.count("cipher")) p.cipher = vm["cipher"].as<std::string>();
    if (vm.count("key-size")) p.key_bytes = vm["key-size"].as<unsigned>() / 8;
    if (vm.count("hash")) p.hash = vm["hash"].as<std::string>();
    if (vm.count("iter-time")) p.iter_time_ms = vm["iter-time"].as<unsigned>();
    if (vm.count("pbkdf-force-iterations")) p.force_iterations = vm["pbkdf-force-iterations"].as<unsigned>();
    if (vm.count("key-slot")) p.keyslot = vm["key-slot"].as<unsigned>();
    if (p.keyslot > 7) throw Failure("Key slot is invalid.");
    if (vm.count("uuid")) p.uuid = vm["uuid"].as<std::string>();
    if (vm.count("reduce-device-size")) p.reduce_bytes = vm["reduce-device-size"].as<uint64_t>();
    luks1_params(vm);  // cryptsetup's size checks, before the passphrase is asked for
    const blkcrypt::SecureBuffer pass = reencrypt_passphrase(rq, vm["verify-passphrase"].as<bool>());
    StopSignals stop;
    return luks1_result(legacy::encrypt(registry(), *store, pass, p, luks1_run_options(rq, progress)), progress);
}

// --decrypt of a LUKS1 image (cryptsetup's legacy decryption): the data back
// at offset 0 in plaintext, no header left. Resumed from the marked image, or
// past its first block (the mark overwritten) with --uuid, as cryptsetup.
int decrypt_luks1(const ReencryptRequest& rq) {
    const auto& vm = rq.vm;
    if (rq.init_only) throw Failure("--init-only is for LUKS2 reencryption only");
    for (const char* o : {"reduce-device-size", "resilience", "hotzone-size"})
        if (vm.count(o)) throw Failure(std::string("--") + o + " with LUKS1 --decrypt is not supported");
    auto store = open_rw(rq.image, "IMAGE");
    std::optional<Progress> progress;
    const Kind k = kind_of(*store);
    // The run's UUID when its files may be here: --uuid, or the header's
    // (killed between the files and the mark, the header is still whole).
    std::string uuid = vm.count("uuid") ? vm["uuid"].as<std::string>() : "";
    if (uuid.empty() && k == Kind::Luks1)
        if (auto h = luks::luks1::read_header(registry(), *store); h) uuid = h->uuid;
    const bool files = !uuid.empty() && ::access(("LUKS-" + uuid + ".log").c_str(), F_OK) == 0;
    if (k == Kind::Luks1Unusable || files) {
        const legacy::Leftover lo = expect(k == Kind::Luks1Unusable ? legacy::find(registry(), *store)
                                                                    : legacy::find_unmarked(registry(), uuid));
        if (lo.log.mode != legacy::Mode::Decrypt) throw Failure("Device is not in LUKS1 decryption. Conflicting option --decrypt.");
        const blkcrypt::SecureBuffer pass = reencrypt_passphrase(rq);
        StopSignals stop;
        return luks1_result(legacy::finish(registry(), *store, lo, pass, luks1_run_options(rq, progress)), progress);
    }
    if (vm.count("uuid"))
        throw Failure("No decryption in progress, provided UUID can be used only to resume suspended decryption process.");
    if (rq.resume_only) throw Failure("Device reencryption not in progress.");
    legacy::DecryptParams p;
    if (vm.count("key-slot")) p.keyslot = static_cast<int>(vm["key-slot"].as<unsigned>());
    const blkcrypt::SecureBuffer pass = reencrypt_passphrase(rq);
    StopSignals stop;
    return luks1_result(legacy::decrypt(registry(), *store, pass, p, luks1_run_options(rq, progress)), progress);
}

// Whether --decrypt means cryptsetup's LUKS1 legacy decryption: IMAGE holds
// LUKS1 (or its reencryption mark), or --uuid names a decryption under way.
bool luks1_decryption(const ReencryptRequest& rq) {
    if (rq.detached) return false;
    if (rq.vm.count("uuid")) return true;
    auto store = open_container_image(rq.image, false, "IMAGE");
    const Kind k = kind_of(*store);
    return k == Kind::Luks1 || k == Kind::Luks1Unusable;
}

int rekey(const ReencryptRequest& rq) {
    check_device_exists_or_fail(rq.header_path);
    auto store = open_container_image(rq.header_path, false, rq.detached ? "--header" : "IMAGE");
    const Kind k = kind_of(*store);
    store.reset();
    check_type(rq.vm, k, rq.header_path);
    if (rq.resume_only && (k == Kind::Luks1 || k == Kind::Luks2 || k == Kind::NotLuks))
        throw Failure("Device reencryption not in progress.");
    switch (k) {
    case Kind::NotLuks:
        throw Failure("Device " + rq.header_path + " is not a valid LUKS device.");
    case Kind::Luks2:
        return rekey_luks2(rq);
    case Kind::Luks2Reencrypt:
        return resume_luks2(rq);
    case Kind::Luks1:
        return rekey_luks1(rq);
    case Kind::Luks1Unusable:
        return resume_luks1(rq);
    }
    return 1;
}

// ---------------------------------------------------------------- repair

int repair(const po::variables_map& vm, const std::string& image) {
    const bool detached = vm.count("header") > 0;
    const std::string header_path = detached ? vm["header"].as<std::string>() : image;
    const std::string role = detached ? "--header" : "IMAGE";
    check_device_exists_or_fail(header_path);
    auto store = open_container_image(header_path, false, role);
    const Kind k = kind_of(*store);
    store.reset();
    check_type(vm, k, header_path);
    const bool verbose = vm["verbose"].as<bool>();
    ReencryptRequest rq{.vm = vm, .image = image, .header_path = header_path, .detached = detached,
                        .progress = progress_settings(vm)};
    switch (k) {
    case Kind::NotLuks:
        throw Failure("Device " + header_path + " is not a valid LUKS device.");
    case Kind::Luks1:
        if (verbose) std::cout << "No LUKS1 reencryption in progress; nothing to repair.\n";
        return 0;
    case Kind::Luks2: {
        const luks2::Header h = luks2_header(header_path, role);
        if (!h.primary_ok || !h.secondary_ok)
            throw Failure("a LUKS2 header copy is damaged; blkcrypt repair does not rewrite it yet (cryptsetup repair does)");
        if (verbose) std::cout << "No LUKS2 reencryption in progress; nothing to repair.\n";
        return 0;
    }
    case Kind::Luks1Unusable: {
        const Luks1Stores st = luks1_stores(rq);
        auto& rw = st.header;
        const legacy::Leftover lo = expect(legacy::find(registry(), *rw));
        const bool untouched = lo.log.direction == legacy::Direction::Forward ? lo.log.offset == 0 : false;
        if (untouched && lo.log.mode != legacy::Mode::Encrypt) {
            expect(legacy::rollback(registry(), *rw, lo, st.data.get()));
            std::cout << "LUKS1 reencryption had converted no data: the original header is back.\n";
            return 0;
        }
        const blkcrypt::SecureBuffer pass = reencrypt_passphrase(rq);
        StopSignals stop;
        std::optional<Progress> progress;
        legacy::RunOptions ro = luks1_run_options(rq, progress);
        ro.data = st.data.get();
        const int rc = luks1_result(legacy::finish(registry(), *rw, lo, pass, ro), progress);
        std::cout << "LUKS1 reencryption finished.\n";
        return rc;
    }
    case Kind::Luks2Reencrypt:
        break;
    }
    const luks2::Header h = luks2_header(header_path, role);
    auto st = luks2::reencrypt_state(h.md);
    if (!st) throw Failure(st.error().message);
    if ((*st)->repair_needed)
        throw Failure("the reencryption metadata needs its digest rewritten (legacy online-reencrypt or no "
                      "digest): not supported yet, run cryptsetup repair");
    if (!(*st)->crashed) {
        if (verbose) std::cout << "The reencryption in progress needs no recovery.\n";
        return 0;
    }
    auto dev = open_rw(header_path, role);
    std::shared_ptr<blkcrypt::BackingStore> data;
    if (detached) data = open_rw(image, "IMAGE");
    luks2::ReencryptRunOptions o;
    o.recover_only = true;
    o.data = data.get();
    auto r = blkcrypt::Result<luks2::ReencryptRunResult>(blkcrypt::make_error(blkcrypt::Status::NoKey, ""));
    r = retry_passphrase<luks2::ReencryptRunResult>(vm, image, [&](const blkcrypt::SecureBuffer& p) {
        return luks2::reencrypt_run(registry(), *dev, p, o);
    });
    const luks2::ReencryptRunResult res = expect(std::move(r));
    if (verbose && res.finished) std::cout << "The crashed hotzone was the last one: the reencryption is finished.\n";
    else if (verbose && res.recovered) std::cout << "The crashed hotzone was recovered; resume with reencrypt --resume-only.\n";
    return 0;
}

}  // namespace

// ---------------------------------------------------------------- commands

int run_reencrypt(Args args) {
    CommandLine cl{"blkcrypt reencrypt [OPTIONS] IMAGE",
                   "Reencrypt a LUKS image in place, offline and without root, as cryptsetup 2.6.1's\n"
                   "reencrypt action does (its options and its on-disk metadata): a new volume key,\n"
                   "cipher, key size or sector size (re-key); --encrypt a plain image; --decrypt.\n"
                   "LUKS2 reencryption is resumable by blkcrypt or cryptsetup (reencrypt\n"
                   "--resume-only) after an interrupt or a crash (repair first); LUKS1 follows\n"
                   "cryptsetup's legacy protocol (LUKS-<uuid>.log/.org/.new in the working\n"
                   "directory). A second reencrypt or repair of the same image fails at once."};
    add_reencrypt_options(cl);
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;
    check_reencrypt_options(*vm);
    const std::string image = the_image(*vm);
    if ((*vm)["test-args"].as<bool>()) return 0;
    ReencryptRequest rq{.vm = *vm,
                        .image = image,
                        .header_path = vm->count("header") ? (*vm)["header"].as<std::string>() : image,
                        .detached = vm->count("header") > 0,
                        .init_only = (*vm)["init-only"].as<bool>(),
                        .resume_only = (*vm)["resume-only"].as<bool>(),
                        .progress = progress_settings(*vm)};
    if (rq.header_path == "-") throw UsageError("--header cannot be stdin: it is rewritten in place");
    ImageLock lock;
    lock.add(image, "IMAGE");
    if (rq.detached) lock.add(rq.header_path, "--header");
    const bool type1 = vm->count("type") && (*vm)["type"].as<std::string>() == "luks1";
    if (((*vm)["encrypt"].as<bool>() || (*vm)["new"].as<bool>()) && type1) return encrypt_luks1(rq);
    if ((*vm)["decrypt"].as<bool>() && luks1_decryption(rq)) return decrypt_luks1(rq);
    if ((*vm)["encrypt"].as<bool>() || (*vm)["new"].as<bool>()) return reencrypt_encrypt(rq);
    if ((*vm)["decrypt"].as<bool>()) return reencrypt_decrypt(rq);
    return rekey(rq);
}

int run_repair(Args args) {
    CommandLine cl{"blkcrypt repair [OPTIONS] IMAGE",
                   "Recover an interrupted reencryption as cryptsetup repair does: a LUKS2 hotzone\n"
                   "left in-reencryption by a crash (blkcrypt's or cryptsetup's) is recovered from\n"
                   "its checksums or journal, after which either tool resumes it; a LUKS1 image\n"
                   "left as LUKS\\xde\\xad by cryptsetup's legacy reencryption is rolled back, or\n"
                   "finished when data was already converted (LUKS-<uuid>.log/.org/.new in the\n"
                   "working directory)."};
    add_repair_options(cl);
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;
    const std::string image = the_image(*vm);
    if (vm->count("key-file") && vm->count("passphrase-file"))
        throw UsageError("--key-file and --passphrase-file exclude each other");
    if ((*vm)["test-args"].as<bool>()) return 0;
    ImageLock lock;
    lock.add(image, "IMAGE");
    if (vm->count("header")) lock.add((*vm)["header"].as<std::string>(), "--header");
    return repair(*vm, image);
}

}  // namespace cli
