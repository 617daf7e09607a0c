// LUKS1 legacy reencryption (see <blkcrypt/luks/reencrypt_luks1.hpp>), after
// cryptsetup 2.6.1 src/utils_reencrypt_luks1.c: the same log text, file
// names, unusable magic and block walk, with the data converted by our
// dm-crypt engine instead of two temporary device-mapper devices.
#include <blkcrypt/luks/reencrypt_luks1.hpp>

#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/dm/table.hpp>
#include <blkcrypt/random.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace blkcrypt::luks::luks1::legacy {

namespace {

Error invalid(std::string msg) { return make_error(Status::Invalid, std::move(msg)); }

std::string errno_text() { return std::strerror(errno); }

std::shared_ptr<BackingStore> borrow(BackingStore& s) {
    return std::shared_ptr<BackingStore>(&s, [](BackingStore*) {});
}

// --- small file helpers: every write fsynced, as the protocol relies on order.

class Fd {
public:
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const { return fd_; }

private:
    int fd_;
};

bool write_all(int fd, uint64_t off, ConstBytes b) {
    while (!b.empty()) {
        const ssize_t n = ::pwrite(fd, b.data(), b.size(), static_cast<off_t>(off));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        b = b.subspan(static_cast<std::size_t>(n));
        off += static_cast<uint64_t>(n);
    }
    return true;
}

Result<std::vector<uint8_t>> read_file(const std::string& path, std::size_t max) {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return make_error(errno == ENOENT ? Status::NotFound : Status::IoError, path + ": " + errno_text());
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return make_error(Status::IoError, path + ": " + errno_text());
    if (!S_ISREG(st.st_mode)) return invalid(path + " is not a regular file");
    if (static_cast<uint64_t>(st.st_size) > max) return invalid(path + " is too large");
    std::vector<uint8_t> out(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < out.size()) {
        const ssize_t n = ::pread(fd.get(), out.data() + got, out.size() - got, static_cast<off_t>(got));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return make_error(Status::IoError, path + ": cannot read");
        got += static_cast<std::size_t>(n);
    }
    return out;
}

// A new file (O_EXCL: never replaces anything) holding data, fsynced.
Result<void> create_file(const std::string& path, ConstBytes data, mode_t mode) {
    Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
    if (fd.get() < 0) return make_error(Status::IoError, "cannot create " + path + ": " + errno_text());
    if (!write_all(fd.get(), 0, data) || ::fsync(fd.get()) != 0)
        return make_error(Status::IoError, "cannot write " + path + ": " + errno_text());
    return {};
}

std::string dir_of(const std::string& dir) { return dir.empty() ? std::string(".") : dir; }

void sync_dir(const std::string& dir) {
    Fd fd(::open(dir_of(dir).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd.get() >= 0) (void)::fsync(fd.get());
}

std::string file_path(const std::string& dir, const std::string& uuid, const char* ext) {
    std::string name = "LUKS-" + uuid + "." + ext;
    if (dir.empty() || dir == ".") return name;
    return dir.back() == '/' ? dir + name : dir + "/" + name;
}

// The UUID comes from the image (untrusted) and names files: hex and dashes
// only, so that it cannot point elsewhere.
bool safe_uuid(std::string_view u) {
    if (u.empty() || u.size() > 40) return false;
    return std::all_of(u.begin(), u.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == '-';
    });
}

// --- the log's line grammar: cryptsetup reads each line with sscanf.

std::string_view skip_space(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\v' ||
                          s.front() == '\f'))
        s.remove_prefix(1);
    return s;
}

// "key = " as sscanf matches "key = %...": the key literally at the start,
// then any whitespace, '=', any whitespace. The rest, or nullopt.
std::optional<std::string_view> after_key(std::string_view line, std::string_view key) {
    if (line.substr(0, key.size()) != key) return std::nullopt;
    std::string_view s = skip_space(line.substr(key.size()));
    if (s.empty() || s.front() != '=') return std::nullopt;
    return skip_space(s.substr(1));
}

template <class T>
std::optional<T> leading_number(std::string_view s) {
    if (!s.empty() && s.front() == '+') s.remove_prefix(1);
    T v{};
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc()) return std::nullopt;  // trailing text after the number is ignored, as sscanf does
    (void)p;
    return v;
}

// --- the journal of the block in flight (ours): a 512-byte head, then the bytes.

constexpr uint64_t kMaxJournal = uint64_t{1} << 30;  // a sanity bound on a saved block

constexpr char kBlkMagic[16] = {'b', 'l', 'k', 'c', 'r', 'y', 'p', 't', '-', 'l', '1', 'r', 'e', 'n', 'c', 0};

struct BlkHead {
    uint64_t log_offset = 0;  // the log's offset when this block was started
    uint64_t phys = 0;        // where the saved bytes belong on the image
    uint64_t len = 0;
};

