// See <blkcrypt/bitlk/bitlk.hpp>. The layout and the checks follow
// cryptsetup 2.6's lib/bitlk/bitlk.c (BITLK_read_sb, parse_vmk_entry), so an
// image it refuses is refused here with its words, and one it reads gives
// the same fields. Every length comes from the image and is checked before use.
#include <blkcrypt/bitlk/bitlk.hpp>

#include "le.hpp"
#include <blkcrypt/shash.hpp>

#include <cstdio>
#include <cstring>
#include <ctime>

namespace blkcrypt::bitlk {

namespace {

constexpr uint8_t kBootCodeV1[3] = {0xeb, 0x52, 0x90};
constexpr uint8_t kBootCodeV2[3] = {0xeb, 0x58, 0x90};
constexpr char kSignature[] = "-FVE-FS-";
constexpr char kSignatureToGo[] = "MSWIN4.1";
constexpr std::size_t kSuperblockOffset = 160, kSuperblockOffsetToGo = 424;
constexpr std::size_t kEntryHeader = 8, kVmkHeader = 28;

// FVE entry types and datum (value) types.
constexpr uint16_t kEntryProperty = 0x0000, kEntryVmk = 0x0002, kEntryFvek = 0x0003,
                   kEntryDescription = 0x0007, kEntryVolumeHeader = 0x000f;
constexpr uint16_t kValueKey = 0x0001, kValueString = 0x0002, kValueStretchKey = 0x0003, kValueUseKey = 0x0004,
                   kValueEncryptedKey = 0x0005, kValueTpmKey = 0x0006, kValueRecoveryTime = 0x0015;

// 1601-01-01 to 1970-01-01 in 100 ns units.
constexpr uint64_t kEpochAsFiletime = 116444736000000000ull;

using namespace detail;

Error invalid(std::string m) { return make_error(Status::Invalid, std::move(m)); }

// UTF-16LE up to the first NUL as UTF-8; nullopt for unpaired surrogates.
std::optional<std::string> utf16_to_utf8(ConstBytes b) {
    std::string out;
    for (std::size_t i = 0; i + 1 < b.size(); i += 2) {
        uint32_t c = le16(b, i);
        if (c == 0) break;
        if (c >= 0xd800 && c < 0xdc00) {
            if (i + 3 >= b.size()) return std::nullopt;
            const uint32_t lo = le16(b, i + 2);
            if (lo < 0xdc00 || lo >= 0xe000) return std::nullopt;
            c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
            i += 2;
        } else if (c >= 0xdc00 && c < 0xe000) {
            return std::nullopt;
        }
        if (c < 0x80) {
            out += static_cast<char>(c);
        } else if (c < 0x800) {
            out += static_cast<char>(0xc0 | (c >> 6));
            out += static_cast<char>(0x80 | (c & 0x3f));
        } else if (c < 0x10000) {
            out += static_cast<char>(0xe0 | (c >> 12));
            out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
            out += static_cast<char>(0x80 | (c & 0x3f));
        } else {
            out += static_cast<char>(0xf0 | (c >> 18));
            out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
            out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
            out += static_cast<char>(0x80 | (c & 0x3f));
        }
    }
    return out;
}

bool known_protector(uint16_t p) {
    return p == kClearKey || p == kStartupKey || p == kPassphrase || p == kRecoveryPassphrase;
}

// The datums after a VMK entry's header, [start, end) of `e`.
Result<void> parse_vmk_datums(ConstBytes e, std::size_t start, std::size_t end, Vmk& vmk) {
    const bool supported = known_protector(vmk.protection);
    while (end - start >= 6) {
        const uint16_t size = le16(e, start);
        if (size == 0) break;
        if (size < kEntryHeader || size > end - start)
            return invalid("Unexpected metadata entry size " + std::to_string(size) +
                           " found when parsing Volume Master Key.");
        const uint16_t type = le16(e, start + 2), value = le16(e, start + 4);
        const ConstBytes d = e.subspan(start, size);
        if (type != kEntryProperty && supported)
            return invalid("Unexpected metadata entry type '" + std::to_string(type) +
                           "' found when parsing supported Volume Master Key.");
        if (value == kValueStretchKey) {
            if (size < kEntryHeader + 4 + 16) return invalid("Truncated stretch key in Volume Master Key.");
            std::memcpy(vmk.salt.data(), d.data() + kEntryHeader + 4, 16);
        } else if (value == kValueEncryptedKey) {
            if (size < kEntryHeader + 12 + 16) return invalid("Truncated encrypted key in Volume Master Key.");
            WrappedKey w;
            std::memcpy(w.nonce.data(), d.data() + kEntryHeader, 12);
            std::memcpy(w.tag.data(), d.data() + kEntryHeader + 12, 16);
            w.data.assign(d.begin() + kEntryHeader + 28, d.end());
            vmk.keys.push_back(std::move(w));
        } else if (value == kValueKey) {
            // The protector's own key in the clear (4 bytes of method first).
            if (size < kEntryHeader + 4) return invalid("Truncated key in Volume Master Key.");
            vmk.clear_key = SecureBuffer(d.subspan(kEntryHeader + 4));
        } else if (value == kValueRecoveryTime) {
        } else if (value == kValueString) {
            auto s = utf16_to_utf8(d.subspan(kEntryHeader));
            if (!s) return invalid("Invalid string found when parsing Volume Master Key.");
            if (!vmk.name.empty()) {
                if (supported)
                    return invalid("Unexpected string ('" + *s + "') found when parsing supported Volume Master Key.");
            } else {
                vmk.name = *s;
            }
        } else if ((value == kValueUseKey && vmk.protection == kStartupKey) ||
                   (value == kValueTpmKey && vmk.protection == kTpm)) {
        } else if (supported) {
            return invalid("Unexpected metadata entry value '" + std::to_string(value) +
                           "' found when parsing supported Volume Master Key.");
        }
        start += size;
    }
    return {};
}

}  // namespace

std::string protection_name(uint16_t p) {
    switch (p) {
    case kClearKey: return "VMK protected with clear key";
    case kTpm: return "VMK protected with TPM";
    case kStartupKey: return "VMK protected with startup key";
    case kTpmPin: return "VMK protected with TPM and PIN";
    case kPassphrase: return "VMK protected with passphrase";
    case kRecoveryPassphrase: return "VMK protected with recovery passphrase";
    case kSmartCard: return "VMK protected with smart card";
    default: return "VMK with unknown protection";
    }
}

Result<std::array<uint64_t, 3>> parse_boot_sector(ConstBytes boot, Metadata& md) {
    if (boot.size() < kBootSectorSize) return invalid("Invalid or unknown boot signature for BITLK device.");
    if (std::memcmp(boot.data(), kBootCodeV1, 3) == 0)
        return make_error(Status::Unsupported, "BITLK version 1 is currently not supported.");
    if (std::memcmp(boot.data(), kBootCodeV2, 3) != 0) return invalid("Invalid or unknown boot signature for BITLK device.");
    std::size_t sb;
    if (std::memcmp(boot.data() + 3, kSignature, 8) == 0) {
        md.togo = false;
        sb = kSuperblockOffset;
    } else if (std::memcmp(boot.data() + 3, kSignatureToGo, 8) == 0) {
        md.togo = true;
        sb = kSuperblockOffsetToGo;
    } else {
        return invalid("Invalid or unknown signature for BITLK device.");
    }
    md.sector_size = le16(boot, 11);
    if (md.sector_size == 0) md.sector_size = 512;  // cryptsetup assumes 512 then
    if (md.sector_size != 512 && md.sector_size != 4096)
        return invalid("Unsupported sector size " + std::to_string(md.sector_size) + ".");
    // The superblock: a GUID, then the three FVE block offsets.
    return std::array<uint64_t, 3>{le64(boot, sb + 16), le64(boot, sb + 24), le64(boot, sb + 32)};
}

Result<void> parse_fve_block(ConstBytes b, Metadata& md) {
    if (b.size() < kFveHeadersSize || std::memcmp(b.data(), kSignature, 8) != 0)
        return invalid("Invalid or unknown signature for BITLK device.");
    md.version = le16(b, 10);
    if (md.version == 1) return make_error(Status::Unsupported, "BITLK version 1 is currently not supported.");
    md.curr_state = le16(b, 12);
    md.next_state = le16(b, 14);
    md.volume_size = le64(b, 16);
    for (int i = 0; i < 3; ++i) md.metadata_offset[i] = le64(b, 32 + 8 * i);
    md.volume_header_offset = le64(b, 56);
    md.volume_header_size = uint64_t{le32(b, 28)} * 512;  // overridden by the entry below

    md.encryption = le16(b, 100);
    struct Method {
        uint16_t id;
        unsigned bits;
        const char* mode;
    };
    static constexpr Method methods[] = {{0x8000, 256, "cbc-elephant"}, {0x8001, 512, "cbc-elephant"},
                                         {0x8002, 128, "cbc-eboiv"},    {0x8003, 256, "cbc-eboiv"},
                                         {0x8004, 256, "xts-plain64"},  {0x8005, 512, "xts-plain64"}};
    md.cipher.clear();
    for (const Method& m : methods)
        if (m.id == md.encryption) md.cipher = "aes", md.cipher_mode = m.mode, md.key_bits = m.bits;
    if (md.cipher.empty()) return make_error(Status::Unsupported, "Unknown or unsupported encryption type.");
    md.guid = guid_string(b, 80);
    const uint64_t ft = le64(b, 104);
    md.creation_time = static_cast<int64_t>((ft - kEpochAsFiletime) / 10000000);  // wraps as cryptsetup's does

    const uint32_t msize = le32(b, 64);
    if (msize < 48 + kEntryHeader || msize > kFveAreaSize)
        return invalid("Invalid BITLK metadata size " + std::to_string(msize) + ".");
    if (b.size() < 64 + uint64_t{msize}) return invalid("Truncated BITLK metadata.");
    const ConstBytes e = b.subspan(kFveHeadersSize, msize - 48);
    std::size_t start = 0;
    bool have_fvek = false;
    md.vmks.clear();
    md.description.reset();
    while (e.size() - start >= 4) {
        const uint16_t size = le16(e, start);
        if (size == 0) break;
        if (size < kEntryHeader || size > e.size() - start)
            return invalid("Unexpected metadata entry size " + std::to_string(size) + " when parsing metadata.");
        const uint16_t type = le16(e, start + 2);
        const ConstBytes d = e.subspan(start, size);
        if (type == kEntryVmk) {
            if (size < kEntryHeader + kVmkHeader) return invalid("Truncated Volume Master Key entry.");
            Vmk vmk;
            vmk.guid = guid_string(d, kEntryHeader);
            vmk.protection = le16(d, kEntryHeader + 26);
            if (auto r = parse_vmk_datums(e, start + kEntryHeader + kVmkHeader, start + size, vmk); !r) return r;
            md.vmks.push_back(std::move(vmk));
        } else if (type == kEntryFvek && !have_fvek) {
            if (size < kEntryHeader + 28) return invalid("Truncated FVEK entry.");
            std::memcpy(md.fvek.nonce.data(), d.data() + kEntryHeader, 12);
            std::memcpy(md.fvek.tag.data(), d.data() + kEntryHeader + 12, 16);
            md.fvek.data.assign(d.begin() + kEntryHeader + 28, d.end());
            have_fvek = true;
        } else if (type == kEntryVolumeHeader) {
            if (size < kEntryHeader + 16) return invalid("Truncated volume header entry.");
            md.volume_header_offset = le64(d, kEntryHeader);
            md.volume_header_size = le64(d, kEntryHeader + 8);
        } else if (type == kEntryDescription && !md.description) {
            auto s = utf16_to_utf8(d.subspan(kEntryHeader));
            if (!s) return invalid("Failed to convert BITLK volume description.");
            md.description = *s;
        }
        start += size;
    }
    if (!have_fvek) return invalid("BITLK metadata has no FVEK entry.");
    return {};
}

std::optional<bool> check_fve_crc(Registry& reg, ConstBytes b) {
    // The block's size in 16-byte units; the record follows it.
    if (b.size() < kFveHeadersSize) return std::nullopt;
    const std::size_t n = std::size_t{le16(b, 8)} * 16;
    if (n < kFveHeadersSize || b.size() < n + 8 || le16(b, n + 2) != 2 || le16(b, n) < 8) return std::nullopt;
    // zlib's CRC32: the registry's crc32 (the kernel's, no inversions) seeded ~0, inverted.
    auto crc = Shash::alloc(reg, "crc32");
    if (!crc) return std::nullopt;
    const uint8_t seed[4] = {0xff, 0xff, 0xff, 0xff};
    uint8_t out[4];
    if (crc->setkey(seed) != Status::Ok || crc->digest(b.first(n), out) != Status::Ok) return std::nullopt;
    return ~le32(ConstBytes(out, 4), 0) == le32(b, n + 4);
}

Result<Metadata> read_metadata(Registry& reg, BackingStore& dev) {
    Metadata boot_md;
    std::vector<uint8_t> boot(kBootSectorSize);
    if (dev.size() < kBootSectorSize) return invalid("Invalid or unknown boot signature for BITLK device.");
    if (Status s = dev.read(0, boot); s != Status::Ok) return make_error(s, "Cannot read the BITLK boot sector.");
    auto offsets = parse_boot_sector(boot, boot_md);
    if (!offsets) return offsets.error();
    // Each copy in turn; the first error is cryptsetup's (it reads only the first).
    std::optional<Error> first_error;
    std::optional<Metadata> fallback;
    for (unsigned i = 0; i < 3; ++i) {
        const uint64_t at = (*offsets)[i];
        Metadata md = boot_md;
        Result<void> r = {};
        std::vector<uint8_t> block;
        if (at > dev.size() || dev.size() - at < kFveHeadersSize) {
            r = invalid("BITLK metadata offset " + std::to_string(at) + " is beyond the end of the device.");
        } else {
            block.resize(static_cast<std::size_t>(std::min<uint64_t>(dev.size() - at, kFveAreaSize)));
            if (Status s = dev.read(at, block); s != Status::Ok) return make_error(s, "Cannot read the BITLK metadata.");
            r = parse_fve_block(block, md);
        }
        if (!r) {
            if (!first_error) first_error = r.error();
            continue;
        }
        // cryptsetup reads the first area; the superblock's own offsets stand.
        md.metadata_offset = *offsets;
        md.copy = i;
        md.damaged_first = i > 0;
        if (check_fve_crc(reg, block).value_or(true)) return md;
        if (!fallback) fallback = std::move(md);
    }
    // No copy passes its CRC32: the first that parses, as cryptsetup would read it.
    if (fallback && fallback->copy == 0) {
        fallback->damaged_first = false;
        return std::move(*fallback);
    }
    if (fallback) return std::move(*fallback);
    return *first_error;
}

std::string dump(const Metadata& md, std::string_view device) {
    std::string o = "Info for BITLK" + std::string(md.togo ? " To Go" : "") + " device " + std::string(device) + ".\n";
    o += "Version:      \t" + std::to_string(md.version) + "\n";
    o += "GUID:         \t" + md.guid + "\n";
    o += "Sector size:  \t" + std::to_string(md.sector_size) + " [bytes]\n";
    o += "Volume size:  \t" + std::to_string(md.volume_size) + " [bytes]\n";
    // ctime(): local time, "Thu Jul  4 06:37:58 2019\n".
    const time_t t = static_cast<time_t>(md.creation_time);
    struct tm tm {};
    char when[64] = "";
    if (localtime_r(&t, &tm)) std::strftime(when, sizeof when, "%a %b %e %H:%M:%S %Y\n", &tm);
    o += "Created:      \t" + std::string(when);
    o += "Description:  \t" + md.description.value_or("(null)") + "\n";
    o += "Cipher name:  \t" + md.cipher + "\n";
    o += "Cipher mode:  \t" + md.cipher_mode + "\n";
    o += "Cipher key:   \t" + std::to_string(md.key_bits) + " bits\n\n";
    o += "Keyslots:\n";
    std::size_t i = 0;
    for (const Vmk& v : md.vmks) {
        o += " " + std::to_string(i++) + ": VMK\n";
        if (!v.name.empty()) o += "\tName:       \t" + v.name + "\n";
        o += "\tGUID:       \t" + v.guid + "\n";
        o += "\tProtection: \t" + protection_name(v.protection) + "\n";
        o += "\tSalt:       \t";
        static const char* digits = "0123456789abcdef";
        for (uint8_t c : v.salt) o += digits[c >> 4], o += digits[c & 15];
        o += "\n";
        for (const WrappedKey& k : v.keys) o += "\tKey data size:\t" + std::to_string(k.data.size()) + " [bytes]\n";
    }
    o += " " + std::to_string(i) + ": FVEK\n";
    o += "\tKey data size:\t" + std::to_string(md.fvek.data.size()) + " [bytes]\n\n";
    o += "Metadata segments:\n";
    for (int a = 0; a < 3; ++a) {
        o += " " + std::to_string(a) + ": FVE metadata area\n";
        o += "\tOffset: \t" + std::to_string(md.metadata_offset[a]) + " [bytes]\n";
        o += "\tSize:   \t" + std::to_string(kFveAreaSize) + " [bytes]\n";
    }
    o += " 3: Volume header\n";
    o += "\tOffset: \t" + std::to_string(md.volume_header_offset) + " [bytes]\n";
    o += "\tSize:   \t" + std::to_string(md.volume_header_size) + " [bytes]\n";
    o += "\tCipher: \t" + md.cipher_spec() + "\n";
    return o;
}

}  // namespace blkcrypt::bitlk
