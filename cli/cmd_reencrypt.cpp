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
#include "number_option.hpp"
#include "passphrase.hpp"
#include "progress.hpp"
#include "reencrypt_cli.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/luks/container.hpp>
#include <blkcrypt/luks/luks2.hpp>
#include <blkcrypt/luks/reencrypt.hpp>
#include <blkcrypt/luks/reencrypt_luks1.hpp>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <iostream>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
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

std::shared_ptr<blkcrypt::BackingStore> open_rw(const std::string& path, const std::string& role) {
    return open_container_image(path, true, role);
}

}  // namespace

int run_luks2_reencryption(const ReencryptRequest& rq, const blkcrypt::SecureBuffer& passphrase) {
    if (rq.detached) throw Failure("reencryption with a detached --header is not supported yet");
    auto dev = open_rw(rq.image, "IMAGE");
    std::optional<Progress> progress;
    StopSignals stop;
    luks2::ReencryptRunOptions o;
    if (rq.vm.count("hotzone-size")) o.hotzone_size = rq.vm["hotzone-size"].as<uint64_t>();
    o.progress = [&](uint64_t done, uint64_t total) {
        if (!progress) progress.emplace(rq.progress, rq.image, total);
        progress->update(done);
        return g_stop_signal.load() == 0;
    };
    auto r = luks2::reencrypt_run(registry(), *dev, passphrase, o);
    if (!r) expect(std::move(r));
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

namespace {

// ---------------------------------------------------------------- options

// cryptsetup 2.6.1's reencrypt options, with their meaning here.
void add_reencrypt_options(CommandLine& cl) {
    cl.options.add_options()
        // What to do.
        ("encrypt", po::bool_switch(), "encrypt a plain IMAGE in place (LUKS2: with --reduce-device-size or --header)")
        ("new,N", po::bool_switch(), "cryptsetup's name for --encrypt")
        ("decrypt", po::bool_switch(), "remove the encryption of IMAGE (LUKS2: with --header)")
        ("init-only", po::bool_switch(), "LUKS2: write the reencryption metadata only; resume it later")
        ("resume-only", po::bool_switch(), "LUKS2: resume a reencryption already initialised (by either tool)")
        // The new data segment.
        ("cipher,c", po::value<std::string>()->value_name("SPEC"), "the new cipher (default: the current one)")
        ("key-size,s", number_value<unsigned>(8, 4096)->value_name("BITS"),
         "the new volume key size (default: the current one; with a new cipher its default)")
        ("sector-size", number_value<unsigned>(512, 4096)->value_name("BYTES"),
         "LUKS2: the new encryption sector size (default: the current one)")
        ("keep-key", po::bool_switch(), "keep the volume key (with a new cipher or sector size only)")
        ("volume-key-file", po::value<std::string>()->value_name("FILE"), "the new volume key, from FILE")
        // How.
        ("resilience", po::value<std::string>()->value_name("MODE"),
         "LUKS2 hotzone protection: checksum (default), journal, none; datashift with --reduce-device-size")
        ("resilience-hash", po::value<std::string>()->value_name("HASH"), "checksum resilience: the hash (default: sha256)")
        ("hotzone-size", bytes_value<uint64_t>(512, UINT64_MAX)->value_name("BYTES"),
         "LUKS2: at most BYTES rewritten per step (default: as much as the resilience area covers)")
        ("device-size", bytes_value<uint64_t>(512, UINT64_MAX)->value_name("BYTES"),
         "LUKS2: reencrypt only the first BYTES of the data")
        ("reduce-device-size", bytes_value<uint64_t>(512, UINT64_MAX)->value_name("BYTES"),
         "move the data by BYTES (--encrypt: room for the header at the start)")
        ("offset,o", number_value<uint64_t>(0, UINT64_MAX / 512)->value_name("SECTORS"),
         "--encrypt: the data offset of the new header, 512-byte sectors")
        ("header", po::value<std::string>()->value_name("FILE"), "the LUKS header is in FILE (detached), not IMAGE")
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
        ("uuid", po::value<std::string>()->value_name("UUID"), "--encrypt: the new header's UUID")
        ("label", po::value<std::string>()->value_name("LABEL"), "--encrypt: the new LUKS2 label")
        ("subsystem", po::value<std::string>()->value_name("NAME"), "--encrypt: the new LUKS2 subsystem")
        ("luks2-metadata-size", bytes_value<uint64_t>(16384, 4194304)->value_name("BYTES"),
         "--encrypt: each LUKS2 header copy")
        ("luks2-keyslots-size", bytes_value<uint64_t>(4096, 128u << 20)->value_name("BYTES"),
         "--encrypt: the LUKS2 keyslots area")
        ("align-payload", number_value<unsigned>(0, UINT32_MAX)->value_name("SECTORS"),
         "--encrypt: align the data to SECTORS")
        ("integrity,I", po::value<std::string>()->value_name("ALG"),
         "refused: reencryption of a device with an integrity profile is not supported (as cryptsetup)")
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
    add_batch_mode_option(cl.options);
    add_tries_option(cl.options);
    add_progress_options(cl.options);
    cl.hidden.add_options()("image", po::value<std::vector<std::string>>(), "IMAGE");
    cl.positional.add("image", -1);
    add_cryptsetup_options(cl, "luks");
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
    add_batch_mode_option(cl.options);
    add_tries_option(cl.options);
    cl.hidden.add_options()("image", po::value<std::vector<std::string>>(), "IMAGE");
    cl.positional.add("image", -1);
    add_cryptsetup_options(cl, "luks");
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
        throw Failure("Reencryption of device with integrity profile is not supported.");
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

int rekey_luks2(const ReencryptRequest& rq) {
    auto header = open_rw(rq.header_path, rq.detached ? "--header" : "IMAGE");
    luks2::ReencryptInitOptions o;
    const auto& vm = rq.vm;
    if (vm.count("resilience")) o.resilience = vm["resilience"].as<std::string>();
    if (o.resilience == "datashift" || o.resilience.rfind("datashift-", 0) == 0 || vm.count("reduce-device-size"))
        throw Failure("reencrypt with a data shift (--reduce-device-size, --resilience datashift) is not supported yet");
    if (vm.count("resilience-hash")) o.hash = vm["resilience-hash"].as<std::string>();
    if (vm.count("cipher")) o.cipher = vm["cipher"].as<std::string>();
    if (vm.count("key-size")) o.key_size = vm["key-size"].as<unsigned>() / 8;
    if (vm.count("sector-size")) o.sector_size = vm["sector-size"].as<unsigned>();
    const blkcrypt::SecureBuffer pass = reencrypt_passphrase(rq);
    expect(luks2::reencrypt_init(registry(), *header, pass, o));
    if (rq.init_only) return 0;
    return run_luks2_reencryption(rq, pass);
}

int resume_luks2(const ReencryptRequest& rq) {
    if (rq.init_only) throw Failure("LUKS2 reencryption already initialized. Aborting operation.");
    const blkcrypt::SecureBuffer pass = reencrypt_passphrase(rq);
    return run_luks2_reencryption(rq, pass);
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
    case Kind::Luks1Unusable:
        throw Failure("LUKS1 reencryption is not supported yet");
    }
    return 1;
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
    if ((*vm)["test-args"].as<bool>()) return 0;
    throw Failure("repair is not supported yet");
}

}  // namespace cli
