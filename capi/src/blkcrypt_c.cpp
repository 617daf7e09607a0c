// <blkcrypt/blkcrypt.h> over the C++ library: every entry point catches
// what the C++ side may throw (std::bad_alloc, a bug) and turns Status and
// Error values into a blk_error plus the thread's last message. Images are
// opened through the containers layer (containers::open, the library's
// store opener), TrueCrypt/VeraCrypt, which has no signature, through
// tcrypt::open; the plaintext is the dm stack the unlock's tables describe.
#include <blkcrypt/blkcrypt.h>

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/containers/container.hpp>
#include <blkcrypt/dm/block_device.hpp>
#include <blkcrypt/dm/dm_table.hpp>
#include <blkcrypt/json_string.hpp>
#include <blkcrypt/luks/container.hpp>
#include <blkcrypt/random.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/shash.hpp>
#include <blkcrypt/skcipher.hpp>
#include <blkcrypt/status.hpp>
#include <blkcrypt/tcrypt/tcrypt.hpp>
#include <blkcrypt/verity/superblock.hpp>
#include <blkcrypt/verity/tree.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

using namespace blkcrypt;

namespace {

thread_local std::string t_last_error;

int fail(int code, std::string message) {
    t_last_error = std::move(message);
    return code;
}

int code_of(Status s) {
    switch (s) {
    case Status::Ok: return BLK_OK;
    case Status::NoKey: return BLK_ERR_WRONG_SECRET;
    case Status::NotFound: return BLK_ERR_NOT_FOUND;
    case Status::Unsupported: return BLK_ERR_UNSUPPORTED;
    case Status::IoError: return BLK_ERR_IO;
    case Status::Corrupt:
    case Status::BadMsg: return BLK_ERR_CORRUPT;
    case Status::NoMem: return BLK_ERR_NO_MEMORY;
    case Status::Invalid: return BLK_ERR_INVALID;
    default: return BLK_ERR_INTERNAL;
    }
}

int fail(const Error& e) { return fail(code_of(e.status), e.message.empty() ? to_string(e.status) : e.message); }
int fail(Status s, const std::string& what) { return fail(code_of(s), what + ": " + to_string(s)); }

// Runs f, turning what C++ may throw into an error code: no exception
// crosses into C.
template <class F>
auto guarded(F&& f) noexcept -> decltype(f()) {
    try {
        return f();
    } catch (const std::bad_alloc&) {
        return fail(BLK_ERR_NO_MEMORY, "out of memory");
    } catch (const std::exception& e) {
        return fail(BLK_ERR_INTERNAL, std::string("internal error: ") + e.what());
    } catch (...) {
        return fail(BLK_ERR_INTERNAL, "internal error");
    }
}

// One registry for the process: the built-in algorithms, set up once.
Registry* registry(Error& err) {
    static std::once_flag once;
    static Registry* reg = nullptr;
    static Error init_error;
    std::call_once(once, [] {
        auto r = std::make_unique<Registry>();
        if (auto s = register_defaults(*r); !s) {
            init_error = s.error();
            return;
        }
        reg = r.release();  // lives as long as the process: handles may outlive any static order
    });
    if (!reg) err = init_error;
    return reg;
}

// A key file's content, at most `max` bytes, in wiping memory: a regular
// file or device through its store, anything else (a FIFO, a pipe as
// /dev/stdin) read to its end, which has no size to ask.
Result<SecureBuffer> read_secret_file(const std::string& path, uint64_t max) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return make_error(Status::NotFound, path + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)) {
        ::close(fd);
        auto store = open_file_store(path, false);
        if (!store) return store.error();
        SecureBuffer out(std::min((*store)->size(), max));
        if (Status s = (*store)->read(0, out.span()); s != Status::Ok) return make_error(s, path + ": cannot read");
        return out;
    }
    SecureBuffer buf(std::min<uint64_t>(max, 64 << 10));
    std::size_t got = 0;
    for (;;) {
        if (got == buf.size()) {
            if (got == max) break;
            SecureBuffer more(std::min<uint64_t>(max, uint64_t{got} * 2));
            std::memcpy(more.data(), buf.data(), got);
            buf = std::move(more);
        }
        const ssize_t n = ::read(fd, buf.data() + got, buf.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int e = errno;
            ::close(fd);
            return make_error(Status::IoError, path + ": " + std::strerror(e));
        }
        if (n == 0) break;
        got += static_cast<std::size_t>(n);
    }
    ::close(fd);
    SecureBuffer out(got);
    std::memcpy(out.data(), buf.data(), got);
    return out;
}

