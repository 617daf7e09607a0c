// blkcrypt crypt: encrypt or decrypt a whole image through the userspace
// dm-crypt target, as the kernel would store it, and print dm table lines.
//
// Encryption writes the plaintext IN through a CryptTarget whose backing
// store is (a temporary) OUT; decryption reads through a target over IN and
// writes OUT. Data moves in 1 MiB bios, several in flight, so memory stays
// bounded whatever the image size.
#include "commands.hpp"
#include "number_option.hpp"
#include "output_file.hpp"
#include "progress.hpp"

#include <blkcrypt/dm/backing_store.hpp>
#include <blkcrypt/dm/bio.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/dm/table.hpp>
#include <blkcrypt/registry.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cli {
namespace {

namespace dm = blkcrypt::dm;
constexpr uint64_t kSector = 512;
constexpr std::size_t kChunk = 1 << 20;  // bytes per bio
constexpr std::size_t kMaxKeyFile = 8192;  // more than any cipher needs

void pwrite_all(int fd, blkcrypt::ConstBytes data, uint64_t offset, const std::string& name) {
    while (!data.empty()) {
        const ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
        if (n < 0) {
            if (errno == EINTR) continue;
            throw Failure(errno_message(name));
        }
        data = data.subspan(static_cast<std::size_t>(n));
        offset += static_cast<uint64_t>(n);
    }
}

// Reads the key file (or stdin for "-") into locked, wiped memory: all of
// it, or the first bits/8 bytes when --key-size is given.
blkcrypt::SecureBuffer read_key_file(const std::string& path, std::optional<unsigned> bits) {
    if (bits && (*bits == 0 || *bits % 8))
        throw UsageError("--key-size must be a positive multiple of 8 bits");
    const std::size_t want = bits ? *bits / 8 : kMaxKeyFile + 1;
    InputFile in(path);
    blkcrypt::SecureBuffer key(want);
    const std::size_t got = in.read(key.span());
    if (bits && got < want)
        throw UsageError("key file " + in.display_name() + " holds " + std::to_string(got) +
                         " bytes, --key-size needs " + std::to_string(want));
    if (!bits && got > kMaxKeyFile)
        throw UsageError("key file " + in.display_name() + " is too long for a key; give --key-size");
    if (got == 0) throw UsageError("key file " + in.display_name() + " is empty");
    key.resize(got);
    return key;
}

const char* const kCryptOnlyOpts[] = {"cipher", "key-file", "key-size", "sector-size", "skip"};

// The table from --table, or from --cipher/--key-file and friends.
dm::CryptTable build_table(const po::variables_map& vm) {
    if (vm.count("table")) {
        for (const char* o : kCryptOnlyOpts)
            if (vm.count(o)) throw UsageError(std::string("--table and --") + o + " exclude each other");
        if (vm["iv-large-sectors"].as<bool>())
            throw UsageError("--table and --iv-large-sectors exclude each other");
        auto t = dm::parse_crypt_args(vm["table"].as<std::string>());
        if (!t) throw UsageError("--table: " + t.error().message);
        return std::move(t).value();
    }
    if (!vm.count("cipher")) throw UsageError("give --table ARGS or --cipher SPEC with --key-file FILE");
    if (!vm.count("key-file")) throw UsageError("--cipher needs --key-file FILE ('-' for stdin)");
    // The key stays out of the string: "-" is the parser's "no key", filled in below.
    std::string args = vm["cipher"].as<std::string>() + " - " +
                       std::to_string(vm.count("skip") ? vm["skip"].as<uint64_t>() : 0);
    std::vector<std::string> opts;
    if (vm.count("sector-size")) opts.push_back("sector_size:" + std::to_string(vm["sector-size"].as<unsigned>()));
    if (vm["iv-large-sectors"].as<bool>()) opts.push_back("iv_large_sectors");
    if (!opts.empty()) {
        args += " " + std::to_string(opts.size());
        for (const auto& o : opts) args += " " + o;
    }
    if (args.find_first_of("\n\t") != std::string::npos || vm["cipher"].as<std::string>().find(' ') != std::string::npos)
        throw UsageError("--cipher: no spaces allowed");
    auto t = dm::parse_crypt_args(args);
    if (!t) throw UsageError("--cipher: " + t.error().message);
    std::optional<unsigned> bits;
    if (vm.count("key-size")) bits = vm["key-size"].as<unsigned>();
    t->key = read_key_file(vm["key-file"].as<std::string>(), bits);
    return std::move(t).value();
}

// Creation errors are the table's fault (cipher, key length, sizes) unless
// the store failed underneath.
std::unique_ptr<dm::CryptTarget> make_target(blkcrypt::Registry& reg, const dm::CryptTable& t,
                                             std::shared_ptr<dm::BackingStore> store,
                                             uint64_t length_sectors, const dm::TargetOptions& opts) {
    auto target = dm::CryptTarget::create(reg, t, std::move(store), length_sectors, opts);
    if (!target) {
        const auto s = target.error().status;
        if (s == blkcrypt::Status::IoError || s == blkcrypt::Status::NoMem)
            throw Failure(target.error().message);
        throw UsageError(target.error().message);
    }
    return std::move(target).value();
}

uint64_t store_size(const std::string& path) {
    auto s = dm::open_file_store(path, false);
    if (!s) throw Failure(s.error().message);
    return (*s)->size();
}

bool is_block_device(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISBLK(st.st_mode);
}

int run_table(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.size() > 1) throw UsageError("crypt table takes at most one DEVICE");
    dm::CryptTable t = build_table(vm);
    t.device = vm.count("device") ? vm["device"].as<std::string>() : files.empty() ? "" : files[0];
    if (t.device.empty()) throw UsageError("crypt table needs --device PATH");
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
    dm::TargetOptions opts;
    opts.threads = 1;
    dm::CryptTable probe = t;  // one sector at the start of the memory store
    probe.offset = probe.length = 0;
    make_target(reg, probe, std::make_shared<dm::MemoryStore>(t.sector_size), step, opts);
    std::cout << t.table_line(vm["show-key"].as<bool>()) << "\n";
    return 0;
}

