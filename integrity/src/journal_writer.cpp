// J-mode writes: __journal_read_write (the blocks into entries of the
// pending sections), then integrity_commit and write_journal (commit ids,
// the sections out with FUA), then do_journal_write (each block to its
// place) and dm_integrity_flush_buffers, in that order, each step flushed
// before the next begins: what makes a kill anywhere replay to a version
// written since the last commit. As in the kernel, many writes share one
// commit: it happens when the entries fill the journal, or on a flush.
#include <blkcrypt/integrity/journal.hpp>

#include "journal_internal.hpp"

#include <algorithm>
#include <cstring>

namespace blkcrypt::integrity {

JournalWriter::JournalWriter(BackingStore& meta, BackingStore& data, BackingStore& tags, const Superblock& sb,
                             const Geometry& g, JournalPosition at, const JournalMac* mac)
    : meta_(meta), data_(data), tags_(tags), g_(g), block_size_(sb.sector_size()), mac_(mac), at_(at) {
    if (g_.journal_sections) at_.section %= g_.journal_sections;
    at_.commit_seq %= kCommitSeqs;
}

JournalPosition JournalWriter::position() const {
    std::lock_guard lk(mu_);
    return at_;
}

Result<void> JournalWriter::check(uint64_t offset, ConstBytes data, ConstBytes tags) const {
    if (g_.journal_sections == 0 || g_.journal_section_entries == 0)
        return make_error(Status::Invalid, "journal: the geometry has no journal");
    if (offset % block_size_ || data.size() % block_size_)
        return make_error(Status::Invalid, "journal: writes are whole blocks of " + std::to_string(block_size_) + " bytes");
    const uint64_t blocks = data.size() / block_size_;
    if (tags.size() != blocks * g_.tag_size)
        return make_error(Status::Invalid, "journal: " + std::to_string(g_.tag_size) + " bytes of tag per block expected");
    if (offset / kSectorSize + data.size() / kSectorSize > g_.provided_data_sectors)
        return make_error(Status::Invalid, "journal: a write past the end of the device");
    return {};
}

Result<void> JournalWriter::add(uint64_t offset, ConstBytes data, ConstBytes tags) {
    if (auto r = check(offset, data, tags); !r) return r;
    std::lock_guard lk(mu_);
    return add_locked(offset, data, tags);
}

Result<void> JournalWriter::write(uint64_t offset, ConstBytes data, ConstBytes tags) {
    if (auto r = check(offset, data, tags); !r) return r;
    std::lock_guard lk(mu_);
    if (auto r = add_locked(offset, data, tags); !r) return r;
    return commit_locked();
}

Result<void> JournalWriter::commit() {
    std::lock_guard lk(mu_);
    return commit_locked();
}

Result<void> JournalWriter::add_locked(uint64_t offset, ConstBytes data, ConstBytes tags) {
    if (failed_) return *failed_;
    const uint32_t n = g_.journal_sections, E = g_.journal_section_entries;
    const uint32_t spb = block_size_ / kSectorSize;
    const std::size_t section_bytes = std::size_t(g_.journal_section_sectors) * kSectorSize;
    // At most the whole journal per commit (the kernel waits for free
    // sections the same way).
    const uint64_t capacity = uint64_t(n) * E;
    const uint64_t blocks = data.size() / block_size_;
    for (uint64_t b = 0; b < blocks; ++b) {
        if (pending_ == capacity)
            if (auto r = commit_locked(); !r) return r;
        const uint32_t k = uint32_t(pending_ / E), e = uint32_t(pending_ % E);
        if (e == 0) {
            // A new section: clean (its unfilled entries stay unused:
            // pad_uncommitted), with the commit ids of its sequence. Its data
            // blocks are filled below, the ones left over cleared at commit.
            const uint32_t s = at_.section + k;
            if (!buf_) buf_.reset(new uint8_t[std::size_t(n) * section_bytes]);
            detail::clean_section_meta(g_, s % n, (at_.commit_seq + (s >= n ? 1 : 0)) % kCommitSeqs,
                                       Bytes(buf_.get() + std::size_t(k) * section_bytes, section_bytes));
        }
        uint8_t* sec = buf_.get() + std::size_t(k) * section_bytes;
        uint8_t* ent = sec + detail::entry_offset(g_, e);
        uint8_t* dst = sec + detail::data_offset_in_section(g_, e);
        const uint8_t* src = data.data() + b * block_size_;
        for (uint32_t x = 0; x < spb; ++x) {
            // The data sector's last 8 bytes go to the entry; the commit id
            // keeps their place.
            std::memcpy(dst + std::size_t(x) * kSectorSize, src + std::size_t(x) * kSectorSize, kJournalSectorData);
            std::memcpy(ent + 8 + 8 * x, src + std::size_t(x) * kSectorSize + kJournalSectorData, 8);
        }
        std::memcpy(ent + 8 + 8 * std::size_t(spb), tags.data() + b * g_.tag_size, g_.tag_size);
        const uint64_t sector = offset / kSectorSize + b * spb;
        detail::put_le64(ent, sector);
        pending_sectors_.push_back(sector);
        newest_[sector] = pending_;
        ++pending_;
    }
    return {};
}

// Pending block b as the replay would copy it: the data with its last bytes
// restored (restore_last_bytes), and its tag.
void JournalWriter::pending_block(uint64_t b, Bytes data, Bytes tag) const {
    const uint32_t E = g_.journal_section_entries, spb = block_size_ / kSectorSize;
    const std::size_t section_bytes = std::size_t(g_.journal_section_sectors) * kSectorSize;
    const uint8_t* sec = buf_.get() + std::size_t(b / E) * section_bytes;
    const uint32_t e = uint32_t(b % E);
    const uint8_t* ent = sec + detail::entry_offset(g_, e);
    std::memcpy(data.data(), sec + detail::data_offset_in_section(g_, e), block_size_);
    for (uint32_t x = 0; x < spb; ++x)
        std::memcpy(data.data() + std::size_t(x) * kSectorSize + kJournalSectorData, ent + 8 + 8 * x, 8);
    std::memcpy(tag.data(), ent + 8 + 8 * std::size_t(spb), g_.tag_size);
}

Result<void> JournalWriter::overlay(uint64_t offset, Bytes data, Bytes tags) const {
    std::lock_guard lk(mu_);
    if (failed_) return *failed_;
    if (newest_.empty()) return {};
    const uint32_t spb = block_size_ / kSectorSize;
    const uint64_t blocks = data.size() / block_size_;
    for (uint64_t i = 0; i < blocks; ++i) {
        const auto it = newest_.find(offset / kSectorSize + i * spb);
        if (it == newest_.end()) continue;
        pending_block(it->second, data.subspan(i * block_size_, block_size_), tags.subspan(i * g_.tag_size, g_.tag_size));
    }
    return {};
}

Result<void> JournalWriter::commit_locked() {
    if (failed_) return *failed_;
    if (pending_ == 0) return {};
    auto r = [&]() -> Result<void> {
        const uint32_t n = g_.journal_sections, E = g_.journal_section_entries;
        const std::size_t section_bytes = std::size_t(g_.journal_section_sectors) * kSectorSize;
        const uint32_t sections = uint32_t((pending_ + E - 1) / E);
        uint8_t* const buf = buf_.get();
        if (const uint32_t used = uint32_t(pending_ % E))
            detail::clear_blocks(g_, used, Bytes(buf + std::size_t(sections - 1) * section_bytes, section_bytes));
        if (mac_)
            for (uint32_t k = 0; k < sections; ++k)
                if (auto m = mac_->write(g_, (at_.section + k) % n, Bytes(buf + std::size_t(k) * section_bytes, section_bytes)); !m)
                    return m;

        // The commit: the sections out (two writes when they wrap), flushed.
        const uint32_t first = at_.section;
        const uint32_t to_end = std::min(sections, n - first);
        const uint64_t off = journal_offset(g_) + uint64_t(first) * section_bytes;
        if (const Status st = meta_.write(off, ConstBytes(buf, std::size_t(to_end) * section_bytes)); st != Status::Ok)
            return detail::store_error(st, "writing the journal", off);
        if (to_end < sections) {
            const uint64_t off0 = journal_offset(g_);
            if (const Status st = meta_.write(off0, ConstBytes(buf + std::size_t(to_end) * section_bytes,
                                                               std::size_t(sections - to_end) * section_bytes));
                st != Status::Ok)
                return detail::store_error(st, "writing the journal", off0);
        }
        if (const Status st = meta_.flush(); st != Status::Ok) return detail::store_error(st, "flushing the journal", 0);
        wrote_ = true;
        at_.section = first + sections;
        if (at_.section >= n) {
            at_.section -= n;
            at_.commit_seq = (at_.commit_seq + 1) % kCommitSeqs;
        }

        // The write-back: every block and its tag in place, in entry order
        // (a later entry of a sector wins, as in the replay), flushed, before
        // the sections can be written again. The journal is on disk, so each
        // block gets its last bytes back in place (restore_last_bytes, what
        // pending_block returns all the same) and a run of blocks adjacent
        // both in a section and on the device goes out in one write, straight
        // from the buffer.
        const uint32_t spb = block_size_ / kSectorSize;
        detail::RunWriter tw(tags_, "writing tags");
        for (uint64_t b = 0; b < pending_;) {
            uint8_t* const run = buf + std::size_t(b / E) * section_bytes + detail::data_offset_in_section(g_, uint32_t(b % E));
            const uint64_t dev_off = g_.data_offset(pending_sectors_[b]);
            std::size_t len = 0;
            do {
                const uint8_t* ent = buf + std::size_t(b / E) * section_bytes + detail::entry_offset(g_, uint32_t(b % E));
                uint8_t* blk = run + len;
                for (uint32_t x = 0; x < spb; ++x)
                    std::memcpy(blk + std::size_t(x) * kSectorSize + kJournalSectorData, ent + 8 + 8 * x, 8);
                if (auto w = tw.put(g_.tag_offset(pending_sectors_[b]), ConstBytes(ent + 8 + 8 * std::size_t(spb), g_.tag_size)); !w)
                    return w;
                len += block_size_;
                ++b;
            } while (b < pending_ && b % E != 0 && g_.data_offset(pending_sectors_[b]) == dev_off + len);
            if (const Status st = data_.write(dev_off, ConstBytes(run, len)); st != Status::Ok)
                return detail::store_error(st, "writing data", dev_off);
        }
        if (auto w = tw.finish(); !w) return w;
        if (const Status st = tags_.flush(); st != Status::Ok) return detail::store_error(st, "flushing tags", 0);
        if (&tags_ != &data_)
            if (const Status st = data_.flush(); st != Status::Ok) return detail::store_error(st, "flushing data", 0);
        return {};
    }();
    if (!r) {
        failed_ = r.error();
        return r;
    }
    pending_ = 0;
    pending_sectors_.clear();
    newest_.clear();
    return {};
}

Result<void> JournalWriter::close() {
    std::lock_guard lk(mu_);
    if (auto r = commit_locked(); !r) return r;
    if (!wrote_) return {};
    const uint32_t n = g_.journal_sections;
    if (auto r = detail::write_clean(meta_, g_, at_.section, n - at_.section, at_.commit_seq, mac_); !r) return r;
    if (at_.section)
        if (auto r = detail::write_clean(meta_, g_, 0, at_.section, (at_.commit_seq + 1) % kCommitSeqs, mac_); !r) return r;
    if (const Status st = meta_.flush(); st != Status::Ok) return detail::store_error(st, "flushing the journal", 0);
    wrote_ = false;
    return {};
}

}  // namespace blkcrypt::integrity