// cryptsetup's largest key file (--keyfile-size's default limit, 8 MiB).
constexpr uint64_t kKeyFileMax = 8 << 20;

}  // namespace

namespace {

// Sequential reads (a file object read from start to end, one small read at
// a time) would otherwise wait for each chunk to be read and decrypted in
// turn, one request in flight, where the CLI's copy keeps several: the
// chunks after the one asked for are read ahead, each into slot
// chunk % kDepth. Any other read goes straight to the device.
struct ReadAhead {
    static constexpr uint64_t kChunk = uint64_t(4) << 20;
    static constexpr unsigned kDepth = 8;
    static constexpr uint64_t kNone = UINT64_MAX;
    struct Slot {
        uint64_t chunk = kNone;
        std::vector<uint8_t> buf;
        bool busy = false;  // a read is in flight into buf (done_mu)
        Status status = Status::Ok;
    };
    std::mutex mu;  // the handle's calls take turns here
    // Only the completions' flags: a completion may run inside submit_read,
    // or wait behind a submit that blocks on a full queue, so it must never
    // need `mu`, which the submitter holds.
    std::mutex done_mu;
    std::condition_variable cv;
    Slot slots[kDepth];
    uint64_t next = 0;  // where the last read ended: a read from here is sequential

    bool busy(const Slot& s) {
        std::lock_guard g(done_mu);
        return s.busy;
    }
    void wait(const Slot& s) {
        std::unique_lock d(done_mu);
        cv.wait(d, [&] { return !s.busy; });
    }
    // Starts reading chunk c into its slot (the caller holds mu; the slot is idle).
    void start(dm::BlockDevice& dev, uint64_t c) {
        Slot& s = slots[c % kDepth];
        const uint64_t at = c * kChunk, len = std::min(kChunk, dev.size() - at);
        s.buf.resize(kChunk);
        s.chunk = c;
        {
            std::lock_guard g(done_mu);
            s.busy = true;
        }
        const Status st = dev.submit_read(at, Bytes(s.buf.data(), len), [this, &s](Status done) {
            std::lock_guard g(done_mu);
            s.status = done;
            s.busy = false;
            cv.notify_all();
        });
        if (st != Status::InProgress) {  // refused: no completion comes
            std::lock_guard g(done_mu);
            s.status = st;
            s.busy = false;
        }
    }
    // Waits for what is in flight and forgets every chunk (after a write, a new unlock).
    void drop() {
        for (Slot& s : slots) {
            wait(s);
            s.chunk = kNone;
        }
    }
};

// From this size up, an aligned read skips the read-ahead (see blk_pread).
constexpr uint64_t kDirectRead = 256 << 10;

// Reads whole blocks straight into `out`, split into pieces submitted
// together, so that every crypt worker decrypts a share of one request (the
// device hands a bio to one worker) as the CLI's copy keeps several bios in
// flight; no bounce buffer. Waits for every piece; the first failure wins.
Status read_split(dm::BlockDevice& dev, uint64_t offset, Bytes out) {
    constexpr uint64_t kPieces = 8, kMinPiece = 64 << 10, kMaxPiece = 1 << 20;
    const uint64_t bs = dev.block_size();
    const uint64_t piece = std::clamp<uint64_t>((out.size() / kPieces + bs - 1) / bs * bs, kMinPiece, kMaxPiece);
    std::mutex mu;  // only the completions' count: one may run inside submit_read
    std::condition_variable cv;
    uint64_t pending = 0;
    Status first = Status::Ok;
    for (uint64_t at = 0; at < out.size(); at += piece) {
        const uint64_t len = std::min<uint64_t>(piece, out.size() - at);
        {
            std::lock_guard g(mu);
            pending++;
        }
        const Status st = dev.submit_read(offset + at, out.subspan(at, len), [&](Status done) {
            std::lock_guard g(mu);
            if (done != Status::Ok && first == Status::Ok) first = done;
            if (--pending == 0) cv.notify_all();
        });
        if (st != Status::InProgress) {  // done or refused: no completion comes
            std::lock_guard g(mu);
            pending--;
            if (st == Status::Ok) continue;
            if (first == Status::Ok) first = st;
            break;
        }
    }
    std::unique_lock g(mu);
    cv.wait(g, [&] { return pending == 0; });
    return first;
}

}  // namespace

