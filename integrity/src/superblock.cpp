#include <blkcrypt/integrity/superblock.hpp>

#include <blkcrypt/internal/bytes_util.hpp>

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace blkcrypt::integrity {

namespace {

constexpr uint8_t kMagic[8] = {'i', 'n', 't', 'e', 'g', 'r', 't', 0};
// Field offsets of struct superblock (all little-endian).
constexpr std::size_t kOffVersion = 8, kOffLog2Interleave = 9, kOffTagSize = 10, kOffJournalSections = 12,
                      kOffProvided = 16, kOffFlags = 24, kOffLog2Spb = 28, kOffLog2Bpb = 29, kOffRecalc = 32,
                      kOffSalt = 48;
// MAX_TAG_SIZE: what one journal entry of an 8-sector block leaves in a
// sector's 496 bytes after the sector number and the 8 last-bytes words.
constexpr uint32_t kMaxTagSize = 496 - 8 - 8 * 8;

Error corrupt(std::string msg) { return make_error(Status::Corrupt, "integrity superblock: " + std::move(msg)); }

}  // namespace

bool has_magic(ConstBytes head) noexcept {
    return head.size() >= sizeof kMagic && std::memcmp(head.data(), kMagic, sizeof kMagic) == 0;
}

Result<Superblock> decode_superblock(ConstBytes head) {
    if (head.size() < kSuperblockBytes) return corrupt("shorter than 64 bytes");
    if (!has_magic(head)) return make_error(Status::NotFound, "no dm-integrity superblock (magic \"integrt\")");
    Superblock sb;
    sb.version = head[kOffVersion];
    if (sb.version < kMinVersion || sb.version > kMaxVersion)
        return corrupt("incompatible version " + std::to_string(sb.version) + " (1 to 5 are known)");
    sb.log2_interleave_sectors = static_cast<int8_t>(head[kOffLog2Interleave]);
    sb.tag_size = get_le16(head.data() + kOffTagSize);
    sb.journal_sections = get_le32(head.data() + kOffJournalSections);
    sb.provided_data_sectors = get_le64(head.data() + kOffProvided);
    sb.flags = get_le32(head.data() + kOffFlags);
    sb.log2_sectors_per_block = head[kOffLog2Spb];  // checked by check_superblock, not here (dump shows it)
    sb.log2_blocks_per_bitmap_bit = head[kOffLog2Bpb];
    sb.recalc_sector = get_le64(head.data() + kOffRecalc);
    std::memcpy(sb.salt.data(), head.data() + kOffSalt, kSaltSize);
    return sb;
}

Result<void> check_superblock(const Superblock& sb, bool meta_device) {
    if (sb.version < kMinVersion || sb.version > kMaxVersion)
        return corrupt("unknown version " + std::to_string(sb.version));
    if (sb.has(kFlagInline)) return corrupt("inline mode (version 6) is not supported");
    if (sb.log2_sectors_per_block > 3)
        return corrupt("log2 sectors per block " + std::to_string(sb.log2_sectors_per_block) +
                       " (blocks above 4096 bytes)");
    if (sb.tag_size == 0) return corrupt("tag size 0");
    if (sb.tag_size > kMaxTagSize) return corrupt("tag size " + std::to_string(sb.tag_size) + " above 424");
    if (sb.journal_sections == 0) return corrupt("journal_sections is 0");
    if (meta_device) {
        if (sb.log2_interleave_sectors != 0)
            return corrupt("log2 interleave sectors " + std::to_string(sb.log2_interleave_sectors) +
                           " with a metadata device (must be 0)");
    } else if (sb.log2_interleave_sectors < 3 || sb.log2_interleave_sectors > 31) {
        return corrupt("log2 interleave sectors " + std::to_string(sb.log2_interleave_sectors) + " outside 3..31");
    }
    return {};
}

std::vector<uint8_t> encode_superblock(const Superblock& sb) {
    std::vector<uint8_t> out(kSuperblockSectors * kSectorSize, 0);
    std::memcpy(out.data(), kMagic, sizeof kMagic);
    out[kOffVersion] = sb.version;
    out[kOffLog2Interleave] = static_cast<uint8_t>(sb.log2_interleave_sectors);
    put_le16(out.data() + kOffTagSize, sb.tag_size);
    put_le32(out.data() + kOffJournalSections, sb.journal_sections);
    put_le64(out.data() + kOffProvided, sb.provided_data_sectors);
    put_le32(out.data() + kOffFlags, sb.flags);
    out[kOffLog2Spb] = sb.log2_sectors_per_block;
    out[kOffLog2Bpb] = sb.log2_blocks_per_bitmap_bit;
    put_le64(out.data() + kOffRecalc, sb.recalc_sector);
    std::memcpy(out.data() + kOffSalt, sb.salt.data(), kSaltSize);
    return out;
}

uint8_t kernel_version(uint32_t flags, bool bitmap_mode, bool meta_device) noexcept {
    if (flags & kFlagFixedHmac) return 5;
    if (flags & kFlagFixedPadding) return 4;
    if (bitmap_mode || (flags & kFlagDirtyBitmap)) return 3;
    if (meta_device || (flags & kFlagRecalculating)) return 2;
    return 1;
}

// cryptsetup 2.6.1's words and order (2.7 changed them to "version:",
// "tag size: N [bytes]", ...); recorded in tests/golden/integrity/*.dump.
std::string dump_text(const Superblock& sb, std::string_view device) {
    std::string out = "Info for integrity device ";
    out += device;
    out += ".\n";
    char line[96];
    auto add = [&](int n) { out.append(line, static_cast<std::size_t>(n)); };
    add(std::snprintf(line, sizeof line, "superblock_version %d\n", int(sb.version)));
    add(std::snprintf(line, sizeof line, "log2_interleave_sectors %d\n", int(sb.log2_interleave_sectors)));
    add(std::snprintf(line, sizeof line, "integrity_tag_size %u\n", unsigned(sb.tag_size)));
    add(std::snprintf(line, sizeof line, "journal_sections %u\n", unsigned(sb.journal_sections)));
    add(std::snprintf(line, sizeof line, "provided_data_sectors %" PRIu64 "\n", sb.provided_data_sectors));
    // 2.6.1 shifts a 32-bit int by the unchecked byte; on x86-64 the CPU
    // takes the count mod 32 (checked against the host's integritysetup).
    const uint32_t sector_size = uint32_t(kSectorSize) << (sb.log2_sectors_per_block & 31);
    add(std::snprintf(line, sizeof line, "sector_size %u\n", unsigned(sector_size)));
    if (sb.version >= 2 && sb.has(kFlagRecalculating))
        add(std::snprintf(line, sizeof line, "recalc_sector %" PRIu64 "\n", sb.recalc_sector));
    add(std::snprintf(line, sizeof line, "log2_blocks_per_bitmap %u\n", unsigned(sb.log2_blocks_per_bitmap_bit)));
    out += "flags ";
    if (sb.has(kFlagJournalMac)) out += "have_journal_mac ";
    if (sb.has(kFlagRecalculating)) out += "recalculating ";
    if (sb.has(kFlagDirtyBitmap)) out += "dirty_bitmap ";
    if (sb.has(kFlagFixedPadding)) out += "fix_padding ";
    if (sb.has(kFlagFixedHmac)) out += "fix_hmac ";
    out += "\n";
    return out;
}

}  // namespace blkcrypt::integrity
