// Section-level helpers shared by the journal's writer, parser and replay.
#pragma once

#include <blkcrypt/integrity/journal.hpp>

#include <cstddef>
#include <cstdint>

namespace blkcrypt::integrity {

namespace detail {

void put_le64(uint8_t* p, uint64_t v) noexcept;
uint64_t get_le64(const uint8_t* p) noexcept;

// Entry n's bytes within its section, and its data block's.
std::size_t entry_offset(const Geometry& g, uint32_t n) noexcept;
std::size_t data_offset_in_section(const Geometry& g, uint32_t n) noexcept;

// journal_entry_set_unused / _is_unused: the sector's high half all ones.
inline void set_unused(uint8_t* entry) noexcept { entry[4] = entry[5] = entry[6] = entry[7] = 0xFF; }
inline bool is_unused(const uint8_t* entry) noexcept {
    return entry[4] == 0xFF && entry[5] == 0xFF && entry[6] == 0xFF && entry[7] == 0xFF;
}

// A section as init_journal leaves it: zeros, every entry unused, the
// commit ids of `seq`.
void clean_section(const Geometry& g, uint32_t section, unsigned seq, Bytes out) noexcept;
// clean_section for a section whose data blocks the caller fills or clears
// (fill_unused_blocks) itself: only the metadata sectors and any sectors
// past the last block are zeroed, the commit ids go everywhere.
void clean_section_meta(const Geometry& g, uint32_t section, unsigned seq, Bytes out) noexcept;
// The data blocks of entries [from, entries) of a section as clean_section
// leaves them: zeros before each sector's commit id.
void clear_blocks(const Geometry& g, uint32_t from, Bytes out) noexcept;
// The commit ids of `seq` into every sector of a section.
void set_commit_ids(const Geometry& g, uint32_t section, unsigned seq, Bytes out) noexcept;

// init_journal(ic, first, count, seq): `count` clean sections from `first`
// (wrapping), with their MAC when `mac` is given.
Result<void> write_clean(BackingStore& meta, const Geometry& g, uint32_t first, uint32_t count, unsigned seq,
                         const JournalMac* mac);

// Writes `in` at `off`, merging writes that continue the previous one into
// one (up to a cap): replay and write-back issue many small adjacent writes.
class RunWriter {
public:
    explicit RunWriter(BackingStore& s, const char* what) : s_(s), what_(what) {}
    Result<void> put(uint64_t off, ConstBytes in);
    Result<void> finish();

private:
    BackingStore& s_;
    const char* what_;
    uint64_t start_ = 0;
    std::vector<uint8_t> buf_;
};

Result<void> store_error(Status st, const char* what, uint64_t off);

}  // namespace detail

}  // namespace blkcrypt::integrity