struct blk_image {
    std::string path;
    bool writable = false;
    std::string type;  // "LUKS2"...
    std::unique_ptr<containers::Container> container;  // the formats with a signature
    std::optional<tcrypt::Volume> tc;                  // TrueCrypt/VeraCrypt once unlocked
    std::shared_ptr<dm::BlockDevice> dev;              // the plaintext once unlocked
    // Reads and writes of one handle take turns here (a partial-block write
    // is a read-modify-write; a read-ahead chunk must not outlive a write).
    ReadAhead ra;
    tcrypt::OpenOptions tc_opts;  // blk_tcrypt_options, blk_tcrypt_add_keyfile
};

namespace {

// The dm stack of (lower tables, top) over the image, writable as the handle is.
int build_device(blk_image* img, Registry& reg, std::vector<dm::NamedDmTable> stack, dm::DmTable top) {
    dm::DmBuildOptions o;
    o.read_only = !img->writable;
    o.open = [](const std::string& path, bool writable) { return open_store(path, writable); };
    stack.push_back({"top", std::move(top)});
    auto dev = dm::build_dm_stack(reg, stack, o);
    if (!dev) return fail(dev.error());
    std::lock_guard lk(img->ra.mu);
    img->ra.drop();
    img->ra.next = 0;
    if (img->dev) img->dev->drain();
    img->dev = std::move(dev).value();
    return BLK_OK;
}

enum class SecretKind { Passphrase, VolumeKey };

int unlock(blk_image* img, ConstBytes secret, SecretKind kind) {
    if (!img) return fail(BLK_ERR_INVALID, "no image handle");
    Error err;
    Registry* reg = registry(err);
    if (!reg) return fail(err);
    if (img->container) {
        auto table = kind == SecretKind::Passphrase ? img->container->unlock(secret)
                                                    : img->container->unlock_volume_key(secret);
        if (!table) return fail(table.error());
        return build_device(img, *reg, img->container->lower_tables(), std::move(table).value());
    }
    if (kind == SecretKind::VolumeKey)
        return fail(BLK_ERR_UNSUPPORTED, "TrueCrypt/VeraCrypt volumes open with a passphrase only here");
    auto store = open_store(img->path, false);
    if (!store) return fail(store.error());
    auto vol = tcrypt::open(*reg, **store, secret, img->tc_opts);
    if (!vol) return fail(vol.error());
    auto table = tcrypt::dm_table(*vol, **store, img->path);
    if (!table) return fail(table.error());
    img->tc = std::move(vol).value();
    return build_device(img, *reg, {}, std::move(table).value());
}

int check_device(blk_image* img) {
    if (!img) return fail(BLK_ERR_INVALID, "no image handle");
    if (!img->dev) return fail(BLK_ERR_NOT_UNLOCKED, img->path + ": not unlocked");
    return BLK_OK;
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return s;
}

int open_image(const char* image, const char* header, const char* type, unsigned flags, blk_image** out) {
    return guarded([&]() -> int {
        if (!image || !out) return fail(BLK_ERR_INVALID, "blk_open: image and out are required");
        if (flags & ~BLK_OPEN_READ_WRITE) return fail(BLK_ERR_INVALID, "blk_open: unknown flags");
        Error err;
        Registry* reg = registry(err);
        if (!reg) return fail(err);
        const std::string want = type ? lower(type) : "";
        auto img = std::make_unique<blk_image>();
        img->path = image;
        img->writable = flags & BLK_OPEN_READ_WRITE;
        if (header && (want == "tcrypt" || want == "veracrypt" || want == "truecrypt" || want == "bitlk" ||
                       want == "fvault2"))
            return fail(BLK_ERR_INVALID, std::string("a detached header is LUKS only, not ") + type);
        if (want == "tcrypt" || want == "veracrypt" || want == "truecrypt") {
            // No signature: the header is only known once a passphrase decrypts it.
            auto store = open_store(img->path, false);
            if (!store) return fail(store.error());
            img->type = "TCRYPT";
        } else if (want.empty() || want == "luks" || want == "luks1" || want == "luks2" || want == "bitlk" ||
                   want == "fvault2") {
            auto c = containers::open(*reg, img->path, header ? header : "");
            if (!c) return fail(c.error());
            const std::string found(containers::format_name((*c)->format()));
            const std::string f = lower(found);
            if (!want.empty() && want != f && !(want == "luks" && f.starts_with("luks")))
                return fail(BLK_ERR_NOT_FOUND, img->path + ": not " + std::string(type) + " (it is " + found + ")");
            img->type = found;
            img->container = std::move(c).value();
        } else {
            return fail(BLK_ERR_INVALID, std::string("unknown type '") + type +
                                             "' (luks, luks1, luks2, bitlk, fvault2, tcrypt)");
        }
        *out = img.release();
        return BLK_OK;
    });
}

}  // namespace

