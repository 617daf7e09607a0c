// The dm-integrity superblock: the first 8 sectors at the device's start
// offset (of the metadata device when there is one), as the Linux kernel
// writes it (drivers/md/dm-integrity.c, struct superblock) and
// integritysetup reads it (cryptsetup lib/integrity/integrity.c).
#pragma once

#include <blkcrypt/bytes.hpp>
#include <blkcrypt/status.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace blkcrypt::integrity {

inline constexpr std::size_t kSectorSize = 512;
inline constexpr std::size_t kSuperblockSectors = 8;  // SB_SECTORS: the area the kernel reserves
inline constexpr std::size_t kSuperblockBytes = 64;   // the fields; the rest of the area is zero
inline constexpr std::size_t kSaltSize = 16;

// Superblock flags (SB_FLAG_*).
inline constexpr uint32_t kFlagJournalMac = 0x1;
inline constexpr uint32_t kFlagRecalculating = 0x2;
inline constexpr uint32_t kFlagDirtyBitmap = 0x4;
inline constexpr uint32_t kFlagFixedPadding = 0x8;
inline constexpr uint32_t kFlagFixedHmac = 0x10;
inline constexpr uint32_t kFlagInline = 0x20;  // version 6 (kernel 6.11); not read here

// Versions 1..5, the ones cryptsetup 2.6.1 and the 6.1 kernel know.
inline constexpr uint8_t kMinVersion = 1;
inline constexpr uint8_t kMaxVersion = 5;

struct Superblock {
    uint8_t version = kMinVersion;
    int8_t log2_interleave_sectors = 0;  // 0 with a separate metadata device
    uint16_t tag_size = 0;               // bytes of tag per block
    uint32_t journal_sections = 0;
    uint64_t provided_data_sectors = 0;  // 512-byte units; what userspace sizes the mapping by
    uint32_t flags = 0;
    uint8_t log2_sectors_per_block = 0;  // 0..3: blocks of 512..4096 bytes
    uint8_t log2_blocks_per_bitmap_bit = 0;
    uint64_t recalc_sector = 0;          // meaningful with kFlagRecalculating
    std::array<uint8_t, kSaltSize> salt{};  // meaningful with kFlagFixedHmac

    bool has(uint32_t flag) const noexcept { return (flags & flag) != 0; }
    // Meaningful once check_superblock passed (log2_sectors_per_block <= 3).
    uint32_t sector_size() const noexcept { return uint32_t(kSectorSize) << (log2_sectors_per_block & 3); }
    uint32_t sectors_per_block() const noexcept { return 1u << (log2_sectors_per_block & 3); }
};

// True when `head` starts with the magic "integrt\0" (whatever follows).
bool has_magic(ConstBytes head) noexcept;

// Parses the superblock from untrusted bytes (at least kSuperblockBytes) as
// integritysetup 2.6.1 reads it: NotFound without the magic; Corrupt for a
// version outside 1..5 or fewer than 64 bytes. Nothing else is checked, so
// dump shows what integritysetup shows; check_superblock holds the
// kernel's checks, which every use beyond dump needs first.
Result<Superblock> decode_superblock(ConstBytes head);

// The kernel's checks when it opens a superblock (dm_integrity_ctr):
// Corrupt, naming the field, for a block above 4096 bytes, a zero tag size,
// a tag larger than a journal entry holds (424 bytes), no journal section,
// an interleave outside 3..31 (with a metadata device: not 0), the inline
// flag (version 6 only).
Result<void> check_superblock(const Superblock& sb, bool meta_device);

// The 4096-byte superblock area (SB_SECTORS) holding `sb`, zero elsewhere,
// as the kernel writes it. The version is taken as given.
std::vector<uint8_t> encode_superblock(const Superblock& sb);

// The version the kernel stores for these flags (sb_set_version):
// 5 fix_hmac, 4 fix_padding, 3 bitmap mode or dirty_bitmap, 2 metadata
// device or recalculating, else 1.
uint8_t kernel_version(uint32_t flags, bool bitmap_mode, bool meta_device) noexcept;

// What `integritysetup dump DEVICE` prints for `sb` (cryptsetup 2.6.1,
// INTEGRITY_dump), `device` standing where it prints the device path.
std::string dump_text(const Superblock& sb, std::string_view device);

}  // namespace blkcrypt::integrity
