// The dm-integrity target on image files: the kernel's table arguments, its
// superblock and geometry, data and tags read and written where the kernel
// keeps them (drivers/md/dm-integrity.c), and with an internal hash the tag
// check of every block the kernel's read path makes.
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/integrity/geometry.hpp>
#include <blkcrypt/integrity/journal.hpp>
#include <blkcrypt/integrity/superblock.hpp>
#include <blkcrypt/integrity/tag_hash.hpp>
#include <blkcrypt/integrity/tagged_device.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace blkcrypt::integrity {

// The table's arguments (dm_integrity_ctr) that matter to an open image.
struct OpenOptions {
    uint64_t start = 0;           // <offset>, in 512-byte sectors: where the superblock is
    uint16_t tag_size = 0;        // <tag_size>: must match the superblock's (0: take it)
    uint32_t block_size = 0;      // block_size: must match the superblock's (0: take it)
    char mode = 'J';              // J journal, D direct, B bitmap, R recovery (read-only, no checks)
    std::string internal_hash;    // internal_hash:, kernel form ("crc32c", "hmac(sha256)");
                                  // empty: the tags come from the target above (dm-crypt)
    SecureBuffer internal_hash_key;
    std::string journal_mac;      // journal_mac:, kernel form ("hmac(sha256)"); required by images made with one
    SecureBuffer journal_mac_key;
    std::string journal_crypt;    // journal_crypt:, kernel form ("ctr(aes)", "chacha20", "cbc(aes)"); the
    SecureBuffer journal_crypt_key;  // journal is encrypted with it (journal_crypt.hpp); not B mode
    bool allow_discards = false;  // an all-0xF6 tag (a discarded block) reads unchecked
    bool read_only = false;       // the table is loaded read-only
    uint32_t buffer_sectors = kDefaultBufferSectors;
    uint32_t journal_sectors = 0;      // journal_sectors: (0: not given); only used to format
    uint32_t journal_watermark = 50;   // journal_watermark: percent
    uint32_t commit_time = 10000;      // commit_time: milliseconds between commits of waiting writes (J mode; 0: none)
    uint64_t sectors_per_bit = 0;      // sectors_per_bit: (B mode; 0: the superblock's)
    uint32_t bitmap_flush_interval = 10000;  // milliseconds (B mode)
    bool recalculate = false;          // recalculate: blocks from recalc_sector (0 when the flag was
                                       // not set) on read unchecked; the tags are not recomputed here
};

class IntegrityTarget final : public TaggedDevice {
public:
    // Reads and checks the superblock at `start` (on `meta` when given, the
    // metadata device, else on `dev`) and computes the kernel's geometry.
    // NotFound when the area holds no superblock ("not initialized": an
    // all-zero area is formatted by `integrity format`, not here); Corrupt
    // for a superblock the kernel refuses; Invalid for bad options (a mode
    // other than J/D/B/R, an internal hash on an image made without one or
    // the reverse is accepted, as the kernel does, but its tags then fail).
    static Result<std::shared_ptr<IntegrityTarget>> open(Registry& reg, std::shared_ptr<BackingStore> dev,
                                                         std::shared_ptr<BackingStore> meta,
                                                         const OpenOptions& opts);
    ~IntegrityTarget() override;

    const Superblock& superblock() const noexcept { return sb_; }
    const Geometry& geometry() const noexcept { return geo_; }
    char mode() const noexcept { return mode_; }
    // The internal hash, or nullptr when the tags come from above.
    const TagHash* tag_hash() const noexcept { return hash_ ? &*hash_ : nullptr; }

    // TaggedDevice: data and the raw stored tags, unchecked.
    uint64_t size() const override { return geo_.provided_data_sectors * kSectorSize; }
    uint32_t block_size() const override { return sb_.sector_size(); }
    uint32_t tag_size() const override { return sb_.tag_size; }
    bool read_only() const override { return read_only_; }
    Result<void> read(uint64_t offset, Bytes data, Bytes tags) override;
    Result<void> write(uint64_t offset, ConstBytes data, ConstBytes tags) override;
    Result<void> flush() override;
    std::string describe() const override;
    // Read-only opens over a mapped data device, no journal to show: a run
    // inside one interleave area is the mapping itself (its tags read).
    ConstBytes read_view(uint64_t offset, std::size_t len, Bytes tags) override;
    void release_view(uint64_t offset, std::size_t len) noexcept override;

