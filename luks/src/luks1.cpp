// See <blkcrypt/luks/luks1.hpp>. The keyslot areas are decrypted by the
// dm-crypt engine with the payload's cipher spec (sector 0 at the area's
// start, 512-byte sectors), as cryptsetup's LUKS_decrypt_from_storage does
// through a temporary dm-crypt mapping; no cipher is implemented here.
#include <blkcrypt/luks/luks1.hpp>

#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/dm/plain_key.hpp>
#include <blkcrypt/dm/table.hpp>
#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/kdf.hpp>
#include <blkcrypt/key_dump.hpp>
#include <blkcrypt/luks/af.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>

namespace blkcrypt::luks::luks1 {

namespace {

constexpr uint8_t kMagic[6] = {'L', 'U', 'K', 'S', 0xba, 0xbe};

// Field offsets of struct luks_phdr.
constexpr std::size_t kOffVersion = 6, kOffCipherName = 8, kOffCipherMode = 40, kOffHashSpec = 72,
                      kOffPayload = 104, kOffKeyBytes = 108, kOffMkDigest = 112, kOffMkSalt = 132,
                      kOffMkIter = 164, kOffUuid = 168, kOffSlots = 208, kSlotSize = 48;
constexpr std::size_t kNameLen = 32, kUuidLen = 40;

// A fixed-size string field: up to its first NUL, the last byte always
// treated as a NUL (cryptsetup terminates them so).
std::string get_string(ConstBytes raw, std::size_t off, std::size_t len) {
    const auto* p = reinterpret_cast<const char*>(raw.data() + off);
    return std::string(p, ::strnlen(p, len - 1));
}

bool put_string(uint8_t* out, std::size_t len, const std::string& s) {
    if (s.size() >= len || s.find('\0') != std::string::npos) return false;
    std::memcpy(out, s.data(), s.size());
    return true;
}

Error invalid(std::string msg) { return make_error(Status::Invalid, std::move(msg)); }

// cryptsetup's LUKS_check_keyslots: every keyslot (enabled or not) has 4000
// stripes, starts past the header, ends before the payload (unless the
// payload offset is 0: a detached header), and no two areas overlap.
Result<void> check_keyslots(const Header& h) {
    const uint64_t secs = af_sectors(h.key_bytes, kStripes);
    std::array<unsigned, kNumKeyslots> order{};
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) {
        return h.keyslots[a].key_material_offset < h.keyslots[b].key_material_offset;
    });
    for (unsigned i = 0; i < kNumKeyslots; ++i) {
        const Keyslot& k = h.keyslots[i];
        const std::string bad = "LUKS keyslot " + std::to_string(i) + " is invalid: ";
        if (k.stripes != kStripes)
            return invalid(bad + std::to_string(k.stripes) + " anti-forensic stripes (LUKS1 uses 4000)");
        if (uint64_t{k.key_material_offset} * kSector < kHeaderSize)
            return invalid(bad + "its key material at sector " + std::to_string(k.key_material_offset) +
                           " overlaps the header");
        if (h.payload_offset == 0) continue;
        if (uint64_t{k.key_material_offset} + secs > h.payload_offset)
            return invalid(bad + "its key material (sectors " + std::to_string(k.key_material_offset) + ".." +
                           std::to_string(uint64_t{k.key_material_offset} + secs) +
                           ") runs into the payload at sector " + std::to_string(h.payload_offset));
    }
    for (unsigned i = 1; i < kNumKeyslots; ++i) {
        const Keyslot& prev = h.keyslots[order[i - 1]];
        const Keyslot& next = h.keyslots[order[i]];
        if (uint64_t{next.key_material_offset} < uint64_t{prev.key_material_offset} + secs)
            return invalid("LUKS keyslot " + std::to_string(order[i - 1]) +
                           " is invalid: its key material overlaps keyslot " + std::to_string(order[i]));
    }
    return {};
}

}  // namespace

uint64_t af_sectors(uint64_t key_bytes, uint64_t stripes) noexcept {
    return (key_bytes * stripes + kSector - 1) / kSector;
}

