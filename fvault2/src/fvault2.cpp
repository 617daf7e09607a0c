// See <blkcrypt/fvault2/fvault2.hpp>. The layout and the checks follow
// cryptsetup 2.6's lib/fvault2/fvault2.c (FVAULT2_read_metadata,
// FVAULT2_get_volume_key), so an image it refuses is refused here and one it
// reads gives the same fields. Every offset and length comes from the image
// and is checked before use.
#include <blkcrypt/fvault2/fvault2.hpp>

#include <blkcrypt/base64.hpp>
#include <blkcrypt/guid.hpp>
#include <blkcrypt/hex.hpp>
#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/kdf.hpp>
#include <blkcrypt/shash.hpp>
#include <blkcrypt/skcipher.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

namespace blkcrypt::fvault2 {

namespace {

constexpr uint16_t kCoreStorageMagic = 0x4353;  // "CS", big-endian
constexpr std::size_t kKeySize = 16;
constexpr std::size_t kPassphraseWrappedKekSize = 284, kKekWrappedVolumeKeySize = 256;

// Fields at an offset the caller has checked; the byte order is the core's.
uint16_t le16(ConstBytes b, std::size_t o) { return get_le16(b.data() + o); }
uint32_t le32(ConstBytes b, std::size_t o) { return get_le32(b.data() + o); }
uint64_t le64(ConstBytes b, std::size_t o) { return get_le64(b.data() + o); }

Error invalid(std::string m) { return make_error(Status::Invalid, std::move(m)); }


// libuuid's uuid_parse: exactly 8-4-4-4-12 hex digits.
std::optional<std::array<uint8_t, 16>> parse_uuid(std::string_view s) {
    if (s.size() != 36) return std::nullopt;
    std::array<uint8_t, 16> u{};
    std::size_t n = 0;
    for (std::size_t i = 0; i < 36;) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i++] != '-') return std::nullopt;
            continue;
        }
        const int hi = hex_digit_value(s[i]), lo = hex_digit_value(s[i + 1]);
        if (hi < 0 || lo < 0) return std::nullopt;
        u[n++] = static_cast<uint8_t>(hi << 4 | lo);
        i += 2;
    }
    return u;
}