extern "C" {

const char* blk_last_error(void) { return t_last_error.c_str(); }

const char* blk_strerror(blk_error code) {
    switch (code) {
    case BLK_OK: return "success";
    case BLK_ERR_INVALID: return "invalid argument";
    case BLK_ERR_WRONG_SECRET: return "wrong secret";
    case BLK_ERR_NOT_FOUND: return "not found";
    case BLK_ERR_UNSUPPORTED: return "unsupported";
    case BLK_ERR_IO: return "I/O error";
    case BLK_ERR_CORRUPT: return "corrupt data";
    case BLK_ERR_NO_MEMORY: return "out of memory";
    case BLK_ERR_READ_ONLY: return "read-only";
    case BLK_ERR_NOT_UNLOCKED: return "not unlocked";
    case BLK_ERR_RANGE: return "out of range";
    case BLK_ERR_INTERNAL: return "internal error";
    default: return "unknown error";
    }
}

const char* blk_version(void) { return BLKCRYPT_C_VERSION; }

void blk_free(void* p) { std::free(p); }

int blk_open(const char* image, const char* type, unsigned flags, blk_image** out) {
    return open_image(image, nullptr, type, flags, out);
}

int blk_open_detached(const char* image, const char* header, const char* type, unsigned flags, blk_image** out) {
    if (!header || !*header) return guarded([] { return fail(BLK_ERR_INVALID, "blk_open_detached: no header"); });
    return open_image(image, header, type, flags, out);
}

int blk_tcrypt_options(blk_image* img, unsigned flags, uint32_t pim, const char* hash) {
    return guarded([&]() -> int {
        if (!img) return fail(BLK_ERR_INVALID, "no image handle");
        if (img->type != "TCRYPT") return fail(BLK_ERR_INVALID, img->path + ": not opened as tcrypt");
        constexpr unsigned known = BLK_TCRYPT_HIDDEN | BLK_TCRYPT_BACKUP | BLK_TCRYPT_SYSTEM | BLK_TCRYPT_NO_VERACRYPT;
        if (flags & ~known) return fail(BLK_ERR_INVALID, "blk_tcrypt_options: unknown flags");
        if ((flags & BLK_TCRYPT_HIDDEN) && (flags & BLK_TCRYPT_SYSTEM))
            return fail(BLK_ERR_INVALID, "blk_tcrypt_options: hidden and system exclude each other");
        if (pim && (flags & BLK_TCRYPT_NO_VERACRYPT))
            return fail(BLK_ERR_INVALID, "blk_tcrypt_options: a PIM needs VeraCrypt mode");
        // cryptsetup's bound: the iterations a PIM gives must fit 32 bits.
        if (pim > UINT32_MAX / 2048) return fail(BLK_ERR_INVALID, "blk_tcrypt_options: PIM too large");
        tcrypt::OpenOptions& o = img->tc_opts;
        o.hidden = flags & BLK_TCRYPT_HIDDEN;
        o.backup = flags & BLK_TCRYPT_BACKUP;
        o.system = flags & BLK_TCRYPT_SYSTEM;
        o.veracrypt = !(flags & BLK_TCRYPT_NO_VERACRYPT);
        o.pim = pim;
        o.hash = hash ? hash : "";
        return BLK_OK;
    });
}

int blk_tcrypt_add_keyfile(blk_image* img, const char* path) {
    return guarded([&]() -> int {
        if (!img) return fail(BLK_ERR_INVALID, "no image handle");
        if (!path) return fail(BLK_ERR_INVALID, "blk_tcrypt_add_keyfile: NULL path");
        if (img->type != "TCRYPT") return fail(BLK_ERR_INVALID, img->path + ": not opened as tcrypt");
        auto b = read_secret_file(path, tcrypt::kKeyfileMax);
        if (!b) return fail(b.error());
        img->tc_opts.keyfiles.push_back(std::move(b).value());
        return BLK_OK;
    });
}

void blk_close(blk_image* img) {
    if (!img) return;
    guarded([&]() -> int {
        if (img->dev) {
            img->dev->drain();
            if (img->writable) (void)img->dev->flush();
        }
        delete img;
        return BLK_OK;
    });
}

const char* blk_image_type(const blk_image* img) { return img ? img->type.c_str() : ""; }

int blk_unlock_passphrase(blk_image* img, const void* passphrase, size_t len) {
    return guarded([&]() -> int {
        if (!passphrase && len) return fail(BLK_ERR_INVALID, "blk_unlock_passphrase: NULL passphrase");
        SecureBuffer secret(ConstBytes(static_cast<const uint8_t*>(passphrase), len));
        return unlock(img, secret, SecretKind::Passphrase);
    });
}

int blk_unlock_key_file(blk_image* img, const char* path) {
    return guarded([&]() -> int {
        if (!path) return fail(BLK_ERR_INVALID, "blk_unlock_key_file: NULL path");
        auto secret = read_secret_file(path, kKeyFileMax);
        if (!secret) return fail(secret.error());
        return unlock(img, *secret, SecretKind::Passphrase);
    });
}

int blk_unlock_volume_key(blk_image* img, const void* key, size_t len) {
    return guarded([&]() -> int {
        if (!key || !len) return fail(BLK_ERR_INVALID, "blk_unlock_volume_key: no key");
        SecureBuffer secret(ConstBytes(static_cast<const uint8_t*>(key), len));
        return unlock(img, secret, SecretKind::VolumeKey);
    });
}

int blk_size(blk_image* img, uint64_t* size) {
    return guarded([&]() -> int {
        if (int rc = check_device(img); rc != BLK_OK) return rc;
        if (!size) return fail(BLK_ERR_INVALID, "blk_size: NULL size");
        *size = img->dev->size();
        return BLK_OK;
    });
}

int64_t blk_pread(blk_image* img, void* buf, size_t len, uint64_t offset) {
    return guarded([&]() -> int64_t {
        if (int rc = check_device(img); rc != BLK_OK) return rc;
        if (!buf && len) return fail(BLK_ERR_INVALID, "blk_pread: NULL buffer");
        dm::BlockDevice& dev = *img->dev;
        const uint64_t size = dev.size();
        if (offset >= size || len == 0) return 0;
        const uint64_t n = std::min<uint64_t>(len, size - offset);
        if (n > static_cast<uint64_t>(INT64_MAX)) return fail(BLK_ERR_INVALID, "blk_pread: length too large");
        auto* out = static_cast<uint8_t*>(buf);
        ReadAhead& ra = img->ra;
        std::lock_guard lk(ra.mu);
        const uint64_t bs = dev.block_size();
        // A large aligned read (a file object's 1 MiB reads) goes straight
        // into the caller's buffer, split across the workers: the read-ahead
        // below would cost a copy of every byte.
        if (offset == ra.next && !(offset % bs == 0 && n >= kDirectRead)) {
            // Sequential: from the read-ahead chunks, the next ones started first.
            const uint64_t last = (size - 1) / ReadAhead::kChunk;
            for (uint64_t at = offset; at < offset + n;) {
                const uint64_t c = at / ReadAhead::kChunk;
                for (uint64_t k = c; k <= std::min(last, c + ReadAhead::kDepth - 1); k++) {
                    ReadAhead::Slot& s = ra.slots[k % ReadAhead::kDepth];
                    if (s.chunk == k) continue;
                    if (k == c) ra.wait(s);  // the slot's older chunk
                    if (!ra.busy(s)) ra.start(dev, k);
                }
                ReadAhead::Slot& s = ra.slots[c % ReadAhead::kDepth];
                ra.wait(s);
                if (s.status != Status::Ok) {
                    s.chunk = ReadAhead::kNone;
                    ra.next = ReadAhead::kNone;
                    return fail(s.status, img->path + ": reading plaintext at byte " +
                                              std::to_string(c * ReadAhead::kChunk));
                }
                const uint64_t to = std::min((c + 1) * ReadAhead::kChunk, offset + n);
                std::memcpy(out + (at - offset), s.buf.data() + (at - c * ReadAhead::kChunk), to - at);
                at = to;
            }
            ra.next = offset + n;
            return static_cast<int64_t>(n);
        }
        ra.next = offset + n;
        // Aligned: straight into the caller's buffer.
        const uint64_t head = offset % bs, whole_end = (offset + n) / bs * bs;
        uint64_t at = offset;
        if (head == 0 && whole_end > offset) {
            if (Status s = read_split(dev, offset, Bytes(out, whole_end - offset)); s != Status::Ok)
                return fail(s, img->path + ": reading plaintext at byte " + std::to_string(offset));
            at = whole_end;
        }
        // The unaligned rest, through whole blocks.
        std::vector<uint8_t> tmp;
        while (at < offset + n) {
            const uint64_t start = at / bs * bs;
            const uint64_t end = std::min<uint64_t>(size, (offset + n + bs - 1) / bs * bs);
            const uint64_t chunk = std::min<uint64_t>(end - start, uint64_t(1) << 20);
            tmp.resize(chunk);
            if (Status s = dm::read_sync(dev, start, Bytes(tmp.data(), chunk)); s != Status::Ok)
                return fail(s, img->path + ": reading plaintext at byte " + std::to_string(start));
            const uint64_t to = std::min(start + chunk, offset + n);
            std::memcpy(out + (at - offset), tmp.data() + (at - start), to - at);
            at = to;
        }
        return static_cast<int64_t>(n);
    });
}

int64_t blk_pwrite(blk_image* img, const void* buf, size_t len, uint64_t offset) {
    return guarded([&]() -> int64_t {
        if (int rc = check_device(img); rc != BLK_OK) return rc;
        if (!img->writable) return fail(BLK_ERR_READ_ONLY, img->path + ": opened read-only");
        if (!buf && len) return fail(BLK_ERR_INVALID, "blk_pwrite: NULL buffer");
        dm::BlockDevice& dev = *img->dev;
        const uint64_t size = dev.size();
        if (offset > size || len > size - offset)
            return fail(BLK_ERR_RANGE, img->path + ": a write of " + std::to_string(len) + " bytes at " +
                                           std::to_string(offset) + " ends past the plaintext's " +
                                           std::to_string(size) + " bytes");
        if (len == 0) return 0;
        const auto* in = static_cast<const uint8_t*>(buf);
        const uint64_t bs = dev.block_size();
        std::lock_guard lock(img->ra.mu);
        img->ra.drop();
        uint64_t at = offset;
        const uint64_t end = offset + len;
        std::vector<uint8_t> tmp;
        while (at < end) {
            const uint64_t start = at / bs * bs;
            if (at == start && end - at >= bs) {
                // Whole blocks straight from the caller's buffer.
                const uint64_t whole = std::min<uint64_t>((end - at) / bs * bs, uint64_t(1) << 24);
                if (Status s = dm::write_sync(dev, at, ConstBytes(in + (at - offset), whole)); s != Status::Ok)
                    return fail(s, img->path + ": writing plaintext at byte " + std::to_string(at));
                at += whole;
                continue;
            }
            // One partial block: read, patch, write back.
            tmp.resize(bs);
            if (Status s = dm::read_sync(dev, start, Bytes(tmp.data(), bs)); s != Status::Ok)
                return fail(s, img->path + ": reading plaintext at byte " + std::to_string(start));
            const uint64_t to = std::min(start + bs, end);
            std::memcpy(tmp.data() + (at - start), in + (at - offset), to - at);
            if (Status s = dm::write_sync(dev, start, ConstBytes(tmp.data(), bs)); s != Status::Ok)
                return fail(s, img->path + ": writing plaintext at byte " + std::to_string(start));
            at = to;
        }
        return static_cast<int64_t>(len);
    });
}

int blk_flush(blk_image* img) {
    return guarded([&]() -> int {
        if (int rc = check_device(img); rc != BLK_OK) return rc;
        img->dev->drain();
        if (Status s = img->dev->flush(); s != Status::Ok) return fail(s, img->path + ": flush");
        return BLK_OK;
    });
}

int blk_dump_json(blk_image* img, char** json) {
    return guarded([&]() -> int {
        if (!img || !json) return fail(BLK_ERR_INVALID, "blk_dump_json: NULL argument");
        Error err;
        Registry* reg = registry(err);
        if (!reg) return fail(err);
        std::string text;
        if (img->type == "LUKS1" || img->type == "LUKS2") {
            // The object `blkcrypt luks dump --json` prints.
            auto store = open_store(img->path, false);
            if (!store) return fail(store.error());
            auto c = luks::Container::load(*reg, *store);
            if (!c) return fail(c.error());
            auto s = c->dump_summary_json(img->path);
            if (!s) return fail(s.error());
            text = std::move(s).value();
        } else {
            std::string dump;
            if (img->container) {
                auto d = img->container->dump(false);
                if (!d) return fail(d.error());
                dump = std::move(d).value();
            } else if (img->tc) {
                dump = tcrypt::dump(*img->tc, img->path);
            } else {
                return fail(BLK_ERR_NOT_UNLOCKED, img->path + ": a TrueCrypt/VeraCrypt header is read at unlock");
            }
            text = "{\"device\":" + json_string(img->path) + ",\"type\":" + json_string(img->type) +
                   ",\"dump\":" + json_string(dump) + "}";
        }
        char* out = static_cast<char*>(std::malloc(text.size() + 1));
        if (!out) return fail(BLK_ERR_NO_MEMORY, "out of memory");
        std::memcpy(out, text.c_str(), text.size() + 1);
        *json = out;
        return BLK_OK;
    });
}

int blk_verity_format(const char* data, const char* hash, const char* hash_name, uint32_t data_block_size,
                      uint32_t hash_block_size, const void* salt, size_t salt_len, void* root_hash,
                      size_t* root_len) {
    return guarded([&]() -> int {
        if (!data || !hash || !root_len || (!root_hash && *root_len))
            return fail(BLK_ERR_INVALID, "blk_verity_format: NULL argument");
        Error err;
        Registry* reg = registry(err);
        if (!reg) return fail(err);
        verity::VerityParams p;
        if (hash_name) p.hash_name = hash_name;
        if (data_block_size) p.data_block_size = data_block_size;
        if (hash_block_size) p.hash_block_size = hash_block_size;
        if (salt) {
            p.salt.assign(static_cast<const uint8_t*>(salt), static_cast<const uint8_t*>(salt) + salt_len);
        } else {
            p.salt.resize(32);
            if (auto r = random_bytes(p.salt); !r) return fail(r.error());
        }
        if (auto r = random_bytes(p.uuid); !r) return fail(r.error());
        p.uuid[6] = static_cast<uint8_t>((p.uuid[6] & 0x0f) | 0x40);  // a version-4 UUID, as veritysetup's
        p.uuid[8] = static_cast<uint8_t>((p.uuid[8] & 0x3f) | 0x80);
        auto data_store = open_store(data, false);
        if (!data_store) return fail(data_store.error());
        if ((*data_store)->size() % p.data_block_size)
            return fail(BLK_ERR_INVALID, std::string(data) + ": " + std::to_string((*data_store)->size()) +
                                             " bytes is not a whole number of " +
                                             std::to_string(p.data_block_size) + "-byte blocks");
        p.data_blocks = (*data_store)->size() / p.data_block_size;
        if (auto c = verity::check_params(p); !c) return fail(c.error());
        auto geometry = verity::plan_tree(*reg, p);
        if (!geometry) return fail(geometry.error());
        const uint64_t need = geometry->hash_device_size(p);
        // A missing HASH file is created; a regular file is grown to hold the
        // tree. Anything else (a device, a URI the store opener takes) is used
        // as it is.
        if (std::string_view(hash).find("://") == std::string_view::npos) {
            const int fd = ::open(hash, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
            if (fd < 0) return fail(BLK_ERR_IO, std::string(hash) + ": " + std::strerror(errno));
            struct stat st{};
            int rc = ::fstat(fd, &st);
            if (rc == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) < need)
                rc = ::ftruncate(fd, static_cast<off_t>(need));
            const int saved = errno;
            ::close(fd);
            if (rc != 0) return fail(BLK_ERR_IO, std::string(hash) + ": " + std::strerror(saved));
        }
        auto hash_store = open_store(hash, true);
        if (!hash_store) return fail(hash_store.error());
        auto r = verity::format_tree(*reg, p, **data_store, **hash_store);
        if (!r) return fail(r.error());
        const size_t have = *root_len;
        *root_len = r->root_hash.size();
        if (have < r->root_hash.size())
            return fail(BLK_ERR_INVALID, "blk_verity_format: the root hash needs " +
                                             std::to_string(r->root_hash.size()) + " bytes");
        std::memcpy(root_hash, r->root_hash.data(), r->root_hash.size());
        return BLK_OK;
    });
}

int blk_verity_verify(const char* data, const char* hash, const void* root_hash, size_t root_len) {
    return guarded([&]() -> int {
        if (!data || !hash || !root_hash || !root_len) return fail(BLK_ERR_INVALID, "blk_verity_verify: NULL argument");
        Error err;
        Registry* reg = registry(err);
        if (!reg) return fail(err);
        auto data_store = open_store(data, false);
        if (!data_store) return fail(data_store.error());
        auto hash_store = open_store(hash, false);
        if (!hash_store) return fail(hash_store.error());
        std::vector<uint8_t> sb(verity::kSuperblockSize);
        if ((*hash_store)->size() < sb.size()) return fail(BLK_ERR_INVALID, std::string(hash) + ": no verity superblock");
        if (Status s = (*hash_store)->read(0, sb); s != Status::Ok) return fail(s, std::string(hash) + ": reading");
        auto p = verity::decode_superblock(sb);
        if (!p) return fail(p.error());
        auto report = verity::verify_tree(*reg, *p, ConstBytes(static_cast<const uint8_t*>(root_hash), root_len),
                                          **data_store, **hash_store);
        if (!report) return fail(report.error());
        if (report->ok()) return BLK_OK;
        const verity::Corruption& c = report->corruptions.front();
        std::string where = c.kind == verity::Corruption::DataBlock   ? "data block " + std::to_string(c.block)
                            : c.kind == verity::Corruption::HashBlock ? "hash block " + std::to_string(c.block)
                                                                      : std::string("the root hash");
        return fail(BLK_ERR_CORRUPT, std::string(data) + ": verification failed at " + where + " (" +
                                         std::to_string(report->corruptions.size()) + " corruption(s))");
    });
}

int blk_hash(const char* alg, const void* key, size_t key_len, const void* data, size_t len, void* out,
             size_t* out_len) {
    return guarded([&]() -> int {
        if (!alg || (!data && len) || !out_len || (!out && *out_len))
            return fail(BLK_ERR_INVALID, "blk_hash: NULL argument");
        Error err;
        Registry* reg = registry(err);
        if (!reg) return fail(err);
        auto h = Shash::alloc(*reg, alg);
        if (!h) return fail(h.error());
        if (key) {
            if (Status s = h->setkey(ConstBytes(static_cast<const uint8_t*>(key), key_len)); s != Status::Ok)
                return fail(s, std::string(alg) + ": setkey");
        }
        const size_t have = *out_len;
        *out_len = h->digestsize();
        if (have < h->digestsize())
            return fail(BLK_ERR_INVALID, std::string(alg) + ": the digest needs " + std::to_string(h->digestsize()) + " bytes");
        if (Status s = h->digest(ConstBytes(static_cast<const uint8_t*>(data), len),
                                 Bytes(static_cast<uint8_t*>(out), h->digestsize()));
            s != Status::Ok)
            return fail(s, std::string(alg) + ": digest");
        return BLK_OK;
    });
}

int blk_cipher(const char* alg, int encrypt, const void* key, size_t key_len, const void* iv, size_t iv_len,
               const void* in, void* out, size_t len) {
    return guarded([&]() -> int {
        if (!alg || !key || ((!in || !out) && len) || (!iv && iv_len))
            return fail(BLK_ERR_INVALID, "blk_cipher: NULL argument");
        Error err;
        Registry* reg = registry(err);
        if (!reg) return fail(err);
        auto c = Skcipher::alloc(*reg, alg);
        if (!c) return fail(c.error());
        if (iv_len != c->ivsize())
            return fail(BLK_ERR_INVALID, std::string(alg) + ": the IV is " + std::to_string(c->ivsize()) +
                                             " bytes, not " + std::to_string(iv_len));
        if (Status s = c->setkey(ConstBytes(static_cast<const uint8_t*>(key), key_len)); s != Status::Ok)
            return fail(s, std::string(alg) + ": setkey (" + std::to_string(key_len) + " bytes)");
        // The IV is the transform's chaining state: work on a copy.
        std::vector<uint8_t> ivbuf(static_cast<const uint8_t*>(iv), static_cast<const uint8_t*>(iv) + iv_len);
        const ConstBytes src(static_cast<const uint8_t*>(in), len);
        const Bytes dst(static_cast<uint8_t*>(out), len);
        const Status s = encrypt ? c->encrypt(src, dst, ivbuf) : c->decrypt(src, dst, ivbuf);
        if (s != Status::Ok) return fail(s, std::string(alg) + (encrypt ? ": encrypt" : ": decrypt"));
        return BLK_OK;
    });
}

}  // extern "C"
