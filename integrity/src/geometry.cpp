// The kernel's geometry, step for step: the bit-by-bit search for the
// largest provided size that fits (get_provided_data_sectors) is kept
// rather than a closed form, so every rounding matches the kernel's.
#include <blkcrypt/integrity/geometry.hpp>

#include <algorithm>
#include <bit>
#include <climits>

namespace blkcrypt::integrity {

namespace {

constexpr uint32_t kJournalSectorData = 512 - 8;  // JOURNAL_SECTOR_DATA: a sector less its commit id
constexpr uint32_t kJournalMacPerSector = 8;
constexpr uint32_t kJournalBlockSectors = 8;
constexpr uint32_t kMetadataPaddingSectors = 8;
constexpr uint32_t kLegacyPadding = 512u << kMetadataPaddingSectors;  // 128 KiB, before fix_padding
constexpr uint32_t kFixedPadding = kMetadataPaddingSectors * 512;     // 4 KiB

int floor_log2(uint64_t v) noexcept { return v ? 63 - std::countl_zero(v) : -1; }  // __fls; fls64 - 1

// Sums and products that saturate: a result past 2^64 sectors fits no device,
// which is all the comparisons below need to see.
uint64_t sat_add(uint64_t a, uint64_t b) noexcept { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
uint64_t sat_mul(uint64_t a, uint64_t b) noexcept { return b && a > UINT64_MAX / b ? UINT64_MAX : a * b; }

// The kernel's dm_integrity_c fields that the geometry reads and writes.
struct Calc {
    uint16_t tag_size = 0;
    uint8_t log2_spb = 0;
    uint8_t log2_interleave = 0;
    uint32_t flags = 0;
    bool meta = false;
    uint64_t start = 0;
    uint64_t data_device_sectors = 0;
    uint64_t meta_device_sectors = 0;
    uint8_t log2_buffer_sectors = 0;
    uint32_t journal_sections = 0;

    uint32_t entry_size = 0, entries_per_sector = 0, section_entries = 0, section_sectors = 0;
    uint64_t journal_entries = 0, initial = 0, provided = 0;
    uint32_t metadata_run = 0;

    // calculate_journal_section_size
    void section_size() {
        entry_size = (8 + 8 * (1u << log2_spb) + tag_size + 7) / 8 * 8;
        const uint32_t space = kJournalSectorData - ((flags & kFlagJournalMac) ? kJournalMacPerSector : 0);
        entries_per_sector = space / entry_size;
        section_entries = entries_per_sector * kJournalBlockSectors;
        section_sectors = (section_entries << log2_spb) + kJournalBlockSectors;
        journal_entries = uint64_t(section_entries) * journal_sections;
    }

    // A metadata device's tag area: every block's tag, in whole buffers.
    uint64_t meta_area_sectors() const {
        const uint64_t bytes = sat_mul(provided >> log2_spb, tag_size);
        const uint64_t unit = uint64_t(512) << log2_buffer_sectors;
        return sat_mul(bytes / unit + (bytes % unit != 0), uint64_t(1) << log2_buffer_sectors);
    }

    // calculate_device_limits: false where the kernel returns -EINVAL.
    bool device_limits() {
        section_size();
        const uint64_t init = kSuperblockSectors + uint64_t(section_sectors) * journal_sections;
        if (init + kMetadataPaddingSectors >= meta_device_sectors || init > UINT_MAX) return false;
        initial = init;
        if (!meta) {
            const uint64_t padding = (flags & kFlagFixedPadding) ? kFixedPadding : kLegacyPadding;
            const uint64_t run_bytes = uint64_t(tag_size) << (log2_interleave - log2_spb);
            metadata_run = static_cast<uint32_t>((run_bytes + padding - 1) / padding * padding / 512);
            // get_area_and_offset and get_data_sector of the last provided sector
            // ((area << l2i) cannot wrap: it is at most the sector itself).
            const uint64_t last = provided - 1;
            const uint64_t area = last >> log2_interleave;
            const uint64_t offset = last & ((uint64_t(1) << log2_interleave) - 1);
            const uint64_t last_sector =
                sat_add(sat_add(area << log2_interleave, sat_mul(area + 1, metadata_run)),
                        sat_add(sat_add(initial, offset), start));
            if (last_sector < start || last_sector >= meta_device_sectors) return false;
        } else {
            if (sat_add(initial, meta_area_sectors()) > meta_device_sectors) return false;
            metadata_run = 1;
        }
        return true;
    }

    // get_provided_data_sectors
    void provided_sectors() {
        if (!meta) {
            provided = 0;
            for (int bit = floor_log2(meta_device_sectors); bit >= 3; --bit) {
                const uint64_t prev = provided;
                provided |= uint64_t(1) << bit;
                if (!device_limits()) provided = prev;
            }
        } else {
            provided = data_device_sectors & ~uint64_t((1u << log2_spb) - 1);
        }
    }

    // The bitmap granularity dm_integrity_ctr settles on: the smallest
    // power of two of at least `sectors_per_bit` (default 32768) sectors
    // whose bitmap fits in the journal's bits.
    uint8_t log2_blocks_per_bitmap_bit(int log2_sectors_per_bit) const {
        if (log2_sectors_per_bit < log2_spb) log2_sectors_per_bit = log2_spb;
        uint64_t bits = (uint64_t(section_sectors) * journal_sections) << (9 + 3);
        if (bits > UINT_MAX) bits = UINT_MAX;
        if (bits)
            while (log2_sectors_per_bit < 63 &&
                   bits < (provided + (uint64_t(1) << log2_sectors_per_bit) - 1) >> log2_sectors_per_bit)
                ++log2_sectors_per_bit;
        return static_cast<uint8_t>(log2_sectors_per_bit - log2_spb);
    }

    Geometry result() const {
        Geometry g;
        g.journal_entry_size = entry_size;
        g.journal_entries_per_sector = entries_per_sector;
        g.journal_section_entries = section_entries;
        g.journal_section_sectors = section_sectors;
        g.journal_sections = journal_sections;
        g.journal_entries = static_cast<uint32_t>(journal_entries);
        g.initial_sectors = initial;
        g.metadata_run = metadata_run;
        g.log2_buffer_sectors = log2_buffer_sectors;
        g.provided_data_sectors = provided;
        g.meta_device = meta;
        g.start = start;
        g.log2_interleave_sectors = log2_interleave;
        g.log2_sectors_per_block = log2_spb;
        g.tag_size = tag_size;
        return g;
    }
};

Error too_small() { return make_error(Status::Invalid, "dm-integrity: the device is too small"); }

Calc calc_for(const Devices& dev) {
    Calc c;
    c.meta = dev.meta_sectors.has_value();
    c.start = dev.start;
    c.data_device_sectors = dev.data_sectors;
    c.meta_device_sectors = c.meta ? *dev.meta_sectors : dev.data_sectors;
    const uint32_t buffer = dev.buffer_sectors ? dev.buffer_sectors : 1;
    c.log2_buffer_sectors = static_cast<uint8_t>(std::min(floor_log2(buffer), 31 - 9));
    return c;
}

// The open-time part of dm_integrity_ctr shared by open and format: the
// provided size, the limits (a metadata device may shrink its buffer), the
// bitmap granularity and the buffer the tags are read with.
Result<Geometry> finish(Calc& c, int log2_sectors_per_bit) {
    c.provided_sectors();
    if (c.provided == 0) return too_small();
    while (!c.device_limits()) {
        if (!c.meta || c.log2_buffer_sectors <= 3) return too_small();
        --c.log2_buffer_sectors;
    }
    // The kernel checks the tags against the metadata device without the
    // table's start offset, which shifts them (cryptsetup always gives 0
    // there); past the end it would fail with I/O errors. Refused here.
    if (c.meta) {
        if (sat_add(sat_add(c.start, c.initial), c.meta_area_sectors()) > c.meta_device_sectors)
            return make_error(Status::Invalid, "dm-integrity: the metadata device is too small for the tags after "
                                               "the start offset");
    }
    Geometry g = c.result();
    g.log2_blocks_per_bitmap_bit = c.log2_blocks_per_bitmap_bit(log2_sectors_per_bit);
    if (!c.meta)
        g.log2_buffer_sectors = static_cast<uint8_t>(
            std::min<int>(c.log2_buffer_sectors, std::countr_zero(c.metadata_run)));
    return g;
}

}  // namespace

uint64_t Geometry::data_offset(uint64_t sector) const noexcept {
    if (meta_device) return sector * kSectorSize;
    const uint64_t area = sector >> log2_interleave_sectors;
    const uint64_t offset = sector & ((uint64_t(1) << log2_interleave_sectors) - 1);
    const uint64_t s = (area << log2_interleave_sectors) + (area + 1) * metadata_run + initial_sectors + offset + start;
    return s * kSectorSize;
}

uint64_t Geometry::tag_offset(uint64_t sector) const noexcept {
    uint64_t area = 0, offset = sector;
    if (!meta_device) {
        area = sector >> log2_interleave_sectors;
        offset = sector & ((uint64_t(1) << log2_interleave_sectors) - 1);
    }
    // In buffers of 2^log2_buffer_sectors sectors, as the kernel counts
    // (its shift truncates an area start that is not buffer-aligned).
    const uint64_t block_bytes = (offset >> log2_sectors_per_block) * tag_size;
    uint64_t buffer = ((area << log2_interleave_sectors) + area * metadata_run) >> log2_buffer_sectors;
    buffer += block_bytes >> (9 + log2_buffer_sectors);
    const uint64_t within = block_bytes & ((uint64_t(512) << log2_buffer_sectors) - 1);
    return (start + initial_sectors) * kSectorSize + (buffer << (9 + log2_buffer_sectors)) + within;
}

Result<Geometry> open_geometry(const Superblock& sb, const Devices& dev) {
    if (auto ok = check_superblock(sb, dev.meta_sectors.has_value()); !ok) return ok.error();
    Calc c = calc_for(dev);
    c.tag_size = sb.tag_size;
    c.log2_spb = sb.log2_sectors_per_block;
    c.log2_interleave = static_cast<uint8_t>(sb.log2_interleave_sectors);
    c.flags = sb.flags;
    c.journal_sections = sb.journal_sections;
    return finish(c, floor_log2(kDefaultSectorsPerBitmapBit));
}

Result<Superblock> format_superblock(const FormatParams& p, const Devices& dev) {
    if (p.sector_size < 512 || p.sector_size > 4096 || !std::has_single_bit(p.sector_size))
        return make_error(Status::Invalid, "dm-integrity: invalid block size " + std::to_string(p.sector_size));
    if (p.tag_size == 0 || p.tag_size > 424)
        return make_error(Status::Invalid, "dm-integrity: invalid tag size " + std::to_string(p.tag_size));
    if (p.mode != 'J' && p.mode != 'B' && p.mode != 'D')
        return make_error(Status::Invalid, std::string("dm-integrity: invalid mode ") + p.mode);
    if (p.mode == 'B' && !p.internal_hash)
        return make_error(Status::Invalid, "dm-integrity: bitmap mode needs an internal hash");

    Calc c = calc_for(dev);
    Superblock sb;
    c.tag_size = p.tag_size;
    c.log2_spb = static_cast<uint8_t>(std::countr_zero(p.sector_size / 512));
    if (p.journal_mac) c.flags |= kFlagJournalMac;
    c.section_size();
    const uint64_t journal_sectors =
        p.journal_sectors ? p.journal_sectors : std::min<uint64_t>(kDefaultMaxJournalSectors, dev.data_sectors >> 7);
    uint32_t sections = static_cast<uint32_t>(journal_sectors / c.section_sectors);
    if (sections == 0) sections = 1;
    if (p.fix_hmac && (p.internal_hash || p.journal_mac)) {
        c.flags |= kFlagFixedHmac;
        sb.salt = p.salt;
    }
    if (!c.meta) {
        if (p.fix_padding) c.flags |= kFlagFixedPadding;
        c.journal_sections = sections;
        const uint32_t interleave = p.interleave_sectors ? p.interleave_sectors : kDefaultInterleaveSectors;
        c.log2_interleave = static_cast<uint8_t>(std::clamp(floor_log2(interleave), 3, 31));
        c.provided_sectors();
        if (c.provided == 0) return too_small();
    } else {
        c.log2_interleave = 0;
        c.provided_sectors();
        if (c.provided == 0) return too_small();
        for (;;) {
            c.journal_sections = 0;
            for (int bit = floor_log2(sections); bit >= 0; --bit) {
                const uint32_t prev = c.journal_sections;
                const uint32_t test = prev | (1u << bit);
                if (test > sections) continue;
                c.journal_sections = test;
                if (!c.device_limits()) c.journal_sections = prev;
            }
            if (c.journal_sections) break;
            if (c.log2_buffer_sectors <= 3) return too_small();
            --c.log2_buffer_sectors;
        }
    }
    sb.tag_size = p.tag_size;
    sb.log2_sectors_per_block = c.log2_spb;
    sb.log2_interleave_sectors = static_cast<int8_t>(c.log2_interleave);
    sb.journal_sections = c.journal_sections;
    sb.flags = c.flags;
    sb.provided_data_sectors = c.provided;
    sb.version = kernel_version(c.flags, p.mode == 'B', c.meta);

    // The constructor goes on to open what it wrote, and stores the bitmap
    // granularity it chose in the new superblock.
    const int log2_spbb = p.sectors_per_bit ? floor_log2(p.sectors_per_bit) : floor_log2(kDefaultSectorsPerBitmapBit);
    auto g = finish(c, log2_spbb);
    if (!g) return g.error();
    sb.log2_blocks_per_bitmap_bit = g->log2_blocks_per_bitmap_bit;
    return sb;
}

}  // namespace blkcrypt::integrity