// strtoull(s, NULL, 16) as cryptsetup calls it: leading spaces, a sign, an
// optional 0x, the longest run of hex digits; overflow gives ULLONG_MAX.
uint64_t strtoull_hex(std::string_view s) {
    std::size_t i = 0;
    while (i < s.size() && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r'))) ++i;
    bool neg = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    if (i + 2 < s.size() && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X') && hex_digit_value(s[i + 2]) >= 0) i += 2;
    uint64_t v = 0;
    for (; i < s.size() && hex_digit_value(s[i]) >= 0; ++i) {
        if (v > (UINT64_MAX >> 4)) return UINT64_MAX;
        v = v << 4 | static_cast<uint64_t>(hex_digit_value(s[i]));
    }
    return neg ? 0 - v : v;
}

// The plist text of a block: [off, off + size) up to its first NUL.
Result<std::string_view> block_xml(ConstBytes block, uint32_t off, uint32_t size) {
    if (uint64_t{off} + size > kBlockSize || off + uint64_t{size} > block.size())
        return invalid("FVAULT2 metadata plist lies outside its block.");
    std::string_view xml(reinterpret_cast<const char*>(block.data()) + off, size);
    return xml.substr(0, xml.find('\0'));
}

Result<std::vector<uint8_t>> plist_data(std::string_view xml, std::string_view key, std::size_t want) {
    auto v = plist_value(xml, key, "data");
    if (!v) return invalid("FVAULT2 metadata has no " + std::string(key) + ".");
    auto d = base64_decode(*v);
    if (!d) return invalid("FVAULT2 " + std::string(key) + " is not base64.");
    if (d->size() != want)
        return invalid("FVAULT2 " + std::string(key) + " has " + std::to_string(d->size()) + " bytes, not " +
                       std::to_string(want) + ".");
    return std::move(*d);
}

Result<void> parse_keys_block(ConstBytes b, Metadata& md) {
    auto xml = block_xml(b, le32(b, 112), le32(b, 116));
    if (!xml) return xml.error();
    auto pwk = plist_data(*xml, "PassphraseWrappedKEKStruct", kPassphraseWrappedKekSize);
    if (!pwk) return pwk.error();
    auto kwvk = plist_data(*xml, "KEKWrappedVolumeKeyStruct", kKekWrappedVolumeKeySize);
    if (!kwvk) return kwvk.error();
    // PassphraseWrappedKEKStruct: salt type, size, 16-byte salt, KEK type,
    // size, 24-byte wrapped KEK, 112 unknown bytes, iterations.
    md.pbkdf2_iterations = le32(*pwk, 168);
    std::memcpy(md.pbkdf2_salt.data(), pwk->data() + 8, md.pbkdf2_salt.size());
    std::memcpy(md.wrapped_kek.data(), pwk->data() + 32, kWrappedKeySize);
    // KEKWrappedVolumeKeyStruct: type, size, 24-byte wrapped volume key.
    std::memcpy(md.wrapped_vk.data(), kwvk->data() + 8, kWrappedKeySize);
    return {};
}

Result<void> parse_volume_block(ConstBytes b, Metadata& md) {
    auto xml = block_xml(b, le32(b, 128), le32(b, 132));
    if (!xml) return xml.error();
    auto size = plist_value(*xml, "com.apple.corestorage.lv.size", "integer");
    if (!size) return invalid("FVAULT2 metadata has no logical volume size.");
    md.lv_size = strtoull_hex(*size);
    if (md.lv_size == 0 || md.lv_size == UINT64_MAX) return invalid("FVAULT2 logical volume size is invalid.");
    auto family = plist_value(*xml, "com.apple.corestorage.lv.familyUUID", "string");
    if (!family) return invalid("FVAULT2 metadata has no family UUID.");
    auto bin = parse_uuid(*family);
    if (!bin) return invalid("FVAULT2 family UUID is invalid.");
    md.family_uuid_bin = *bin;
    md.family_uuid = uuid_text(bin->data());
    return {};
}

Result<void> read_exact(BackingStore& dev, uint64_t off, Bytes out, const char* what) {
    if (off > dev.size() || out.size() > dev.size() - off)
        return make_error(Status::Invalid, std::string("The device is too short for the FVAULT2 ") + what + ".");
    if (Status s = dev.read(off, out); s != Status::Ok)
        return make_error(s, std::string("Cannot read the FVAULT2 ") + what + ".");
    return {};
}

// RFC 3394 unwrap of one 16-byte key: BadMsg when the integrity value does
// not match (the wrong passphrase or KEK).
Result<SecureBuffer> unwrap(Registry& reg, ConstBytes kek, ConstBytes wrapped) {
    auto kw = Skcipher::alloc(reg, "kw(aes)");
    if (!kw) return kw.error();
    if (Status s = kw->setkey(kek); s != Status::Ok) return make_error(s, "kw(aes) key");
    std::array<uint8_t, 8> a{};
    std::memcpy(a.data(), wrapped.data(), a.size());
    SecureBuffer key(kKeySize);
    if (Status s = kw->decrypt(wrapped.subspan(8, kKeySize), key.span(), a); s != Status::Ok)
        return make_error(s, "key unwrap");
    return key;
}

}  // namespace

bool checksum_ok(Registry& reg, ConstBytes block) {
    if (block.size() < 8 || le32(block, 4) != 0xffffffffu) return false;
    auto h = Shash::alloc(reg, "crc32c");
    if (!h) return false;
    // The registry's crc32c is the kernel's: seeded ~0 by default, inverted at
    // the end; Core Storage stores the register uninverted.
    std::array<uint8_t, 4> d{};
    if (h->digest(block.subspan(8), d) != Status::Ok) return false;
    return ~le32(d, 0) == le32(block, 0);
}

std::optional<std::string> plist_value(std::string_view xml, std::string_view key, std::string_view type) {
    const std::string head = "<key>" + std::string(key) + "</key><" + std::string(type);
    const std::string tail = "</" + std::string(type) + ">";
    for (std::size_t at = xml.find(head); at != std::string_view::npos; at = xml.find(head, at + 1)) {
        // [^>]*> then ([^<]+) then the closing tag; else the next occurrence.
        const std::size_t gt = xml.find('>', at + head.size());
        if (gt == std::string_view::npos) return std::nullopt;
        const std::size_t lt = xml.find('<', gt + 1);
        if (lt == std::string_view::npos) return std::nullopt;
        if (lt > gt + 1 && xml.substr(lt, tail.size()) == tail) return std::string(xml.substr(gt + 1, lt - gt - 1));
    }
    return std::nullopt;
}

Result<VolumeHeader> parse_volume_header(Registry& reg, ConstBytes h) {
    if (h.size() < kVolumeHeaderSize || !checksum_ok(reg, h.first(kVolumeHeaderSize)))
        return invalid("No FVAULT2 volume header (checksum mismatch).");
    if (le16(h, 8) != 1) return invalid("Unsupported FVAULT2 version " + std::to_string(le16(h, 8)) + ".");
    if ((h[88] << 8 | h[89]) != kCoreStorageMagic) return invalid("Invalid Core Storage magic bytes.");
    if (le32(h, 168) != kKeySize)
        return invalid("Unsupported FVAULT2 AES key size: " + std::to_string(le32(h, 168)) + " bytes.");
    VolumeHeader vh;
    vh.block_size = le32(h, 96);
    vh.disklabel_block = le64(h, 104);
    vh.pv_uuid = uuid_text(h.data() + 304);
    vh.metadata_key = SecureBuffer(2 * kKeySize);
    std::memcpy(vh.metadata_key.data(), h.data() + 176, kKeySize);
    std::memcpy(vh.metadata_key.data() + kKeySize, h.data() + 304, kKeySize);
    return vh;
}

Result<void> parse_metadata_block(ConstBytes b, Metadata& md) {
    if (b.size() < kBlockSize) return invalid("FVAULT2 metadata block is short.");
    switch (le16(b, 10)) {
    case 0x0019:
        if (auto r = parse_keys_block(b, md); !r) return r;
        md.found |= kFoundKeys;
        break;
    case 0x001a:
        if (auto r = parse_volume_block(b, md); !r) return r;
        md.found |= kFoundVolume;
        break;
    case 0x0305: {
        const uint64_t blk = le32(b, 104);
        if (md.block_size && blk > UINT64_MAX / md.block_size) return invalid("FVAULT2 logical volume offset overflows.");
        md.lv_offset = blk * md.block_size;
        md.found |= kFoundOffset;
        break;
    }
    default:
        break;
    }
    return {};
}

Result<Metadata> read_metadata(Registry& reg, BackingStore& dev) {
    std::vector<uint8_t> block(kBlockSize);
    if (auto r = read_exact(dev, 0, Bytes(block).first(kVolumeHeaderSize), "volume header"); !r) return r.error();
    auto vh = parse_volume_header(reg, ConstBytes(block).first(kVolumeHeaderSize));
    if (!vh) return vh.error();
    Metadata md;
    md.pv_uuid = vh->pv_uuid;
    md.block_size = vh->block_size;

    // The disk label (a checksummed block of type 0x0011) points to the
    // volume groups descriptor, which says where the encrypted metadata is.
    const uint64_t bs = vh->block_size;
    if (bs && vh->disklabel_block > kMaxOffset / bs) return invalid("FVAULT2 disk label offset is beyond 1 GiB.");
    uint64_t off = vh->disklabel_block * bs;
    if (auto r = read_exact(dev, off, block, "disk label"); !r) return r.error();
    if (!checksum_ok(reg, block)) return invalid("FVAULT2 disk label checksum mismatch.");
    off += le32(block, 220);
    if (off > kMaxOffset) return invalid("FVAULT2 volume groups descriptor is beyond 1 GiB.");
    std::array<uint8_t, 40> vgd{};
    if (auto r = read_exact(dev, off, vgd, "volume groups descriptor"); !r) return r.error();
    const uint64_t blocks = le64(vgd, 8), start_block = le64(vgd, 32);
    if (bs && start_block > kMaxOffset / bs) return invalid("FVAULT2 encrypted metadata is beyond 1 GiB.");
    const uint64_t start = start_block * bs;

    auto xts = Skcipher::alloc(reg, "xts(aes)");
    if (!xts) return xts.error();
    if (Status s = xts->setkey(vh->metadata_key); s != Status::Ok)
        return make_error(s, "FVAULT2 metadata key refused by xts(aes).");
    std::vector<uint8_t> plain(kBlockSize);
    for (uint64_t i = 0; i < blocks; ++i) {
        if (i > (kMaxOffset - start) / kBlockSize) return invalid("FVAULT2 encrypted metadata is beyond 1 GiB.");
        if (auto r = read_exact(dev, start + i * kBlockSize, block, "encrypted metadata"); !r) return r.error();
        if (std::all_of(block.begin(), block.end(), [](uint8_t c) { return c == 0; })) break;
        // Each block is one XTS data unit, its tweak the block's index.
        std::array<uint8_t, 16> tweak{};
        for (int k = 0; k < 8; ++k) tweak[k] = static_cast<uint8_t>(i >> (8 * k));
        if (Status s = xts->decrypt(block, plain, tweak); s != Status::Ok)
            return make_error(s, "FVAULT2 metadata decryption failed.");
        if (!checksum_ok(reg, plain))
            return invalid("FVAULT2 encrypted metadata block " + std::to_string(i) + " checksum mismatch.");
        if (auto r = parse_metadata_block(plain, md); !r) return r.error();
    }
    std::fill(plain.begin(), plain.end(), 0);
    if (md.found != kFoundAll) return invalid("Necessary FVAULT2 metadata blocks not found.");
    return md;
}

std::string dump(const Metadata& md, std::string_view device) {
    std::string o = "Header information for FVAULT2 device " + std::string(device) + ".\n";
    o += "Physical volume UUID: \t" + md.pv_uuid + "\n";
    o += "Family UUID:          \t" + md.family_uuid + "\n";
    o += "Logical volume offset:\t" + std::to_string(md.lv_offset) + " [bytes]\n";
    o += "Logical volume size:  \t" + std::to_string(md.lv_size) + " [bytes]\n";
    o += "Cipher:               \t" + md.cipher + "\n";
    o += "Cipher mode:          \t" + md.cipher_mode + "\n";
    o += "PBKDF2 iterations:    \t" + std::to_string(md.pbkdf2_iterations) + "\n";
    o += "PBKDF2 salt:          \t";
    static const char* digits = "0123456789abcdef";
    for (uint8_t c : md.pbkdf2_salt) o += digits[c >> 4], o += digits[c & 15], o += ' ';
    o += "\n";
    return o;
}

SecureBuffer dump_volume_key(const Metadata& md, std::string_view device, ConstBytes key) {
    const std::string head = dump(md, device) + "Volume key:       \t";
    // The key's hex goes straight into wiping memory, all on one line.
    SecureBuffer out(head.size() + key.size() * 3 + 1);
    std::memcpy(out.data(), head.data(), head.size());
    std::size_t pos = head.size();
    static const char* digits = "0123456789abcdef";
    for (uint8_t c : key) {
        out[pos++] = static_cast<uint8_t>(digits[c >> 4]);
        out[pos++] = static_cast<uint8_t>(digits[c & 15]);
        out[pos++] = ' ';
    }
    out[pos] = '\n';
    return out;
}

Result<SecureBuffer> unlock(Registry& reg, const Metadata& md, ConstBytes passphrase) {
    SecureBuffer pk(kKeySize);
    if (auto r = pbkdf2(reg, "sha256", passphrase, md.pbkdf2_salt, md.pbkdf2_iterations, pk.span()); !r)
        return r.error();
    auto kek = unwrap(reg, pk, md.wrapped_kek);
    if (!kek && kek.status() == Status::BadMsg) return make_error(Status::NoKey, "No key available with this passphrase.");
    if (!kek) return kek.error();
    auto half = unwrap(reg, *kek, md.wrapped_vk);
    if (!half && half.status() == Status::BadMsg)
        return make_error(Status::NoKey, "No key available with this passphrase.");
    if (!half) return half.error();
    // The second XTS key: SHA-256 of the first and the family UUID, truncated.
    auto sha = Shash::alloc(reg, "sha256");
    if (!sha) return sha.error();
    SecureBuffer in(kKeySize + md.family_uuid_bin.size()), digest(32);
    std::memcpy(in.data(), half->data(), kKeySize);
    std::memcpy(in.data() + kKeySize, md.family_uuid_bin.data(), md.family_uuid_bin.size());
    if (Status s = sha->digest(in, digest.span()); s != Status::Ok) return make_error(s, "sha256");
    SecureBuffer vk(kVolumeKeySize);
    std::memcpy(vk.data(), half->data(), kKeySize);
    std::memcpy(vk.data() + kKeySize, digest.data(), kKeySize);
    return vk;
}

namespace {

dm::CryptTable crypt_table(const Metadata& md, ConstBytes key) {
    auto t = dm::parse_cipher_spec(md.cipher_spec());
    dm::CryptTable table = t ? std::move(t).value() : dm::CryptTable{};
    table.key.assign(key);
    table.offset = md.lv_offset / 512;
    table.iv_offset = 0;
    table.start = 0;
    table.length = md.lv_size / 512;
    return table;
}

Result<void> check_extent(const Metadata& md, uint64_t dev_size) {
    if (md.lv_offset % 512 || md.lv_size % 512)
        return invalid("FVAULT2 logical volume is not aligned to 512-byte sectors.");
    if (md.lv_offset > dev_size || md.lv_size > dev_size - md.lv_offset)
        return invalid("Device is too small for the FVAULT2 logical volume (" + std::to_string(md.lv_offset) + " + " +
                       std::to_string(md.lv_size) + " bytes).");
    return {};
}

}  // namespace

Result<dm::DmTable> dm_table(const Metadata& md, ConstBytes key, uint64_t dev_size, const std::string& device) {
    if (!key.empty() && key.size() != kVolumeKeySize) return invalid("the key does not fit the volume's cipher");
    if (auto r = check_extent(md, dev_size); !r) return r.error();
    return dm::DmTable{dm::crypt_line(crypt_table(md, key), md.lv_size / 512, device)};
}

}  // namespace blkcrypt::fvault2
