// Where dm-integrity keeps what: the journal, the interleaved tag and data
// areas, and how many sectors it provides, computed exactly as the kernel
// does (drivers/md/dm-integrity.c: calculate_journal_section_size,
// calculate_device_limits, get_provided_data_sectors, initialize_superblock,
// and the bitmap sizing in dm_integrity_ctr). All sizes in 512-byte sectors.
#pragma once

#include <blkcrypt/integrity/superblock.hpp>

#include <cstdint>
#include <optional>

namespace blkcrypt::integrity {

inline constexpr uint32_t kDefaultInterleaveSectors = 32768;
inline constexpr uint32_t kDefaultBufferSectors = 128;
inline constexpr uint32_t kDefaultMaxJournalSectors = 131072;  // 64-bit kernels
inline constexpr uint32_t kDefaultSectorsPerBitmapBit = 32768;

// The devices under the target: the table's device and offset, and the
// metadata device (meta_device:) when tags and journal live apart.
struct Devices {
    uint64_t data_sectors = 0;                 // the whole table device
    uint64_t start = 0;                        // the table's offset argument
    std::optional<uint64_t> meta_sectors;      // the whole metadata device
    uint32_t buffer_sectors = kDefaultBufferSectors;  // buffer_sectors: (only sizes a metadata device's area)
};

// The layout the kernel derives from a superblock and the devices.
struct Geometry {
    uint32_t journal_entry_size = 0;        // bytes
    uint32_t journal_entries_per_sector = 0;
    uint32_t journal_section_entries = 0;
    uint32_t journal_section_sectors = 0;
    uint32_t journal_sections = 0;
    uint32_t journal_entries = 0;
    uint64_t initial_sectors = 0;           // superblock + journal
    uint32_t metadata_run = 0;              // tag sectors before each interleave area
    uint8_t log2_buffer_sectors = 0;
    uint64_t provided_data_sectors = 0;     // what the kernel exposes: the mapping's size
    uint8_t log2_blocks_per_bitmap_bit = 0; // as the kernel computes it at open

    bool meta_device = false;
    uint64_t start = 0;
    uint8_t log2_interleave_sectors = 0;
    uint8_t log2_sectors_per_block = 0;
    uint16_t tag_size = 0;

    // Byte offset of logical sector `sector` (a multiple of the block size,
    // below provided_data_sectors) on the data device (get_data_sector).
    uint64_t data_offset(uint64_t sector) const noexcept;
    // Byte offset of its tag on the metadata device (the data device when
    // there is none; get_metadata_sector_and_offset).
    uint64_t tag_offset(uint64_t sector) const noexcept;
};

// What the kernel computes when it opens `sb` on `dev` (dm_integrity_ctr):
// provided_data_sectors comes from the device sizes, not from the
// superblock. Corrupt when check_superblock refuses `sb`; Invalid ("the
// device is too small") when the kernel would refuse the devices, and when
// a metadata device with a start offset cannot hold the tags after it
// (the kernel accepts that and fails with I/O errors at the end).
Result<Geometry> open_geometry(const Superblock& sb, const Devices& dev);

// The table arguments the kernel formats with (initialize_superblock).
struct FormatParams {
    uint16_t tag_size = 4;
    uint32_t sector_size = 512;          // block_size: 512..4096, a power of two
    uint32_t journal_sectors = 0;        // 0: min(131072, data device >> 7)
    uint32_t interleave_sectors = kDefaultInterleaveSectors;
    uint64_t sectors_per_bit = 0;        // sectors_per_bit: (0: 32768)
    char mode = 'J';                     // J, B or D (B raises the version to 3)
    bool fix_padding = true;             // cryptsetup adds fix_padding and fix_hmac
    bool fix_hmac = true;
    bool internal_hash = true;           // internal_hash: is set (standalone integritysetup; not under dm-crypt)
    bool journal_mac = false;
    std::array<uint8_t, kSaltSize> salt{};  // the kernel draws it at random; stored with fix_hmac (when a hash or MAC is set)
};

// The superblock the kernel writes when it formats an all-zero area
// (initialize_superblock, then the bitmap sizing of dm_integrity_ctr), with
// the geometry it then opens. Invalid for bad parameters or devices too small.
Result<Superblock> format_superblock(const FormatParams& p, const Devices& dev);

}  // namespace blkcrypt::integrity