uint64_t device_sectors(const Header& h) noexcept {
    uint64_t end = 0;
    for (const Keyslot& k : h.keyslots)
        end = std::max(end, uint64_t{k.key_material_offset} + af_sectors(h.key_bytes, kStripes));
    return end;
}

Result<Header> parse_header(ConstBytes raw) {
    if (raw.size() < kHeaderSize || std::memcmp(raw.data(), kMagic, sizeof kMagic) != 0)
        return invalid("not a LUKS device");
    Header h;
    h.version = get_be16(raw.data() + kOffVersion);
    if (h.version != 1) return invalid("Unsupported LUKS version " + std::to_string(h.version) + ".");
    h.cipher_name = get_string(raw, kOffCipherName, kNameLen);
    h.cipher_mode = get_string(raw, kOffCipherMode, kNameLen);
    h.hash_spec = get_string(raw, kOffHashSpec, kNameLen);
    h.payload_offset = get_be32(raw.data() + kOffPayload);
    h.key_bytes = get_be32(raw.data() + kOffKeyBytes);
    std::memcpy(h.mk_digest.data(), raw.data() + kOffMkDigest, kDigestSize);
    std::memcpy(h.mk_digest_salt.data(), raw.data() + kOffMkSalt, kSaltSize);
    h.mk_digest_iterations = get_be32(raw.data() + kOffMkIter);
    h.uuid = get_string(raw, kOffUuid, kUuidLen);
    for (unsigned i = 0; i < kNumKeyslots; ++i) {
        const uint8_t* s = raw.data() + kOffSlots + i * kSlotSize;
        Keyslot& k = h.keyslots[i];
        k.active = get_be32(s);
        k.iterations = get_be32(s + 4);
        std::memcpy(k.salt.data(), s + 8, kSaltSize);
        k.key_material_offset = get_be32(s + 40);
        k.stripes = get_be32(s + 44);
    }
    if (h.cipher_name.empty() || h.cipher_mode.empty()) return invalid("LUKS header without a cipher");
    if (h.hash_spec.empty()) return invalid("LUKS header without a hash");
    if (h.key_bytes == 0 || h.key_bytes > kMaxKeyBytes)
        return invalid("LUKS volume key of " + std::to_string(h.key_bytes) + " bytes (1.." +
                       std::to_string(kMaxKeyBytes) + " supported)");
    if (Result<void> r = check_keyslots(h); !r) return r.error();
    return h;
}

Result<std::array<uint8_t, kHeaderSize>> serialize_header(const Header& h) {
    std::array<uint8_t, kHeaderSize> out{};
    uint8_t* p = out.data();
    std::memcpy(p, kMagic, sizeof kMagic);
    put_be16(p + kOffVersion, h.version);
    if (!put_string(p + kOffCipherName, kNameLen, h.cipher_name) ||
        !put_string(p + kOffCipherMode, kNameLen, h.cipher_mode) ||
        !put_string(p + kOffHashSpec, kNameLen, h.hash_spec))
        return invalid("LUKS1 cipher name, mode and hash must each be at most 31 characters");
    if (!put_string(p + kOffUuid, kUuidLen, h.uuid)) return invalid("LUKS1 UUID longer than 39 characters");
    put_be32(p + kOffPayload, h.payload_offset);
    put_be32(p + kOffKeyBytes, h.key_bytes);
    std::memcpy(p + kOffMkDigest, h.mk_digest.data(), kDigestSize);
    std::memcpy(p + kOffMkSalt, h.mk_digest_salt.data(), kSaltSize);
    put_be32(p + kOffMkIter, h.mk_digest_iterations);
    for (unsigned i = 0; i < kNumKeyslots; ++i) {
        uint8_t* s = p + kOffSlots + i * kSlotSize;
        const Keyslot& k = h.keyslots[i];
        put_be32(s, k.active);
        put_be32(s + 4, k.iterations);
        std::memcpy(s + 8, k.salt.data(), kSaltSize);
        put_be32(s + 40, k.key_material_offset);
        put_be32(s + 44, k.stripes);
    }
    return out;
}