void put_le64(uint8_t* p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t get_le64(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

// The head names the run by its new header's master-key digest and salt
// (random per run), so that a stale file from another run never matches.
std::array<uint8_t, 512> blk_head(const BlkHead& h, const std::string& uuid, Direction d, const Header& neu) {
    std::array<uint8_t, 512> b{};
    std::memcpy(b.data() + 104, neu.mk_digest.data(), kDigestSize);
    std::memcpy(b.data() + 124, neu.mk_digest_salt.data(), kSaltSize);
    std::memcpy(b.data(), kBlkMagic, sizeof kBlkMagic);
    put_le64(b.data() + 16, h.log_offset);
    put_le64(b.data() + 24, h.phys);
    put_le64(b.data() + 32, h.len);
    b[40] = static_cast<uint8_t>(d);
    std::memcpy(b.data() + 64, uuid.data(), std::min<std::size_t>(uuid.size(), 40));
    return b;
}

// Saves the old bytes of [phys, phys+len) before they are overwritten: the
// bytes first, then the head naming them, each fsynced, so a head is only
// ever found beside complete bytes.
Result<void> journal_block(int fd, const BlkHead& h, const std::string& uuid, Direction d, const Header& neu,
                           ConstBytes old) {
    // Invalidate the previous head first: a crash while the new bytes are
    // written must not leave the old head describing them.
    std::array<uint8_t, 512> zero{};
    if (!write_all(fd, 0, zero) || ::fdatasync(fd) != 0 || !write_all(fd, 512, old) || ::fdatasync(fd) != 0)
        return make_error(Status::IoError, "cannot write the reencryption block journal: " + errno_text());
    std::array<uint8_t, 512> head = blk_head(h, uuid, d, neu);
    if (!write_all(fd, 0, head) || ::fdatasync(fd) != 0)
        return make_error(Status::IoError, "cannot write the reencryption block journal: " + errno_text());
    return {};
}

Result<Header> header_file(Registry& reg, const std::string& path, const std::string& uuid, const char* what) {
    Result<std::vector<uint8_t>> raw = read_file(path, 64u << 20);
    if (!raw) return raw.error();
    Result<Header> h = parse_header(*raw);
    if (!h) return make_error(h.status(), path + " (" + what + " header): " + h.error().message);
    if (!uuid.empty() && h->uuid != uuid) return invalid(path + ": UUID " + h->uuid + " is not the expected " + uuid);
    if (Result<std::string> r = registry_hash(reg, h->hash_spec); !r) return r.error();
    if (raw->size() < device_sectors(*h) * kSector) return invalid(path + " does not hold its keyslot areas");
    return h;
}

Result<std::unique_ptr<dm::CryptTarget>> data_target(Registry& reg, BackingStore& store, const Header& h,
                                                     SecureBuffer key, uint64_t len_sectors, std::size_t block) {
    Result<dm::CryptTable> t = dm::parse_cipher_spec(h.cipher_spec());
    if (!t) return make_error(t.status(), "LUKS cipher " + h.cipher_spec() + ": " + t.error().message);
    if (h.cipher_name != "cipher_null") t->key = std::move(key);  // cipher_null: no key, dm-crypt's "-"
    t->offset = h.payload_offset;
    dm::CryptTargetOptions o;
    o.max_request = block;
    return dm::CryptTarget::create(reg, *t, borrow(store), len_sectors, o);
}

Status bio_sync(dm::CryptTarget& t, dm::BioDir dir, uint64_t off, uint8_t* p, std::size_t n) {
    dm::Bio bio;
    bio.sector = off / kSector;
    bio.dir = dir;
    bio.vecs.push_back({p, n});
    return t.submit_sync(bio);
}

Result<SecureBuffer> unlock_file(Registry& reg, const std::string& path, const Header& h, ConstBytes passphrase,
                                 const char* what) {
    Result<std::shared_ptr<BackingStore>> s = open_store(path, false);
    if (!s) return s.error();
    Result<Unlocked> u = open_any(reg, **s, h, passphrase);
    if (!u) return make_error(u.status(), std::string(what) + " header " + path + ": " + u.error().message);
    return std::move(u->volume_key);
}

Result<void> write_log(int fd, const Log& log) {
    const std::array<uint8_t, kLogSize> b = format_log(log);
    if (!write_all(fd, 0, b) || ::fdatasync(fd) != 0)
        return make_error(Status::IoError, "Cannot write reencryption log file.");
    return {};
}

}  // namespace

std::array<uint8_t, kLogSize> format_log(const Log& log) {
    std::array<uint8_t, kLogSize> out{};
    const int n = std::snprintf(reinterpret_cast<char*>(out.data()), out.size(),
                                "# LUKS reencryption log, DO NOT EDIT OR DELETE.\n"
                                "version = %d\nUUID = %s\ndirection = %d\nmode = %d\n"
                                "offset = %llu\nshift = %llu\n# EOF\n",
                                2, log.uuid.c_str(), static_cast<int>(log.direction), static_cast<int>(log.mode),
                                static_cast<unsigned long long>(log.offset), static_cast<unsigned long long>(log.shift));
    // snprintf's terminating NUL is part of the zero padding, as in cryptsetup.
    (void)n;
    return out;
}

Result<Log> parse_log(ConstBytes sector, const std::string& expected_uuid) {
    if (sector.size() < kLogSize) return make_error(Status::IoError, "Cannot read reencryption log file.");
    // The sector as a C string: the last byte forced to NUL, only complete
    // lines (ending in '\n') before the first NUL are read.
    std::string_view text(reinterpret_cast<const char*>(sector.data()), kLogSize - 1);
    text = text.substr(0, text.find('\0'));
    const Error wrong = invalid("Wrong log format.");
    Log log;
    log.uuid = expected_uuid;
    for (std::size_t nl; (nl = text.find('\n')) != std::string_view::npos; text.remove_prefix(nl + 1)) {
        const std::string_view line = text.substr(0, nl);
        if (!line.empty() && line.front() == '#') continue;
        if (auto v = after_key(line, "version")) {
            auto i = leading_number<int>(*v);
            if (!i) return wrong;
            if (*i < 1 || *i > 2) return wrong;
        } else if (auto vu = after_key(line, "UUID")) {
            std::string_view u = *vu;
            u = u.substr(0, std::min<std::size_t>(u.find_first_of(" \t\r\v\f"), 40));
            if (u.empty()) return wrong;
            if (u != expected_uuid) return invalid("Wrong log format. (UUID " + std::string(u) + " is not the image's)");
        } else if (auto vd = after_key(line, "direction")) {
            auto i = leading_number<int>(*vd);
            if (!i) return wrong;
            if (*i != 0 && *i != 1) return wrong;
            log.direction = static_cast<Direction>(*i);
        } else if (auto vo = after_key(line, "offset")) {
            auto u = leading_number<uint64_t>(*vo);
            if (!u) return wrong;
            log.offset = *u;
        } else if (auto vs = after_key(line, "shift")) {
            auto u = leading_number<uint64_t>(*vs);
            if (!u) return wrong;
            log.shift = *u;
        } else if (auto vm = after_key(line, "mode")) {
            auto i = leading_number<int>(*vm);
            if (!i || *i < 0 || *i > 2) return wrong;
            log.mode = static_cast<Mode>(*i);
        } else {
            return wrong;
        }
    }
    return log;
}

Result<std::optional<std::string>> unusable_uuid(BackingStore& store) {
    if (store.size() < kHeaderSize) return std::optional<std::string>{};
    std::array<uint8_t, kHeaderSize> h{};
    if (Status s = store.read(0, h); s != Status::Ok) return make_error(s, store.name() + ": cannot read the header");
    const uint16_t version = static_cast<uint16_t>((h[6] << 8) | h[7]);
    if (std::memcmp(h.data(), kUnusableMagic, sizeof kUnusableMagic) != 0 || version != 1)
        return std::optional<std::string>{};
    // cryptsetup takes the UUID field (offset 0xa8) up to its first NUL, at most 40 bytes.
    const char* u = reinterpret_cast<const char*>(h.data() + 0xa8);
    return std::optional<std::string>{std::string(u, strnlen(u, 40))};
}

namespace {

// The log and both header files of the run named uuid. Each header must
// carry the UUID its side has: the image's, or kEncryptUuid for a fake
// (cipher_null) one; an encryption's new header has a UUID of its own.
Result<Leftover> load_files(Registry& reg, const std::string& uuid, const std::string& dir) {
    Leftover lo;
    lo.uuid = uuid;
    lo.log_path = file_path(dir, lo.uuid, "log");
    lo.org_path = file_path(dir, lo.uuid, "org");
    lo.new_path = file_path(dir, lo.uuid, "new");
    lo.blk_path = file_path(dir, lo.uuid, "blk");
    Result<std::vector<uint8_t>> raw = read_file(lo.log_path, 1u << 20);
    if (!raw)
        return make_error(raw.status(), "LUKS1 reencryption of " + lo.uuid + " in progress, but its log " + lo.log_path +
                                            " cannot be read (cryptsetup writes it in the directory it ran in): " +
                                            raw.error().message);
    Result<Log> log = parse_log(*raw, lo.uuid);
    if (!log) return make_error(log.status(), lo.log_path + ": " + log.error().message);
    lo.log = *log;
    const bool enc = lo.log.mode == Mode::Encrypt, dec = lo.log.mode == Mode::Decrypt;
    Result<Header> org = header_file(reg, lo.org_path, enc ? kEncryptUuid : lo.uuid, "old");
    if (!org) return org.error();
    Result<Header> neu = header_file(reg, lo.new_path, dec ? kEncryptUuid : enc ? "" : lo.uuid, "new");
    if (!neu) return neu.error();
    lo.org = std::move(org).value();
    lo.neu = std::move(neu).value();
    return lo;
}

}  // namespace

Result<Leftover> find(Registry& reg, BackingStore& store, const std::string& dir) {
    Result<std::optional<std::string>> uuid = unusable_uuid(store);
    if (!uuid) return uuid.error();
    if (!*uuid) return invalid(store.name() + " is not marked by a LUKS1 reencryption in progress (no LUKS\\xde\\xad magic)");
    if (!safe_uuid(**uuid)) return invalid(store.name() + ": the marked header's UUID is not a UUID");
    return load_files(reg, **uuid, dir);
}

Result<Leftover> find_unmarked(Registry& reg, const std::string& uuid, const std::string& dir) {
    if (!safe_uuid(uuid)) return invalid("'" + uuid + "' is not a UUID");
    Result<Leftover> lo = load_files(reg, uuid, dir);
    if (!lo) return lo;
    if (lo->log.mode == Mode::Reencrypt)
        return invalid(lo->log_path + " is a reencryption (mode 0): its image must be marked LUKS\\xde\\xad");
    return lo;
}

namespace {

// The size in bytes of the data mapping the log's offsets count in
// (cryptsetup: the new device's size when reencrypting).
Result<uint64_t> mapping_size(BackingStore& store, const Leftover& lo) {
    const uint64_t total = store.size() / kSector * kSector;
    const uint64_t org = uint64_t{lo.org.payload_offset} * kSector, neu = uint64_t{lo.neu.payload_offset} * kSector;
    // Encryption: the plaintext (fake .org, payload 0) moves on to the new
    // payload; decryption: the data moves back to 0 (fake .new), its
    // mapping the old one's size (cryptsetup: device_size_org_real).
    if (lo.log.mode == Mode::Encrypt && (org != 0 || neu == 0))
        return invalid("an encryption's headers must have payload 0 (old) and past 0 (new): not what cryptsetup writes");
    if (lo.log.mode == Mode::Decrypt && neu != 0)
        return invalid("a decryption's new header must have payload 0: not what cryptsetup writes");
    if (lo.log.mode == Mode::Decrypt) {
        if (total <= org) return invalid(store.name() + " is smaller than the header's payload offset");
        return total - org;
    }
    if (lo.neu.payload_offset < lo.org.payload_offset)
        return invalid("the new header's payload (sector " + std::to_string(lo.neu.payload_offset) +
                       ") is before the old one's: not what cryptsetup writes");
    if (total <= neu || total <= org) return invalid(store.name() + " is smaller than the headers' payload offset");
    return total - neu;
}

Result<void> remove_files(const Leftover& lo, const std::string& dir) {
    // The log first: without it nothing resumes the run, so a crash here
    // cannot lead a later resume to reconvert finished data.
    for (const std::string* p : {&lo.log_path, &lo.blk_path, &lo.org_path, &lo.new_path})
        if (::unlink(p->c_str()) != 0 && errno != ENOENT)
            return make_error(Status::IoError, "cannot remove " + *p + ": " + errno_text());
    sync_dir(dir);
    return {};
}

// Puts a header file (.org or .new) back onto the marked image, crash-safely:
// first all of it with the magic still LUKS\xde\xad, flushed, so that a crash
// or a torn write leaves the image marked (the leftover is resumed or rolled
// back again from the untouched file); then the six magic bytes, inside the
// first sector (either half of a torn magic write leaves one of the two
// magics, as they share "LUK"), flushed.
Result<void> restore_marked(Registry& reg, BackingStore& store, ConstBytes hdr) {
    Result<Header> h = parse_header(hdr);
    if (!h) return invalid("the header file does not hold a valid LUKS header");
    if (Result<std::string> r = registry_hash(reg, h->hash_spec); !r) return r.error();
    const uint64_t used = device_sectors(*h) * kSector;
    if (hdr.size() < used) return invalid("the header file does not hold its keyslot areas");
    if (store.size() < used) return invalid(store.name() + " is smaller than the header's keyslot areas");
    std::vector<uint8_t> marked(hdr.begin(), hdr.begin() + static_cast<std::ptrdiff_t>(used));
    std::memcpy(marked.data(), kUnusableMagic, sizeof kUnusableMagic);
    if (Status s = store.write(0, marked); s != Status::Ok)
        return make_error(s, store.name() + ": cannot write the LUKS header");
    if (Status s = store.flush(); s != Status::Ok) return make_error(s, store.name() + ": flush");
    if (Status s = store.write(0, hdr.first(sizeof kUnusableMagic)); s != Status::Ok)
        return make_error(s, store.name() + ": cannot write the LUKS magic");
    if (Status s = store.flush(); s != Status::Ok) return make_error(s, store.name() + ": flush");
    return {};
}

std::string dir_from(const std::string& log_path) {
    const std::size_t slash = log_path.rfind('/');
    return slash == std::string::npos ? std::string() : log_path.substr(0, slash);
}

// The .new header onto the image (magic last), then the files removed.
Result<void> restore_new(Registry& reg, BackingStore& store, const Leftover& lo) {
    Result<std::vector<uint8_t>> neu = read_file(lo.new_path, 64u << 20);
    if (!neu) return neu.error();
    if (Result<void> r = restore_marked(reg, store, *neu); !r) return r;
    return remove_files(lo, dir_from(lo.log_path));
}

bool same_mapping(const Leftover& lo, const SecureBuffer& vk_old, const SecureBuffer& vk_new) {
    return lo.org.cipher_spec() == lo.neu.cipher_spec() && lo.org.payload_offset == lo.neu.payload_offset &&
           vk_old.size() == vk_new.size() && std::equal(vk_old.data(), vk_old.data() + vk_old.size(), vk_new.data());
}


// A block interrupted mid-write: LUKS-<uuid>.blk (ours) holds its old bytes
// under a head naming this run and the log offset the block started at;
// when that is the log's offset now (nullopt: any, for a run whose log says
// no block completed, so that only its first can have been in flight), the
// bytes go back (the block is then redone, or the run rolled back). No file,
// another run's or another offset's: nothing to do.
Result<void> replay_block(BackingStore& data, const Leftover& lo, std::optional<uint64_t> log_offset) {
    Fd blk(::open(lo.blk_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (blk.get() < 0) return {};
    const uint64_t total = data.size() / kSector * kSector;
    std::array<uint8_t, 512> head{};
    const ssize_t n = ::pread(blk.get(), head.data(), head.size(), 0);
    if (n != 512 || std::memcmp(head.data(), kBlkMagic, sizeof kBlkMagic) != 0 ||
        head[40] != static_cast<uint8_t>(lo.log.direction) ||
        std::memcmp(head.data() + 104, lo.neu.mk_digest.data(), kDigestSize) != 0 ||
        std::memcmp(head.data() + 124, lo.neu.mk_digest_salt.data(), kSaltSize) != 0 ||
        std::string_view(reinterpret_cast<const char*>(head.data() + 64),
                         strnlen(reinterpret_cast<const char*>(head.data() + 64), 40)) != lo.uuid)
        return {};
    BlkHead h{get_le64(head.data() + 16), get_le64(head.data() + 24), get_le64(head.data() + 32)};
    // Any block size (the run may have used another one), within the image.
    if ((log_offset && h.log_offset != *log_offset) || h.len == 0 || h.len > kMaxJournal || h.len > total || h.phys > total - h.len)
        return {};
    std::vector<uint8_t> old(h.len);
    if (::pread(blk.get(), old.data(), old.size(), 512) != static_cast<ssize_t>(old.size()))
        return make_error(Status::IoError, lo.blk_path + ": cannot read the saved block");
    if (Status s = data.write(h.phys, old); s != Status::Ok)
        return make_error(s, data.name() + ": cannot restore the interrupted block");
    if (Status s = data.flush(); s != Status::Ok) return make_error(s, data.name() + ": flush");
    return {};
}

}  // namespace

Result<void> rollback(Registry& reg, BackingStore& store, const Leftover& lo, BackingStore* data) {
    Result<uint64_t> size = mapping_size(data ? *data : store, lo);
    if (!size) return size.error();
    const bool untouched = lo.log.direction == Direction::Forward ? lo.log.offset == 0 : lo.log.offset >= *size;
    if (!untouched)
        return invalid("data is already reencrypted (log offset " + std::to_string(lo.log.offset) +
                       "): it cannot be rolled back by restoring the header; finish it instead");
    // The first block may have been in flight: its old bytes back first.
    if (Result<void> r = replay_block(data ? *data : store, lo, std::nullopt); !r) return r;
    // An encryption wrote nothing on the image before its first block.
    if (lo.log.mode == Mode::Encrypt) return remove_files(lo, dir_from(lo.log_path));
    Result<std::vector<uint8_t>> org = read_file(lo.org_path, 64u << 20);
    if (!org) return org.error();
    if (Result<void> r = restore_marked(reg, store, *org); !r) return r;
    return remove_files(lo, dir_from(lo.log_path));
}

Result<void> finish(Registry& reg, BackingStore& store, const Leftover& lo, ConstBytes passphrase,
                    const RunOptions& opts) {
    // A detached header (--header): store holds it, opts.data the data.
    BackingStore& data = opts.data ? *opts.data : store;
    const bool enc = lo.log.mode == Mode::Encrypt, dec = lo.log.mode == Mode::Decrypt;
    if (opts.block_size < kSector || opts.block_size % kSector || opts.block_size > kMaxJournal)
        return invalid("block size must be a multiple of 512 bytes");
    Result<uint64_t> size = mapping_size(data, lo);
    if (!size) return size.error();
    if (opts.device_size % kSector) return invalid("Device size must be multiple of 512 bytes sector.");
    if (opts.device_size > *size)
        return invalid("--device-size " + std::to_string(opts.device_size) + " is larger than the data (" +
                       std::to_string(*size) + " bytes)");
    const uint64_t dev = opts.device_size ? opts.device_size : *size;
    const uint64_t total = data.size() / kSector * kSector;

    // The fake (cipher_null) side needs no key: any passphrase opens it.
    Result<SecureBuffer> vk_old = enc ? Result<SecureBuffer>(SecureBuffer()) : unlock_file(reg, lo.org_path, lo.org, passphrase, "old");
    if (!vk_old) return vk_old.error();
    Result<SecureBuffer> vk_new = dec ? Result<SecureBuffer>(SecureBuffer()) : unlock_file(reg, lo.new_path, lo.neu, passphrase, "new");
    if (!vk_new) return vk_new.error();
    // A --keep-key run: both headers map the data to the same ciphertext.
    if (!enc && !dec && same_mapping(lo, *vk_old, *vk_new)) return restore_new(reg, store, lo);
    Result<std::unique_ptr<dm::CryptTarget>> src =
        data_target(reg, data, lo.org, std::move(vk_old).value(), (total - uint64_t{lo.org.payload_offset} * kSector) / kSector,
                    opts.block_size);
    if (!src) return src.error();
    Result<std::unique_ptr<dm::CryptTarget>> dst =
        data_target(reg, data, lo.neu, std::move(vk_new).value(), dev / kSector, opts.block_size);
    if (!dst) return dst.error();

    Fd logfd(::open(lo.log_path.c_str(), O_RDWR | O_CLOEXEC));
    if (logfd.get() < 0) return make_error(Status::IoError, "Cannot open reencryption log file " + lo.log_path);
    Fd blk(::open(lo.blk_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (blk.get() < 0) return make_error(Status::IoError, "cannot open " + lo.blk_path + ": " + errno_text());

    Log log = lo.log;
    // cryptsetup's backward walk starts at ~0 before the first run: the end.
    if (log.direction == Direction::Backward && log.offset > dev) log.offset = dev;
    if (log.direction == Direction::Forward && log.offset > dev)
        return invalid(lo.log_path + ": offset " + std::to_string(log.offset) + " is past the data (" +
                       std::to_string(dev) + " bytes)");
    if (log.offset % kSector) return invalid(lo.log_path + ": offset is not a multiple of 512");
    const uint64_t dst_base = uint64_t{lo.neu.payload_offset} * kSector;

    // A block interrupted mid-write: put its old bytes back, then redo it.
    if (Result<void> r = replay_block(data, lo, log.offset); !r) return r;

    SecureBuffer plain(opts.block_size);
    std::vector<uint8_t> saved(opts.block_size);
    if (Result<void> r = write_log(logfd.get(), log); !r) return r;
    const uint64_t done0 = log.direction == Direction::Forward ? log.offset : dev - log.offset;
    uint64_t done = done0;
    while (log.direction == Direction::Forward ? log.offset < dev : log.offset > 0) {
        uint64_t start, len;
        if (log.direction == Direction::Forward) {
            start = log.offset;
            len = std::min<uint64_t>(opts.block_size, dev - start);
        } else {
            start = log.offset > opts.block_size ? log.offset - opts.block_size : 0;
            len = log.offset - start;
        }
        const std::size_t n = static_cast<std::size_t>(len);
        if (Status s = bio_sync(**src, dm::BioDir::Read, start, plain.data(), n); s != Status::Ok)
            return make_error(s, data.name() + ": read error during reencryption");
        if (Status s = data.read(dst_base + start, Bytes(saved).first(n)); s != Status::Ok)
            return make_error(s, data.name() + ": read error during reencryption");
        if (Result<void> r = journal_block(blk.get(), BlkHead{log.offset, dst_base + start, len}, lo.uuid, log.direction,
                                           lo.neu, ConstBytes(saved).first(n));
            !r)
            return r;
        if (Status s = bio_sync(**dst, dm::BioDir::Write, start, plain.data(), n); s != Status::Ok)
            return make_error(s, data.name() + ": IO error during reencryption.");
        if (Status s = data.flush(); s != Status::Ok) return make_error(s, data.name() + ": IO error during reencryption.");
        log.offset = log.direction == Direction::Forward ? start + len : start;
        if (Result<void> r = write_log(logfd.get(), log); !r) return r;
        done += len;
        if (opts.progress && !opts.progress(done, dev))
            return make_error(Status::Interrupted, "Reencryption interrupted.");
    }
    src->reset();
    dst->reset();
    if (dec) {
        // cryptsetup zeroes the tail the data no longer reaches (the old
        // payload offset's worth), "to not leave any sign of encryption";
        // no header goes back.
        const uint64_t tail = uint64_t{lo.org.payload_offset} * kSector;
        std::vector<uint8_t> zero(static_cast<std::size_t>(std::min<uint64_t>(tail, 1u << 20)));
        for (uint64_t at = total - tail; at < total;) {
            const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(zero.size(), total - at));
            if (Status s = data.write(at, ConstBytes(zero).first(n)); s != Status::Ok)
                return make_error(s, data.name() + ": cannot zero the end of the device");
            at += n;
        }
        if (Status s = data.flush(); s != Status::Ok) return make_error(s, data.name() + ": flush");
        return remove_files(lo, dir_from(lo.log_path));
    }
    return restore_new(reg, store, lo);
}

namespace {

// Creates the .org and .new of a run, then its log, each fsynced: the log
// is what makes a run resumable (either tool resumes from it), so it comes
// last and whole (written under a temporary name, then linked to its own:
// a kill leaves it complete or absent). .org and .new left without a log by
// a run killed before it are stale (nothing resumes them) and replaced.
// cryptsetup creates the log first; a kill between its files leaves a log
// that neither tool can resume.
Result<Leftover> create_run(const std::string& uuid, const std::string& dir, const Log& log, ConstBytes org,
                            ConstBytes neu) {
    Leftover names;
    names.uuid = uuid;
    names.log_path = file_path(dir, uuid, "log");
    names.org_path = file_path(dir, uuid, "org");
    names.new_path = file_path(dir, uuid, "new");
    names.blk_path = file_path(dir, uuid, "blk");
    if (::access(names.log_path.c_str(), F_OK) == 0)
        return invalid("Log file " + names.log_path + " exists: a reencryption of this UUID was started here; resume it");
    std::string tmp = names.log_path + ".tmp";
    for (const std::string* p : {&names.org_path, &names.new_path, &names.blk_path, &tmp}) (void)::unlink(p->c_str());
    auto undo = [&](Error e) -> Error {
        for (const std::string* p : {&names.org_path, &names.new_path, &tmp}) (void)::unlink(p->c_str());
        return e;
    };
    if (Result<void> r = create_file(names.org_path, org, 0400); !r) return undo(r.error());
    if (Result<void> r = create_file(names.new_path, neu, 0600); !r) return undo(r.error());
    if (Result<void> r = create_file(tmp, format_log(log), 0600); !r) return undo(r.error());
    if (::link(tmp.c_str(), names.log_path.c_str()) != 0)
        return undo(make_error(Status::IoError, "cannot create " + names.log_path + ": " + errno_text()));
    (void)::unlink(tmp.c_str());
    sync_dir(dir);
    return names;
}

// A new run's files are made: the magic marks the image as theirs, then
// the run goes on as a resumed one would. A failed mark may still have
// landed (in part): the files stay, so that a marked image can be finished
// or rolled back.
Result<void> mark_and_finish(Registry& reg, BackingStore& store, ConstBytes passphrase, const std::string& dir,
                             const RunOptions& opts) {
    if (Status s = store.write(0, ConstBytes(kUnusableMagic, sizeof kUnusableMagic)); s != Status::Ok)
        return make_error(s, store.name() + ": cannot mark the header");
    if (Status s = store.flush(); s != Status::Ok) return make_error(s, store.name() + ": flush");
    Result<Leftover> lo = find(reg, store, dir);
    if (!lo) return lo.error();
    return finish(reg, store, *lo, passphrase, opts);
}

// The header of a LUKS1 image a new run may start on: not marked by a run
// in progress, its UUID fit to name the run's files.
Result<Header> startable_header(Registry& reg, BackingStore& store) {
    Result<std::optional<std::string>> marked = unusable_uuid(store);
    if (!marked) return marked.error();
    if (*marked)
        return invalid(store.name() + ": a LUKS1 reencryption is already in progress (LUKS\\xde\\xad); finish or roll it back");
    Result<Header> h = read_header(reg, store);
    if (!h) return h.error();
    if (!safe_uuid(h->uuid)) return invalid(store.name() + ": the header's UUID is not a UUID; set one first (luksUUID)");
    return h;
}

// The new header's payload offset (sectors), checked as cryptsetup checks
// --reduce-device-size, and --keep-key's limits; before anything is written.
Result<uint32_t> new_payload_offset(BackingStore& store, const Header& h, const ReencryptParams& p) {
    if (p.keep_key && !p.cipher.empty() && p.cipher != h.cipher_spec())
        return invalid("--keep-key keeps the volume key, so the cipher cannot change (" + h.cipher_spec() +
                       "): the data would be read with the wrong cipher");
    if (p.keep_key && p.reduce_bytes)
        return invalid("--keep-key leaves the data where it is, so --reduce-device-size cannot move the data "
                       "offset (cryptsetup 2.6.1 does and loses the data)");
    if (p.reduce_bytes % kSector) return invalid("Reduce size must be multiple of 512 bytes sector.");
    if (p.reduce_bytes > (uint64_t{1} << 30)) return invalid("Maximum device reduce size is 1 GiB.");
    const uint64_t off = uint64_t{h.payload_offset} + p.reduce_bytes / kSector;
    if (p.reduce_bytes && off % (4096 / kSector)) return invalid("Data offset is not multiple of 4096 bytes.");
    if (off * kSector >= store.size() / kSector * kSector)
        return invalid("Device " + store.name() + " is too small for activation, there is no remaining space for data.");
    return static_cast<uint32_t>(off);
}

}  // namespace

Result<void> reencrypt(Registry& reg, BackingStore& store, ConstBytes passphrase, const ReencryptParams& p,
                       const RunOptions& opts) {
    Result<Header> h = startable_header(reg, store);
    if (!h) return h.error();
    Result<Unlocked> u = open_any(reg, store, *h, passphrase, p.keyslot);
    if (!u) return u.error();

    Leftover names;
    names.log_path = file_path(p.dir, h->uuid, "log");
    names.org_path = file_path(p.dir, h->uuid, "org");
    names.new_path = file_path(p.dir, h->uuid, "new");
    names.blk_path = file_path(p.dir, h->uuid, "blk");
    if (::access(names.log_path.c_str(), F_OK) == 0)
        return invalid("Log file " + names.log_path + " exists: a reencryption of this UUID was started elsewhere");

    BackingStore& data_store = opts.data ? *opts.data : store;  // a detached header: the data elsewhere
    Result<uint32_t> offset = new_payload_offset(data_store, *h, p);
    if (!offset) return offset.error();
    if (const uint64_t data = data_store.size() / kSector * kSector - uint64_t{*offset} * kSector;
        opts.device_size % kSector || opts.device_size > data)
        return invalid(opts.device_size % kSector ? "Device size must be multiple of 512 bytes sector."
                                                  : "--device-size " + std::to_string(opts.device_size) +
                                                        " is larger than the data (" + std::to_string(data) + " bytes)");

    // The new header, built in memory first: nothing is created if it fails.
    FormatParams fp;
    fp.cipher = p.cipher.empty() ? h->cipher_spec() : p.cipher;
    fp.key_bytes = p.keep_key ? h->key_bytes : p.key_bytes ? p.key_bytes : h->key_bytes;
    fp.hash = p.hash.empty() ? h->hash_spec : p.hash;
    fp.iter_time_ms = p.iter_time_ms;
    fp.force_iterations = p.force_iterations;
    fp.keyslot = u->keyslot;
    fp.offset = *offset;
    // A detached header keeps its payload on the data device (0 included).
    fp.detached = opts.data != nullptr || *offset == 0;
    if (*offset == 0) fp.alignment = 0;
    fp.uuid = h->uuid;
    // The header and keyslot areas only (eight areas of 4000 stripes, each
    // rounded to 4 KiB): a shifted payload can be far past them.
    MemoryStore mem(static_cast<std::size_t>(std::max<uint64_t>(
        std::min<uint64_t>(uint64_t{*offset} * kSector, 32u << 20), 4096 + 8 * (uint64_t{fp.key_bytes} * kStripes + 4096))));
    SecureBuffer vk(fp.key_bytes);
    if (p.keep_key)
        vk.assign(u->volume_key.span());
    else if (Result<void> r = random_bytes(vk.span()); !r)
        return r.error();
    if (Result<Header> nh = format(reg, mem, fp, vk, passphrase); !nh)
        return make_error(nh.status(), "the new header: " + nh.error().message);
    Result<std::vector<uint8_t>> backup = header_backup(reg, store);
    if (!backup) return backup.error();

    // The files (.org, .new, then the log: create_run), then the magic. Until the magic
    // is written the image is untouched, and a failure removes the files.
    // A shift walks backward from cryptsetup's start mark ~0 (the end).
    Log log{h->uuid, p.reduce_bytes ? Direction::Backward : Direction::Forward, Mode::Reencrypt,
            p.reduce_bytes ? ~uint64_t{0} : 0, 0};
    Result<Leftover> made = create_run(h->uuid, p.dir, log, *backup, mem.data());
    if (!made) return made.error();
    return mark_and_finish(reg, store, passphrase, p.dir, opts);
}

namespace {

// A header for fp built in memory (the header and keyslot areas only).
Result<std::vector<uint8_t>> header_bytes(Registry& reg, const FormatParams& fp, ConstBytes vk, ConstBytes passphrase) {
    // Room for the header and eight keyslot areas, each rounded to 4 KiB.
    MemoryStore mem(4096 + 8 * (std::size_t{fp.key_bytes} * kStripes + 4096));
    Result<Header> h = format(reg, mem, fp, vk, passphrase);
    if (!h) return h.error();
    std::vector<uint8_t> out = std::move(mem.data());
    out.resize(static_cast<std::size_t>(device_sectors(*h) * kSector));
    return out;
}

// cryptsetup's backup_fake_header: cipher_null-ecb, payload 0 (its header
// file is detached from the data), kEncryptUuid, a random volume key, the
// passphrase in `keyslot`.
Result<std::vector<uint8_t>> fake_header(Registry& reg, uint32_t key_bytes, const std::string& hash, uint32_t iter_time_ms,
                                         uint32_t force_iterations, unsigned keyslot, ConstBytes passphrase) {
    FormatParams fp;
    fp.cipher = "cipher_null-ecb";
    fp.key_bytes = key_bytes;
    fp.hash = hash;
    fp.iter_time_ms = iter_time_ms;
    fp.force_iterations = force_iterations;
    fp.keyslot = keyslot;
    fp.detached = true;
    fp.offset = 0;
    fp.alignment = 0;
    fp.uuid = kEncryptUuid;
    SecureBuffer vk(key_bytes);
    if (Result<void> r = random_bytes(vk.span()); !r) return r.error();
    Result<std::vector<uint8_t>> b = header_bytes(reg, fp, vk, passphrase);
    if (!b) return make_error(b.status(), "the cipher_null header: " + b.error().message);
    return b;
}

}  // namespace

Result<void> encrypt(Registry& reg, BackingStore& store, ConstBytes passphrase, const EncryptParams& p,
                     const RunOptions& opts) {
    if (opts.data) return make_error(Status::Unsupported, "LUKS1 encryption or decryption with a detached header is not supported yet");
    Result<std::optional<std::string>> marked = unusable_uuid(store);
    if (!marked) return marked.error();
    if (*marked) return invalid("Device " + store.name() + " is already in LUKS reencryption. Aborting operation.");
    {
        std::array<uint8_t, kHeaderSize> raw{};
        if (store.size() >= kHeaderSize && store.read(0, raw) == Status::Ok && parse_header(raw))
            return invalid("Device " + store.name() + " is already LUKS device. Aborting operation.");
    }
    if (!p.reduce_bytes)
        return invalid("Encryption without detached header (--header) is not possible without data device size "
                       "reduction (--reduce-device-size).");
    if (p.reduce_bytes % kSector) return invalid("Reduce size must be multiple of 512 bytes sector.");
    if (p.reduce_bytes > (uint64_t{1} << 30)) return invalid("Maximum device reduce size is 1 GiB.");
    const uint64_t total = store.size() / kSector * kSector;
    if (p.reduce_bytes >= total)
        return invalid("Device " + store.name() + " is too small for activation, there is no remaining space for data.");
    if (opts.device_size % kSector || opts.device_size > total - p.reduce_bytes)
        return invalid("--device-size must be a multiple of 512 within the data (" + std::to_string(total - p.reduce_bytes) +
                       " bytes)");

    Result<std::vector<uint8_t>> org =
        fake_header(reg, p.key_bytes, p.hash, p.iter_time_ms, p.force_iterations, p.keyslot, passphrase);
    if (!org) return org.error();
    // The new header: its file is detached from the data, so its payload is
    // the reduce size itself (LUKS_generate_phdr with alignPayload), which
    // must clear the keyslot areas (cryptsetup's check and words).
    FormatParams fp;
    fp.cipher = p.cipher;
    fp.key_bytes = p.key_bytes;
    fp.hash = p.hash;
    fp.iter_time_ms = p.iter_time_ms;
    fp.force_iterations = p.force_iterations;
    fp.keyslot = p.keyslot;
    fp.detached = true;
    fp.offset = static_cast<uint32_t>(p.reduce_bytes / kSector);
    fp.uuid = p.uuid;
    if (fp.uuid.empty()) {
        Result<std::string> u = random_uuid();
        if (!u) return u.error();
        fp.uuid = *u;
    }
    SecureBuffer vk(p.key_bytes);
    if (Result<void> r = random_bytes(vk.span()); !r) return r.error();
    Result<std::vector<uint8_t>> neu = header_bytes(reg, fp, vk, passphrase);
    if (!neu) return make_error(neu.status(), "the new header: " + neu.error().message);

    const Log log{kEncryptUuid, Direction::Backward, Mode::Encrypt, ~uint64_t{0}, 0};
    Result<Leftover> names = create_run(kEncryptUuid, p.dir, log, *org, *neu);
    if (!names) return names.error();
    Result<Leftover> lo = find_unmarked(reg, kEncryptUuid, p.dir);
    if (!lo) return lo.error();
    return finish(reg, store, *lo, passphrase, opts);
}

Result<void> decrypt(Registry& reg, BackingStore& store, ConstBytes passphrase, const DecryptParams& p,
                     const RunOptions& opts) {
    if (opts.data) return make_error(Status::Unsupported, "LUKS1 encryption or decryption with a detached header is not supported yet");
    Result<Header> h = startable_header(reg, store);
    if (!h) return h.error();
    if (h->payload_offset == 0) return invalid(store.name() + ": the header is detached (payload offset 0)");
    const uint64_t total = store.size() / kSector * kSector;
    if (total <= uint64_t{h->payload_offset} * kSector) return invalid(store.name() + " is smaller than its payload offset");
    if (opts.device_size % kSector || opts.device_size > total - uint64_t{h->payload_offset} * kSector)
        return invalid("--device-size must be a multiple of 512 within the data");
    Result<Unlocked> u = open_any(reg, store, *h, passphrase, p.keyslot);
    if (!u) return u.error();
    Result<std::vector<uint8_t>> org = header_backup(reg, store);
    if (!org) return org.error();
    // cryptsetup's fake header for the plaintext: its defaults (256-bit key, sha256).
    Result<std::vector<uint8_t>> neu = fake_header(reg, 32, "sha256", 2000, 1000, static_cast<unsigned>(u->keyslot), passphrase);
    if (!neu) return neu.error();
    const Log log{h->uuid, Direction::Forward, Mode::Decrypt, 0, 0};
    Result<Leftover> names = create_run(h->uuid, p.dir, log, *org, *neu);
    if (!names) return names.error();
    return mark_and_finish(reg, store, passphrase, p.dir, opts);
}

}  // namespace blkcrypt::luks::luks1::legacy
