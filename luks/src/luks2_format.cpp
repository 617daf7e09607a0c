// LUKS2 format: the layout and JSON cryptsetup 2.6.1's luksFormat writes
// (lib/luks2/luks2_json_format.c LUKS2_generate_hdr, luks2_keyslot_luks2.c,
// luks2_digest_pbkdf2.c), with the KDF costs given by the caller.
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/kdf.hpp>
#include <blkcrypt/luks/af.hpp>
#include <blkcrypt/luks/luks2.hpp>
#include <blkcrypt/random.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

namespace blkcrypt::luks2 {

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

bool uuid_ok(const std::string& u) {
    if (u.size() != 36) return false;
    for (std::size_t i = 0; i < u.size(); ++i) {
        const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash != (u[i] == '-')) return false;
        if (!dash && !std::isxdigit(static_cast<unsigned char>(u[i]))) return false;
    }
    return true;
}

std::string u64s(uint64_t v) { return std::to_string(v); }

// Encrypts data in place with the keyslot cipher, 512-byte sectors from 0,
// through the dm-crypt engine (the inverse of the unlock path).
Result<void> encrypt_area(Registry& reg, const std::string& cipher, ConstBytes key, Bytes data) {
    Result<dm::CryptTable> table = dm::parse_cipher_spec(cipher);
    if (!table) return table.error();
    table->key.assign(key);
    auto store = std::make_shared<MemoryStore>(data.size());
    dm::TargetOptions topts;
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
    if (o.iterations == 0) return bad("the KDF cost (iterations / passes) must be given");
    const bool argon = o.pbkdf == "argon2i" || o.pbkdf == "argon2id";
    if (!argon && o.pbkdf != "pbkdf2") return bad("unknown PBKDF " + o.pbkdf);
    if (argon && (o.memory_kib == 0 || o.parallel == 0)) return bad("argon2 needs memory and parallel costs");
    if (o.digest_iterations < 1000) return bad("the volume key digest needs at least 1000 iterations");
    const std::string uuid = o.uuid.empty() ? random_uuid() : o.uuid;
    if (!uuid_ok(uuid)) return bad("Wrong LUKS UUID format provided.");
    if (o.label.size() >= 48 || o.subsystem.size() >= 48) return bad("label and subsystem: at most 47 characters");
    // The data cipher must exist and take this key before anything is written.
    {
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

    // The keyslot: KDF(passphrase) keys the area cipher (the segment's),
    // which encrypts the AF-split volume key.
    Keyslot ks;
    ks.key_size = o.key_size;
    ks.stripes = 4000;
    const uint64_t af_bytes = ks.af_size();
    const uint64_t area_size = (af_bytes + 4095) / 4096 * 4096;
    const uint64_t area_offset = 2 * md;
    if (area_size > ks_size) return bad("the keyslots area is too small for one keyslot");
    std::vector<uint8_t> kdf_salt(32), digest_salt(32);
    if (auto r = random_bytes(kdf_salt); !r) return r.error();
    if (auto r = random_bytes(digest_salt); !r) return r.error();
    SecureBuffer area_key(o.key_size);
    Result<void> kr = argon ? argon2(o.pbkdf == "argon2id" ? Argon2Type::Id : Argon2Type::I, passphrase, kdf_salt,
                                     o.iterations, o.memory_kib, o.parallel, area_key.span())
                            : pbkdf2(reg, o.hash, passphrase, kdf_salt, o.iterations, area_key.span());
    if (!kr) return kr.error();
    std::vector<uint8_t> area(static_cast<std::size_t>(area_size), 0);
    {
        SecureBuffer split(static_cast<std::size_t>(af_bytes));
        const std::size_t used = static_cast<std::size_t>(o.key_size) * 4000;
        if (auto r = luks::af_split(reg, o.hash, vk, 4000, split.span().first(used)); !r) return r.error();
        if (auto r = encrypt_area(reg, o.cipher, area_key, split.span()); !r) return r.error();
        std::copy(split.data(), split.data() + split.size(), area.begin());
    }

    // The digest: PBKDF2 of the volume key, the hash's full output.
    Result<Shash> h = Shash::alloc(reg, o.hash);
    if (!h) return h.error();
    std::vector<uint8_t> digest(h->digestsize());
    if (auto r = pbkdf2(reg, o.hash, vk, digest_salt, o.digest_iterations, digest); !r) return r.error();

    json kdf;
    kdf["type"] = o.pbkdf;
    if (argon) {
        kdf["time"] = o.iterations;
        kdf["memory"] = o.memory_kib;
        kdf["cpus"] = o.parallel;
    } else {
        kdf["hash"] = o.hash;
        kdf["iterations"] = o.iterations;
    }
    kdf["salt"] = base64_encode(kdf_salt);
    json keyslot;
    keyslot["type"] = "luks2";
    keyslot["key_size"] = o.key_size;
    keyslot["af"] = json{{"type", "luks1"}, {"stripes", 4000}, {"hash", o.hash}};
    keyslot["area"] = json{{"type", "raw"}, {"offset", u64s(area_offset)}, {"size", u64s(area_size)},
                           {"encryption", o.cipher}, {"key_size", o.key_size}};
    keyslot["kdf"] = kdf;
    json root;
    root["keyslots"][std::to_string(o.keyslot)] = keyslot;
    root["tokens"] = json::object();
    root["segments"]["0"] = json{{"type", "crypt"}, {"offset", u64s(o.data_offset)}, {"size", "dynamic"},
                                 {"iv_tweak", "0"}, {"encryption", o.cipher}, {"sector_size", o.sector_size}};
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

}  // namespace blkcrypt::luks2