Result<std::string> registry_hash(Registry& reg, std::string_view hash_spec) {
    const std::string name = dm::plain_hash_alg(hash_spec);
    Result<Shash> mac = Shash::alloc(reg, "hmac(" + name + ")");
    if (!mac || mac->digestsize() < kDigestSize)
        return make_error(Status::Unsupported, "Requested LUKS hash " + std::string(hash_spec) + " is not supported.");
    return name;
}

Result<Header> read_header(Registry& reg, BackingStore& store) {
    std::array<uint8_t, kHeaderSize> raw{};
    if (store.size() < kHeaderSize) return invalid(store.name() + ": not a LUKS device");
    if (Status s = store.read(0, raw); s != Status::Ok)
        return make_error(s, store.name() + ": cannot read the LUKS header");
    Result<Header> h = parse_header(raw);
    if (!h) return make_error(h.status(), (store.name().empty() ? "" : store.name() + ": ") + h.error().message);
    if (Result<std::string> r = registry_hash(reg, h->hash_spec); !r) return r.error();
    const uint64_t need = device_sectors(*h) * kSector;
    if (store.size() < need)
        return invalid("Device " + store.name() + " is too small. (LUKS1 requires at least " +
                       std::to_string(need) + " bytes.)");
    return h;
}

Result<bool> check_volume_key(Registry& reg, const Header& h, ConstBytes vk) {
    if (vk.size() != h.key_bytes) return false;
    Result<std::string> hash = registry_hash(reg, h.hash_spec);
    if (!hash) return hash.error();
    SecureBuffer digest(kDigestSize);
    if (Result<void> r = pbkdf2(reg, *hash, vk, h.mk_digest_salt, h.mk_digest_iterations, digest.span()); !r)
        return r.error();
    // Not secret (the digest is in the header), so a plain comparison does.
    return std::memcmp(digest.data(), h.mk_digest.data(), kDigestSize) == 0;
}

Result<SecureBuffer> open_keyslot(Registry& reg, BackingStore& store, const Header& h, unsigned slot,
                                  ConstBytes passphrase) {
    if (slot >= kNumKeyslots) return invalid("LUKS1 keyslot " + std::to_string(slot) + " does not exist (0..7)");
    const Keyslot& k = h.keyslots[slot];
    if (!k.enabled()) return make_error(Status::NoKey, "Keyslot " + std::to_string(slot) + " is not active.");
    Result<std::string> hash = registry_hash(reg, h.hash_spec);
    if (!hash) return hash.error();

    // The key that encrypts the area, then the area through a dm-crypt
    // target over [key material offset, + AF sectors) of the store.
    Result<dm::CryptTable> table = dm::parse_cipher_spec(h.cipher_spec());
    if (!table) return make_error(table.status(), "LUKS cipher " + h.cipher_spec() + ": " + table.error().message);
    table->key = SecureBuffer(h.key_bytes);
    if (Result<void> r = pbkdf2(reg, *hash, passphrase, k.salt, k.iterations, table->key.span()); !r) return r.error();
    if (h.cipher_name == "cipher_null") table->key = SecureBuffer();  // no key, as dm-crypt's "-"
    const uint64_t secs = af_sectors(h.key_bytes, k.stripes);
    table->offset = k.key_material_offset;
    dm::CryptTargetOptions opts;
    opts.threads = 1;
    opts.queue_depth = 1;
    Result<std::unique_ptr<dm::CryptTarget>> target =
        dm::CryptTarget::create(reg, *table, std::shared_ptr<BackingStore>(&store, [](BackingStore*) {}), secs, opts);
    if (!target) return target.error();
    SecureBuffer area(secs * kSector);
    dm::Bio bio;
    bio.sector = 0;
    bio.dir = dm::BioDir::Read;
    bio.vecs.push_back({area.data(), area.size()});
    if (Status s = (*target)->submit_sync(bio); s != Status::Ok)
        return make_error(s, "reading LUKS keyslot " + std::to_string(slot) + ": " + to_string(s));
    target->reset();

    SecureBuffer vk(h.key_bytes);
    if (Result<void> r = af_merge(reg, *hash, area.span().first(std::size_t{h.key_bytes} * k.stripes), k.stripes,
                                  vk.span());
        !r)
        return r.error();
    Result<bool> ok = check_volume_key(reg, h, vk);
    if (!ok) return ok.error();
    if (!*ok) return make_error(Status::NoKey, "No key available with this passphrase.");
    return vk;
}

