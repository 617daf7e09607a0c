// TrueCrypt/VeraCrypt header decryption and the volume's dm-crypt table, with
// cryptsetup's search order (lib/tcrypt): every KDF in turn derives a
// 192-byte header key, and every cipher chain decrypts the 448 encrypted
// header bytes with it until one gives the "TRUE" (or "VERA") magic.
#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/kdf.hpp>
#include <blkcrypt/key_dump.hpp>
#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/skcipher.hpp>
#include <blkcrypt/tcrypt/tcrypt.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <string>

namespace blkcrypt::tcrypt {
namespace {

constexpr std::size_t kEncSize = 448;     // encrypted part of the header
constexpr std::size_t kHdrKeySize = 192;  // PBKDF2 output: up to 3 ciphers x 64 bytes
constexpr std::size_t kKeysOffset = 192;  // of the key area in the decrypted part
constexpr std::size_t kKeysSize = 256;
constexpr std::size_t kCrcSpan = 188;     // bytes covered by the header CRC-32
constexpr std::size_t kLrwTweakKey = 16;

// One KDF candidate (cryptsetup's tcrypt_kdf table, in its order, then
// VeraCrypt 1.26's Argon2id, which cryptsetup does not know).
struct Kdf {
    bool legacy, veracrypt;
    const char* hash;  // cryptsetup's name; "argon2id" for Argon2id
    uint32_t iterations, pim_const, pim_mult;
};
constexpr Kdf kKdfs[] = {
    {false, false, "ripemd160", 2000, 0, 0},
    {false, false, "ripemd160", 1000, 0, 0},  // system encryption
    {false, false, "sha512", 1000, 0, 0},
    {false, false, "whirlpool", 1000, 0, 0},
    {true, false, "sha1", 2000, 0, 0},
    {false, true, "sha512", 500000, 15000, 1000},
    {false, true, "whirlpool", 500000, 15000, 1000},
    {false, true, "sha256", 500000, 15000, 1000},
    {false, true, "sha256", 200000, 0, 2048},  // boot only
    {false, true, "blake2s-256", 500000, 15000, 1000},
    {false, true, "blake2s-256", 200000, 0, 2048},  // boot only
    {false, true, "ripemd160", 655331, 15000, 1000},
    {false, true, "ripemd160", 327661, 0, 2048},  // boot only
    {false, true, "stribog512", 500000, 15000, 1000},
    // Last: the costliest to try (96 MiB). Its costs come from the PIM.
    {false, true, "argon2id", 0, 0, 0},
};

// VeraCrypt's Argon2id costs for a PIM (its documentation, "Argon2id"): no
// PIM counts as PIM 2 (96 MiB, 3 passes); memory grows 32 MiB a step up to
// 1 GiB at PIM 31, passes one every three PIMs to 13, then one a PIM.
struct Argon2Costs {
    uint32_t passes, memory_kib;
};
Argon2Costs argon2_costs(uint32_t pim) {
    const uint64_t p = pim ? pim : 2;
    const uint64_t mib = std::min<uint64_t>(64 + (p - 1) * 32, 1024);
    const uint64_t t = p <= 31 ? 3 + (p - 1) / 3 : 13 + (p - 31);
    return {static_cast<uint32_t>(std::min<uint64_t>(t, UINT32_MAX)), static_cast<uint32_t>(mib * 1024)};
}

// The registry's name of a TrueCrypt hash.
std::string registry_hash(std::string_view h) {
    if (h == "ripemd160") return "rmd160";
    if (h == "whirlpool") return "wp512";
    if (h == "stribog512") return "streebog512";
    return std::string(h);
}

enum class Mode { Xts, Lrw, CbcTcw, CbcTcrypt, Cbci };

bool is_cbc(Mode m) { return m == Mode::CbcTcw || m == Mode::CbcTcrypt || m == Mode::Cbci; }

// One cipher of a chain: where its key (and tweak key) sit in the 192-byte
// header key and in the header's key area. For the CBC modes also its key
// and block size and the IV seed and whitening bytes that follow its key in
// the volume key (cryptsetup's key_size, iv_size and key_extra_size).
struct Part {
    const char* name;
    unsigned key_offset, iv_offset;
    unsigned key_size = 0, block = 16, extra = 0;
};
struct Chain {
    bool legacy;
    const char* name;
    Mode mode;
    unsigned count;
    Part part[3];
};
// cryptsetup's tcrypt_cipher table, in its order.
constexpr Chain kChains[] = {
    {false, "aes", Mode::Xts, 1, {{"aes", 0, 32}}},
    {false, "serpent", Mode::Xts, 1, {{"serpent", 0, 32}}},
    {false, "twofish", Mode::Xts, 1, {{"twofish", 0, 32}}},
    {false, "twofish-aes", Mode::Xts, 2, {{"twofish", 0, 64}, {"aes", 32, 96}}},
    {false, "serpent-twofish-aes", Mode::Xts, 3, {{"serpent", 0, 96}, {"twofish", 32, 128}, {"aes", 64, 160}}},
    {false, "aes-serpent", Mode::Xts, 2, {{"aes", 0, 64}, {"serpent", 32, 96}}},
    {false, "aes-twofish-serpent", Mode::Xts, 3, {{"aes", 0, 96}, {"twofish", 32, 128}, {"serpent", 64, 160}}},
    {false, "serpent-twofish", Mode::Xts, 2, {{"serpent", 0, 64}, {"twofish", 32, 96}}},
    {false, "camellia", Mode::Xts, 1, {{"camellia", 0, 32}}},
    {false, "kuznyechik", Mode::Xts, 1, {{"kuznyechik", 0, 32}}},
    {false, "kuznyechik-camellia", Mode::Xts, 2, {{"kuznyechik", 0, 64}, {"camellia", 32, 96}}},
    {false, "twofish-kuznyechik", Mode::Xts, 2, {{"twofish", 0, 64}, {"kuznyechik", 32, 96}}},
    {false, "serpent-camellia", Mode::Xts, 2, {{"serpent", 0, 64}, {"camellia", 32, 96}}},
    {false, "aes-kuznyechik", Mode::Xts, 2, {{"aes", 0, 64}, {"kuznyechik", 32, 96}}},
    {false, "camellia-serpent-kuznyechik", Mode::Xts, 3,
     {{"camellia", 0, 96}, {"serpent", 32, 128}, {"kuznyechik", 64, 160}}},
    {false, "aes", Mode::Lrw, 1, {{"aes", 32, 0}}},
    {false, "serpent", Mode::Lrw, 1, {{"serpent", 32, 0}}},
    {false, "twofish", Mode::Lrw, 1, {{"twofish", 32, 0}}},
    {false, "twofish-aes", Mode::Lrw, 2, {{"twofish", 32, 0}, {"aes", 64, 0}}},
    {false, "serpent-twofish-aes", Mode::Lrw, 3, {{"serpent", 32, 0}, {"twofish", 64, 0}, {"aes", 96, 0}}},
    {false, "aes-serpent", Mode::Lrw, 2, {{"aes", 32, 0}, {"serpent", 64, 0}}},
    {false, "aes-twofish-serpent", Mode::Lrw, 3, {{"aes", 32, 0}, {"twofish", 64, 0}, {"serpent", 96, 0}}},
    {false, "serpent-twofish", Mode::Lrw, 2, {{"serpent", 32, 0}, {"twofish", 64, 0}}},
    // Legacy CBC, all with whitening: the cipher keys from byte 32 on, the
    // IV seed and whitening from byte 0. cbc-tcw: one cipher, which the
    // kernel maps; cbci-tcrypt: one CBC over the whole cascade ("outer
    // CBC"); cbc-tcrypt: TrueCrypt's little-endian Blowfish, alone or in a
    // chain of ciphers each with its own CBC ("inner CBC").
    {true, "aes", Mode::CbcTcw, 1, {{"aes", 32, 0, 32, 16, 32}}},
    {true, "serpent", Mode::CbcTcw, 1, {{"serpent", 32, 0, 32, 16, 32}}},
    {true, "twofish", Mode::CbcTcw, 1, {{"twofish", 32, 0, 32, 16, 32}}},
    {true, "twofish-aes", Mode::Cbci, 2, {{"twofish", 32, 0, 32, 16, 0}, {"aes", 64, 0, 32, 16, 32}}},
    {true, "serpent-twofish-aes", Mode::Cbci, 3,
     {{"serpent", 32, 0, 32, 16, 0}, {"twofish", 64, 0, 32, 16, 0}, {"aes", 96, 0, 32, 16, 32}}},
    {true, "aes-serpent", Mode::Cbci, 2, {{"aes", 32, 0, 32, 16, 0}, {"serpent", 64, 0, 32, 16, 32}}},
    {true, "aes-twofish-serpent", Mode::Cbci, 3,
     {{"aes", 32, 0, 32, 16, 0}, {"twofish", 64, 0, 32, 16, 0}, {"serpent", 96, 0, 32, 16, 32}}},
    {true, "serpent-twofish", Mode::Cbci, 2, {{"serpent", 32, 0, 32, 16, 0}, {"twofish", 64, 0, 32, 16, 32}}},
    {true, "cast5", Mode::CbcTcw, 1, {{"cast5", 32, 0, 16, 8, 24}}},
    {true, "des3_ede", Mode::CbcTcw, 1, {{"des3_ede", 32, 0, 24, 8, 24}}},
    {true, "blowfish_le", Mode::CbcTcrypt, 1, {{"blowfish_le", 32, 0, 56, 8, 24}}},
    {true, "blowfish_le-aes", Mode::CbcTcrypt, 2, {{"blowfish_le", 32, 0, 56, 8, 0}, {"aes", 88, 0, 32, 16, 32}}},
    {true, "serpent-blowfish_le-aes", Mode::CbcTcrypt, 3,
     {{"serpent", 32, 0, 32, 16, 0}, {"blowfish_le", 64, 0, 56, 8, 0}, {"aes", 120, 0, 32, 16, 32}}},
};

const char* mode_name(Mode m) {
    switch (m) {
    case Mode::Xts: return "xts-plain64";
    case Mode::Lrw: return "lrw-benbi";
    case Mode::CbcTcw: return "cbc-tcw";
    case Mode::CbcTcrypt: return "cbc-tcrypt";
    case Mode::Cbci: return "cbci-tcrypt";
    }
    return "";
}

// One cipher's share of the volume key before the next one's (cryptsetup's
// key_size).
std::size_t part_len(const Part& p, Mode m) {
    switch (m) {
    case Mode::Xts: return 64;
    case Mode::Lrw: return 48;
    default: return p.key_size;
    }
}

// cryptsetup's chain_key_size: the shares, then the last CBC cipher's IV
// seed and whitening.
std::size_t chain_key_size(const Chain& c) {
    std::size_t n = 0;
    for (unsigned i = 0; i < c.count; ++i) n += part_len(c.part[i], c.mode);
    return n + (is_cbc(c.mode) ? c.part[c.count - 1].extra : 0);
}

// One cipher's key as its mode takes it, from `src` (the 192-byte header key
// or the header's key area): cryptsetup's TCRYPT_copy_key.
void copy_key(const Part& p, Mode m, const uint8_t* src, uint8_t* out) {
    switch (m) {
    case Mode::Xts:
        std::memcpy(out, src + p.key_offset, 32);
        std::memcpy(out + 32, src + p.iv_offset, 32);
        break;
    case Mode::Lrw:
        std::memcpy(out, src + p.key_offset, 32);
        std::memcpy(out + 32, src, kLrwTweakKey);
        break;
    default:
        std::memcpy(out, src + p.key_offset, p.key_size);
        std::memcpy(out + p.key_size, src + p.iv_offset, p.extra);
        break;
    }
}

// The chain's whole key, each cipher's part in chain order, as
// cryptsetup's TCRYPT_get_volume_key lays it out (in its table only the last
// CBC cipher has seed and whitening bytes, so nothing is overwritten).
SecureBuffer chain_key(const Chain& c, const uint8_t* src) {
    SecureBuffer k(chain_key_size(c));
    std::size_t at = 0;
    for (unsigned i = 0; i < c.count; ++i) {
        copy_key(c.part[i], c.mode, src, k.data() + at);
        at += part_len(c.part[i], c.mode);
    }
    return k;
}

// The registry name of one cipher in the chain's mode, and of the chain: the
// ciphers of an xts or lrw chain are one cascade(...) composition; an outer
// CBC chain is cbc over the cascade of the block ciphers.
std::string part_api(const Part& p, Mode m) {
    switch (m) {
    case Mode::Xts: return std::string("xts(") + p.name + ")";
    case Mode::Lrw: return std::string("lrw(") + p.name + ")";
    default: return std::string("cbc(") + p.name + ")";
    }
}
std::string chain_api(const Chain& c) {
    if (c.mode == Mode::Cbci) {
        std::string s = "cbc(cascade(";
        for (unsigned i = 0; i < c.count; ++i) s += (i ? "," : "") + std::string(c.part[i].name);
        return s + "))";
    }
    if (c.count == 1) return part_api(c.part[0], c.mode);
    std::string s = "cascade(";
    for (unsigned i = 0; i < c.count; ++i) s += (i ? "," : "") + part_api(c.part[i], c.mode);
    return s + ")";
}

// The CRC-32 register (reflected, polynomial 0xEDB88320) advanced over data,
// without inversions: cryptsetup's crypt_crc32. Bitwise, as it runs over at
// most a keyfile and two header fields.
uint32_t crc_update(uint32_t crc, ConstBytes data) {
    for (uint8_t byte : data) {
        crc ^= byte;
        for (int b = 0; b < 8; ++b) crc = (crc >> 1) ^ ((crc & 1) ? 0xEDB88320u : 0);
    }
    return crc;
}
uint32_t crc32(ConstBytes data) { return ~crc_update(~0u, data); }

// CBC-decrypts `buf` in place with registry algorithm `api` under `key` and
// `iv`, after removing the header whitening (header key bytes 8..15): one
// stage of cryptsetup's TCRYPT_decrypt_hdr_one, or its TCRYPT_decrypt_cbci
// when `api` is cbc over a cascade.
bool cbc_stage(Registry& reg, const std::string& api, ConstBytes key, const uint8_t* hkey, std::size_t ivlen,
               uint8_t* buf) {
    auto sk = Skcipher::alloc(reg, api);
    if (!sk || sk->setkey(key) != Status::Ok) return false;
    for (std::size_t j = 0; j < kEncSize; ++j) buf[j] ^= hkey[8 + j % 8];
    uint8_t iv[16] = {};
    std::memcpy(iv, hkey, ivlen);
    const bool ok = sk->decrypt(ConstBytes(buf, kEncSize), Bytes(buf, kEncSize), Bytes(iv, ivlen)) == Status::Ok;
    secure_wipe(iv, sizeof iv);
    return ok;
}

// Decrypts one candidate into `out`: false when the registry lacks one of
// the chain's ciphers (kuznyechik, say) or the result has no magic.
bool try_chain(Registry& reg, const Chain& c, const uint8_t* hkey, const uint8_t* enc, bool vera, uint8_t* out) {
    std::memcpy(out, enc, kEncSize);
    if (c.mode == Mode::Cbci) {
        SecureBuffer key(c.count * 32);
        for (unsigned i = 0; i < c.count; ++i)
            std::memcpy(key.data() + i * 32, hkey + c.part[i].key_offset, c.part[i].key_size);
        if (!cbc_stage(reg, chain_api(c), key, hkey, c.part[0].block, out)) return false;
    } else if (is_cbc(c.mode)) {
        // Inner CBC: the last cipher's CBC first, each stage whitened.
        for (unsigned i = c.count; i-- > 0;) {
            const Part& p = c.part[i];
            if (!cbc_stage(reg, part_api(p, c.mode), ConstBytes(hkey + p.key_offset, p.key_size), hkey, p.block, out))
                return false;
        }
    } else {
        auto sk = Skcipher::alloc(reg, chain_api(c));
        if (!sk) return false;
        if (sk->setkey(chain_key(c, hkey)) != Status::Ok) return false;
        uint8_t iv[16] = {};
        if (c.mode == Mode::Lrw) iv[15] = 1;  // the header is LRW block 1
        if (sk->decrypt(ConstBytes(out, kEncSize), Bytes(out, kEncSize), Bytes(iv, 16)) != Status::Ok) return false;
    }
    return !std::memcmp(out, "TRUE", 4) || (vera && !std::memcmp(out, "VERA", 4));
}

Header parse(const uint8_t* d) {
    Header h;
    h.veracrypt = d[0] == 'V';
    h.version = get_be16(d + 4);
    h.version_tc = get_be16(d + 6);
    h.hidden_volume_size = get_be64(d + 28);
    h.volume_size = get_be64(d + 36);
    h.mk_offset = get_be64(d + 44);
    if (!h.mk_offset) h.mk_offset = 512;
    h.mk_size = get_be64(d + 52);
    h.flags = get_be32(d + 60);
    h.sector_size = get_be32(d + 64);
    if (!h.sector_size) h.sector_size = 512;
    h.keys.assign(ConstBytes(d + kKeysOffset, kKeysSize));
    return h;
}

bool contains(std::string_view hay, std::string_view needle) { return hay.find(needle) != std::string_view::npos; }

const Chain* find_chain(const Header& h) {
    for (const auto& c : kChains)
        if (h.cipher == c.name && h.mode == mode_name(c.mode)) return &c;
    return nullptr;
}

}  // namespace

void mix_keyfile(Bytes pool, ConstBytes keyfile) {
    if (pool.empty()) return;
    // CRC-32 register advanced one byte at a time, without the final
    // inversion: the pool takes every intermediate value.
    uint32_t crc = ~0u;
    std::size_t j = 0;
    const std::size_t n = std::min(keyfile.size(), kKeyfileMax);
    for (std::size_t i = 0; i < n; ++i) {
        crc = crc_update(crc, keyfile.subspan(i, 1));
        for (int s = 24; s >= 0; s -= 8) {
            pool[j] = static_cast<uint8_t>(pool[j] + (crc >> s));
            j = (j + 1) % pool.size();
        }
    }
}

Result<Volume> from_decrypted(ConstBytes dec, std::string_view cipher, std::string_view mode, uint64_t dev_size,
                              const OpenOptions& opts) {
    if (dec.size() != kEncSize) return make_error(Status::Invalid, "a TCRYPT header has 448 encrypted bytes");
    const Chain* cp = nullptr;
    for (const auto& ch : kChains)
        if (cipher == ch.name && mode == mode_name(ch.mode)) cp = &ch;
    if (!cp) return make_error(Status::Unsupported, "unknown TCRYPT cipher chain " + std::string(cipher) + "-" + std::string(mode));
    const Chain& c = *cp;
    const uint8_t* d = dec.data();
    if (std::memcmp(d, "TRUE", 4) && (!opts.veracrypt || std::memcmp(d, "VERA", 4)))
        return make_error(Status::Invalid, "TCRYPT header magic mismatch.");
    // Version 3 and older headers have no header CRC; the key CRC always counts.
    if (get_be16(d + 4) > 3 && crc32(ConstBytes(d, kCrcSpan)) != get_be32(d + kCrcSpan))
        return make_error(Status::Invalid, "TCRYPT header CRC32 mismatch.");
    if (crc32(ConstBytes(d + kKeysOffset, kKeysSize)) != get_be32(d + 8))
        return make_error(Status::Invalid, "TCRYPT keys CRC32 mismatch.");
    Volume v;
    v.hdr = parse(d);
    v.hdr.cipher = c.name;
    v.hdr.mode = mode_name(c.mode);
    v.hdr.key_size = chain_key_size(c);
    const Header& h = v.hdr;
    if (h.sector_size % 512)
        return make_error(Status::Unsupported, "Activation is not supported for " +
                                                   std::to_string(h.sector_size) + " sector size.");
    // Data and IV offsets as cryptsetup's TCRYPT_get_data_offset
    // and TCRYPT_get_iv_offset.
    const uint64_t mk = h.mk_offset / 512;
    // TrueCrypt < 6 kept a hidden volume right before its header near the end.
    auto old_hidden = [&]() -> Result<uint64_t> {
        if (h.hidden_volume_size > dev_size || dev_size - h.hidden_volume_size < static_cast<uint64_t>(-kHiddenOffsetOld))
            return make_error(Status::Invalid, "TCRYPT hidden volume larger than the device.");
        return (dev_size - h.hidden_volume_size + static_cast<uint64_t>(kHiddenOffsetOld)) / 512;
    };
    uint64_t data = mk;
    if (!opts.system && c.mode == Mode::Xts && h.version < 3) {
        data = 1;
    } else if (!opts.system && opts.hidden && (c.mode != Mode::Xts || h.version == 3)) {
        auto o = old_hidden();
        if (!o) return o.error();
        data = *o;
    }
    const uint64_t iv = c.mode == Mode::Xts ? data : c.mode == Mode::Lrw ? 0 : mk;
    // System encryption of a whole-disk image: the whole encrypted area, as
    // cryptsetup maps it when it finds no partition.
    v.length_sectors = (opts.hidden && !opts.system ? h.hidden_volume_size : h.volume_size) / 512;
    // The legacy CBC modes all use dm-crypt's tcw IV and whitening: over one
    // cipher, or over the cascade of block ciphers for outer CBC.
    std::string spec = c.mode == Mode::Cbci ? "capi:" + chain_api(c) + "-tcw"
                       : is_cbc(c.mode)     ? std::string(c.part[0].name) + "-cbc-tcw"
                       : c.count == 1       ? std::string(c.part[0].name) + "-" + mode_name(c.mode)
                                            : "capi:" + chain_api(c) + "-" + (c.mode == Mode::Xts ? "plain64" : "benbi");
    // An inner-CBC chain (each cipher its own CBC and whitening) has no
    // table yet: its header opens and dumps, dm_table refuses it.
    if (c.mode != Mode::CbcTcrypt || c.count == 1) {
        auto t = dm::parse_cipher_spec(spec);
        if (!t) return t.error();
        v.table = std::move(*t);
    }
    v.table.key = volume_key(v);
    v.table.offset = data;
    v.table.iv_offset = iv;
    v.table.sector_size = 512;
    return v;
}

Result<Volume> open(Registry& reg, BackingStore& dev, ConstBytes passphrase, const OpenOptions& opts) {
    // VeraCrypt's pool grows to 128 bytes for a passphrase over 64.
    const bool long_pool = opts.veracrypt && passphrase.size() > kPoolSize;
    const std::size_t max_pw = long_pool ? kVeraPoolSize : kPoolSize;
    if (passphrase.size() > max_pw)
        return make_error(Status::Invalid,
                          "Maximum TCRYPT passphrase length (" + std::to_string(max_pw) + ") exceeded.");
    SecureBuffer pool(max_pw);
    for (const auto& kf : opts.keyfiles) mix_keyfile(pool.span(), kf);
    for (std::size_t i = 0; i < passphrase.size(); ++i)
        pool[i] = static_cast<uint8_t>(pool[i] + passphrase[i]);
    // With keyfiles the whole pool is the password, zeros included.
    const std::size_t pw_len = opts.keyfiles.empty() ? passphrase.size() : max_pw;

    const uint64_t dev_size = dev.size();
    auto at = [&](int64_t off) -> int64_t { return off < 0 ? static_cast<int64_t>(dev_size) + off : off; };
    std::vector<int64_t> offsets;
    if (opts.system) offsets = {kSystemOffset};
    else if (opts.hidden) offsets = opts.backup ? std::vector<int64_t>{at(kHiddenBackupOffset)}
                                                : std::vector<int64_t>{kHiddenOffset, at(kHiddenOffsetOld)};
    else offsets = {opts.backup ? at(kBackupOffset) : 0};

    std::vector<std::string> missing;
    bool tried = false, skip_told = false;
    for (int64_t off : offsets) {
        if (off < 0 || static_cast<uint64_t>(off) + kHeaderSize > dev_size) continue;
        std::array<uint8_t, kHeaderSize> raw{};
        if (auto s = dev.read(static_cast<uint64_t>(off), Bytes(raw.data(), raw.size())); s != Status::Ok)
            return make_error(s, "Cannot read TCRYPT header.");
        for (const auto& k : kKdfs) {
            if (!opts.hash.empty() && !contains(k.hash, opts.hash)) continue;
            if (k.veracrypt && !opts.veracrypt) continue;
            // With a PIM only VeraCrypt's KDFs, their iterations from it.
            if (opts.veracrypt && opts.pim && !k.veracrypt) continue;
            const bool is_argon2 = !std::strcmp(k.hash, "argon2id");
            const uint64_t it64 = is_argon2 ? argon2_costs(opts.pim).passes
                                  : opts.veracrypt && opts.pim ? k.pim_const + uint64_t{k.pim_mult} * opts.pim
                                                               : k.iterations;
            if (it64 > UINT32_MAX) return make_error(Status::Invalid, "Invalid PIM value: outside of range.");
            const auto iters = static_cast<uint32_t>(it64);
            if (is_argon2 && opts.hash.empty() && opts.pim > kArgon2SearchMaxPim) {
                if (opts.on_kdf_skipped && !skip_told) opts.on_kdf_skipped(k.hash, iters, argon2_costs(opts.pim).memory_kib);
                skip_told = true;  // once, not once per header offset
                continue;
            }
            if (opts.on_kdf) opts.on_kdf(k.hash, iters, is_argon2 ? argon2_costs(opts.pim).memory_kib : 0);
            SecureBuffer hkey(kHdrKeySize);
            // Argon2id, one lane, over the same password and salt, always
            // 192 bytes (its output depends on the length, unlike PBKDF2's).
            auto r = is_argon2 ? argon2(Argon2Type::Id, ConstBytes(pool.data(), pw_len), ConstBytes(raw.data(), kSaltSize),
                                        iters, argon2_costs(opts.pim).memory_kib, 1, hkey.span())
                               : pbkdf2(reg, registry_hash(k.hash), ConstBytes(pool.data(), pw_len),
                                        ConstBytes(raw.data(), kSaltSize), iters, hkey.span());
            if (!r) {
                if (r.status() != Status::NotFound) return r.error();
                if (std::find(missing.begin(), missing.end(), k.hash) == missing.end()) missing.push_back(k.hash);
                continue;
            }
            tried = true;
            SecureBuffer dec(kEncSize);
            for (const auto& c : kChains) {
                if (!opts.cipher.empty() && !contains(c.name, opts.cipher)) continue;
                if (!try_chain(reg, c, hkey.data(), raw.data() + kSaltSize, opts.veracrypt, dec.data()))
                    continue;
                auto v = from_decrypted(ConstBytes(dec.data(), kEncSize), c.name, mode_name(c.mode), dev_size, opts);
                if (!v) {
                    if (v.status() == Status::Invalid) continue;  // a CRC mismatch: not this chain
                    return v.error();
                }
                v->hdr.kdf_hash = k.hash;
                v->hdr.iterations = iters;
                return v;
            }
        }
    }
    if (!tried && !missing.empty()) {
        std::string m;
        for (const auto& h : missing) m += (m.empty() ? "" : ", ") + h;
        return make_error(Status::Unsupported, "PBKDF2 hash algorithm not available: " + m + ".");
    }
    return make_error(Status::NoKey, "No device header detected with this passphrase.");
}

SecureBuffer volume_key(const Volume& vol) {
    const Chain* c = find_chain(vol.hdr);
    if (!c || vol.hdr.keys.size() < kKeysSize) return {};
    return chain_key(*c, vol.hdr.keys.data());
}

std::string dump(const Volume& vol, std::string_view device_path) {
    const Header& h = vol.hdr;
    std::string o;
    char buf[256];
    auto line = [&](const char* fmt, auto... a) {
        std::snprintf(buf, sizeof buf, fmt, a...);
        o += buf;
    };
    o += std::string(h.veracrypt ? "VERACRYPT" : "TCRYPT") + " header information for " + std::string(device_path) + "\n";
    line("Version:       \t%d\n", h.version);
    line("Driver req.:\t%x.%x\n", h.version_tc >> 8, h.version_tc & 0xFF);
    line("Sector size:\t%u\n", h.sector_size);
    line("MK offset:\t%llu\n", static_cast<unsigned long long>(h.mk_offset));
    line("PBKDF2 hash:\t%s\n", h.kdf_hash.c_str());
    line("Cipher chain:\t%s\n", h.cipher.c_str());
    line("Cipher mode:\t%s\n", h.mode.c_str());
    line("MK bits:       \t%zu\n", h.key_size * 8);
    return o;
}

SecureBuffer dump_volume_key(const Volume& vol, std::string_view device_path) {
    // cryptsetup's tcryptDump_with_volume_key: always "TCRYPT", the data
    // offset in sectors, then the key lines every dump prints.
    const Header& h = vol.hdr;
    const std::string head = "TCRYPT header information for " + std::string(device_path) +
                             "\nCipher chain:  \t" + h.cipher + "\nCipher mode:   \t" + h.mode +
                             "\nPayload offset:\t" + std::to_string(vol.table.offset - vol.partition_in_disk) + "\n";
    return key_dump_lines(head, volume_key(vol));
}

namespace {

Result<void> check_decryptable(const Volume& vol) {
    if (vol.table.alg_name.empty())
        return make_error(Status::Unsupported, "The TCRYPT legacy inner-CBC chain " + vol.hdr.cipher + "-" +
                                                   vol.hdr.mode + " cannot be decrypted yet (its header opens).");
    return {};
}

Result<void> check_fits(const Volume& vol, BackingStore& data) {
    const uint64_t sectors = data.size() / 512;
    if (sectors <= vol.table.offset || vol.length_sectors > sectors - vol.table.offset)
        return make_error(Status::Invalid, (data.name().empty() ? std::string("the data device") : data.name()) +
                                               " is too small for the TCRYPT volume");
    return {};
}

}  // namespace

Result<dm::DmTable> dm_table(const Volume& vol, BackingStore& data, const std::string& device) {
    if (auto r = check_decryptable(vol); !r) return r.error();
    if (auto s = check_fits(vol, data); !s.ok()) return s.error();
    uint64_t length = vol.length_sectors ? vol.length_sectors : vol.table.length;
    if (!length) length = data.size() / 512 - vol.table.offset;
    return dm::DmTable{dm::crypt_line(vol.table, length, device)};
}

namespace {

constexpr uint64_t kSector = 512;
constexpr std::size_t kMaxLogical = 128;  // EBRs followed at most

bool is_extended(uint8_t type) { return type == 0x05 || type == 0x0F || type == 0x85; }

Status read_sector(BackingStore& disk, uint64_t lba, uint8_t* out) {
    if (disk.size() / kSector <= lba) return Status::Invalid;
    return disk.read(lba * kSector, Bytes(out, kSector));
}

// Partition `number` of a GPT (the kernel's numbering: the entry's index + 1).
Result<Partition> gpt_partition(BackingStore& disk, unsigned number) {
    std::array<uint8_t, kSector> h{};
    if (read_sector(disk, 1, h.data()) != Status::Ok || std::memcmp(h.data(), "EFI PART", 8))
        return make_error(Status::Invalid, "no GPT header at sector 1 of a protective MBR's disk");
    const uint32_t hsize = get_le32(h.data() + 12);
    if (hsize < 92 || hsize > kSector) return make_error(Status::Invalid, "GPT header size out of range");
    std::array<uint8_t, kSector> z = h;
    std::memset(z.data() + 16, 0, 4);
    if (crc32(ConstBytes(z.data(), hsize)) != get_le32(h.data() + 16))
        return make_error(Status::Invalid, "GPT header CRC32 mismatch");
    const uint64_t entries_lba = get_le64(h.data() + 72);
    const uint32_t count = get_le32(h.data() + 80), esize = get_le32(h.data() + 84);
    if (esize < 128 || esize % 8 || esize > 4096 || uint64_t{count} * esize > (1u << 20))
        return make_error(Status::Invalid, "GPT partition entries out of range");
    const uint64_t bytes = uint64_t{count} * esize;
    if (entries_lba > disk.size() / kSector || bytes > disk.size() - entries_lba * kSector)
        return make_error(Status::Invalid, "GPT partition entries outside the disk");
    std::vector<uint8_t> e(bytes);
    if (auto s = disk.read(entries_lba * kSector, Bytes(e.data(), e.size())); s != Status::Ok)
        return make_error(s, "cannot read the GPT partition entries");
    if (crc32(ConstBytes(e.data(), e.size())) != get_le32(h.data() + 88))
        return make_error(Status::Invalid, "GPT partition entries CRC32 mismatch");
    if (number < 1 || number > count) return make_error(Status::NotFound, "no partition " + std::to_string(number));
    const uint8_t* p = e.data() + uint64_t{number - 1} * esize;
    if (std::all_of(p, p + 16, [](uint8_t b) { return b == 0; }))
        return make_error(Status::NotFound, "partition " + std::to_string(number) + " is empty");
    const uint64_t first = get_le64(p + 32), last = get_le64(p + 40);
    if (last < first || last == UINT64_MAX) return make_error(Status::Invalid, "GPT partition ends before it starts");
    return Partition{first, last - first + 1};
}


}  // namespace

bool has_partition_table(BackingStore& dev) {
    std::array<uint8_t, kSector> mbr{};
    return read_sector(dev, 0, mbr.data()) == Status::Ok && mbr[510] == 0x55 && mbr[511] == 0xAA;
}

Result<Partition> find_partition(BackingStore& disk, unsigned number) {
    std::array<uint8_t, kSector> mbr{};
    if (read_sector(disk, 0, mbr.data()) != Status::Ok || mbr[510] != 0x55 || mbr[511] != 0xAA)
        return make_error(Status::Invalid, "no partition table (no MBR signature in sector 0)");
    auto slot = [](const uint8_t* sec, unsigned i) { return sec + 446 + 16 * i; };
    for (unsigned i = 0; i < 4; ++i)
        if (slot(mbr.data(), i)[4] == 0xEE) return gpt_partition(disk, number);
    Result<Partition> found = make_error(Status::NotFound, "no partition " + std::to_string(number));
    if (number >= 1 && number <= 4) {
        const uint8_t* e = slot(mbr.data(), number - 1);
        if (is_extended(e[4])) return make_error(Status::Invalid, "partition " + std::to_string(number) + " is the extended partition");
        if (e[4] && get_le32(e + 12)) found = Partition{get_le32(e + 8), get_le32(e + 12)};
        return found;
    }
    // Logical partitions: the chain of EBRs in the extended partition, each
    // holding data partitions (relative to itself) and a link to the next
    // (relative to the extended partition's start).
    uint64_t ext = 0;
    for (unsigned i = 0; i < 4 && !ext; ++i)
        if (is_extended(slot(mbr.data(), i)[4])) ext = get_le32(slot(mbr.data(), i) + 8);
    unsigned n = 5;
    std::vector<uint64_t> seen;  // a chain that comes back to an EBR ends there
    for (uint64_t ebr = ext; ext && seen.size() < kMaxLogical;) {
        seen.push_back(ebr);
        std::array<uint8_t, kSector> sec{};
        if (read_sector(disk, ebr, sec.data()) != Status::Ok || sec[510] != 0x55 || sec[511] != 0xAA)
            return make_error(Status::Invalid, "a broken extended partition chain");
        uint64_t next = 0;
        for (unsigned i = 0; i < 4; ++i) {
            const uint8_t* e = slot(sec.data(), i);
            if (!e[4] || !get_le32(e + 12)) continue;
            if (is_extended(e[4])) {
                if (!next) next = ext + get_le32(e + 8);
            } else if (n++ == number) {
                return Partition{ebr + get_le32(e + 8), get_le32(e + 12)};
            }
        }
        if (!next || std::find(seen.begin(), seen.end(), next) != seen.end()) break;
        ebr = next;
    }
    return found;
}

Status map_system_partition(Volume& vol, Partition part, bool in_disk) {
    const Chain* c = find_chain(vol.hdr);
    if (!c || (in_disk && !part.sectors)) return Status::Invalid;
    // cryptsetup (2.6.1) for a partition: data from its sector 0, IVs from
    // the partition's start on the disk (plus the mk offset for cbc-tcw,
    // whose IVs always count from it).
    vol.table.iv_offset = (c->mode == Mode::CbcTcw ? vol.hdr.mk_offset / kSector : 0) + part.start;
    vol.table.offset = in_disk ? part.start : 0;
    vol.partition_in_disk = in_disk ? part.start : 0;
    vol.length_sectors = part.sectors;
    return Status::Ok;
}

}  // namespace blkcrypt::tcrypt
