// blkcrypt crypt: encrypt or decrypt a whole image through the userspace
// dm-crypt target, as the kernel would store it, and print dm table lines.
//
// Encryption writes the plaintext IN through a CryptTarget whose backing
// store is (a temporary) OUT; decryption reads through a target over IN and
// writes OUT. Data moves in 1 MiB bios, several in flight, so memory stays
// bounded whatever the image size.
#include "commands.hpp"
#include "json.hpp"
#include "number_option.hpp"
#include "output_file.hpp"
#include "passphrase.hpp"
#include "progress.hpp"
#include "serve.hpp"

#include <blkcrypt/dm/backing_store.hpp>
#include <blkcrypt/dm/bio.hpp>
#include <blkcrypt/dm/bio_ring.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/dm/plain_key.hpp>
#include <blkcrypt/dm/table.hpp>
#include <blkcrypt/nbd/block_device.hpp>
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
constexpr std::size_t kChunk = 1 << 20;  // bytes per bio
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

// stdin, a FIFO or a character device: read in order, no size known.
bool is_stream_input(const std::string& path) {
    struct stat st {};
    return path == "-" || (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode));
}

// The target's store when IN or OUT is a stream: one chunk buffer per bio in
// flight, found from the offset (bios start at multiples of kChunk and never
// cross one). Encryption leaves the ciphertext there for the writer; a
// decryption's reader fills it before the bio is submitted.
class RingStore final : public dm::BackingStore {
public:
    RingStore(uint64_t base, uint64_t size, std::size_t depth)
        : base_(base), size_(size), bufs_(depth, std::vector<uint8_t>(kChunk)) {}
    blkcrypt::Bytes chunk(uint64_t pos) { return bufs_[(pos / kChunk) % bufs_.size()]; }
    blkcrypt::Status read(uint64_t offset, blkcrypt::Bytes out) override {
        const auto src = locate(offset, out.size());
        if (src.size() != out.size()) return blkcrypt::Status::IoError;
        if (!out.empty()) std::memcpy(out.data(), src.data(), out.size());
        return blkcrypt::Status::Ok;
    }
    blkcrypt::Status write(uint64_t offset, blkcrypt::ConstBytes in) override {
        const auto dst = locate(offset, in.size());
        if (dst.size() != in.size()) return blkcrypt::Status::IoError;
        if (!in.empty()) std::memcpy(dst.data(), in.data(), in.size());
        return blkcrypt::Status::Ok;
    }
    uint64_t size() const override { return size_; }

private:
    // The bytes [offset, offset+len) of the store, or an empty span.
    blkcrypt::Bytes locate(uint64_t offset, std::size_t len) {
        if (offset < base_) return {};
        const uint64_t rel = offset - base_;
        const std::size_t within = static_cast<std::size_t>(rel % kChunk);
        if (len > kChunk - within) return {};
        return chunk(rel).subspan(within, len);
    }
    const uint64_t base_, size_;
    std::vector<std::vector<uint8_t>> bufs_;
};