// One bio and its buffer in the ring of bios in flight.
struct Slot {
    std::vector<uint8_t> buf;
    dm::Bio bio;
    uint64_t pos = 0;  // byte offset into the target
    bool busy = false;
    blkcrypt::Status status = blkcrypt::Status::Ok;
};

int run_copy(const po::variables_map& vm, bool enc, const std::vector<std::string>& files) {
    if (files.size() != 2) throw UsageError(std::string("crypt ") + (enc ? "encrypt" : "decrypt") + " needs IN and OUT");
    const std::string& in_path = files[0];
    const std::string& out_path = files[1];
    if (in_path == "-" || out_path == "-")
        throw UsageError("IN and OUT must be files or block devices, not stdin/stdout");
    if (vm.count("device")) throw UsageError("--device is for crypt table");
    if (vm["show-key"].as<bool>()) throw UsageError("--show-key is for crypt table");
    // The target would read ciphertext it has just overwritten.
    struct stat in_st {}, out_st {};
    const bool out_exists = ::stat(out_path.c_str(), &out_st) == 0;
    if (in_path == out_path || (out_exists && ::stat(in_path.c_str(), &in_st) == 0 &&
                                in_st.st_dev == out_st.st_dev && in_st.st_ino == out_st.st_ino))
        throw UsageError("OUT is the input file; refusing to overwrite the input");
    // Installed before OUT exists and removed after its temporary file is
    // gone, so a signal never leaves the temporary file behind.
    SignalGuard signals;
    const bool in_place = vm["in-place"].as<bool>();
    if (in_place && !out_exists) throw Failure(errno_message(out_path));
    if (out_exists && S_ISDIR(out_st.st_mode)) throw UsageError(out_path + " is a directory");
    if (!in_place && out_exists && S_ISBLK(out_st.st_mode))
        throw UsageError(out_path + " is a block device; writing to it needs --in-place");

    dm::CryptTable table = build_table(vm);
    table.offset = vm["offset"].as<uint64_t>();
    const uint64_t step = table.sector_size / kSector;
    const uint64_t offset_bytes = table.offset * kSector;
    if (table.offset % step)
        throw UsageError("--offset must be a multiple of the sector size (" + std::to_string(step) + " sectors)");

    // Plaintext size: all of IN (encrypt) or IN after --offset (decrypt), unless --size.
    auto in_store = dm::open_file_store(in_path, false);
    if (!in_store) throw Failure(in_store.error().message);
    const uint64_t in_size = (*in_store)->size();
    uint64_t avail = in_size;
    if (!enc) {
        if (in_size < offset_bytes) throw UsageError("--offset is past the end of " + in_path);
        avail = in_size - offset_bytes;
    }
    if (!vm.count("size") && avail % table.sector_size)
        throw UsageError(in_path + ": " + std::to_string(avail) + " bytes" + (enc ? "" : " after --offset") +
                         " is not a multiple of the sector size " + std::to_string(table.sector_size));
    uint64_t length = avail / kSector;  // 512-byte sectors
    if (vm.count("size")) {
        length = vm["size"].as<uint64_t>();
        if (length > avail / kSector)
            throw UsageError("--size " + std::to_string(length) + " is more than the " +
                             std::to_string(avail / kSector) + " sectors of " + in_path);
        if (length % step)
            throw UsageError("--size must be a multiple of the sector size (" + std::to_string(step) + " sectors)");
    }
    if (length == 0) throw UsageError(in_path + ": nothing to " + (enc ? "encrypt" : "decrypt"));
    const uint64_t total = length * kSector;

    // OUT: a temporary file renamed at the end, or the existing file/device with --in-place.
    std::optional<TempOutput> tmp;
    int out_fd = -1;
    struct FdCloser {
        int& fd;
        ~FdCloser() { if (fd >= 0) ::close(fd); }
    } closer{out_fd};
    if (!in_place) {
        tmp.emplace(out_path);
    } else {
        out_fd = ::open(out_path.c_str(), O_WRONLY | O_CLOEXEC);
        if (out_fd < 0) throw Failure(errno_message(out_path));
    }
    const int wfd = tmp ? tmp->fd() : out_fd;
    const std::string& wname = tmp ? tmp->path() : out_path;

    std::shared_ptr<dm::BackingStore> store;
    if (enc) {
        // The file store's size is fixed when opened: size OUT first (never shrink in place).
        const uint64_t need = offset_bytes + total;
        if (!is_block_device(wname)) {
            struct stat st {};
            if (::fstat(wfd, &st) != 0) throw Failure(errno_message(wname));
            if (static_cast<uint64_t>(st.st_size) < need && ::ftruncate(wfd, static_cast<off_t>(need)) != 0)
                throw Failure(errno_message(wname));
        }
        auto s = dm::open_file_store(wname, true);
        if (!s) throw Failure(s.error().message);
        store = *s;
    } else {
        store = *in_store;
    }

    dm::TargetOptions opts;
    if (vm.count("threads")) opts.threads = vm["threads"].as<unsigned>();
    const std::size_t depth = std::max<std::size_t>(8, 2 * std::size_t{opts.threads});
    opts.queue_depth = depth;
    opts.max_request = kChunk;

    // Declared before the target: its destructor waits for the bios in
    // flight, whose completions touch these.
    std::mutex mu;
    std::condition_variable cv;
    // Encryption reads a mappable IN in place: the engine never writes a
    // write bio's memory, so its pages go from the page cache straight to
    // the cipher, without a copy into a buffer of ours.
    const blkcrypt::ConstBytes in_map = enc ? (*in_store)->mapped() : blkcrypt::ConstBytes{};
    std::vector<Slot> slots(depth);
    if (in_map.empty())
        for (auto& s : slots) s.buf.resize(kChunk);
    blkcrypt::Registry& reg = registry();
    auto target = make_target(reg, table, store, length, opts);

    Progress progress(vm["progress"].as<bool>(), total);
    std::size_t head = 0, inflight = 0;
    uint64_t next = 0, done = 0;

    // Waits for the oldest bio; a decrypted one is written out in order.
    auto retire = [&] {
        Slot& s = slots[head];
        {
            std::unique_lock lk(mu);
            cv.wait(lk, [&] { return !s.busy; });
        }
        head = (head + 1) % depth;
        --inflight;
        if (s.status != blkcrypt::Status::Ok)
            throw Failure(std::string(enc ? "writing " : "reading ") + (enc ? out_path : in_path) +
                          " at sector " + std::to_string(s.bio.sector) + ": " + blkcrypt::to_string(s.status));
        const std::size_t n = s.bio.vecs[0].len;
        if (enc) {
            (*in_store)->release_mapped(s.pos, n);  // bounded memory
            // Truncated under us: the mapping read zeros, not the file.
            if ((*in_store)->changed()) throw Failure(in_path + ": changed size while being read");
            store->start_writeback(offset_bytes + s.pos, n);
        } else {
            pwrite_all(wfd, blkcrypt::ConstBytes(s.buf.data(), n), s.pos, wname);
            // Start writeback now, so the final fsync waits for the tail only
            // (advice: an error here resurfaces at that fsync).
            (void)::sync_file_range(wfd, static_cast<off64_t>(s.pos), static_cast<off64_t>(n), SYNC_FILE_RANGE_WRITE);
        }
        done += n;
        progress.update(done);
    };

    try {
        while (next < total && pending_signal() == 0) {
            if (inflight == depth) retire();
            Slot& s = slots[(head + inflight) % depth];
            const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(kChunk, total - next));
            uint8_t* data = s.buf.data();
            if (!in_map.empty()) {
                data = const_cast<uint8_t*>(in_map.data() + next);  // read-only mapping, never written
            } else if (enc && (*in_store)->read(next, blkcrypt::Bytes(data, n)) != blkcrypt::Status::Ok) {
                throw Failure(in_path + ": read error at byte " + std::to_string(next));
            }
            s.pos = next;
            s.busy = true;
            s.bio.sector = next / kSector;
            s.bio.dir = enc ? dm::BioDir::Write : dm::BioDir::Read;
            s.bio.vecs = {blkcrypt::SgEntry{data, n}};
            s.bio.on_complete = [&mu, &cv, &s](blkcrypt::Status st) {
                std::lock_guard lk(mu);
                s.status = st;
                s.busy = false;
                cv.notify_all();
            };
            const blkcrypt::Status st = target->submit(s.bio);
            if (st != blkcrypt::Status::InProgress) {
                s.busy = false;
                throw Failure(std::string("bio refused: ") + blkcrypt::to_string(st));
            }
            ++inflight;
            next += n;
        }
        if (pending_signal() == 0)
            while (inflight) retire();
    } catch (...) {
        target->drain();  // the bios still reference slots
        throw;
    }
    if (const int sig = pending_signal()) {
        target->drain();
        throw Failure(std::string("interrupted by ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
                      "; " + (tmp ? "no output written" : out_path + " is partly written"));
    }
    if ((*in_store)->changed()) throw Failure(in_path + ": changed size while being read");
    progress.update(done, true);

    if (enc && store->flush() != blkcrypt::Status::Ok) throw Failure(out_path + ": flush failed");
    target.reset();
    store.reset();
    if (tmp) {
        tmp->commit();
    } else {
        if (::fsync(out_fd) != 0 && errno != EINVAL) throw Failure(errno_message(out_path));
        const int rc = ::close(out_fd);
        out_fd = -1;
        if (rc != 0) throw Failure(errno_message(out_path));
    }
    return 0;
}

}  // namespace

