// LUKS2 keyslot unlock and the data segment's dm-crypt table
// (cryptsetup lib/luks2/luks2_keyslot_luks2.c, luks2_digest_pbkdf2.c).
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/dm/plain_key.hpp>
#include <blkcrypt/kdf.hpp>
#include <blkcrypt/luks/af.hpp>
#include <blkcrypt/luks/luks2.hpp>
#include <blkcrypt/registry.hpp>

#include <algorithm>
#include <optional>

namespace blkcrypt::luks::luks2 {

namespace {

constexpr const char* kNoKey = "No key available with this passphrase.";
constexpr const char* kNoUsable = "No usable keyslot is available.";

bool equal_ct(ConstBytes a, ConstBytes b) {
    if (a.size() != b.size()) return false;
    uint8_t d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d |= static_cast<uint8_t>(a[i] ^ b[i]);
    return d == 0;
}

Result<void> run_kdf(Registry& reg, const Kdf& kdf, ConstBytes passphrase, Bytes out) {
    // The JSON holds cryptsetup's hash names: whirlpool is the registry's wp512.
    if (kdf.type == "pbkdf2")
        return pbkdf2(reg, dm::plain_hash_alg(kdf.hash), passphrase, kdf.salt, kdf.iterations, out);
    const Argon2Type t = kdf.type == "argon2id" ? Argon2Type::Id : Argon2Type::I;
    return argon2(t, passphrase, kdf.salt, kdf.time, kdf.memory, kdf.cpus, out);
}

// Decrypts `data` in place as the keyslot area's cipher over 512-byte
// sectors numbered from 0 at the area start, through the dm-crypt engine.
Result<void> decrypt_area(Registry& reg, const std::string& cipher, ConstBytes key, Bytes data) {
    Result<dm::CryptTable> table = dm::parse_cipher_spec(cipher);
    if (!table) return table.error();
    table->key.assign(key);
    auto store = std::make_shared<MemoryStore>(data.size());
    std::copy(data.begin(), data.end(), store->data().begin());
    dm::CryptTargetOptions opts;
    opts.threads = 1;  // a few hundred KiB: not worth waking every core
    Result<std::unique_ptr<dm::CryptTarget>> target =
        dm::CryptTarget::create(reg, *table, store, data.size() / 512, opts);
    if (!target) return target.error();
    dm::Bio bio;
    bio.sector = 0;
    bio.dir = dm::BioDir::Read;
    bio.vecs.push_back(SgEntry{data.data(), data.size()});
    if (Status s = (*target)->submit_sync(bio); s != Status::Ok)
        return make_error(s, "cannot decrypt the keyslot area with " + cipher);
    return {};
}

// The digest check: PBKDF2 of the candidate key against the stored value.
Result<bool> digest_matches(Registry& reg, const Digest& d, ConstBytes key) {
    if (d.type != "pbkdf2") return make_error(Status::Unsupported, "unknown digest type " + d.type);
    SecureBuffer out(d.digest.size());
    if (auto r = pbkdf2(reg, dm::plain_hash_alg(d.hash), key, d.salt, d.iterations, out.span()); !r) return r.error();
    return equal_ct(out, d.digest);
}

}  // namespace

Result<SecureBuffer> unlock_keyslot(Registry& reg, BackingStore& header, const Metadata& md, int k,
                                    ConstBytes passphrase) {
    auto it = md.keyslots.find(k);
    if (it == md.keyslots.end()) return make_error(Status::Invalid, "Keyslot " + std::to_string(k) + " is not active.");
    const Keyslot& ks = it->second;
    if (ks.type != "luks2")
        return make_error(Status::Unsupported, "keyslot " + std::to_string(k) + " of type " + ks.type + " holds no passphrase");
    const int did = md.digest_for_keyslot(k);
    if (did < 0) return make_error(Status::Invalid, "keyslot " + std::to_string(k) + " has no digest");

    // cryptsetup 2.6.1 reads the AF data past a too-small area (into the
    // next keyslot's); that would overlap other data, so it is refused.
    if (ks.af_size() > ks.area_size)
        return make_error(Status::Invalid, "keyslot " + std::to_string(k) + ": the AF-split key (" +
                                               std::to_string(ks.af_size()) + " bytes) runs past its area (" +
                                               std::to_string(ks.area_size) + " bytes)");
    SecureBuffer area_key(ks.area_key_size);
    if (auto r = run_kdf(reg, ks.kdf, passphrase, area_key.span()); !r) return r.error();

    SecureBuffer material(static_cast<std::size_t>(ks.af_size()));
    if (header.size() < ks.area_offset || header.size() - ks.area_offset < material.size())
        return make_error(Status::IoError, "the keyslot area lies past the end of the header device");
    if (Status s = header.read(ks.area_offset, material.span()); s != Status::Ok)
        return make_error(s, "cannot read keyslot " + std::to_string(k));
    if (auto r = decrypt_area(reg, ks.area_encryption, area_key, material.span()); !r) return r.error();

    SecureBuffer key(ks.key_size);
    const std::size_t used = static_cast<std::size_t>(ks.key_size) * ks.stripes;
    if (auto r = luks::af_merge(reg, ks.af_hash, material.span().first(used), ks.stripes, key.span()); !r)
        return r.error();
    Result<bool> ok = digest_matches(reg, md.digests.at(did), key);
    if (!ok) return ok.error();
    if (!*ok) return make_error(Status::NoKey, kNoKey);
    return key;
}

Result<luks::Volume> volume_from_key(Registry& reg, const Metadata& md, ConstBytes volume_key, int keyslot) {
    auto sit = md.segments.find(0);
    if (sit == md.segments.end() || sit->second.type != "crypt")
        return make_error(Status::Unsupported, "LUKS2 segment 0 is not a crypt segment");
    const Segment& seg = sit->second;
    std::optional<luks::IntegrityProfile> profile;
    if (seg.integrity) {
        // LUKS2 writes no journal encryption or MAC (cryptsetup 2.6.1 refuses
        // to activate one it did not write either).
        if (seg.integrity->journal_encryption != "none" || seg.integrity->journal_integrity != "none")
            return make_error(Status::Unsupported, "LUKS2 integrity with journal encryption or integrity (" +
                                                       seg.integrity->journal_encryption + ", " +
                                                       seg.integrity->journal_integrity + ") is not supported");
        auto p = luks::integrity_profile(seg.encryption, seg.integrity->type);
        if (!p) return p.error();
        const uint32_t ikey = seg.integrity->key_size.value_or(p->key_size);
        if (volume_key.size() <= ikey)
            return make_error(Status::Invalid, "the volume key is too short for integrity " + seg.integrity->type);
        profile = std::move(p).value();
    }
    // The volume key must match the segment's digest.
    bool checked = false;
    for (const auto& [id, d] : md.digests) {
        if (!std::count(d.segments.begin(), d.segments.end(), 0)) continue;
        Result<bool> ok = digest_matches(reg, d, volume_key);
        if (!ok) return ok.error();
        if (!*ok) return make_error(Status::NoKey, "Volume key does not match the volume.");
        checked = true;
    }
    if (!checked) return make_error(Status::Invalid, "segment 0 has no digest");

    // With integrity the kernel's capi: AEAD over the dm-integrity device
    // (the key "-" here, set below).
    Result<dm::CryptTable> table =
        profile ? dm::parse_crypt_args(profile->cipher + " - 0 1 integrity:" + std::to_string(profile->tag_size) + ":aead")
                : dm::parse_cipher_spec(seg.encryption);
    if (!table) return table.error();
    table->key.assign(volume_key);
    table->sector_size = seg.sector_size;
    // LUKS2 counts IVs in 512-byte sectors whatever the sector size (only
    // BITLK sets iv_large_sectors); cryptsetup's own userspace reencryption
    // writes data that way (tests/unit/luks2_test.cpp checks it).
    table->iv_large_sectors = false;
    table->iv_offset = seg.iv_tweak;
    table->offset = profile ? 0 : seg.offset / 512;  // integrity: sector 0 of NAME_dif
    for (const std::string& f : md.config.flags) {
        if (f == "allow-discards") table->allow_discards = true;
        else if (f == "same-cpu-crypt") table->same_cpu_crypt = true;
        else if (f == "submit-from-crypt-cpus") table->submit_from_crypt_cpus = true;
        else if (f == "no-read-workqueue") table->no_read_workqueue = true;
        else if (f == "no-write-workqueue") table->no_write_workqueue = true;
    }
    luks::Volume v{luks::Version::Luks2, md.hdr.uuid, md.hdr.label, std::move(*table),
                   seg.size ? *seg.size / 512 : 0, keyslot};
    if (profile) v.integrity = luks::VolumeIntegrity{seg.integrity->type, seg.offset / 512, profile->tag_size};
    return v;
}

Result<luks::Volume> open(Registry& reg, BackingStore& header, ConstBytes passphrase, OpenOptions opts) {
    Result<Header> h = read_header(reg, header);
    if (!h) return h.error();
    if (opts.warnings)
        opts.warnings->insert(opts.warnings->end(), h->warnings.begin(), h->warnings.end());
    const Metadata& md = h->md;
    if (!opts.ignore_requirements)
        if (auto r = check_requirements(md); !r) return r.error();

    // An explicit keyslot: it must unlock the data segment, except for a
    // passphrase test, which cryptsetup's open --test-passphrase --key-slot
    // runs on an unbound keyslot too (CRYPT_ACTIVATE_ALLOW_UNBOUND_KEY).
    if (opts.keyslot >= 0) {
        if (!md.keyslots.count(opts.keyslot))
            return make_error(Status::Invalid, "Keyslot " + std::to_string(opts.keyslot) + " is not active.");
        if (md.digest_for_keyslot(opts.keyslot, 0) < 0) {
            if (!opts.ignore_requirements) return make_error(Status::Invalid, kNoUsable);
            Result<SecureBuffer> key = unlock_keyslot(reg, header, md, opts.keyslot, passphrase);
            if (!key) return key.error();
            // No data table: this key is not the volume key.
            luks::Volume v;
            v.version = luks::Version::Luks2;
            v.uuid = md.hdr.uuid;
            v.label = md.hdr.label;
            v.keyslot = opts.keyslot;
            return v;
        }
        Result<SecureBuffer> key = unlock_keyslot(reg, header, md, opts.keyslot, passphrase);
        if (!key) return key.error();
        return volume_from_key(reg, md, *key, opts.keyslot);
    }

    // cryptsetup's LUKS2_keyslot_open: keyslots of priority "prefer", then
    // "normal" ("ignore" only when named), each in order. A keyslot not bound
    // to the data segment (unbound, or of another type) is skipped as
    // "unusable"; a pass answers as its last keyslot did, so a wrong
    // passphrase whose last candidate is unusable gets cryptsetup's "No
    // usable keyslot is available." (exit 1), not "No key available..." (2).
    // (cryptsetup walks the JSON's order; headers it writes list keyslots
    // by number, as here.)
    // A keyslot that cannot be tried (damaged area, unknown cipher) does not
    // stop the others; its error is reported only when no keyslot could
    // even compare the passphrase.
    std::optional<Error> broken;
    bool compared = false;
    bool pass_unusable[2] = {true, true};  // prefer, normal: the last keyslot was unusable (or none)
    for (int pass = 0; pass < 2; ++pass) {
        const int prio = pass == 0 ? 2 : 1;
        for (const auto& [id, ks] : md.keyslots) {
            if (ks.priority != prio) continue;
            if (ks.type != "luks2" || md.digest_for_keyslot(id, 0) < 0) {
                pass_unusable[pass] = true;
                continue;
            }
            pass_unusable[pass] = false;
            Result<SecureBuffer> key = unlock_keyslot(reg, header, md, id, passphrase);
            if (key) return volume_from_key(reg, md, *key, id);
            if (key.status() == Status::NoKey) compared = true;
            else if (key.status() == Status::NoMem) return key.error();
            else if (!broken) broken = key.error();
        }
    }
    if (broken && !compared) return *broken;
    // "Prefer password wrong to no entry from priority slot."
    const bool prefer_wrong = !pass_unusable[0];
    if (pass_unusable[1] && !prefer_wrong) return make_error(Status::Invalid, kNoUsable);
    return make_error(Status::NoKey, kNoKey);
}

}  // namespace blkcrypt::luks::luks2
