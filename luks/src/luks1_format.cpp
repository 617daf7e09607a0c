// LUKS1 creation (see <blkcrypt/luks/luks1.hpp>), after cryptsetup's
// LUKS_generate_phdr, LUKS_set_key and LUKS_wipe_header_areas: the same
// layout, iteration counts and wiping, so cryptsetup reads what we write.
#include <blkcrypt/luks/luks1.hpp>

#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/dm/table.hpp>
#include <blkcrypt/kdf.hpp>
#include <blkcrypt/luks/af.hpp>
#include <blkcrypt/random.hpp>
#include <blkcrypt/registry.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace blkcrypt::luks::luks1 {

namespace {

Error invalid(std::string msg) { return make_error(Status::Invalid, std::move(msg)); }

uint64_t round_up(uint64_t v, uint64_t to) { return to ? (v + to - 1) / to * to : v; }

std::shared_ptr<BackingStore> borrow(BackingStore& s) {
    return std::shared_ptr<BackingStore>(&s, [](BackingStore*) {});
}

// Encrypts `data` (whole sectors) into the store at `sector` with cipher spec
// and key, sector numbers starting at 0 there: a keyslot area.
Result<void> write_area(Registry& reg, BackingStore& store, const std::string& cipher, ConstBytes key,
                        uint64_t sector, ConstBytes data) {
    Result<dm::CryptTable> t = dm::parse_cipher_spec(cipher);
    if (!t) return make_error(t.status(), "LUKS cipher " + cipher + ": " + t.error().message);
    // cipher_null takes no key (dm-crypt's "-", as cryptsetup maps it).
    if (cipher.rfind("cipher_null", 0) != 0) t->key.assign(key);
    t->offset = sector;
    dm::CryptTargetOptions opts;
    opts.threads = 1;
    opts.queue_depth = 1;
    auto target = dm::CryptTarget::create(reg, *t, borrow(store), data.size() / kSector, opts);
    if (!target) return target.error();
    dm::Bio bio;
    bio.dir = dm::BioDir::Write;
    bio.vecs.push_back({const_cast<uint8_t*>(data.data()), data.size()});  // a write never changes it
    if (Status s = (*target)->submit_sync(bio); s != Status::Ok)
        return make_error(s, "writing a LUKS keyslot area: " + std::string(to_string(s)));
    return {};
}

Result<void> fill(BackingStore& store, uint64_t offset, uint64_t length, bool random) {
    std::vector<uint8_t> block(std::min<uint64_t>(length, 1 << 20));
    for (uint64_t done = 0; done < length;) {
        const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(block.size(), length - done));
        if (random) {
            if (Result<void> r = random_bytes(Bytes(block).first(n)); !r) return r;
        }
        if (Status s = store.write(offset + done, ConstBytes(block).first(n)); s != Status::Ok)
            return make_error(s, store.name() + ": cannot wipe the LUKS header area");
        done += n;
    }
    return {};
}

}  // namespace

Result<std::string> random_uuid() {
    uint8_t b[16];
    if (Result<void> r = random_bytes(b); !r) return r.error();
    b[6] = static_cast<uint8_t>((b[6] & 0x0f) | 0x40);  // version 4
    b[8] = static_cast<uint8_t>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (int i = 0; i < 16; ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
        s += digits[b[i] >> 4];
        s += digits[b[i] & 15];
    }
    return s;
}

