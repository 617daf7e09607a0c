// See <blkcrypt/bitlk/bitlk.hpp>. Unlocking as cryptsetup 2.6's
// BITLK_get_volume_key: each VMK in metadata order, its protector's key
// (stretched passphrase, stretched recovery key, .BEK startup key, or the
// clear key on disk) unwraps the VMK with AES-CCM, and the VMK the FVEK.
#include <blkcrypt/aead.hpp>
#include <blkcrypt/bitlk/bitlk.hpp>

#include "le.hpp"
#include <blkcrypt/key_dump.hpp>
#include <blkcrypt/shash.hpp>

#include <cstring>

namespace blkcrypt::bitlk {

namespace {

constexpr std::size_t kKeyDatumHeader = 12;  // size, type, value, version, method
constexpr std::size_t kBekHeader = 48, kStartupKeyHeader = 24, kEntryHeader = 8;
constexpr uint16_t kEntryProperty = 0x0000, kEntryStartupKey = 0x0006, kEntryVolumeGuid = 0x0019;
constexpr uint16_t kValueKey = 0x0001, kValueString = 0x0002, kValueExternalKey = 0x0009, kValueGuid = 0x0017;

using namespace detail;

// UTF-8 to UTF-16LE, as Windows hashes it. (cryptsetup up to 2.6 hashed
// twice the UTF-8 length, zero padded: the same for ASCII only; later
// versions hash the UTF-16 length, as here.)
std::optional<SecureBuffer> utf16_password(ConstBytes p) {
    SecureBuffer out(p.size() * 2);
    std::size_t o = 0;
    for (std::size_t i = 0; i < p.size();) {
        uint32_t c = p[i];
        std::size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (n == 0 || i + n > p.size()) return std::nullopt;
        if (n > 1) c &= 0x3f >> (n - 1);
        for (std::size_t k = 1; k < n; ++k) {
            if ((p[i + k] & 0xc0) != 0x80) return std::nullopt;
            c = (c << 6) | (p[i + k] & 0x3f);
        }
        i += n;
        if (c > 0x10ffff || (c >= 0xd800 && c < 0xe000)) return std::nullopt;
        auto put = [&](uint32_t u) {
            out[o++] = static_cast<uint8_t>(u);
            out[o++] = static_cast<uint8_t>(u >> 8);
        };
        if (c >= 0x10000) {
            put(0xd800 + ((c - 0x10000) >> 10));
            put(0xdc00 + ((c - 0x10000) & 0x3ff));
        } else {
            put(c);
        }
    }
    out.resize(o);
    return out;
}

Error no_key() { return make_error(Status::NoKey, "No key available with this passphrase."); }

// The key inside an unwrapped key datum; the FVEK of 128-bit elephant is
// stored as 16 B key, 16 B zeros, 16 B diffuser key, 16 B zeros and handed
// to dm-crypt as key || diffuser key (cryptsetup's decrypt_key).
Result<SecureBuffer> open_key(Registry& reg, const WrappedKey& w, ConstBytes key, const Metadata* fvek_of) {
    auto datum = unwrap(reg, w, key);
    if (!datum) return datum.error();
    if (le16(*datum, 0) != datum->size()) return make_error(Status::Invalid, "Unexpected key data size.");
    if (datum->size() < kKeyDatumHeader) return make_error(Status::Invalid, "Unexpected key data size.");
    SecureBuffer k(datum->span().subspan(kKeyDatumHeader));
    if (fvek_of && fvek_of->cipher_mode == "cbc-elephant" && fvek_of->key_bits == 256 && k.size() == 64) {
        std::memmove(k.data() + 16, k.data() + 32, 16);
        k.resize(32);
    }
    return k;
}

// A VMK's key opens it: the FVEK then, or the reason it did not.
Result<Unlocked> open_with(Registry& reg, const Metadata& md, std::size_t idx, ConstBytes protector_key) {
    for (const WrappedKey& w : md.vmks[idx].keys) {
        auto vmk = open_key(reg, w, protector_key, nullptr);
        if (!vmk) continue;
        auto fvek = open_key(reg, md.fvek, *vmk, &md);
        if (!fvek && fvek.status() == Status::BadMsg)
            return make_error(Status::Corrupt, "The FVEK fails its AES-CCM check under the unlocked VMK: "
                                               "the BITLK metadata is damaged.");
        if (!fvek) return fvek.error();
        if (fvek->size() * 8 != md.key_bits) return make_error(Status::Invalid, "Unexpected key data size.");
        return Unlocked{std::move(fvek).value(), idx};
    }
    return no_key();
}

}  // namespace

std::optional<SecureBuffer> recovery_key(ConstBytes t) {
    constexpr std::size_t kLen = 55;
    std::size_t len = t.size();
    if (len == kLen + 1 && t[kLen] == '\n') len = kLen;
    if (len != kLen) return std::nullopt;
    SecureBuffer key(16);
    for (std::size_t g = 0; g < 8; ++g) {
        const std::size_t at = g * 7;
        if (g < 7 && t[at + 6] != '-') return std::nullopt;
        uint32_t v = 0;
        for (std::size_t i = 0; i < 6; ++i) {
            const uint8_t c = t[at + i];
            if (c < '0' || c > '9') return std::nullopt;  // strtol would stop there: not divisible in practice
            v = v * 10 + (c - '0');
        }
        // Each group is 11 times a 16-bit word of the key.
        if (v % 11 || v / 11 > 0xffff) return std::nullopt;
        key[2 * g] = static_cast<uint8_t>(v / 11);
        key[2 * g + 1] = static_cast<uint8_t>((v / 11) >> 8);
    }
    return key;
}

Result<SecureBuffer> stretch_passphrase(Registry& reg, ConstBytes pass, bool recovery,
                                        const std::array<uint8_t, 16>& salt, uint64_t rounds) {
    auto h = Shash::alloc(reg, "sha256");
    if (!h) return h.error();
    // struct bitlk_kdf_data: last_sha256, initial_sha256, salt, le64 count.
    SecureBuffer kdf(32 + 32 + 16 + 8);
    std::memcpy(kdf.data() + 64, salt.data(), 16);
    Bytes initial = kdf.span().subspan(32, 32), last = kdf.span().subspan(0, 32);
    if (recovery) {
        if (Status s = h->digest(pass, initial); s != Status::Ok) return make_error(s, "sha256");
    } else {
        auto u = utf16_password(pass);
        if (!u) return make_error(Status::Invalid, "The passphrase is not valid UTF-8.");
        if (Status s = h->digest(*u, initial); s != Status::Ok) return make_error(s, "sha256");
        if (Status s = h->digest(initial, initial); s != Status::Ok) return make_error(s, "sha256");
    }
    // The rounds as one call: the SHA-NI driver runs them with the chaining
    // value in registers, without a dispatch per round.
    auto desc = h->new_desc();
    if (!desc) return desc.error();
    if (Status s = desc->chain(kdf.span(), rounds); s != Status::Ok) return make_error(s, "sha256");
    return SecureBuffer(ConstBytes(last));
}

Result<SecureBuffer> unwrap(Registry& reg, const WrappedKey& w, ConstBytes key) {
    auto ccm = Aead::alloc(reg, "ccm(aes)");
    if (!ccm) return ccm.error();
    if (Status s = ccm->setkey(key); s != Status::Ok) return make_error(s, "AES-CCM key");
    if (Status s = ccm->setauthsize(16); s != Status::Ok) return make_error(s, "AES-CCM tag");
    // The kernel's CCM IV: L - 1 (L = 3 for a 12-byte nonce), then the nonce.
    std::array<uint8_t, 16> iv{};
    iv[0] = 2;
    std::memcpy(iv.data() + 1, w.nonce.data(), 12);
    SecureBuffer in(w.data.size() + 16), out(w.data.size());
    std::memcpy(in.data(), w.data.data(), w.data.size());
    std::memcpy(in.data() + w.data.size(), w.tag.data(), 16);
    if (Status s = ccm->decrypt({}, in, out.span(), iv); s != Status::Ok)
        return make_error(s == Status::BadMsg ? Status::BadMsg : s, "AES-CCM unwrap failed");
    return out;
}

Result<SecureBuffer> startup_key(ConstBytes bek, const Vmk& vmk, std::string_view volume_guid) {
    if (bek.size() < kBekHeader + 6) return make_error(Status::NoKey, "not a startup key");
    if (guid_string(bek, 16) != vmk.guid) return make_error(Status::NoKey, "startup key of another VMK");
    if (le32(bek, 4) != 1)
        return make_error(Status::Unsupported, "Unsupported BEK metadata version " + std::to_string(le32(bek, 4)));
    if (le32(bek, 0) != bek.size())
        return make_error(Status::Invalid, "Unexpected BEK metadata size " + std::to_string(le32(bek, 0)) +
                                               " does not match BEK file length");
    const uint16_t size = le16(bek, kBekHeader), type = le16(bek, kBekHeader + 2), value = le16(bek, kBekHeader + 4);
    if (size < kEntryHeader) return make_error(Status::Invalid, "Unexpected metadata entry found when parsing startup key.");
    if (type != kEntryStartupKey || value != kValueExternalKey)
        return make_error(Status::Invalid, "Unexpected metadata entry found when parsing startup key.");
    // The external key's datums, as cryptsetup 2.6 reads them: an optional
    // name, the volume's GUID (Windows 11 writes it, entry type 0x19), then
    // the key. A GUID that names another volume is refused, as cryptsetup does.
    std::size_t start = kBekHeader + kEntryHeader + kStartupKeyHeader;
    while (start < bek.size() && bek.size() - start >= 6) {
        const uint16_t sz = le16(bek, start), t = le16(bek, start + 2), v = le16(bek, start + 4);
        if (sz == 0) break;
        if (sz < kEntryHeader || sz > bek.size() - start) return make_error(Status::Invalid, "Damaged startup key.");
        if (t != kEntryProperty && t != kEntryVolumeGuid)
            return make_error(Status::Invalid, "Unexpected metadata entry type '" + std::to_string(t) +
                                                   "' found when parsing external key.");
        if (v == kValueKey) {
            if (sz < kEntryHeader + 4) return make_error(Status::Invalid, "Damaged startup key.");
            return SecureBuffer(bek.subspan(start + kEntryHeader + 4, sz - kEntryHeader - 4));
        }
        if (v == kValueGuid) {
            if (sz < kEntryHeader + 16) return make_error(Status::Invalid, "Damaged startup key.");
            const std::string g = guid_string(bek, start + kEntryHeader);
            if (g != volume_guid)
                return make_error(Status::Invalid, "BEK file GUID '" + g + "' does not match GUID of the volume.");
        } else if (v != kValueString) {
            return make_error(Status::Invalid, "Unexpected metadata entry value '" + std::to_string(v) +
                                                   "' found when parsing external key.");
        }
        start += sz;
    }
    return make_error(Status::Invalid, "Damaged startup key.");
}

Result<Unlocked> unlock(Registry& reg, const Metadata& md, ConstBytes secret) {
    const std::optional<SecureBuffer> rk = recovery_key(secret);
    for (std::size_t i = 0; i < md.vmks.size(); ++i) {
        const Vmk& v = md.vmks[i];
        Result<SecureBuffer> k = no_key();
        if (v.protection == kPassphrase) {
            k = stretch_passphrase(reg, secret, false, v.salt);
        } else if (v.protection == kRecoveryPassphrase && rk) {
            k = stretch_passphrase(reg, *rk, true, v.salt);
        } else if (v.protection == kStartupKey) {
            k = startup_key(secret, v, md.guid);
            if (!k && k.status() != Status::NoKey) return k.error();  // this VMK's file, damaged
        }
        if (!k) continue;
        auto r = open_with(reg, md, i, *k);
        if (r || r.status() != Status::NoKey) return r;
    }
    return no_key();
}

Result<Unlocked> unlock_clear_key(Registry& reg, const Metadata& md) {
    for (std::size_t i = 0; i < md.vmks.size(); ++i)
        if (md.vmks[i].protection == kClearKey && !md.vmks[i].clear_key.empty()) return open_with(reg, md, i, md.vmks[i].clear_key);
    return make_error(Status::NoKey, "The BITLK device has no clear key.");
}

SecureBuffer dump_volume_key(const Metadata& md, std::string_view device, ConstBytes key) {
    std::string head = "BITLK header information for " + std::string(device) + "\n";
    head += "Cipher name:   \t" + md.cipher + "\n";
    head += "Cipher mode:   \t" + md.cipher_mode + "\n";
    head += "UUID:          \t" + md.guid + "\n";
    return key_dump_lines(head, key);
}

}  // namespace blkcrypt::bitlk
