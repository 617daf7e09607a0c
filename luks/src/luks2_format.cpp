// LUKS2 format: the layout and JSON cryptsetup 2.6.1's luksFormat writes
// (lib/luks2/luks2_json_format.c LUKS2_generate_hdr, luks2_keyslot_luks2.c,
// luks2_digest_pbkdf2.c); KDF costs given or benchmarked as cryptsetup does.
#include <blkcrypt/base64.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/dm/plain_key.hpp>
#include <blkcrypt/kdf.hpp>
#include <blkcrypt/luks/af.hpp>
#include <blkcrypt/luks/luks2.hpp>
#include <blkcrypt/luks/pbkdf_bench.hpp>
#include <blkcrypt/random.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <unistd.h>

namespace blkcrypt::luks::luks2 {

namespace {

using json = nlohmann::ordered_json;

Error bad(std::string msg) { return make_error(Status::Invalid, std::move(msg)); }

std::string random_uuid() {
    uint8_t b[16];
    if (!random_bytes(b).ok()) return {};
    b[6] = static_cast<uint8_t>((b[6] & 0x0f) | 0x40);  // version 4
    b[8] = static_cast<uint8_t>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
    char s[37];
    std::snprintf(s, sizeof s, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                  b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    return s;
}

std::string u64s(uint64_t v) { return std::to_string(v); }

// Encrypts data in place with the keyslot cipher, 512-byte sectors from 0,
// through the dm-crypt engine (the inverse of the unlock path).
Result<void> encrypt_area(Registry& reg, const std::string& cipher, ConstBytes key, Bytes data) {
    Result<dm::CryptTable> table = dm::parse_cipher_spec(cipher);
    if (!table) return table.error();
    table->key.assign(key);
    auto store = std::make_shared<MemoryStore>(data.size());
    dm::CryptTargetOptions topts;
    topts.threads = 1;
    Result<std::unique_ptr<dm::CryptTarget>> target =
        dm::CryptTarget::create(reg, *table, store, data.size() / 512, topts);
    if (!target) return target.error();
    dm::Bio bio;
    bio.dir = dm::BioDir::Write;
    bio.vecs.push_back(SgEntry{data.data(), data.size()});
    if (Status s = (*target)->submit_sync(bio); s != Status::Ok)
        return make_error(s, "cannot encrypt the keyslot area with " + cipher);
    std::copy(store->data().begin(), store->data().end(), data.begin());
    return {};
}

// The keyslot area's cipher and key bytes: the segment's, except that a
// segment with integrity (an AEAD or random IVs: nothing a keyslot area can
// use) gets cryptsetup's default aes-xts-plain64 with a 512-bit key
// (LUKS2_keyslot_cipher_incompatible).
std::pair<std::string, std::size_t> keyslot_cipher(const std::string& segment_cipher, bool integrity,
                                                   std::size_t vk_size) {
    if (integrity) return {"aes-xts-plain64", 64};
    return {segment_cipher, vk_size};
}

struct NewKeyslot {
    json obj;
    std::vector<uint8_t> area;  // encrypted AF data, padded to 4 KiB
};

// A luks2 keyslot for vk under passphrase: KDF(passphrase) keys the area
// cipher, which encrypts the AF-split volume key (cryptsetup: the area
// cipher and key size are the segment's).
Result<NewKeyslot> make_keyslot(Registry& reg, ConstBytes vk, ConstBytes passphrase, const KeyslotOptions& o,
                                const std::string& cipher, std::size_t area_key_size, uint64_t area_offset) {
    const bool argon = o.pbkdf == "argon2i" || o.pbkdf == "argon2id";
    if (!argon && o.pbkdf != "pbkdf2") return bad("unknown PBKDF " + o.pbkdf);
    if (o.priority < 0 || o.priority > 2) return bad("priority must be 0, 1 or 2");
    // Costs not given are chosen as cryptsetup chooses them: lanes
    // min(4, CPUs), memory up to min(1 GiB, half of RAM), then a benchmark
    // for iter_time_ms.
    uint32_t iterations = o.iterations, memory = o.memory_kib, parallel = o.parallel;
    if (argon) {
        if (parallel == 0) parallel = luks::default_argon2_parallel();
        if (memory == 0) memory = luks::default_argon2_memory_kib();
        if (iterations == 0) {
            Result<luks::Argon2Cost> c = luks::benchmark_argon2(
                o.pbkdf == "argon2id" ? Argon2Type::Id : Argon2Type::I, vk.size(), o.iter_time_ms, memory, parallel);
            if (!c) return c.error();
            iterations = c->time;
            memory = c->memory_kib;
        }
    } else if (iterations == 0) {
        Result<uint32_t> it = luks::benchmark_pbkdf2(reg, o.hash, vk.size(), o.iter_time_ms);
        if (!it) return it.error();
        iterations = *it;
    }
    Keyslot ks;
    ks.key_size = static_cast<uint32_t>(vk.size());
    ks.stripes = 4000;
    const uint64_t af_bytes = ks.af_size();
    NewKeyslot out;
    out.area.assign(static_cast<std::size_t>((af_bytes + 4095) / 4096 * 4096), 0);
    std::vector<uint8_t> kdf_salt(32);
    if (auto r = random_bytes(kdf_salt); !r) return r.error();
    SecureBuffer area_key(area_key_size);
    Result<void> kr =
        argon ? argon2(o.pbkdf == "argon2id" ? Argon2Type::Id : Argon2Type::I, passphrase, kdf_salt, iterations,
                       memory, parallel, area_key.span())
              : pbkdf2(reg, dm::plain_hash_alg(o.hash), passphrase, kdf_salt, iterations, area_key.span());
    if (!kr) return kr.error();
    {
        SecureBuffer split(static_cast<std::size_t>(af_bytes));
        const std::size_t used = vk.size() * 4000;
        if (auto r = luks::af_split(reg, o.hash, vk, 4000, split.span().first(used)); !r) return r.error();
        if (auto r = encrypt_area(reg, cipher, area_key, split.span()); !r) return r.error();
        std::copy(split.data(), split.data() + split.size(), out.area.begin());
    }
    json kdf;
    kdf["type"] = o.pbkdf;
    if (argon) {
        kdf["time"] = iterations;
        kdf["memory"] = memory;
        kdf["cpus"] = parallel;
    } else {
        kdf["hash"] = o.hash;
        kdf["iterations"] = iterations;
    }
    kdf["salt"] = base64_encode(kdf_salt);
    out.obj["type"] = "luks2";
    out.obj["key_size"] = vk.size();
    out.obj["af"] = json{{"type", "luks1"}, {"stripes", 4000}, {"hash", o.hash}};
    out.obj["area"] = json{{"type", "raw"}, {"offset", u64s(area_offset)}, {"size", u64s(out.area.size())},
                            {"encryption", cipher}, {"key_size", area_key_size}};
    out.obj["kdf"] = kdf;
    if (o.priority != 1) out.obj["priority"] = o.priority;
    return out;
}

}  // namespace

Result<luks::Volume> format(Registry& reg, BackingStore& header, ConstBytes passphrase, const FormatOptions& o) {
    const uint64_t md = o.metadata_size;
    if (md < kMinHdrSize || md > kMaxHdrSize || (md & (md - 1)))
        return bad("LUKS2 metadata size must be a power of two 16 KiB..4 MiB");
    if (o.sector_size < 512 || o.sector_size > 4096 || (o.sector_size & (o.sector_size - 1)))
        return bad("sector size must be a power of two 512..4096");
    if (o.data_offset % o.sector_size) return bad("the data offset must be a multiple of the sector size");
    uint64_t ks_size = o.keyslots_size;
    if (ks_size == 0) {
        // cryptsetup: the keyslots area fills the room up to the data
        // (16 MiB with a detached header), at most 128 MiB.
        const uint64_t end = o.data_offset ? o.data_offset : (16u << 20);
        if (end <= 2 * md) return bad("the data offset leaves no room for keyslots");
        ks_size = std::min<uint64_t>(end - 2 * md, kMaxKeyslotsSize) / 4096 * 4096;
    }
    if (ks_size % 4096 || ks_size > kMaxKeyslotsSize) return bad("keyslots size must be 4 KiB aligned, at most 128 MiB");
    if (o.data_offset && o.data_offset < 2 * md + ks_size) return bad("the data offset lies inside the header");
    if (header.size() < 2 * md + ks_size) return make_error(Status::IoError, "the header device is too small");
    if (o.keyslot < 0 || o.keyslot >= kMaxKeyslots) return bad("keyslot must be 0..31");
    if (o.key_size == 0 || o.key_size > 512) return bad("key size out of range");
    if (o.pbkdf != "pbkdf2" && o.pbkdf != "argon2i" && o.pbkdf != "argon2id") return bad("unknown PBKDF " + o.pbkdf);
    if (o.digest_iterations < 1000) return bad("the volume key digest needs at least 1000 iterations");
    const std::string uuid = o.uuid.empty() ? random_uuid() : o.uuid;
    if (!luks::valid_uuid(uuid)) return bad("Wrong LUKS UUID format provided.");
    if (o.label.size() >= 48 || o.subsystem.size() >= 48) return bad("label and subsystem: at most 47 characters");
    // The data cipher must exist and take this key before anything is written.
    if (!o.integrity.empty()) {
        auto prof = luks::integrity_profile(o.cipher, o.integrity);
        if (!prof) return prof.error();
        if (o.key_size <= prof->key_size) return bad("the volume key has no room for the cipher key");
    } else {
        Result<dm::CryptTable> t = dm::parse_cipher_spec(o.cipher);
        if (!t) return t.error();
    }

    SecureBuffer vk(o.key_size);
    if (!o.volume_key.empty()) {
        if (o.volume_key.size() != o.key_size) return bad("the volume key has the wrong size");
        vk.assign(o.volume_key);
    } else if (auto r = random_bytes(vk.span()); !r) {
        return r.error();
    }

    const uint64_t area_offset = 2 * md;
    std::vector<uint8_t> digest_salt(32);
    if (auto r = random_bytes(digest_salt); !r) return r.error();
    KeyslotOptions ko;
    copy_keyslot_costs(ko, o);
    const auto [area_cipher, area_key] = keyslot_cipher(o.cipher, !o.integrity.empty(), vk.size());
    Result<NewKeyslot> nk = make_keyslot(reg, vk, passphrase, ko, area_cipher, area_key, area_offset);
    if (!nk) return nk.error();
    if (nk->area.size() > ks_size) return bad("the keyslots area is too small for one keyslot");
    std::vector<uint8_t>& area = nk->area;

    // The digest: PBKDF2 of the volume key, the hash's full output.
    // o.hash is cryptsetup's name (kept in the JSON); the registry may name it otherwise.
    const std::string hash = dm::plain_hash_alg(o.hash);
    Result<Shash> h = Shash::alloc(reg, hash);
    if (!h) return h.error();
    std::vector<uint8_t> digest(h->digestsize());
    if (auto r = pbkdf2(reg, hash, vk, digest_salt, o.digest_iterations, digest); !r) return r.error();

    json root;
    root["keyslots"][std::to_string(o.keyslot)] = nk->obj;
    root["tokens"] = json::object();
    root["segments"]["0"] = json{{"type", "crypt"}, {"offset", u64s(o.data_offset)}, {"size", "dynamic"},
                                 {"iv_tweak", "0"}, {"encryption", o.cipher}, {"sector_size", o.sector_size}};
    if (!o.integrity.empty())
        root["segments"]["0"]["integrity"] =
            json{{"type", o.integrity}, {"journal_encryption", "none"}, {"journal_integrity", "none"}};
    root["digests"]["0"] = json{{"type", "pbkdf2"},
                                {"keyslots", json::array({std::to_string(o.keyslot)})},
                                {"segments", json::array({"0"})},
                                {"hash", o.hash},
                                {"iterations", o.digest_iterations},
                                {"salt", base64_encode(digest_salt)},
                                {"digest", base64_encode(digest)}};
    root["config"] = json{{"json_size", u64s(md - kBinHeaderSize)}, {"keyslots_size", u64s(ks_size)}};
    const std::string text = root.dump(-1, ' ', false, json::error_handler_t::replace);

    BinaryHeader bh;
    bh.hdr_size = md;
    bh.seqid = 1;
    bh.label = o.label;
    bh.subsystem = o.subsystem;
    bh.checksum_alg = "sha256";
    bh.uuid = uuid;
    // Each copy has its own salt (cryptsetup regenerates it per copy).
    std::array<Result<std::vector<uint8_t>>, 2> copies{make_error(Status::Invalid, ""), make_error(Status::Invalid, "")};
    for (int c = 0; c < 2; ++c) {
        if (auto r = random_bytes(bh.salt); !r) return r.error();
        copies[c] = build_copy(reg, bh, c == 1, text);
        if (!copies[c]) return copies[c].error();
    }
    // Check what is about to be written as any reader will.
    if (Result<Metadata> m = parse_metadata(ConstBytes(copies[0]->data() + kBinHeaderSize, md - kBinHeaderSize), bh); !m)
        return m.error();

    // Old metadata goes first (a half-written format must not look like the
    // previous container), then the keyslot, then primary and secondary.
    std::vector<uint8_t> zeros(static_cast<std::size_t>(2 * md), 0);
    if (Status s = header.write(0, zeros); s != Status::Ok) return make_error(s, "cannot write the header");
    if (Status s = header.write(area_offset, area); s != Status::Ok) return make_error(s, "cannot write the keyslot");
    if (Status s = header.write(0, *copies[0]); s != Status::Ok) return make_error(s, "cannot write the primary header");
    if (Status s = header.write(md, *copies[1]); s != Status::Ok) return make_error(s, "cannot write the secondary header");
    if (Status s = header.flush(); s != Status::Ok) return make_error(s, "cannot flush the header");

    Result<Header> back = read_header(reg, header);
    if (!back) return back.error();
    return volume_from_key(reg, back->md, vk, o.keyslot);
}

Result<void> write_metadata(Registry& reg, BackingStore& header, const Metadata& current, std::string_view text) {
    BinaryHeader bh = current.hdr;
    bh.seqid = current.hdr.seqid + 1;
    std::array<Result<std::vector<uint8_t>>, 2> copies{make_error(Status::Invalid, ""), make_error(Status::Invalid, "")};
    for (int c = 0; c < 2; ++c) {
        if (auto r = random_bytes(bh.salt); !r) return r.error();
        copies[c] = build_copy(reg, bh, c == 1, text);
        if (!copies[c]) return copies[c].error();
    }
    const uint64_t md = bh.hdr_size;
    if (Result<Metadata> m = parse_metadata(ConstBytes(copies[0]->data() + kBinHeaderSize, md - kBinHeaderSize), bh); !m)
        return m.error();
    // Primary first: until it is whole the secondary (old) copy is the good
    // one; once it is, its higher seqid wins over the old secondary.
    if (Status s = header.write(0, *copies[0]); s != Status::Ok) return make_error(s, "cannot write the primary header");
    if (Status s = header.flush(); s != Status::Ok) return make_error(s, "cannot flush the header");
    if (Status s = header.write(md, *copies[1]); s != Status::Ok) return make_error(s, "cannot write the secondary header");
    if (Status s = header.flush(); s != Status::Ok) return make_error(s, "cannot flush the header");
    return {};
}

namespace {

// The first gap in the keyslots area that holds a keyslot for a key of
// key_size bytes (LUKS2_find_area_gap).
Result<uint64_t> find_gap(const Metadata& md, std::size_t key_size) {
    Keyslot probe;
    probe.key_size = static_cast<uint32_t>(key_size);
    probe.stripes = 4000;
    const uint64_t need = (probe.af_size() + 4095) / 4096 * 4096;
    std::vector<std::pair<uint64_t, uint64_t>> used;
    for (const auto& [id, ks] : md.keyslots) used.emplace_back(ks.area_offset, ks.area_offset + ks.area_size);
    std::sort(used.begin(), used.end());
    uint64_t at = 2 * md.metadata_size();
    for (const auto& [b, e] : used) {
        if (b >= at + need) break;
        at = std::max(at, (e + 4095) / 4096 * 4096);
    }
    if (at + need > md.hdr_and_areas_size()) return make_error(Status::Invalid, "No space for new keyslot.");
    return at;
}

// The current header, refusing what cryptsetup refuses to change.
Result<Header> header_for_update(Registry& reg, BackingStore& store) {
    Result<Header> h = read_header(reg, store);
    if (!h) return h.error();
    if (auto r = check_requirements(h->md); !r) return r.error();
    if (!h->primary_ok || !h->secondary_ok)
        return make_error(Status::Invalid, "a LUKS2 header copy is damaged; repair it (cryptsetup repair) before changing keyslots");
    return h;
}

}  // namespace

Result<int> add_keyslot(Registry& reg, BackingStore& header, ConstBytes volume_key, ConstBytes passphrase,
                        const KeyslotOptions& o) {
    Result<Header> h = header_for_update(reg, header);
    if (!h) return h.error();
    const Metadata& md = h->md;
    // The key must be the volume's.
    Result<luks::Volume> v = volume_from_key(reg, md, volume_key);
    if (!v) return v.error();
    int k = o.keyslot;
    if (k < 0) {
        for (k = 0; k < kMaxKeyslots && md.keyslots.count(k); ++k) {}
        if (k == kMaxKeyslots) return make_error(Status::Invalid, "All key slots full.");
    } else if (k >= kMaxKeyslots) {
        return bad("keyslot must be 0..31");
    } else if (md.keyslots.count(k)) {
        return make_error(Status::Invalid, "Key slot " + std::to_string(k) + " is full, please select another one.");
    }
    const auto [cipher, area_key] = keyslot_cipher(md.segments.at(0).encryption,
                                                   md.segments.at(0).integrity.has_value(), volume_key.size());
    Result<uint64_t> gap = find_gap(md, volume_key.size());
    if (!gap) return gap.error();
    const uint64_t at = *gap;

    Result<NewKeyslot> nk = make_keyslot(reg, volume_key, passphrase, o, cipher, area_key, at);
    if (!nk) return nk.error();
    json root = json::parse(md.json, nullptr, false);
    root["keyslots"][std::to_string(k)] = nk->obj;
    // The new keyslot joins the segment's digest.
    for (auto& [id, d] : md.digests)
        if (std::count(d.segments.begin(), d.segments.end(), 0)) root["digests"][std::to_string(id)]["keyslots"].push_back(std::to_string(k));
    const std::string text = root.dump(-1, ' ', false, json::error_handler_t::replace);

    if (Status s = header.write(at, nk->area); s != Status::Ok) return make_error(s, "cannot write the keyslot");
    if (Status s = header.flush(); s != Status::Ok) return make_error(s, "cannot flush the keyslot");
    if (auto r = write_metadata(reg, header, md, text); !r) return r.error();
    return k;
}

Result<void> remove_keyslot(Registry& reg, BackingStore& header, int k) {
    Result<Header> h = header_for_update(reg, header);
    if (!h) return h.error();
    const Metadata& md = h->md;
    auto it = md.keyslots.find(k);
    if (it == md.keyslots.end()) return make_error(Status::Invalid, "Keyslot " + std::to_string(k) + " is not active.");
    json root = json::parse(md.json, nullptr, false);
    root["keyslots"].erase(std::to_string(k));
    const std::string name = std::to_string(k);
    auto drop = [&](json& arr) {
        json out = json::array();
        for (auto& e : arr)
            if (!(e.is_string() && e.get<std::string>() == name)) out.push_back(e);
        arr = std::move(out);
    };
    for (auto& [id, d] : root["digests"].items()) drop(d["keyslots"]);
    for (auto& [id, t] : root["tokens"].items()) drop(t["keyslots"]);
    const std::string text = root.dump(-1, ' ', false, json::error_handler_t::replace);
    // Key material first: once the area is gone the slot cannot open, even
    // if the header still lists it.
    std::vector<uint8_t> zeros(static_cast<std::size_t>(it->second.area_size), 0);
    if (Status s = header.write(it->second.area_offset, zeros); s != Status::Ok) return make_error(s, "cannot wipe the keyslot");
    if (Status s = header.flush(); s != Status::Ok) return make_error(s, "cannot flush the keyslot wipe");
    return write_metadata(reg, header, md, text);
}

Result<int> change_keyslot(Registry& reg, BackingStore& header, ConstBytes old_passphrase, ConstBytes new_passphrase,
                           const KeyslotOptions& o) {
    Result<Header> h = header_for_update(reg, header);
    if (!h) return h.error();
    const Metadata& md = h->md;
    // Which slot the old passphrase opens (cryptsetup's order, or the named one).
    OpenOptions oo;
    oo.keyslot = o.keyslot;
    Result<luks::Volume> v = luks2::open(reg, header, old_passphrase, oo);
    if (!v) return v.error();
    const int k = v->keyslot;
    const Keyslot& old_ks = md.keyslots.at(k);
    Result<uint64_t> gap = find_gap(md, v->table.key.size());
    if (!gap) return gap.error();
    KeyslotOptions ko = o;
    ko.priority = old_ks.priority;
    Result<NewKeyslot> nk =
        make_keyslot(reg, v->table.key, new_passphrase, ko, old_ks.area_encryption, old_ks.area_key_size, *gap);
    if (!nk) return nk.error();
    json root = json::parse(md.json, nullptr, false);
    root["keyslots"][std::to_string(k)] = nk->obj;
    const std::string text = root.dump(-1, ' ', false, json::error_handler_t::replace);

    if (Status s = header.write(*gap, nk->area); s != Status::Ok) return make_error(s, "cannot write the keyslot");
    if (Status s = header.flush(); s != Status::Ok) return make_error(s, "cannot flush the keyslot");
    if (auto r = write_metadata(reg, header, md, text); !r) return r.error();
    // Only now is the old area unreferenced.
    std::vector<uint8_t> zeros(static_cast<std::size_t>(old_ks.area_size), 0);
    if (Status s = header.write(old_ks.area_offset, zeros); s != Status::Ok) return make_error(s, "cannot wipe the old keyslot");
    if (Status s = header.flush(); s != Status::Ok) return make_error(s, "cannot flush the keyslot wipe");
    return k;
}

Result<void> set_labels(Registry& reg, BackingStore& header, std::string_view label, std::string_view subsystem) {
    Result<Header> h = header_for_update(reg, header);
    if (!h) return h.error();
    Metadata md = h->md;
    // The binary header's fields hold 47 bytes and a NUL.
    md.hdr.label = std::string(label.substr(0, 47));
    md.hdr.subsystem = std::string(subsystem.substr(0, 47));
    return write_metadata(reg, header, md, md.json);
}

Result<void> set_priority(Registry& reg, BackingStore& header, int k, int priority) {
    if (priority < 0 || priority > 2) return bad("priority must be 0, 1 or 2");
    Result<Header> h = header_for_update(reg, header);
    if (!h) return h.error();
    const Metadata& md = h->md;
    if (!md.keyslots.count(k)) return make_error(Status::Invalid, "Keyslot " + std::to_string(k) + " is not active.");
    json root = json::parse(md.json, nullptr, false);
    json& ks = root["keyslots"][std::to_string(k)];
    if (priority == 1)
        ks.erase("priority");
    else
        ks["priority"] = priority;
    return write_metadata(reg, header, md, root.dump(-1, ' ', false, json::error_handler_t::replace));
}

Result<int> import_token(Registry& reg, BackingStore& header, std::string_view token, int id, bool replace) {
    json t = json::parse(token.begin(), token.end(), nullptr, false);
    if (t.is_discarded() || !t.is_object()) return bad("the token is not a JSON object");
    if (!t.contains("type") || !t["type"].is_string() || !t.contains("keyslots") || !t["keyslots"].is_array())
        return bad("a token needs a \"type\" string and a \"keyslots\" array");
    // cryptsetup's own token type is checked by its handler.
    if (t["type"] == "luks2-keyring" && !(t.contains("key_description") && t["key_description"].is_string()))
        return bad("a luks2-keyring token needs a \"key_description\" string");
    Result<Header> h = header_for_update(reg, header);
    if (!h) return h.error();
    const Metadata& md = h->md;
    if (id < 0) {
        for (id = 0; id < kMaxTokens && md.tokens.count(id); ++id) {}
        if (id == kMaxTokens) return bad("No free token slot.");
    } else if (id >= kMaxTokens) {
        return bad("Token " + std::to_string(id) + " is invalid.");
    } else if (md.tokens.count(id) && !replace) {
        return bad("Token " + std::to_string(id) + " in use.");
    }
    json root = json::parse(md.json, nullptr, false);
    root["tokens"][std::to_string(id)] = std::move(t);
    // write_metadata checks the keyslot references as any reader does.
    if (auto r = write_metadata(reg, header, md, root.dump(-1, ' ', false, json::error_handler_t::strict)); !r)
        return r.error();
    return id;
}

Result<void> assign_token(Registry& reg, BackingStore& header, int id, int k) {
    Result<Header> h = header_for_update(reg, header);
    if (!h) return h.error();
    const Metadata& md = h->md;
    if (!md.tokens.count(id)) return bad("Token " + std::to_string(id) + " is not in use.");
    if (!md.keyslots.count(k)) return bad("Keyslot " + std::to_string(k) + " is not active.");
    json root = json::parse(md.json, nullptr, false);
    json& ks = root["tokens"][std::to_string(id)]["keyslots"];
    for (const json& e : ks)
        if (e.is_string() && e.get<std::string>() == std::to_string(k)) return {};  // already assigned
    ks.push_back(std::to_string(k));
    return write_metadata(reg, header, md, root.dump(-1, ' ', false, json::error_handler_t::strict));
}

Result<void> remove_token(Registry& reg, BackingStore& header, int id) {
    Result<Header> h = header_for_update(reg, header);
    if (!h) return h.error();
    const Metadata& md = h->md;
    if (!md.tokens.count(id)) return bad("Token " + std::to_string(id) + " is not in use.");
    json root = json::parse(md.json, nullptr, false);
    root["tokens"].erase(std::to_string(id));
    return write_metadata(reg, header, md, root.dump(-1, ' ', false, json::error_handler_t::strict));
}

Result<std::vector<uint8_t>> header_backup(Registry& reg, BackingStore& header) {
    Result<Header> h = read_header(reg, header);
    if (!h) return h.error();
    const uint64_t n = h->md.hdr_and_areas_size();
    const long page = sysconf(_SC_PAGESIZE);
    const uint64_t p = page > 0 ? static_cast<uint64_t>(page) : 4096;
    if (header.size() < n) return make_error(Status::IoError, "the header device is shorter than its header and keyslots");
    std::vector<uint8_t> out(static_cast<std::size_t>((n + p - 1) / p * p), 0);
    if (Status s = header.read(0, Bytes(out.data(), static_cast<std::size_t>(n))); s != Status::Ok)
        return make_error(s, "cannot read the header");
    return out;
}

Result<void> header_restore(Registry& reg, BackingStore& device, BackingStore& backup) {
    Result<Header> b = read_header(reg, backup);
    if (!b) return make_error(Status::Invalid, "Backup file doesn't contain valid LUKS header.");
    if (!b->md.config.requirements.empty())
        return make_error(Status::Unsupported, "Forbidden LUKS2 requirements detected in backup " + backup.name() + ".");
    const uint64_t n = b->md.hdr_and_areas_size();
    if (Result<Header> cur = read_header(reg, device)) {
        auto data_offset = [](const Metadata& m) {
            uint64_t off = std::numeric_limits<uint64_t>::max();
            for (const auto& [id, s] : m.segments)
                if (s.type == "crypt") off = std::min(off, s.offset);
            return off;
        };
        if (data_offset(cur->md) != data_offset(b->md))
            return make_error(Status::Invalid, "Data offset differ on device and backup, restore failed.");
        if (cur->md.hdr_and_areas_size() != n)
            return make_error(Status::Invalid,
                              "Binary header with keyslot areas size differ on device and backup, restore failed.");
    }
    if (backup.size() < n || device.size() < n) return make_error(Status::IoError, "the backup or the device is too small");
    std::vector<uint8_t> buf(static_cast<std::size_t>(n));
    if (Status s = backup.read(0, buf); s != Status::Ok) return make_error(s, "Cannot read header backup file.");
    if (Status s = device.write(0, buf); s != Status::Ok) return make_error(s, "cannot write the header");
    if (Status s = device.flush(); s != Status::Ok) return make_error(s, "cannot flush the header");
    return {};
}

}  // namespace blkcrypt::luks::luks2

namespace blkcrypt::luks::luks2::detail {

// For reencryption (reencrypt_meta.cpp): a keyslot object and its area, and
// the gap it goes in, as luksAddKey makes them.
Result<std::pair<std::string, std::vector<uint8_t>>> new_keyslot(Registry& reg, ConstBytes vk, ConstBytes passphrase,
                                                                  const KeyslotOptions& o, const std::string& cipher,
                                                                  uint64_t area_offset, std::size_t area_key_size) {
    Result<NewKeyslot> nk = make_keyslot(reg, vk, passphrase, o, cipher, area_key_size ? area_key_size : vk.size(),
                                         area_offset);
    if (!nk) return nk.error();
    return std::make_pair(nk->obj.dump(), std::move(nk->area));
}

Result<uint64_t> keyslot_gap(const Metadata& md, std::size_t key_size) { return find_gap(md, key_size); }

}  // namespace blkcrypt::luks::luks2::detail
