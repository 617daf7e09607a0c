// The dm-integrity journal, byte for byte as the kernel keeps it
// (drivers/md/dm-integrity.c: create_journal, init_journal,
// dm_integrity_commit_id, integrity_commit, write_journal, do_journal_write,
// replay_journal, section_mac).
//
// Layout: right after the superblock (sector start + 8 of the metadata
// device, or of the data device without one) lie journal_sections sections
// of journal_section_sectors sectors. A section is 8 metadata sectors, then
// one data block per entry. Every 512-byte journal sector ends in an 8-byte
// commit id: C[seq] ^ (section << 32 ^ sector-in-section), C = 0x11..11,
// 0x22..22, 0x33..33, 0x44..44. Entry n of a section sits in metadata sector
// n % 8 at byte (n / 8) * entry_size: le64 logical sector (high half
// 0xFFFFFFFF: unused), one 8-byte "last bytes" per 512-byte sector of the
// block (the bytes the commit id displaced in the data sector), the tag.
// With a journal MAC, bytes 496..503 of the 8 metadata sectors hold 64
// bytes of the section's MAC.
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/bytes.hpp>
#include <blkcrypt/integrity/geometry.hpp>
#include <blkcrypt/integrity/superblock.hpp>
#include <blkcrypt/status.hpp>

#include <cstdint>

namespace blkcrypt::integrity {

inline constexpr unsigned kCommitSeqs = 4;                 // N_COMMIT_IDS
inline constexpr uint32_t kJournalBlockSectors = 8;         // metadata sectors of a section
inline constexpr uint32_t kJournalSectorData = 504;         // a journal sector less its commit id
inline constexpr uint32_t kJournalMacPerSector = 8;
inline constexpr uint32_t kJournalMacSize = kJournalMacPerSector * kJournalBlockSectors;  // 64

// The commit id stored (le64) at bytes 504..511 of sector `sector` of
// section `section`, in commit sequence `seq` (0..3).
uint64_t commit_id(uint32_t section, uint32_t sector, unsigned seq) noexcept;

// Byte offset of the journal on the device holding the superblock, and its
// length.
uint64_t journal_offset(const Geometry& g) noexcept;
uint64_t journal_bytes(const Geometry& g) noexcept;

// Writes a clean journal, all of it in commit sequence 0: what the kernel
// writes when it formats (init_journal(ic, 0, journal_sections, 0) in
// dm_integrity_ctr). `meta` is the device holding the superblock. Refuses
// (Unsupported) a superblock with a journal MAC: that needs its key (see
// init_journal with a JournalMac).
Result<void> init_journal(BackingStore& meta, const Superblock& sb, const Geometry& g);

}  // namespace blkcrypt::integrity
