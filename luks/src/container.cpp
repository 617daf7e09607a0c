// See <blkcrypt/luks/container.hpp>. LUKS1 is opened here; LUKS2 goes to its
// own reader (luks2.hpp) from this one front.
#include <blkcrypt/luks/container.hpp>
#include <blkcrypt/luks/luks1.hpp>
#include <blkcrypt/luks/luks2.hpp>

#include <blkcrypt/internal/bytes_util.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>

namespace blkcrypt::luks {

Result<Version> detect(BackingStore& header) {
    static constexpr uint8_t kMagic[6] = {'L', 'U', 'K', 'S', 0xba, 0xbe};
    std::array<uint8_t, 8> head{};
    const std::string who = header.name().empty() ? "" : header.name() + ": ";
    if (header.size() < head.size()) return make_error(Status::Invalid, who + "not a LUKS device");
    if (Status s = header.read(0, head); s != Status::Ok)
        return make_error(s, who + "cannot read the LUKS header");
    if (std::memcmp(head.data(), kMagic, sizeof kMagic) != 0) {
        // A LUKS2 primary that lost its magic (sector 0 zeroed, a torn
        // write) still has a secondary copy; cryptsetup looks for it at every
        // offset a metadata size allows (LUKS2_HDR2_OFFSETS), and so do we.
        static constexpr uint8_t kMagic2[6] = {'S', 'K', 'U', 'L', 0xba, 0xbe};
        for (uint64_t off = luks2::kMinHdrSize; off <= luks2::kMaxHdrSize; off *= 2) {
            if (header.size() < off + head.size()) break;
            if (Status s = header.read(off, head); s != Status::Ok)
                return make_error(s, who + "cannot read the LUKS header");
            if (std::memcmp(head.data(), kMagic2, sizeof kMagic2) == 0 && get_be16(head.data() + 6) == 2)
                return Version::Luks2;
        }
        return make_error(Status::Invalid, who + "not a LUKS device");
    }
    const uint16_t v = get_be16(head.data() + 6);
    if (v == 1) return Version::Luks1;
    if (v == 2) return Version::Luks2;
    return make_error(Status::Invalid, who + "Unsupported LUKS version " + std::to_string(v) + ".");
}

namespace {


// The volume of an unlocked LUKS1 header: its payload as a dm-crypt table.
Result<Volume> luks1_volume(const luks1::Header& h, SecureBuffer key, int keyslot) {
    Result<dm::CryptTable> t = dm::parse_cipher_spec(h.cipher_spec());
    if (!t) return make_error(t.status(), "LUKS cipher " + h.cipher_spec() + ": " + t.error().message);
    Volume vol;
    vol.version = Version::Luks1;
    vol.uuid = h.uuid;
    vol.table = std::move(t).value();
    vol.table.key = std::move(key);
    vol.table.offset = h.payload_offset;
    vol.keyslot = keyslot;
    return vol;
}

}  // namespace

Result<Volume> open(Registry& reg, BackingStore& header, ConstBytes passphrase, OpenOptions opts) {
    Result<Version> v = detect(header);
    if (!v) return v.error();
    if (*v == Version::Luks2) return luks2::open(reg, header, passphrase, opts);
    Result<luks1::Header> h = luks1::read_header(reg, header);
    if (!h) return h.error();
    Result<luks1::Unlocked> u = luks1::open_any(reg, header, *h, passphrase, opts.keyslot);
    if (!u) return u.error();
    return luks1_volume(*h, std::move(u->volume_key), static_cast<int>(u->keyslot));
}

Result<Volume> open_with_volume_key(Registry& reg, BackingStore& header, ConstBytes volume_key,
                                    OpenOptions opts) {
    Result<Version> v = detect(header);
    if (!v) return v.error();
    if (*v == Version::Luks2) {
        Result<luks2::Header> h = luks2::read_header(reg, header);
        if (!h) return h.error();
        if (opts.warnings) opts.warnings->insert(opts.warnings->end(), h->warnings.begin(), h->warnings.end());
        if (!opts.ignore_requirements)
            if (auto r = luks2::check_requirements(h->md); !r) return r.error();
        return luks2::volume_from_key(reg, h->md, volume_key);
    }
    Result<luks1::Header> h = luks1::read_header(reg, header);
    if (!h) return h.error();
    Result<bool> ok = luks1::check_volume_key(reg, *h, volume_key);
    if (!ok) return ok.error();
    if (!*ok) return make_error(Status::NoKey, "Volume key does not match the volume.");
    return luks1_volume(*h, SecureBuffer(volume_key), -1);  // no keyslot was used
}

// luks2_integrity.cpp: the dm-integrity device's size.
Result<uint64_t> integrity_provided_sectors(const Volume& vol, BackingStore& data);

Result<dm::DmTable> dm_table(const Volume& vol, BackingStore& data, const std::string& device) {
    if (vol.integrity) {
        // cryptsetup maps the crypt target over the whole integrity device
        // (a dynamic segment: LUKS2 --integrity never sets a size).
        auto provided = integrity_provided_sectors(vol, data);
        if (!provided) return provided.error();
        if (*provided == 0) return make_error(Status::Invalid, "the dm-integrity device provides no sectors");
        return dm::DmTable{dm::crypt_line(vol.table, *provided, device)};
    }
    const uint64_t sectors = data.size() / 512;
    if (sectors <= vol.table.offset)
        return make_error(Status::Invalid, (data.name().empty() ? std::string("the data device") : data.name()) +
                                               " ends before the LUKS payload at sector " +
                                               std::to_string(vol.table.offset));
    uint64_t length = vol.length_sectors ? vol.length_sectors : vol.table.length;
    if (!length) length = sectors - vol.table.offset;  // a dynamic segment: to the end
    if (length > sectors - vol.table.offset)
        return make_error(Status::Invalid, "Device too small for the target length");
    return dm::DmTable{dm::crypt_line(vol.table, length, device)};
}

bool valid_uuid(std::string_view u) noexcept {
    if (u.size() != 36) return false;
    for (std::size_t i = 0; i < u.size(); ++i) {
        const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash != (u[i] == '-')) return false;
        if (!dash && !std::isxdigit(static_cast<unsigned char>(u[i]))) return false;
    }
    return true;
}

}  // namespace blkcrypt::luks

