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
#include <blkcrypt/integrity/tag_hash.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/status.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

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

// The journal MAC (journal_mac:ALG[:KEY], integritysetup --journal-integrity):
// a keyed or plain hash of each section's entry sectors (section_mac), 64
// bytes of it spread over bytes 496..503 of the section's 8 metadata
// sectors; with fix_hmac the salt and the section number go first, and the
// superblock carries a MAC of its first 512 - digest bytes (sb_mac).
class JournalMac {
public:
    // alg in the kernel's form ("hmac(sha256)", "sha256"...). NotFound for
    // an unknown hash; Invalid for a keyed hash without a key.
    static Result<std::shared_ptr<JournalMac>> create(Registry& reg, std::string_view alg, ConstBytes key,
                                                       const Superblock& sb);
    virtual ~JournalMac() = default;
    // The section's MAC into its bytes `sec`, and the check of it.
    virtual Result<void> write(const Geometry& g, uint32_t section, Bytes sec) const = 0;
    virtual Result<bool> check(const Geometry& g, uint32_t section, ConstBytes sec) const = 0;
    // sb_mac: the MAC of the superblock area's first 512 - digest bytes,
    // stored after them (with fix_hmac; the kernel checks it on every load
    // except mode R).
    virtual Result<void> write_superblock(Bytes area) const = 0;
    virtual Result<bool> check_superblock(ConstBytes area) const = 0;
};

// init_journal with a journal MAC (nullptr: as above, none).
Result<void> init_journal(BackingStore& meta, const Superblock& sb, const Geometry& g, const JournalMac* mac);

// What the kernel's resume does with the journal it finds (replay_journal).
struct ReplayOptions {
    char mode = 'J';                    // J keeps a whole journal as it is; D and B re-initialise a used one
    const TagHash* tag_hash = nullptr;  // internal hash: each replayed block's tag is checked against it
    const JournalMac* mac = nullptr;    // journal_mac: each replayed section's MAC is checked
};

// Where the kernel goes on from after the replay: the section its next
// commit fills and that commit's sequence (ic->free_section, ic->commit_seq).
struct JournalPosition {
    uint32_t section = 0;
    unsigned commit_seq = 0;
};

struct ReplayResult {
    uint32_t first_section = 0;   // where the replay started (write_start)
    uint32_t sections = 0;        // sections whose commit ids were whole and in sequence
    uint64_t blocks = 0;          // journal entries copied to their place
    bool reinitialised = false;   // the journal was written clean again (clear_journal)
    JournalPosition next;         // where J-mode writes go on
};

// A journal read into memory and checked as replay_journal checks it: every
// sector's commit id must belong to one of the four sequences, the newest
// run of whole sections is found, and the used entries of those sections,
// oldest first, are the blocks the replay writes.
class Journal {
public:
    // `bytes`: the whole journal area (journal_bytes(g)), untrusted.
    // Corrupt where the kernel fails the device instead of replaying (every
    // later I/O returns EIO): a commit id of no sequence, all four
    // sequences in use, an entry's sector not a multiple of the block size,
    // a section MAC or an internal-hash tag that does not match; the
    // message names the kernel's dmesg error.
    static Result<Journal> parse(std::vector<uint8_t> bytes, const Superblock& sb, const Geometry& g,
                                 const ReplayOptions& opts);
    static Result<Journal> read(BackingStore& meta, const Superblock& sb, const Geometry& g,
                                const ReplayOptions& opts);

    // One block the replay writes: logical sector, and where its entry is.
    struct Block {
        uint64_t sector;
        uint32_t section;
        uint32_t entry;
    };
    // In replay order: a later block for the same sector wins.
    const std::vector<Block>& blocks() const noexcept { return blocks_; }
    // The block's data as the kernel copies it (its last bytes restored
    // into bytes 504..511 of each 512-byte sector), and its tag.
    void block_data(const Block& b, Bytes out) const;
    ConstBytes block_tag(const Block& b) const;

    bool empty() const noexcept { return empty_; }  // journal_empty: nothing to replay
    uint32_t first_section() const noexcept { return write_start_; }
    uint32_t whole_sections() const noexcept { return write_sections_; }
    // Whether the kernel writes the journal clean after the replay, and from
    // where J-mode writes go on.
    bool needs_reinit() const noexcept { return reinit_; }
    unsigned erase_seq() const noexcept { return erase_seq_; }
    JournalPosition next() const noexcept { return next_; }