Result<uint32_t> benchmark_pbkdf2(Registry& reg, std::string_view hash_spec, std::size_t key_bytes,
                                  uint32_t time_ms) {
    Result<std::string> hash = registry_hash(reg, hash_spec);
    if (!hash) return hash.error();
    static const uint8_t password[] = {'f', 'o', 'o', 'b', 'a', 'r', 'f', 'o'};
    static const uint8_t salt[] = {'0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};
    SecureBuffer out(std::max<std::size_t>(key_bytes, 1));
    uint64_t iterations = 1 << 15;
    double per_second = 0;
    for (;;) {
        const auto start = std::chrono::steady_clock::now();
        if (Result<void> r = pbkdf2(reg, *hash, password, salt, static_cast<uint32_t>(iterations), out.span()); !r)
            return r.error();
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        if (ms > 0) per_second = static_cast<double>(iterations) * 1000.0 / ms;
        // The growth steps of cryptsetup's pbkdf2 check.
        if (ms > 500 || iterations >= (uint64_t{1} << 31)) break;
        iterations <<= ms <= 62 ? 4 : ms <= 125 ? 3 : ms <= 250 ? 2 : 1;
        iterations = std::min<uint64_t>(iterations, uint64_t{1} << 31);
    }
    const double want = per_second * time_ms / 1000.0;
    if (want > 4294967295.0) return invalid("PBKDF2 iteration count for " + std::to_string(time_ms) + " ms overflows");
    return std::max(kMinIterations, static_cast<uint32_t>(want));
}

Result<Header> make_header(Registry& reg, const FormatParams& p, ConstBytes vk, uint32_t keyslot_iterations) {
    const auto dash = p.cipher.find('-');
    if (dash == std::string::npos || dash == 0 || dash + 1 == p.cipher.size())
        return invalid("LUKS1 cipher '" + p.cipher + "' is not NAME-MODE (e.g. aes-xts-plain64)");
    if (vk.size() != p.key_bytes || p.key_bytes == 0 || p.key_bytes > kMaxKeyBytes)
        return invalid("LUKS1 volume key of " + std::to_string(vk.size()) + " bytes (1.." +
                       std::to_string(kMaxKeyBytes) + " supported)");
    if (p.keyslot >= kNumKeyslots) return invalid("Key slot " + std::to_string(p.keyslot) + " is invalid.");
    Header h;
    h.cipher_name = p.cipher.substr(0, dash);
    h.cipher_mode = p.cipher.substr(dash + 1);
    h.hash_spec = p.hash;
    for (char& c : h.hash_spec)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');  // as cryptsetup stores it
    Result<std::string> hash = registry_hash(reg, h.hash_spec);
    if (!hash) return hash.error();
    // The cipher must take this key: try it on one sector of memory.
    {
        MemoryStore probe(kSector);
        std::vector<uint8_t> zero(kSector);
        if (Result<void> r = write_area(reg, probe, p.cipher, vk, 0, zero); !r)
            return make_error(r.status(), "Cipher " + p.cipher + " (key size " + std::to_string(vk.size() * 8) +
                                              " bits) is not available: " + r.error().message);
    }
    h.key_bytes = p.key_bytes;

    uint64_t sector = kAlignKeyslots / kSector;
    const uint64_t secs = af_sectors(h.key_bytes, kStripes);
    for (Keyslot& k : h.keyslots) {
        k = Keyslot{};
        k.key_material_offset = static_cast<uint32_t>(sector);
        sector = round_up(sector + secs, kAlignKeyslots / kSector);
    }
    uint64_t payload = 0;
    if (p.offset) {
        if (p.offset % (kAlignKeyslots / kSector)) return invalid("Data offset is not multiple of 4096 bytes.");
        payload = p.offset;
    } else if (p.detached) {
        payload = p.alignment;
    } else {
        payload = round_up(sector, p.alignment);
    }
    // As cryptsetup: 0 (detached only) or past the keyslots, which the reader
    // checks for any non-zero payload offset, detached or not.
    if ((payload != 0 || !p.detached) && payload < sector)
        return invalid("Data offset for LUKS header must be either 0 or higher than header size.");
    if (payload > 0xffffffffu) return invalid("LUKS1 payload offset past 2^32 sectors");
    h.payload_offset = static_cast<uint32_t>(payload);

    if (p.uuid.empty()) {
        Result<std::string> u = random_uuid();
        if (!u) return u.error();
        h.uuid = *u;
    } else {
        h.uuid = p.uuid;
    }
    if (Result<void> r = random_bytes(h.mk_digest_salt); !r) return r.error();
    if (p.force_iterations) {
        h.mk_digest_iterations = kMinIterations;
    } else {
        const uint64_t it = uint64_t{keyslot_iterations} * kDigestMs / std::max<uint32_t>(p.iter_time_ms, 1);
        h.mk_digest_iterations = static_cast<uint32_t>(std::clamp<uint64_t>(it, kMinIterations, 0xffffffffu));
    }
    SecureBuffer digest(kDigestSize);
    if (Result<void> r = pbkdf2(reg, *hash, vk, h.mk_digest_salt, h.mk_digest_iterations, digest.span()); !r)
        return r.error();
    std::memcpy(h.mk_digest.data(), digest.data(), kDigestSize);
    return h;
}

Result<void> write_header(BackingStore& store, const Header& h) {
    Result<std::array<uint8_t, kHeaderSize>> raw = serialize_header(h);
    if (!raw) return raw.error();
    if (Status s = store.write(0, *raw); s != Status::Ok) return make_error(s, store.name() + ": cannot write the LUKS header");
    if (Status s = store.flush(); s != Status::Ok) return make_error(s, store.name() + ": cannot flush the LUKS header");
    return {};
}

Result<void> add_keyslot(Registry& reg, BackingStore& store, Header& h, unsigned slot, ConstBytes vk,
                         ConstBytes passphrase, uint32_t iterations) {
    if (slot >= kNumKeyslots) return invalid("Key slot " + std::to_string(slot) + " is invalid.");
    if (h.keyslots[slot].enabled()) return invalid("Key slot " + std::to_string(slot) + " is full, please select another one.");
    Result<std::string> hash = registry_hash(reg, h.hash_spec);
    if (!hash) return hash.error();
    Keyslot k = h.keyslots[slot];
    k.iterations = std::max(iterations, kMinIterations);
    if (Result<void> r = random_bytes(k.salt); !r) return r.error();
    SecureBuffer key(h.key_bytes);
    if (Result<void> r = pbkdf2(reg, *hash, passphrase, k.salt, k.iterations, key.span()); !r) return r.error();
    const uint64_t secs = af_sectors(h.key_bytes, k.stripes);
    SecureBuffer split(secs * kSector);  // zero padding after the stripes, as cryptsetup's
    if (Result<void> r = af_split(reg, *hash, vk, k.stripes, split.span().first(std::size_t{h.key_bytes} * k.stripes));
        !r)
        return r;
    if (Result<void> r = write_area(reg, store, h.cipher_spec(), key, k.key_material_offset, split); !r) return r;
    if (Status s = store.flush(); s != Status::Ok) return make_error(s, store.name() + ": flush");
    // The area is on disk before the header names it: a crash in between
    // leaves the old header, which does not use the area.
    k.active = kKeyEnabled;
    Header updated = h;
    updated.keyslots[slot] = k;
    if (Result<void> r = write_header(store, updated); !r) return r;
    h = updated;
    return {};
}

Result<void> remove_keyslot(BackingStore& store, Header& h, unsigned slot) {
    if (slot >= kNumKeyslots) return invalid("Key slot " + std::to_string(slot) + " is invalid.");
    if (!h.keyslots[slot].enabled()) return invalid("Keyslot " + std::to_string(slot) + " is not active.");
    const Keyslot& k = h.keyslots[slot];
    if (Result<void> r = fill(store, uint64_t{k.key_material_offset} * kSector, af_sectors(h.key_bytes, k.stripes) * kSector,
                              true);
        !r)
        return r;
    if (Status s = store.flush(); s != Status::Ok) return make_error(s, store.name() + ": flush");
    Header updated = h;
    Keyslot& off = updated.keyslots[slot];
    off.active = kKeyDisabled;
    off.iterations = 0;
    off.salt.fill(0);
    if (Result<void> r = write_header(store, updated); !r) return r;
    h = updated;
    return {};
}

Result<void> change_keyslot(Registry& reg, BackingStore& store, Header& h, unsigned old_slot, unsigned new_slot,
                            ConstBytes vk, ConstBytes new_passphrase, uint32_t iterations) {
    if (old_slot == new_slot)
        return invalid("changing keyslot " + std::to_string(old_slot) + " in place is not crash-safe: free a keyslot first");
    if (Result<void> r = add_keyslot(reg, store, h, new_slot, vk, new_passphrase, iterations); !r) return r;
    return remove_keyslot(store, h, old_slot);
}

Result<std::vector<uint8_t>> header_backup(Registry& reg, BackingStore& store) {
    Result<Header> h = read_header(reg, store);
    if (!h) return h.error();
    const uint64_t used = device_sectors(*h) * kSector;
    std::vector<uint8_t> out(round_up(used, kAlignKeyslots));  // the rounding stays zero, as cryptsetup's
    if (Status s = store.read(0, Bytes(out).first(used)); s != Status::Ok)
        return make_error(s, store.name() + ": cannot read the LUKS header and keyslots");
    if (uint64_t{h->keyslots[0].key_material_offset} * kSector == kAlignKeyslots)
        std::fill(out.begin() + kHeaderSize, out.begin() + kAlignKeyslots, uint8_t{0});
    return out;
}

Result<void> header_restore(Registry& reg, BackingStore& store, ConstBytes backup) {
    Result<Header> h = parse_header(backup);
    if (!h) return invalid("Backup file does not contain valid LUKS header.");
    if (Result<std::string> r = registry_hash(reg, h->hash_spec); !r) return r.error();
    const uint64_t used = device_sectors(*h) * kSector;
    if (backup.size() < used) return invalid("Backup file does not contain valid LUKS header.");
    if (store.size() < used)
        return invalid("Device " + store.name() + " is too small. (LUKS1 requires at least " + std::to_string(used) +
                       " bytes.)");
    std::array<uint8_t, kHeaderSize> cur{};
    if (Status s = store.read(0, cur); s != Status::Ok) return make_error(s, store.name() + ": cannot read");
    if (Result<Header> old = parse_header(cur); old && (old->payload_offset != h->payload_offset || old->key_bytes != h->key_bytes))
        return invalid("Data offset or key size differs on device and backup, restore failed.");
    if (Status s = store.write(0, backup.first(used)); s != Status::Ok)
        return make_error(s, store.name() + ": cannot write the LUKS header");
    if (Status s = store.flush(); s != Status::Ok) return make_error(s, store.name() + ": flush");
    return {};
}

Result<Header> format(Registry& reg, BackingStore& store, const FormatParams& params, ConstBytes vk,
                      ConstBytes passphrase) {
    uint32_t iterations = params.force_iterations;
    if (!iterations) {
        Result<uint32_t> it = benchmark_pbkdf2(reg, params.hash, params.key_bytes, params.iter_time_ms);
        if (!it) return it.error();
        iterations = *it;
    }
    Result<Header> h = make_header(reg, params, vk, iterations);
    if (!h) return h;
    const uint64_t need = device_sectors(*h) * kSector;
    if (store.size() < need)
        return invalid("Device " + store.name() + " is too small. (LUKS1 requires at least " + std::to_string(need) +
                       " bytes.)");
    // LUKS_wipe_header_areas: zeros to the payload (the first 4 KiB of a
    // detached header), then random bytes over each keyslot area.
    uint64_t zero_len = uint64_t{h->payload_offset} * kSector;
    if (zero_len == 0 || zero_len > need) zero_len = kAlignKeyslots;
    if (Result<void> r = fill(store, 0, std::min<uint64_t>(zero_len, store.size()), false); !r) return r.error();
    for (const Keyslot& k : h->keyslots)
        if (Result<void> r = fill(store, uint64_t{k.key_material_offset} * kSector,
                                  af_sectors(h->key_bytes, kStripes) * kSector, true);
            !r)
            return r.error();
    if (Result<void> r = write_header(store, *h); !r) return r.error();
    if (Result<void> r = add_keyslot(reg, store, *h, params.keyslot, vk, passphrase, iterations); !r) return r.error();
    return h;
}

}  // namespace blkcrypt::luks::luks1