// ---- Container: the keyslot and header actions of both versions.

namespace blkcrypt::luks {

namespace {

Error not_active(int k) { return make_error(Status::Invalid, "Keyslot " + std::to_string(k) + " is not active."); }
Error invalid_slot(int k) { return make_error(Status::Invalid, "Key slot " + std::to_string(k) + " is invalid."); }

}  // namespace

Result<Container> Container::load(Registry& reg, std::shared_ptr<BackingStore> store) {
    if (!store) return make_error(Status::Invalid, "no header device");
    Result<Version> v = detect(*store);
    if (!v) return v.error();
    Container c;
    c.reg_ = &reg;
    c.store_ = std::move(store);
    c.version_ = *v;
    if (*v == Version::Luks1) {
        Result<luks1::Header> h = luks1::read_header(reg, *c.store_);
        if (!h) return h.error();
        c.luks1_ = std::move(h).value();
        return c;
    }
    Result<luks2::Header> h = luks2::read_header(reg, *c.store_);
    if (!h) return h.error();
    c.warnings_ = std::move(h->warnings);
    c.luks2_ = std::make_shared<const luks2::Metadata>(std::move(h->md));
    return c;
}

Result<void> Container::reread() {
    Result<luks2::Header> h = luks2::read_header(*reg_, *store_);
    if (!h) return h.error();
    luks2_ = std::make_shared<const luks2::Metadata>(std::move(h->md));
    return {};
}

Result<void> Container::only_luks2() const {
    if (version_ == Version::Luks2) return {};
    return make_error(Status::Unsupported, "Device " + store_->name() + " is not a valid LUKS2 device.");
}

std::string Container::uuid() const { return version_ == Version::Luks1 ? luks1_->uuid : luks2_->hdr.uuid; }

Result<std::size_t> Container::volume_key_size() const {
    if (version_ == Version::Luks1) return std::size_t{luks1_->key_bytes};
    for (const auto& [id, dg] : luks2_->digests) {
        if (std::find(dg.segments.begin(), dg.segments.end(), 0) == dg.segments.end()) continue;
        for (int k : dg.keyslots)
            if (auto it = luks2_->keyslots.find(k); it != luks2_->keyslots.end()) return std::size_t{it->second.key_size};
    }
    return make_error(Status::Invalid,
                      "Cannot determine volume key size for LUKS without keyslots, please use --key-size option.");
}

int Container::keyslot_limit() const noexcept {
    return version_ == Version::Luks1 ? static_cast<int>(luks1::kNumKeyslots) : luks2::kMaxKeyslots;
}

bool Container::keyslot_active(int k) const {
    if (k < 0 || k >= keyslot_limit()) return false;
    return version_ == Version::Luks1 ? luks1_->keyslots[static_cast<unsigned>(k)].enabled()
                                      : luks2_->keyslots.count(k) > 0;
}

std::vector<int> Container::active_keyslots() const {
    std::vector<int> out;
    for (int k = 0; k < keyslot_limit(); ++k)
        if (keyslot_active(k)) out.push_back(k);
    return out;
}

Result<void> Container::check_requirements() const {
    return version_ == Version::Luks2 ? luks2::check_requirements(*luks2_) : Result<void>{};
}

Result<Unlocked> Container::unlock(ConstBytes passphrase, int keyslot) const {
    if (version_ == Version::Luks1) {
        Result<luks1::Unlocked> u = luks1::open_any(*reg_, *store_, *luks1_, passphrase, keyslot);
        if (!u) return u.error();
        return Unlocked{static_cast<int>(u->keyslot), std::move(u->volume_key)};
    }
    OpenOptions o;
    o.keyslot = keyslot;
    Result<Volume> v = luks2::open(*reg_, *store_, passphrase, o);
    if (!v) return v.error();
    return Unlocked{v->keyslot, std::move(v->table.key)};
}

Result<void> Container::check_volume_key(ConstBytes volume_key) const {
    if (version_ == Version::Luks2) {
        Result<Volume> v = luks2::volume_from_key(*reg_, *luks2_, volume_key);
        if (!v) return v.error();
        return {};
    }
    Result<bool> ok = luks1::check_volume_key(*reg_, *luks1_, volume_key);
    if (!ok) return ok.error();
    if (!*ok) return make_error(Status::NoKey, "Volume key does not match the volume.");
    return {};
}

Result<int> Container::free_keyslot(int requested) const {
    if (requested >= keyslot_limit()) return invalid_slot(requested);
    if (requested >= 0) {
        if (keyslot_active(requested))
            return make_error(Status::Invalid, "Key slot " + std::to_string(requested) + " is full, please select another one.");
        return requested;
    }
    for (int k = 0; k < keyslot_limit(); ++k)
        if (!keyslot_active(k)) return k;
    return make_error(Status::Invalid, "All key slots full.");
}

Result<int> Container::add_keyslot(ConstBytes volume_key, ConstBytes passphrase, const KeyslotOptions& opts) {
    Result<int> slot = free_keyslot(opts.keyslot);
    if (!slot) return slot;
    if (version_ == Version::Luks2) {
        KeyslotOptions o = opts;
        o.keyslot = *slot;
        Result<int> made = luks2::add_keyslot(*reg_, *store_, volume_key, passphrase, o);
        if (!made) return made;
        if (auto r = reread(); !r) return r.error();
        return made;
    }
    uint32_t iterations = opts.iterations;
    if (!iterations) {
        Result<uint32_t> it = luks1::benchmark_pbkdf2(*reg_, luks1_->hash_spec, luks1_->key_bytes, opts.iter_time_ms);
        if (!it) return it.error();
        iterations = *it;
    }
    if (auto r = luks1::add_keyslot(*reg_, *store_, *luks1_, static_cast<unsigned>(*slot), volume_key, passphrase,
                                    iterations);
        !r)
        return r.error();
    return slot;
}

Result<Unlocked> Container::unlock_to_change(ConstBytes old_passphrase, int requested) const {
    return unlock(old_passphrase, version_ == Version::Luks1 ? -1 : requested);
}

Result<int> Container::change_target(const Unlocked& old, int requested) const {
    if (version_ == Version::Luks2) return old.keyslot;
    if (requested >= keyslot_limit()) return invalid_slot(requested);
    if (requested >= 0) return requested;
    for (int k = 0; k < keyslot_limit(); ++k)
        if (!keyslot_active(k)) return k;
    return make_error(Status::Invalid, "All key slots full: a crash-safe change needs a free keyslot.");
}

Result<void> Container::change_keyslot(const Unlocked& old, int target, ConstBytes old_passphrase,
                                       ConstBytes new_passphrase, const KeyslotOptions& opts) {
    if (version_ == Version::Luks2) {
        KeyslotOptions o = opts;
        o.keyslot = old.keyslot;
        Result<int> r = luks2::change_keyslot(*reg_, *store_, old_passphrase, new_passphrase, o);
        if (!r) return r.error();
        return reread();
    }
    uint32_t iterations = opts.iterations;
    if (!iterations) {
        Result<uint32_t> it = luks1::benchmark_pbkdf2(*reg_, luks1_->hash_spec, luks1_->key_bytes, opts.iter_time_ms);
        if (!it) return it.error();
        iterations = *it;
    }
    return luks1::change_keyslot(*reg_, *store_, *luks1_, static_cast<unsigned>(old.keyslot),
                                 static_cast<unsigned>(target), old.volume_key, new_passphrase, iterations);
}

Result<void> Container::check_removable(int k) const {
    if (k < 0 || k >= keyslot_limit()) return invalid_slot(k);
    if (!keyslot_active(k)) return not_active(k);
    return {};
}

Result<void> Container::remove_keyslot(int k) {
    if (auto r = check_removable(k); !r) return r;
    if (version_ == Version::Luks1) return luks1::remove_keyslot(*store_, *luks1_, static_cast<unsigned>(k));
    if (auto r = luks2::remove_keyslot(*reg_, *store_, k); !r) return r;
    return reread();
}

Result<void> Container::erase() {
    for (int k : active_keyslots())
        if (auto r = remove_keyslot(k); !r) return r;
    return {};
}

Result<void> Container::set_uuid(std::string_view uuid) {
    if (auto r = check_requirements(); !r) return r;
    if (version_ == Version::Luks1) {
        luks1::Header h = *luks1_;
        h.uuid = std::string(uuid);
        if (auto r = luks1::write_header(*store_, h); !r) return r;
        luks1_ = std::move(h);
        return {};
    }
    luks2::Metadata md = *luks2_;
    md.hdr.uuid = std::string(uuid);  // the binary headers carry it; the JSON stays
    if (auto r = luks2::write_metadata(*reg_, *store_, md, md.json); !r) return r;
    return reread();
}

Result<std::vector<uint8_t>> Container::header_backup() const {
    return version_ == Version::Luks1 ? luks1::header_backup(*reg_, *store_) : luks2::header_backup(*reg_, *store_);
}

std::string Container::dump(std::string_view device) const {
    return version_ == Version::Luks1 ? luks1::dump(*luks1_, device) : luks2::dump(*luks2_);
}

SecureBuffer Container::dump_volume_key(std::string_view device, ConstBytes volume_key) const {
    if (version_ == Version::Luks1) return luks1::dump_volume_key(*luks1_, device, volume_key);
    // cryptsetup prints LUKS1's lines for LUKS2 too: the data segment's
    // cipher split at its first '-' and its offset in sectors.
    const luks2::Segment& seg = luks2_->segments.at(0);
    luks1::Header fields;
    const std::size_t dash = seg.encryption.find('-');
    fields.cipher_name = seg.encryption.substr(0, dash);
    fields.cipher_mode = dash == std::string::npos ? "" : seg.encryption.substr(dash + 1);
    fields.payload_offset = static_cast<uint32_t>(seg.offset / luks1::kSector);
    fields.uuid = luks2_->hdr.uuid;
    return luks1::dump_volume_key(fields, device, volume_key);
}

Result<std::string> Container::dump_json_metadata() const {
    if (auto r = only_luks2(); !r) return r.error();
    return luks2::dump_json(*luks2_);
}

Result<void> Container::set_labels(std::string_view label, std::string_view subsystem) {
    if (auto r = only_luks2(); !r) return r;
    if (auto r = luks2::set_labels(*reg_, *store_, label, subsystem); !r) return r;
    return reread();
}

Result<void> Container::set_priority(int k, int priority) {
    if (auto r = only_luks2(); !r) return r;
    if (auto r = luks2::set_priority(*reg_, *store_, k, priority); !r) return r;
    return reread();
}

Result<int> Container::import_token(std::string_view token, int id, bool replace) {
    if (auto r = only_luks2(); !r) return r.error();
    Result<int> made = luks2::import_token(*reg_, *store_, token, id, replace);
    if (!made) return made;
    if (auto r = reread(); !r) return r.error();
    return made;
}

Result<void> Container::assign_token(int id, int k) {
    if (auto r = only_luks2(); !r) return r;
    if (auto r = luks2::assign_token(*reg_, *store_, id, k); !r) return r;
    return reread();
}

Result<void> Container::remove_token(int id) {
    if (auto r = only_luks2(); !r) return r;
    if (auto r = luks2::remove_token(*reg_, *store_, id); !r) return r;
    return reread();
}

Result<std::string> Container::export_token(int id) const {
    if (auto r = only_luks2(); !r) return r.error();
    auto it = luks2_->tokens.find(id);
    if (it == luks2_->tokens.end())
        return make_error(Status::Invalid, "Failed to get token " + std::to_string(id) + " for export.");
    return it->second.json;
}

Result<void> header_restore(Registry& reg, BackingStore& device, BackingStore& backup) {
    std::array<uint8_t, 8> head{};
    if (backup.size() >= head.size())
        if (Status s = backup.read(0, head); s != Status::Ok) return make_error(s, "Cannot read header backup file.");
    // The backup's own version picks the format (cryptsetup restores either).
    if (head[6] == 0 && head[7] == 2) return luks2::header_restore(reg, device, backup);
    std::vector<uint8_t> bytes(static_cast<std::size_t>(backup.size()));
    if (Status s = backup.read(0, bytes); s != Status::Ok) return make_error(s, "Cannot read header backup file.");
    return luks1::header_restore(reg, device, bytes);
}

}  // namespace blkcrypt::luks