int run_table(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.size() > 1) throw UsageError("crypt table takes at most one DEVICE");
    const std::string device = vm.count("device") ? vm["device"].as<std::string>() : files.empty() ? "" : files[0];
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
    dm::TargetOptions opts;
    opts.threads = 1;
    dm::CryptTable probe = t;  // one sector at the start of the memory store
    probe.offset = probe.length = 0;
    make_target(reg, probe, std::make_shared<dm::MemoryStore>(t.sector_size), step, opts);
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
    const bool in_stream = is_stream_input(in_path);

    // OUT, through the output policy; IN and the key file may not be it (the
    // target would read ciphertext it has just overwritten).
    Output out(out_path, OutputOptions{.role = "OUT", .secret = !enc, .can_stream = true,
                                       .in_place = vm["in-place"].as<bool>(),
                                       .inputs = {{"IN", in_path}, {"the key file", key_path}}});

    dm::CryptTable table = build_table(vm, enc ? out_path : in_path);  // the encrypted image names the prompt
    table.offset = vm["offset"].as<uint64_t>();
    const uint64_t step = table.sector_size / kSector;
    const uint64_t offset_bytes = table.offset * kSector;
    if (table.offset % step)
        throw UsageError("--offset must be a multiple of the sector size (" + std::to_string(step) + " sectors)");
    if (vm.count("size") && (vm["size"].as<uint64_t>() == 0 || vm["size"].as<uint64_t>() % step))
        throw UsageError("--size must be a non-zero multiple of the sector size (" + std::to_string(step) + " sectors)");

    // Plaintext size: all of IN (encrypt) or IN after --offset (decrypt), unless
    // --size; unknown for a stream without --size, which is read to its end.
    std::shared_ptr<dm::BackingStore> in_store;
    std::optional<InputFile> in;
    std::optional<uint64_t> total;
    if (in_stream) {
        in.emplace(in_path);
        if (vm.count("size")) total = vm["size"].as<uint64_t>() * kSector;
        if (!enc) {  // the ciphertext starts at --offset: skip what comes before
            std::vector<uint8_t> skip(kChunk);
            for (uint64_t left = offset_bytes; left;) {
                const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(left, kChunk));
                if (in->read(blkcrypt::Bytes(skip).first(n)) != n)
                    throw UsageError("--offset is past the end of " + in->display_name());
                left -= n;
            }
        }
    } else {
        auto s = dm::open_file_store(in_path, false);
        if (!s) throw Failure(s.error().message);
        in_store = *s;
        const uint64_t in_size = in_store->size();
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
        }
        if (length == 0) throw UsageError(in_path + ": nothing to " + verb);
        total = length * kSector;
    }
    const std::string in_name = in ? in->display_name() : in_path;
    // A stream of unknown size: the target spans far more than any input.
    const uint64_t length = total ? *total / kSector : (uint64_t{1} << 50) / step * step;

    if (total) out.reserve((enc ? offset_bytes : 0) + *total);  // the device must be large enough
    // Encryption into a seekable OUT of known size writes through a file store
    // on it; any other case goes through the ring of chunk buffers.
    std::shared_ptr<dm::BackingStore> store;
    std::shared_ptr<RingStore> ring;
    dm::TargetOptions opts;
    if (vm.count("threads")) opts.threads = vm["threads"].as<unsigned>();
    const std::size_t depth = std::max<std::size_t>(8, 2 * std::size_t{opts.threads});
    opts.queue_depth = depth;
    opts.max_request = kChunk;
    if (enc && out.seekable() && total) {
        auto s = dm::open_file_store(out.write_path(), true);
        if (!s) throw Failure(s.error().message);
        store = *s;
    } else if (!enc && !in_stream) {
        store = in_store;
    } else {
        ring = std::make_shared<RingStore>(offset_bytes, offset_bytes + length * kSector, depth);
        store = ring;
    }
    if (enc && !out.seekable()) {  // a stream's ciphertext also starts at --offset
        const std::vector<uint8_t> zeros(kChunk);
        for (uint64_t left = offset_bytes; left;) {
            const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(left, kChunk));
            out.write(blkcrypt::ConstBytes(zeros).first(n));
            left -= n;
        }
    }

    // Encryption reads a mappable IN in place: the engine never writes a
    // write bio's memory, so its pages go from the page cache straight to
    // the cipher, without a copy into a buffer of ours.
    const blkcrypt::ConstBytes in_map = enc && in_store ? in_store->mapped() : blkcrypt::ConstBytes{};
    blkcrypt::Registry& reg = registry();
    auto target = make_target(reg, table, store, length, opts);

    if (out_path == "-" && vm["progress-json"].as<bool>())
        throw UsageError("--progress-json prints to stdout, which OUT '-' already uses");
    if (out_path == "-" && vm["json"].as<bool>())
        throw UsageError("--json prints to stdout, which OUT '-' already uses");
    const auto started = std::chrono::steady_clock::now();
    Progress progress(progress_settings(vm), enc ? out_path : in_path, total.value_or(0));
    uint64_t next = 0, done = 0;

    // Writes out what the oldest bio produced, in order.
    auto retire = [&](const dm::RetiredBio& r) {
        if (r.status != blkcrypt::Status::Ok)
            throw Failure(std::string(enc ? "writing " : "reading ") + (enc ? out.name() : in_name) +
                          " at sector " + std::to_string(r.sector) + ": " + blkcrypt::to_string(r.status));
        const uint64_t pos = r.sector * kSector;  // byte offset into the target
        const std::size_t n = r.data.size();
        if (enc && ring) {
            out.pwrite(ring->chunk(pos).first(n), offset_bytes + pos);
        } else if (enc) {
            if (!in_map.empty()) in_store->release_mapped(pos, n);  // bounded memory
            // Truncated under us: the mapping read zeros, not the file.
            if (in_store && in_store->changed()) throw Failure(in_path + ": changed size while being read");
            store->start_writeback(offset_bytes + pos, n);
        } else {
            out.pwrite(r.data, pos);
            // Start writeback now, so the final fsync waits for the tail only
            // (advice: an error here resurfaces at that fsync).
            if (out.seekable())
                (void)::sync_file_range(out.fd(), static_cast<off64_t>(pos), static_cast<off64_t>(n),
                                        SYNC_FILE_RANGE_WRITE);
        }
        done += n;
        progress.update(done);
        return blkcrypt::Status::Ok;
    };
    // Its destructor waits for the bios in flight, also when an exception
    // leaves this function. Slots own a chunk buffer unless IN is mapped.
    dm::BioRing bios(*target, depth, in_map.empty() ? kChunk : 0, retire);
    auto refused = [](blkcrypt::Status st) {
        throw Failure(std::string("bio refused: ") + blkcrypt::to_string(st));
    };

    for (bool eof = false; !eof && (!total || next < *total);) {
        if (const blkcrypt::Status st = bios.reserve(); st != blkcrypt::Status::Ok) refused(st);
        std::size_t n = static_cast<std::size_t>(total ? std::min<uint64_t>(kChunk, *total - next) : kChunk);
        uint8_t* data = bios.next_buffer().data();
        if (!in_map.empty()) {
            data = const_cast<uint8_t*>(in_map.data() + next);  // read-only mapping, never written
        } else if (in) {
            // Sequential reads: plaintext into the bio, ciphertext into the ring.
            const std::size_t got = in->read(enc ? blkcrypt::Bytes(data, n) : ring->chunk(next).first(n));
            if (got < n) {
                if (total)
                    throw Failure(in_name + " ended after " + std::to_string(next + got) +
                                  " bytes; --size asks for " + std::to_string(*total));
                if (got % table.sector_size)
                    throw Failure(in_name + " ends with a partial sector: " + std::to_string(next + got) +
                                  " bytes is not a multiple of the sector size " +
                                  std::to_string(table.sector_size));
                eof = true;
                n = got;
                if (n == 0) break;
            }
        } else if (enc && in_store->read(next, blkcrypt::Bytes(data, n)) != blkcrypt::Status::Ok) {
            throw Failure(in_path + ": read error at byte " + std::to_string(next));
        }
        if (const blkcrypt::Status st = bios.submit(next / kSector, enc ? dm::BioDir::Write : dm::BioDir::Read,
                                                    blkcrypt::Bytes(data, n));
            st != blkcrypt::Status::Ok)
            refused(st);
        next += n;
    }
    if (const blkcrypt::Status st = bios.finish(); st != blkcrypt::Status::Ok) refused(st);
    if (next == 0) throw UsageError(in_name + ": nothing to " + verb);
    if (in_store && in_store->changed()) throw Failure(in_path + ": changed size while being read");
    progress.finish(done);

    target.reset();
    store.reset();
    out.commit();  // its fsync also covers what the file store wrote
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
        w.key("sectors"), w.number(static_cast<int64_t>(done / kSector));
        w.key("bytes"), w.number(static_cast<int64_t>(done));
        w.key("seconds"), w.decimal(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
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
    auto s = dm::open_file_store(image, !read_only);
    if (!s) throw Failure(s.error().message);
    std::shared_ptr<dm::BackingStore> store = *s;
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
    dm::TargetOptions opts;
    if (vm.count("threads")) opts.threads = vm["threads"].as<unsigned>();
    std::shared_ptr<dm::CryptTarget> target = make_target(registry(), table, store, length, opts);
    return serve_device(vm, blkcrypt::nbd::make_crypt_device(std::move(target), std::move(store), read_only));
}

}  // namespace

int run_crypt(Args args) {
    CommandLine cl{"blkcrypt crypt encrypt|decrypt [--table ARGS | --cipher SPEC [--key-size BITS]\n"
                   "                              [--key-file FILE | --hash HASH] [...]] IN OUT\n"
                   "       blkcrypt crypt table [--table ARGS | --cipher SPEC ...]\n"
                   "                            [--device PATH] [--size SECTORS] [--show-key]\n"
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
    only_for(cl, {"encrypt", "decrypt"}, {"in-place"});
    only_for(cl, {"encrypt", "decrypt", "table"}, {"json"});
    only_for(cl, {"serve"}, serve_option_names());
    only_for(cl, {"encrypt", "decrypt"}, progress_option_names());
    only_for(cl, {"table"}, {"device", "show-key"});
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;
    const auto [action, files] = action_arguments(*vm);
    if (action == "table") return run_table(*vm, files);
    if (action == "encrypt" || action == "decrypt") return run_copy(*vm, action == "encrypt", files);
    if (action == "serve") return run_serve(*vm, files);
    throw UsageError("unknown action '" + action + "': use encrypt, decrypt, table or serve");
}

}  // namespace cli