    // With an internal hash: whole blocks at `offset`, each checked against
    // its tag as the kernel checks it. A mismatch is Corrupt, its message
    // naming the sector the kernel's "Checksum failed at sector 0x…" names.
    // Mode R reads unchecked; with the recalculating flag, blocks at or past
    // recalc_sector are unchecked; with allow_discards an all-0xF6 tag is
    // accepted. Invalid without an internal hash.
    Result<void> read_checked(uint64_t offset, Bytes data);
    // With an internal hash: writes whole blocks with their computed tags.
    Result<void> write_hashed(uint64_t offset, ConstBytes data);

    // With allow_discards and an internal hash: whole blocks discarded as
    // the kernel discards them. In J mode the journal is committed and
    // written back first (the kernel does it before a discard over
    // journaled blocks); in B mode the bitmap is marked first; each tag
    // becomes the discard filler (all 0xF6), then the data is punched out
    // (the data before the tags in D mode, as the kernel submits it). A
    // data store that cannot punch keeps the old bytes, which then read
    // unchecked. Unsupported without allow_discards or an internal hash.
    Result<void> discard(uint64_t offset, uint64_t len);
    bool allow_discards() const noexcept { return allow_discards_ && hash_.has_value(); }

    // Leaves the image as the kernel leaves it at a clean close (B mode:
    // the dirty-bitmap flag cleared). Called by the destructor too;
    // explicit calls report errors.
    Result<void> close();

private:
    Result<void> flush_stores();
    IntegrityTarget() = default;

    // Where every write ends up: data then tags straight to their places,
    // as mode D writes them. write() routes through here in every mode
    // today; J mode leaves the journal clean (an image the kernel replays
    // nothing from). The journal (journal.cpp) hooks in at write(): it takes
    // J-mode writes and calls write_direct when it writes sections back.
    Result<void> write_direct(uint64_t offset, ConstBytes data, ConstBytes tags);
    Result<void> read_raw(uint64_t offset, Bytes data, Bytes tags);
    std::string resized_note() const;
    // B mode: the dirty flag and the bits of [offset, offset+len) on disk
    // before the write (io_mu_ held).
    Result<void> mark_bitmap(uint64_t offset, uint64_t len);
    Result<void> write_superblock(const Superblock& sb);
    Result<void> load_bitmap();
    uint64_t bitmap_bytes() const;
    uint64_t bitmap_offset() const;
    bool bit_set(const std::vector<uint8_t>& bm, uint64_t sector) const;
    Result<void> check_range(uint64_t offset, std::size_t len, const char* what) const;

    std::shared_ptr<BackingStore> dev_, meta_;
    BackingStore* tags_store_ = nullptr;  // meta_ when given, else dev_
    Superblock sb_;
    Geometry geo_;
    std::optional<TagHash> hash_;
    char mode_ = 'J';
    bool read_only_ = false;
    bool allow_discards_ = false;
    std::string name_;
    // Reads share it, writes take it alone: a read overlapping a write sees
    // each block with its matching tag.
    mutable std::shared_mutex io_mu_;

    std::optional<uint64_t> recalc_from_;  // blocks from here on read unchecked
    // B mode. bitmap_: what is on disk; pending_: the regions flagged at open
    // (a crash left them for the kernel to recalculate: read unchecked).
    bool bitmap_dirty_ = false;  // the superblock on disk has DIRTY_BITMAP
    std::vector<uint8_t> bitmap_, pending_;
    bool wrote_ = false;
    bool closed_ = false;

    // The journal (journal.cpp). Writable opens replay it as the kernel's
    // resume does; J-mode writes then go through journal_. A read-only open
    // writes nothing: what the replay would write is read from the journal
    // instead (replayed_: the last entry for each sector).
    Result<void> open_journal();
    std::shared_ptr<JournalMac> journal_mac_;
    std::shared_ptr<BackingStore> journal_store_;  // meta seen through journal_crypt: (journal_crypt.hpp)
    std::unique_ptr<JournalWriter> journal_;
    // J mode, writable: the kernel's autocommit timer (commit_time:), a
    // thread committing the waiting writes every commit_time ms, so a crash
    // loses at most that much of what was written without a flush.
    void start_committer(uint32_t ms);
    void stop_committer();
    std::thread committer_;
    std::mutex commit_mu_;
    std::condition_variable commit_cv_;
    bool stop_commit_ = false;
    std::optional<Journal> replayed_journal_;
    std::unordered_map<uint64_t, std::size_t> replayed_;
};

}  // namespace blkcrypt::integrity
