// The dm-integrity target over BackingStores. Reads and writes are split at
// interleave-area boundaries: inside an area the blocks' data is one run and
// their tags another (the kernel packs tags), so a run of blocks costs one
// read of data and one of tags, whatever its length.
#include <blkcrypt/integrity/device.hpp>
#include <blkcrypt/integrity/journal_crypt.hpp>

#include <blkcrypt/internal/bytes_util.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <climits>
#include <cstring>
#include <mutex>

namespace blkcrypt::integrity {

namespace {

constexpr uint8_t kDiscardFiller = 0xf6;       // DISCARD_FILLER: the tag of a discarded block
constexpr uint32_t kBitmapBlockBytes = 4096;   // BITMAP_BLOCK_SIZE

int floor_log2(uint64_t v) noexcept { return v ? 63 - std::countl_zero(v) : -1; }

std::string hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

// The bitmap granularity dm_integrity_ctr picks for `sectors_per_bit`
// (as geometry.cpp computes it for the default).
uint8_t log2_blocks_per_bit(const Geometry& g, uint64_t sectors_per_bit) {
    int l2 = floor_log2(sectors_per_bit);
    if (l2 < g.log2_sectors_per_block) l2 = g.log2_sectors_per_block;
    uint64_t bits = (uint64_t(g.journal_section_sectors) * g.journal_sections) << (9 + 3);
    if (bits > UINT_MAX) bits = UINT_MAX;
    if (bits)
        while (l2 < 63 && bits < (g.provided_data_sectors + (uint64_t(1) << l2) - 1) >> l2) ++l2;
    return static_cast<uint8_t>(l2 - g.log2_sectors_per_block);
}

// Per-thread scratch for tags, reused across calls (no allocation per I/O
// once warm).
std::vector<uint8_t>& scratch(int which, std::size_t n) {
    thread_local std::vector<uint8_t> bufs[2];
    auto& b = bufs[which];
    if (b.size() < n) b.resize(n);
    return b;
}

}  // namespace

Result<std::shared_ptr<IntegrityTarget>> IntegrityTarget::open(Registry& reg, std::shared_ptr<BackingStore> dev,
                                                               std::shared_ptr<BackingStore> meta,
                                                               const OpenOptions& o) {
    if (!dev) return make_error(Status::Invalid, "dm-integrity: no device");
    if (o.mode != 'J' && o.mode != 'D' && o.mode != 'B' && o.mode != 'R')
        return make_error(Status::Invalid, std::string("dm-integrity: invalid mode '") + o.mode + "' (J, D, B or R)");
    if (o.mode == 'B' && o.internal_hash.empty())
        return make_error(Status::Invalid, "dm-integrity: bitmap mode can be only used with an internal hash");
    if (o.allow_discards && o.internal_hash.empty())
        return make_error(Status::Invalid, "dm-integrity: allow_discards can be only used with an internal hash");

    std::shared_ptr<IntegrityTarget> t(new IntegrityTarget());
    t->dev_ = std::move(dev);
    t->meta_ = std::move(meta);
    BackingStore& sbs = t->meta_ ? *t->meta_ : *t->dev_;
    t->tags_store_ = &sbs;
    t->name_ = t->dev_->name().empty() ? "memory" : t->dev_->name();

    const uint64_t sb_at = o.start * kSectorSize;
    if (o.start > UINT64_MAX / kSectorSize || sb_at + kSuperblockSectors * kSectorSize > sbs.size())
        return make_error(Status::Invalid, "dm-integrity: the device is too small for a superblock at sector " +
                                               std::to_string(o.start));
    std::vector<uint8_t> area(kSuperblockSectors * kSectorSize);
    if (Status s = sbs.read(sb_at, area); s != Status::Ok)
        return make_error(s, "dm-integrity: cannot read the superblock of " + sbs.name());
    if (!has_magic(area)) {
        const bool zero = std::all_of(area.begin(), area.end(), [](uint8_t b) { return b == 0; });
        return make_error(Status::NotFound, zero ? "dm-integrity: the device is not initialized (its superblock "
                                                   "area is zero; format it first)"
                                                 : "dm-integrity: no superblock (the device is not initialized)");
    }
    auto sb = decode_superblock(area);
    if (!sb) return sb.error();
    t->sb_ = *sb;
    // The journal MAC: the kernel refuses a table whose journal_mac: does
    // not match the flag ("Journal mac mismatch"), and with fix_hmac checks
    // the superblock's MAC on every load but in mode R.
    if (t->sb_.has(kFlagJournalMac) != !o.journal_mac.empty())
        return make_error(Status::Invalid, t->sb_.has(kFlagJournalMac)
                                               ? "dm-integrity: the image has a journal MAC: give its algorithm and key "
                                                 "(journal_mac:, --journal-integrity) (\"Journal mac mismatch\")"
                                               : "dm-integrity: the image has no journal MAC (\"Journal mac mismatch\")");
    if (!o.journal_mac.empty()) {
        auto m = JournalMac::create(reg, o.journal_mac, o.journal_mac_key, t->sb_);
        if (!m) return make_error(m.status(), "dm-integrity: " + m.error().message);
        t->journal_mac_ = *m;
        if (o.mode != 'R' && t->sb_.has(kFlagFixedHmac)) {
            auto ok = t->journal_mac_->check_superblock(area);
            if (!ok) return make_error(ok.status(), "dm-integrity: " + ok.error().message);
            if (!*ok) return make_error(Status::Corrupt, "dm-integrity: the superblock's MAC does not match (the kernel: "
                                                         "\"Error reading superblock\", superblock mac)");
        }
    }
    if (o.tag_size && o.tag_size != t->sb_.tag_size)
        return make_error(Status::Invalid, "dm-integrity: tag size " + std::to_string(o.tag_size) +
                                               " doesn't match the superblock's (" +
                                               std::to_string(t->sb_.tag_size) + ")");
    if (o.block_size && o.block_size != t->sb_.sector_size())
        return make_error(Status::Invalid, "dm-integrity: block size " + std::to_string(o.block_size) +
                                               " doesn't match the superblock's (" +
                                               std::to_string(t->sb_.sector_size()) + ")");

    Devices d;
    d.data_sectors = t->dev_->size() / kSectorSize;
    d.start = o.start;
    if (t->meta_) d.meta_sectors = t->meta_->size() / kSectorSize;
    d.buffer_sectors = o.buffer_sectors;
    auto g = open_geometry(t->sb_, d);
    if (!g) return g.error();
    t->geo_ = *g;
    if (o.sectors_per_bit) t->geo_.log2_blocks_per_bitmap_bit = log2_blocks_per_bit(t->geo_, o.sectors_per_bit);
    if (!o.journal_crypt.empty()) {
        // B mode keeps its bitmap in the journal area: not done with an
        // encrypted journal here.
        if (o.mode == 'B')
            return make_error(Status::Unsupported, "dm-integrity: journal_crypt: in bitmap mode (B) is not supported");
        auto c = JournalCrypt::create(reg, o.journal_crypt, o.journal_crypt_key, t->geo_);
        if (!c) return make_error(c.status(), "dm-integrity: " + c.error().message);
        std::shared_ptr<BackingStore> m = t->meta_ ? t->meta_ : t->dev_;
        t->journal_store_ = journal_crypt_store(std::move(m), *c, t->geo_);
    }

    if (!o.internal_hash.empty()) {
        auto h = TagHash::create(reg, o.internal_hash, o.internal_hash_key, t->sb_);
        if (!h) return make_error(h.error().status, "dm-integrity: " + h.error().message);
        t->hash_.emplace(std::move(*h));
    }
    t->mode_ = o.mode;
    t->read_only_ = o.read_only || o.mode == 'R';
    t->allow_discards_ = o.allow_discards;

    // Which blocks read unchecked: those the kernel has yet to recalculate.
    if (t->sb_.has(kFlagRecalculating)) t->recalc_from_ = t->sb_.recalc_sector;
    else if (o.recalculate && t->hash_) t->recalc_from_ = 0;

    // A dirty bitmap (B mode in use, or a crash in it): the kernel reads the
    // bitmap from the journal area at resume. In B mode the flagged regions
    // are recalculated (read unchecked until then); in the other modes any
    // flagged region, or a bitmap of another granularity, recalculates the
    // whole device.
    if (t->sb_.has(kFlagDirtyBitmap) && t->mode_ != 'R') {
        if (auto r = t->load_bitmap(); !r) return r.error();
        const bool same = t->sb_.log2_blocks_per_bitmap_bit == t->geo_.log2_blocks_per_bitmap_bit;
        const bool clear = std::all_of(t->bitmap_.begin(), t->bitmap_.end(), [](uint8_t b) { return b == 0; });
        if (t->mode_ == 'B' && same) {
            t->pending_ = t->bitmap_;
            t->bitmap_dirty_ = true;
        } else if (!clear || !same) {
            t->recalc_from_ = 0;
            if (t->mode_ == 'B') {
                std::fill(t->bitmap_.begin(), t->bitmap_.end(), uint8_t(0xff));
                t->pending_ = t->bitmap_;
                t->bitmap_dirty_ = true;
            }
        }
    }
    if (auto r = t->open_journal(); !r) return r.error();
    if (t->journal_ && o.commit_time) t->start_committer(o.commit_time);
    return t;
}

// dm_integrity_resume: the journal is replayed, except in mode R and where
// the journal area holds a dirty bitmap (B mode in use; other modes then
// recalculate, see above, and the kernel writes a clean journal).
Result<void> IntegrityTarget::open_journal() {
    if (mode_ == 'R' || sb_.has(kFlagDirtyBitmap)) return {};
    BackingStore& meta = journal_store_ ? *journal_store_ : meta_ ? *meta_ : *dev_;
    ReplayOptions ro{mode_, hash_ ? &*hash_ : nullptr, journal_mac_.get()};
    auto j = Journal::read(meta, sb_, geo_, ro);
    if (!j) return make_error(j.status(), "dm-integrity: " + name_ + ": " + j.error().message);
    if (read_only_) {
        for (std::size_t i = 0; i < j->blocks().size(); ++i) replayed_[j->blocks()[i].sector] = i;
        if (!replayed_.empty()) replayed_journal_.emplace(std::move(*j));
        return {};
    }
    auto r = j->apply(meta, *dev_, *tags_store_);
    if (!r) return make_error(r.status(), "dm-integrity: " + name_ + ": " + r.error().message);
    if (mode_ == 'J')
        journal_ = std::make_unique<JournalWriter>(meta, *dev_, *tags_store_, sb_, geo_, r->next, journal_mac_.get());
    return {};
}

void IntegrityTarget::start_committer(uint32_t ms) {
    committer_ = std::thread([this, ms] {
        std::unique_lock lk(commit_mu_);
        while (!commit_cv_.wait_for(lk, std::chrono::milliseconds(ms), [this] { return stop_commit_; })) {
            lk.unlock();
            {
                // A failed commit fails every later write and flush, which
                // report it (the kernel fails the device the same way).
                std::unique_lock io(io_mu_);
                if (!closed_) (void)journal_->commit();
            }
            lk.lock();
        }
    });
}

void IntegrityTarget::stop_committer() {
    if (!committer_.joinable()) return;
    {
        std::lock_guard lk(commit_mu_);
        stop_commit_ = true;
    }
    commit_cv_.notify_all();
    committer_.join();
}

IntegrityTarget::~IntegrityTarget() { (void)close(); }

uint64_t IntegrityTarget::bitmap_bytes() const {
    const uint64_t blocks = geo_.provided_data_sectors >> geo_.log2_sectors_per_block;
    const uint64_t bits = (blocks + (uint64_t(1) << geo_.log2_blocks_per_bitmap_bit) - 1) >>
                          geo_.log2_blocks_per_bitmap_bit;
    const uint64_t n_blocks = (bits + kBitmapBlockBytes * 8 - 1) / (kBitmapBlockBytes * 8);
    return n_blocks * kBitmapBlockBytes;
}

uint64_t IntegrityTarget::bitmap_offset() const { return (geo_.start + kSuperblockSectors) * kSectorSize; }

Result<void> IntegrityTarget::load_bitmap() {
    bitmap_.assign(bitmap_bytes(), 0);
    if (bitmap_.size() > uint64_t(geo_.journal_sections) * geo_.journal_section_sectors * kSectorSize)
        return make_error(Status::Corrupt, "dm-integrity: the bitmap does not fit in the journal");
    if (Status s = tags_store_->read(bitmap_offset(), bitmap_); s != Status::Ok)
        return make_error(s, "dm-integrity: cannot read the bitmap of " + name_);
    return {};
}

bool IntegrityTarget::bit_set(const std::vector<uint8_t>& bm, uint64_t sector) const {
    const uint64_t bit = sector >> (geo_.log2_sectors_per_block + geo_.log2_blocks_per_bitmap_bit);
    return bit / 8 < bm.size() && (bm[bit / 8] >> (bit % 8) & 1);
}

std::string IntegrityTarget::describe() const {
    std::string s = std::string("integrity ") + mode_ + " tag " + std::to_string(sb_.tag_size);
    if (hash_) s += " " + std::string(hash_->alg_name());
    s += " over " + name_;
    if (meta_) s += " (metadata " + meta_->name() + ")";
    return s;
}

Result<void> IntegrityTarget::check_range(uint64_t offset, std::size_t len, const char* what) const {
    const uint32_t bs = block_size();
    if (offset % bs || len % bs)
        return make_error(Status::Invalid, std::string("dm-integrity: ") + what + " of " + std::to_string(len) +
                                               " bytes at " + std::to_string(offset) + " is not in whole " +
                                               std::to_string(bs) + "-byte blocks");
    if (offset > size() || len > size() - offset)
        return make_error(Status::IoError, std::string("dm-integrity: ") + what + " past the end of the device (" +
                                               std::to_string(size()) + " bytes)");
    return {};
}

// Calls f(sector, byte index into the caller's buffer, bytes) for each run
// of blocks that lies inside one interleave area.
template <class F>
static Status for_each_run(const Geometry& g, uint64_t offset, std::size_t len, F&& f) {
    uint64_t sector = offset / kSectorSize;
    std::size_t done = 0;
    while (done < len) {
        std::size_t n = len - done;
        if (!g.meta_device) {
            const uint64_t area_end = ((sector >> g.log2_interleave_sectors) + 1) << g.log2_interleave_sectors;
            n = static_cast<std::size_t>(std::min<uint64_t>(n, (area_end - sector) * kSectorSize));
        }
        if (Status s = f(sector, done, n); s != Status::Ok) return s;
        done += n;
        sector += n / kSectorSize;
    }
    return Status::Ok;
}

// Why an I/O error may have happened: a file that shrank (or grew) since
// it was opened, which a device under the kernel's mapping cannot do.
std::string IntegrityTarget::resized_note() const {
    if (dev_->changed() || (meta_ && meta_->changed())) return " (the file changed size while open)";
    return {};
}

Result<void> IntegrityTarget::read_raw(uint64_t offset, Bytes data, Bytes tags) {
    const uint32_t bs = block_size(), ts = tag_size();
    Status st = for_each_run(geo_, offset, data.size(), [&](uint64_t sector, std::size_t at, std::size_t n) {
        if (Status s = dev_->read(geo_.data_offset(sector), data.subspan(at, n)); s != Status::Ok) return s;
        return tags_store_->read(geo_.tag_offset(sector), tags.subspan(at / bs * ts, n / bs * ts));
    });
    if (st != Status::Ok)
        return make_error(st, "dm-integrity: cannot read " + name_ + " at sector " + hex(offset / kSectorSize) +
                                  resized_note());
    if (journal_)  // J mode: writes not yet committed are newer than the device
        if (auto r = journal_->overlay(offset, data, tags); !r)
            return make_error(r.status(), "dm-integrity: " + name_ + ": " + r.error().message);
    if (!replayed_.empty()) {  // a read-only open over a journal to replay
        const uint64_t spb = bs / kSectorSize;
        for (std::size_t i = 0; i < data.size() / bs; ++i) {
            const auto it = replayed_.find(offset / kSectorSize + i * spb);
            if (it == replayed_.end()) continue;
            const auto& b = replayed_journal_->blocks()[it->second];
            replayed_journal_->block_data(b, data.subspan(i * bs, bs));
            const auto t = replayed_journal_->block_tag(b);
            std::copy(t.begin(), t.end(), tags.begin() + std::ptrdiff_t(i * ts));
        }
    }
    return {};
}

ConstBytes IntegrityTarget::read_view(uint64_t offset, std::size_t len, Bytes tags) {
    if (!read_only_ || journal_ || !replayed_.empty() || !len) return {};
    if (!check_range(offset, len, "a read") || tags.size() != len / block_size() * tag_size()) return {};
    const uint64_t sector = offset / kSectorSize;
    if (!geo_.meta_device && (sector >> geo_.log2_interleave_sectors) !=
                                 ((sector + len / kSectorSize - 1) >> geo_.log2_interleave_sectors))
        return {};  // two areas: two runs, read() does it
    const ConstBytes map = dev_->mapped();
    const uint64_t at = geo_.data_offset(sector);
    if (map.size() < at || map.size() - at < len) return {};
    if (tags_store_->read(geo_.tag_offset(sector), tags) != Status::Ok) return {};
    return map.subspan(static_cast<std::size_t>(at), len);
}

void IntegrityTarget::release_view(uint64_t offset, std::size_t len) noexcept {
    dev_->release_mapped(geo_.data_offset(offset / kSectorSize), len);
}

Result<void> IntegrityTarget::read(uint64_t offset, Bytes data, Bytes tags) {
    if (auto r = check_range(offset, data.size(), "a read"); !r) return r;
    if (tags.size() != data.size() / block_size() * tag_size())
        return make_error(Status::Invalid, "dm-integrity: the tag buffer does not fit the blocks");
    std::shared_lock lk(io_mu_);
    return read_raw(offset, data, tags);
}

Result<void> IntegrityTarget::read_checked(uint64_t offset, Bytes data) {
    if (!hash_) return make_error(Status::Invalid, "dm-integrity: no internal hash to check the tags with");
    if (auto r = check_range(offset, data.size(), "a read"); !r) return r;
    const uint32_t bs = block_size(), ts = tag_size();
    const std::size_t ntags = data.size() / bs * ts;
    auto& stored = scratch(0, ntags);
    auto& computed = scratch(1, ntags);
    {
        std::shared_lock lk(io_mu_);
        if (auto r = read_raw(offset, data, Bytes(stored.data(), ntags)); !r) return r;
    }
    if (mode_ == 'R') return {};
    const uint64_t first = offset / kSectorSize;
    if (Status s = hash_->compute(first, data, Bytes(computed.data(), ntags)); s != Status::Ok)
        return make_error(s, "dm-integrity: cannot compute the tags");
    // Whole tags, as dm_integrity_rw_tag(TAG_CMP) compares them: a digest
    // shorter than the tag is zero-padded on both sides.
    const std::size_t cmp = ts;
    const uint64_t spb = bs / kSectorSize;
    for (std::size_t i = 0; i < data.size() / bs; ++i) {
        const uint8_t* a = stored.data() + i * ts;
        if (std::memcmp(a, computed.data() + i * ts, cmp) == 0) continue;
        const uint64_t sector = first + i * spb;
        if (recalc_from_ && sector >= *recalc_from_) continue;
        if (!pending_.empty() && mode_ == 'B' && bit_set(pending_, sector)) continue;
        if (allow_discards_ && std::all_of(a, a + ts, [](uint8_t b) { return b == kDiscardFiller; })) continue;
        // The sector the kernel names is the block's first (recorded for
        // 512- and 4096-byte blocks: tests/golden/integrity-data/tamper.log).
        return make_error(Status::Corrupt, name_ + ": Checksum failed at sector " + hex(sector));
    }
    return {};
}

Result<void> IntegrityTarget::write(uint64_t offset, ConstBytes data, ConstBytes tags) {
    if (read_only_) return make_error(Status::Invalid, "dm-integrity: " + name_ + " is read-only");
    if (auto r = check_range(offset, data.size(), "a write"); !r) return r;
    if (tags.size() != data.size() / block_size() * tag_size())
        return make_error(Status::Invalid, "dm-integrity: the tag buffer does not fit the blocks");
    // J mode: into the journal, as the kernel writes (journal_writer.cpp);
    // committed when the journal fills, or at flush() or close().
    if (journal_) {
        std::unique_lock lk(io_mu_);
        wrote_ = true;
        if (auto r = journal_->add(offset, data, tags); !r)
            return make_error(r.status(), "dm-integrity: " + name_ + ": " + r.error().message);
        return {};
    }
    return write_direct(offset, data, tags);
}

Result<void> IntegrityTarget::write_direct(uint64_t offset, ConstBytes data, ConstBytes tags) {
    std::unique_lock lk(io_mu_);
    if (mode_ == 'B')
        if (auto r = mark_bitmap(offset, data.size()); !r) return r;
    const uint32_t bs = block_size(), ts = tag_size();
    Status st = for_each_run(geo_, offset, data.size(), [&](uint64_t sector, std::size_t at, std::size_t n) {
        if (Status s = dev_->write(geo_.data_offset(sector), data.subspan(at, n)); s != Status::Ok) return s;
        return tags_store_->write(geo_.tag_offset(sector), tags.subspan(at / bs * ts, n / bs * ts));
    });
    if (st != Status::Ok)
        return make_error(st, "dm-integrity: cannot write " + name_ + " at sector " + hex(offset / kSectorSize) +
                                  resized_note());
    wrote_ = true;
    return {};
}

Result<void> IntegrityTarget::write_hashed(uint64_t offset, ConstBytes data) {
    if (!hash_) return make_error(Status::Invalid, "dm-integrity: no internal hash to compute the tags with");
    if (auto r = check_range(offset, data.size(), "a write"); !r) return r;
    const std::size_t ntags = data.size() / block_size() * tag_size();
    auto& tags = scratch(0, ntags);
    if (Status s = hash_->compute(offset / kSectorSize, data, Bytes(tags.data(), ntags)); s != Status::Ok)
        return make_error(s, "dm-integrity: cannot compute the tags");
    return write(offset, data, ConstBytes(tags.data(), ntags));
}

// B mode, as the kernel runs it: the superblock says the bitmap in the
// journal area is live (DIRTY_BITMAP), and a region's bit is on disk before
// any write to it, so that after a crash the kernel recalculates the tags
// of exactly the regions that may be torn. Called with io_mu_ held.
Result<void> IntegrityTarget::mark_bitmap(uint64_t offset, uint64_t len) {
    if (!bitmap_dirty_) {
        bitmap_.assign(bitmap_bytes(), 0);
        Superblock sb = sb_;
        sb.flags |= kFlagDirtyBitmap;
        sb.log2_blocks_per_bitmap_bit = geo_.log2_blocks_per_bitmap_bit;
        sb.version = kernel_version(sb.flags, true, geo_.meta_device);
        if (auto r = write_superblock(sb); !r) return r;
        sb_ = sb;
        bitmap_dirty_ = true;
    }
    const int shift = geo_.log2_sectors_per_block + geo_.log2_blocks_per_bitmap_bit;
    const uint64_t first = (offset / kSectorSize) >> shift;
    const uint64_t last = ((offset + len) / kSectorSize - 1) >> shift;
    bool changed = false;
    for (uint64_t b = first; b <= last; ++b) {
        uint8_t& byte = bitmap_[b / 8];
        if (!(byte >> (b % 8) & 1)) {
            byte |= uint8_t(1u << (b % 8));
            changed = true;
        }
    }
    if (!changed) return {};
    if (Status s = tags_store_->write(bitmap_offset(), bitmap_); s != Status::Ok)
        return make_error(s, "dm-integrity: cannot write the bitmap of " + name_);
    if (Status s = tags_store_->flush(); s != Status::Ok)
        return make_error(s, "dm-integrity: cannot flush the bitmap of " + name_);
    return {};
}

Result<void> IntegrityTarget::write_superblock(const Superblock& sb) {
    auto area = encode_superblock(sb);
    if (journal_mac_ && sb.has(kFlagFixedHmac))  // sync_rw_sb: the superblock's MAC (sb_mac)
        if (auto r = journal_mac_->write_superblock(area); !r) return r;
    if (Status s = tags_store_->write(geo_.start * kSectorSize, area); s != Status::Ok)
        return make_error(s, "dm-integrity: cannot write the superblock of " + name_);
    if (Status s = tags_store_->flush(); s != Status::Ok)
        return make_error(s, "dm-integrity: cannot flush the superblock of " + name_);
    return {};
}

// A flush makes every completed write durable: in J mode the pending
// journal entries are committed (and written back) first, as the kernel
// commits on REQ_PREFLUSH.
Result<void> IntegrityTarget::discard(uint64_t offset, uint64_t len) {
    if (!allow_discards())
        return make_error(Status::Unsupported, "dm-integrity: " + name_ + " takes no discards (no allow_discards)");
    if (read_only_) return make_error(Status::Invalid, "dm-integrity: " + name_ + " is read-only");
    if (len > SIZE_MAX) return make_error(Status::Invalid, "dm-integrity: a discard too large");
    if (auto r = check_range(offset, static_cast<std::size_t>(len), "a discard"); !r) return r;
    std::unique_lock lk(io_mu_);
    wrote_ = true;
    if (journal_)
        if (auto r = journal_->commit(); !r) return make_error(r.status(), "dm-integrity: " + name_ + ": " + r.error().message);
    if (mode_ == 'B')
        if (auto r = mark_bitmap(offset, len); !r) return r;
    const uint32_t bs = block_size(), ts = tag_size();
    auto punch = [&](uint64_t sector, std::size_t n) {
        const Status s = dev_->discard(geo_.data_offset(sector), n);
        return s == Status::Unsupported ? Status::Ok : s;
    };
    std::vector<uint8_t> filler;
    Status st = for_each_run(geo_, offset, static_cast<std::size_t>(len), [&](uint64_t sector, std::size_t, std::size_t n) {
        if (mode_ == 'D')
            if (Status s = punch(sector, n); s != Status::Ok) return s;
        filler.assign(n / bs * ts, kDiscardFiller);
        return tags_store_->write(geo_.tag_offset(sector), filler);
    });
    if (st == Status::Ok && mode_ != 'D') {
        // The tags on disk before the data goes (dm_integrity_flush_buffers).
        if (Status s = tags_store_->flush(); s != Status::Ok) st = s;
        if (st == Status::Ok)
            st = for_each_run(geo_, offset, static_cast<std::size_t>(len),
                              [&](uint64_t sector, std::size_t, std::size_t n) { return punch(sector, n); });
    }
    if (st != Status::Ok)
        return make_error(st, "dm-integrity: cannot discard " + name_ + " at sector " + hex(offset / kSectorSize));
    return {};
}

Result<void> IntegrityTarget::flush() {
    if (read_only_) return {};
    if (journal_) {
        std::unique_lock lk(io_mu_);
        if (auto r = journal_->commit(); !r) return make_error(r.status(), "dm-integrity: " + name_ + ": " + r.error().message);
    }
    return flush_stores();
}

Result<void> IntegrityTarget::flush_stores() {
    if (Status s = dev_->flush(); s != Status::Ok) return make_error(s, "dm-integrity: cannot flush " + name_);
    if (meta_)
        if (Status s = meta_->flush(); s != Status::Ok)
            return make_error(s, "dm-integrity: cannot flush " + meta_->name());
    return {};
}

// The kernel's clean B-mode suspend re-initialises the journal over the
// bitmap and clears DIRTY_BITMAP; journal initialisation belongs to
// journal.cpp, so here the bitmap is cleared of the regions written in this
// session (their data and tags are on disk after the flush) and the flag
// stays: the kernel then opens it cleanly in any mode (B: an all-clear
// bitmap recalculates nothing; J/D: it re-initialises the journal).
// Regions already flagged at open keep their bits: they still need the
// kernel's recalculation.
Result<void> IntegrityTarget::close() {
    stop_committer();
    std::unique_lock lk(io_mu_);
    if (closed_) return {};
    closed_ = true;
    if (read_only_ || !wrote_) return {};
    if (journal_)  // the kernel's clean suspend: the journal written clean
        if (auto r = journal_->close(); !r) return make_error(r.status(), "dm-integrity: " + name_ + ": " + r.error().message);
    if (auto r = flush_stores(); !r) return r;
    if (mode_ == 'B' && bitmap_dirty_) {
        if (pending_.empty()) std::fill(bitmap_.begin(), bitmap_.end(), uint8_t(0));
        else bitmap_ = pending_;
        if (Status s = tags_store_->write(bitmap_offset(), bitmap_); s != Status::Ok)
            return make_error(s, "dm-integrity: cannot write the bitmap of " + name_);
        if (Status s = tags_store_->flush(); s != Status::Ok)
            return make_error(s, "dm-integrity: cannot flush the bitmap of " + name_);
    }
    return {};
}

}  // namespace blkcrypt::integrity