    // The replay's writes: every block's data (on `data`) and tag (on
    // `tags`: the metadata device, or `data` without one) in order, a
    // flush, then the clean journal on `meta` where the kernel writes one.
    Result<ReplayResult> apply(BackingStore& meta, BackingStore& data, BackingStore& tags) const;

private:
    Journal() = default;
    Geometry geo_;
    std::vector<uint8_t> bytes_;
    std::vector<Block> blocks_;
    const JournalMac* mac_ = nullptr;
    bool empty_ = true, reinit_ = false;
    uint32_t write_start_ = 0, write_sections_ = 0;
    unsigned erase_seq_ = 0;
    JournalPosition next_;
};

// Reads, checks and replays the journal as the kernel does at resume
// (nothing in mode R). `tags` is the metadata device, or `data`.
Result<ReplayResult> replay_journal(BackingStore& meta, BackingStore& data, BackingStore& tags,
                                    const Superblock& sb, const Geometry& g, const ReplayOptions& opts);

// J-mode writes as the kernel makes them: each write's blocks become
// entries of the next free sections (data blocks with the commit ids in
// their last 8 bytes, the displaced bytes and the tag in the entry). A
// commit gives the sections the commit ids of the current sequence (the
// next one past the last section), writes and flushes them
// (integrity_commit, write_journal), then copies every block to its place
// with its tag and flushes (do_journal_write), and the sections are free
// again. A kill at any point leaves an image whose replay gives every block
// a version written since the last completed commit, with its tag.
// Serialised: one call at a time.
class JournalWriter {
public:
    // From `at`: where the replay left the journal (Journal::next() or
    // ReplayResult::next).
    JournalWriter(BackingStore& meta, BackingStore& data, BackingStore& tags, const Superblock& sb,
                  const Geometry& g, JournalPosition at, const JournalMac* mac = nullptr);

    // Whole blocks at byte `offset` of the target's device; tags: tag_size
    // bytes per block, in order. add() batches as the kernel does: the
    // entries wait in memory and are committed when they fill the journal
    // (or at commit(), close()); write() is add() then commit().
    Result<void> add(uint64_t offset, ConstBytes data, ConstBytes tags);
    Result<void> write(uint64_t offset, ConstBytes data, ConstBytes tags);
    // Every added block committed and written back (nothing to do when none
    // waits). After a failed commit every later call fails, as the kernel
    // fails the device on a journal I/O error.
    Result<void> commit();
    // Reads must see the newest data: the waiting blocks (the newest entry
    // of each sector) over what was read from the device at `offset`.
    Result<void> overlay(uint64_t offset, Bytes data, Bytes tags) const;
    // The kernel's clean suspend (dm_integrity_postsuspend): a commit, then,
    // once something went through the journal, every section written clean
    // again, those from the next free one in the current sequence, the ones
    // before it in the next.
    Result<void> close();
    // Where the next commit starts.
    JournalPosition position() const;

private:
    Result<void> check(uint64_t offset, ConstBytes data, ConstBytes tags) const;
    Result<void> add_locked(uint64_t offset, ConstBytes data, ConstBytes tags);
    Result<void> commit_locked();
    void pending_block(uint64_t b, Bytes data, Bytes tag) const;

    BackingStore &meta_, &data_, &tags_;
    Geometry g_;
    uint32_t block_size_ = 0;
    const JournalMac* mac_ = nullptr;
    mutable std::mutex mu_;
    JournalPosition at_;
    bool wrote_ = false;
    std::optional<Error> failed_;
    // The pending commit: its sections from at_, filled entry by entry (the
    // whole journal's room, allocated once and never zero-filled: each
    // section is cleaned as it is started); each entry's logical sector; the
    // newest entry of each sector.
    std::unique_ptr<uint8_t[]> buf_;
    uint64_t pending_ = 0;
    std::vector<uint64_t> pending_sectors_;
    std::unordered_map<uint64_t, uint64_t> newest_;
};

}  // namespace blkcrypt::integrity
