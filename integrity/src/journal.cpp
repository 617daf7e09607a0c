// The journal's on-disk form and the clean journal the kernel writes at
// format (init_journal). Replay and the J-mode writer build on the section
// helpers here.
#include <blkcrypt/integrity/journal.hpp>

#include "journal_internal.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace blkcrypt::integrity {

namespace {

constexpr uint64_t kCommitBase[kCommitSeqs] = {0x1111111111111111ull, 0x2222222222222222ull,
                                               0x3333333333333333ull, 0x4444444444444444ull};

}  // namespace

uint64_t commit_id(uint32_t section, uint32_t sector, unsigned seq) noexcept {
    return kCommitBase[seq % kCommitSeqs] ^ ((uint64_t(section) << 32) ^ sector);
}

uint64_t journal_offset(const Geometry& g) noexcept { return (g.start + kSuperblockSectors) * kSectorSize; }

uint64_t journal_bytes(const Geometry& g) noexcept {
    return uint64_t(g.journal_sections) * g.journal_section_sectors * kSectorSize;
}

namespace detail {

void put_le64(uint8_t* p, uint64_t v) noexcept {
    for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}

uint64_t get_le64(const uint8_t* p) noexcept {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

std::size_t entry_offset(const Geometry& g, uint32_t n) noexcept {
    return std::size_t(n % kJournalBlockSectors) * kSectorSize + std::size_t(n / kJournalBlockSectors) * g.journal_entry_size;
}

std::size_t data_offset_in_section(const Geometry& g, uint32_t n) noexcept {
    return (std::size_t(kJournalBlockSectors) + (std::size_t(n) << g.log2_sectors_per_block)) * kSectorSize;
}

void clean_section(const Geometry& g, uint32_t section, unsigned seq, Bytes out) noexcept {
    std::fill(out.begin(), out.end(), uint8_t(0));
    for (uint32_t j = 0; j < g.journal_section_sectors; ++j)
        put_le64(out.data() + std::size_t(j) * kSectorSize + kJournalSectorData, commit_id(section, j, seq));
    for (uint32_t n = 0; n < g.journal_section_entries; ++n) set_unused(out.data() + entry_offset(g, n));
}

void set_commit_ids(const Geometry& g, uint32_t section, unsigned seq, Bytes out) noexcept {
    for (uint32_t j = 0; j < g.journal_section_sectors; ++j)
        put_le64(out.data() + std::size_t(j) * kSectorSize + kJournalSectorData, commit_id(section, j, seq));
}

}  // namespace detail

Result<void> init_journal(BackingStore& meta, const Superblock& sb, const Geometry& g) {
    if (sb.has(kFlagJournalMac))
        return make_error(Status::Unsupported, "the journal has a MAC (journal_mac): its key is needed to write it");
    return detail::write_clean(meta, g, 0, g.journal_sections, 0, nullptr);
}

namespace detail {

Result<void> write_clean(BackingStore& meta, const Geometry& g, uint32_t first, uint32_t count, unsigned seq,
                         const SectionMac* mac) {
    if (g.journal_sections == 0 || g.journal_section_sectors == 0)
        return make_error(Status::Invalid, "the geometry has no journal");
    const std::size_t section_bytes = std::size_t(g.journal_section_sectors) * kSectorSize;
    // Whole sections per write, about 1 MiB at a time.
    const uint32_t per_write = std::max<uint32_t>(1, uint32_t((1u << 20) / section_bytes));
    std::vector<uint8_t> buf;
    uint32_t done = 0;
    while (done < count) {
        uint32_t s = (first + done) % g.journal_sections;
        // A run never wraps past the last section: the next write starts at 0.
        const uint32_t n = std::min({per_write, count - done, g.journal_sections - s});
        buf.resize(std::size_t(n) * section_bytes);
        for (uint32_t k = 0; k < n; ++k) {
            Bytes sec(buf.data() + std::size_t(k) * section_bytes, section_bytes);
            clean_section(g, s + k, seq, sec);
            if (mac) {
                if (auto r = mac->write(g, s + k, sec); !r) return r;
            }
        }
        const uint64_t off = journal_offset(g) + uint64_t(s) * section_bytes;
        if (const Status st = meta.write(off, buf); st != Status::Ok)
            return make_error(st, "writing the journal at byte " + std::to_string(off) + ": " + to_string(st));
        done += n;
    }
    return {};
}

}  // namespace detail

}  // namespace blkcrypt::integrity