int run_crypt(Args args) {
    CommandLine cl{"blkcrypt crypt encrypt|decrypt (--table ARGS | --cipher SPEC --key-file FILE [...]) IN OUT\n"
                   "       blkcrypt crypt table (--table ARGS | --cipher SPEC --key-file FILE [...])\n"
                   "                            [--device PATH] [--size SECTORS] [--show-key]",
                   "Encrypt a plain image IN into OUT as dm-crypt stores it, or decrypt such an\n"
                   "image, or print the dm table line. ARGS is '<cipher> <key> <iv_offset> [<#opts>\n"
                   "<opts>...]'. OUT is written under a temporary name and renamed when done;\n"
                   "an interrupted run leaves no OUT. Sizes and offsets are 512-byte sectors."};
    cl.options.add_options()
        ("table", po::value<std::string>()->value_name("ARGS"), "dm-crypt target arguments (key in hex)")
        ("cipher,c", po::value<std::string>()->value_name("SPEC"), "cipher, e.g. aes-xts-plain64, aes-cbc-essiv:sha256")
        ("key-file", po::value<std::string>()->value_name("FILE"), "read the key from FILE ('-' for stdin)")
        ("key-size", number_value<unsigned>(8, 8 * 8192)->value_name("BITS"), "use the first BITS bits of the key file (default: all of it)")
        ("sector-size", number_value<unsigned>(512, 4096)->value_name("BYTES"), "encryption sector size, 512..4096")
        ("iv-large-sectors", po::bool_switch(), "IVs count sector_size units, not 512-byte sectors")
        ("skip,p", number_value<uint64_t>(0, UINT64_MAX)->value_name("SECTORS"), "IV offset (iv_offset in the table)")
        ("offset,o", number_value<uint64_t>(0, UINT64_MAX / kSector)->default_value(0)->value_name("SECTORS"), "where the ciphertext starts in the encrypted file")
        ("size,b", number_value<uint64_t>(1, UINT64_MAX / kSector)->value_name("SECTORS"), "sectors to process (default: all)")
        ("threads,t", threads_value()->value_name("N"), "crypt worker threads, at most 256 (default: one per core)")
        ("in-place", po::bool_switch(), "write into the existing OUT (file or device) directly")
        ("progress", po::bool_switch(), "show a progress bar when stderr is a terminal")
        ("device", po::value<std::string>()->value_name("PATH"), "crypt table: the device of the line")
        ("show-key", po::bool_switch(), "crypt table: print the key instead of zeros");
    add_action_arguments(cl, "encrypt, decrypt or table");
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;
    const auto [action, files] = action_arguments(*vm);
    if (action == "table") return run_table(*vm, files);
    if (action == "encrypt" || action == "decrypt") return run_copy(*vm, action == "encrypt", files);
    throw UsageError("unknown action '" + action + "': use encrypt, decrypt or table");
}

}  // namespace cli