Result<Unlocked> open_any(Registry& reg, BackingStore& store, const Header& h, ConstBytes passphrase, int slot) {
    if (slot >= static_cast<int>(kNumKeyslots))
        return invalid("Key slot " + std::to_string(slot) + " is invalid (LUKS1 has 0..7).");
    for (unsigned i = 0; i < kNumKeyslots; ++i) {
        if (slot >= 0 && i != static_cast<unsigned>(slot)) continue;
        if (!h.keyslots[i].enabled()) continue;
        Result<SecureBuffer> vk = open_keyslot(reg, store, h, i, passphrase);
        if (vk) return Unlocked{i, std::move(vk).value()};
        if (vk.status() != Status::NoKey) return vk.error();
    }
    return make_error(Status::NoKey, "No key available with this passphrase.");
}

namespace {

// cryptsetup's crypt_log_hex with separator " ": every byte followed by it.
std::string hex_spaced(ConstBytes b) {
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (uint8_t c : b) {
        s += digits[c >> 4];
        s += digits[c & 15];
        s += ' ';
    }
    return s;
}

}  // namespace

std::string dump(const Header& h, std::string_view device) {
    std::string o = "LUKS header information for " + std::string(device) + "\n\n";
    o += "Version:       \t" + std::to_string(h.version) + "\n";
    o += "Cipher name:   \t" + h.cipher_name + "\n";
    o += "Cipher mode:   \t" + h.cipher_mode + "\n";
    o += "Hash spec:     \t" + h.hash_spec + "\n";
    o += "Payload offset:\t" + std::to_string(h.payload_offset) + "\n";
    o += "MK bits:       \t" + std::to_string(uint64_t{h.key_bytes} * 8) + "\n";
    o += "MK digest:     \t" + hex_spaced(h.mk_digest) + "\n";
    const ConstBytes mks(h.mk_digest_salt);
    o += "MK salt:       \t" + hex_spaced(mks.first(kSaltSize / 2)) + "\n";
    o += "               \t" + hex_spaced(mks.subspan(kSaltSize / 2)) + "\n";
    o += "MK iterations: \t" + std::to_string(h.mk_digest_iterations) + "\n";
    o += "UUID:          \t" + h.uuid + "\n\n";
    for (unsigned i = 0; i < kNumKeyslots; ++i) {
        const Keyslot& k = h.keyslots[i];
        if (!k.enabled()) {
            o += "Key Slot " + std::to_string(i) + ": DISABLED\n";
            continue;
        }
        const ConstBytes salt(k.salt);
        o += "Key Slot " + std::to_string(i) + ": ENABLED\n";
        o += "\tIterations:         \t" + std::to_string(k.iterations) + "\n";
        o += "\tSalt:               \t" + hex_spaced(salt.first(kSaltSize / 2)) + "\n";
        o += "\t                      \t" + hex_spaced(salt.subspan(kSaltSize / 2)) + "\n";
        o += "\tKey material offset:\t" + std::to_string(k.key_material_offset) + "\n";
        o += "\tAF stripes:            \t" + std::to_string(k.stripes) + "\n";
    }
    return o;
}

SecureBuffer dump_volume_key(const Header& h, std::string_view device, ConstBytes vk) {
    std::string head = "LUKS header information for " + std::string(device) + "\n";
    head += "Cipher name:   \t" + h.cipher_name + "\n";
    head += "Cipher mode:   \t" + h.cipher_mode + "\n";
    head += "Payload offset:\t" + std::to_string(h.payload_offset) + "\n";
    head += "UUID:          \t" + h.uuid + "\n";
    return key_dump_lines(head, vk);
}

}  // namespace blkcrypt::luks::luks1
