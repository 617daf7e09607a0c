// J-mode writes: __journal_read_write (the blocks into entries), then
// integrity_commit and write_journal (commit ids, the sections out with
// FUA), then do_journal_write (each block to its place) and
// dm_integrity_flush_buffers, in that order, each step flushed before the
// next begins: what makes a kill anywhere replay to old or new.
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

Result<void> JournalWriter::write(uint64_t offset, ConstBytes data, ConstBytes tags) {
    if (g_.journal_sections == 0 || g_.journal_section_entries == 0)
        return make_error(Status::Invalid, "journal: the geometry has no journal");
    if (offset % block_size_ || data.size() % block_size_)
        return make_error(Status::Invalid, "journal: writes are whole blocks of " + std::to_string(block_size_) + " bytes");
    const uint64_t blocks = data.size() / block_size_;
    if (tags.size() != blocks * g_.tag_size)
        return make_error(Status::Invalid, "journal: " + std::to_string(g_.tag_size) + " bytes of tag per block expected");
    if (offset / kSectorSize + data.size() / kSectorSize > g_.provided_data_sectors)
        return make_error(Status::Invalid, "journal: a write past the end of the device");
    std::lock_guard lk(mu_);
    // At most the whole journal per commit (the kernel waits for free
    // sections the same way).
    const uint64_t per_commit = uint64_t(g_.journal_sections) * g_.journal_section_entries;
    for (uint64_t done = 0; done < blocks;) {
        const uint64_t m = std::min(per_commit, blocks - done);
        if (auto r = commit_chunk(offset / kSectorSize + done * (block_size_ / kSectorSize),
                                  data.subspan(done * block_size_, m * block_size_),
                                  tags.subspan(done * g_.tag_size, m * g_.tag_size));
            !r)
            return r;
        done += m;
    }
    return {};
}

Result<void> JournalWriter::commit_chunk(uint64_t sector, ConstBytes data, ConstBytes tags) {
    const uint32_t n = g_.journal_sections, E = g_.journal_section_entries;
    const uint32_t spb = block_size_ / kSectorSize;
    const std::size_t section_bytes = std::size_t(g_.journal_section_sectors) * kSectorSize;
    const uint64_t blocks = data.size() / block_size_;
    const uint32_t sections = uint32_t((blocks + E - 1) / E);

    // The sections, entries filled in (unfilled ones of the last section
    // stay unused: pad_uncommitted), commit ids of their sequence, MAC.
    buf_.assign(std::size_t(sections) * section_bytes, 0);
    unsigned seq = at_.commit_seq;
    uint32_t s = at_.section;
    for (uint32_t k = 0; k < sections; ++k) {
        Bytes sec(buf_.data() + std::size_t(k) * section_bytes, section_bytes);
        detail::clean_section(g_, s, seq, sec);
        for (uint32_t e = 0; e < E; ++e) {
            const uint64_t b = uint64_t(k) * E + e;
            if (b >= blocks) break;
            uint8_t* ent = sec.data() + detail::entry_offset(g_, e);
            uint8_t* dst = sec.data() + detail::data_offset_in_section(g_, e);
            const uint8_t* src = data.data() + b * block_size_;
            for (uint32_t x = 0; x < spb; ++x) {
                // The data sector's last 8 bytes go to the entry; the commit
                // id takes their place.
                std::memcpy(dst + std::size_t(x) * kSectorSize, src + std::size_t(x) * kSectorSize, kJournalSectorData);
                std::memcpy(ent + 8 + 8 * x, src + std::size_t(x) * kSectorSize + kJournalSectorData, 8);
            }
            std::memcpy(ent + 8 + 8 * std::size_t(spb), tags.data() + b * g_.tag_size, g_.tag_size);
            detail::put_le64(ent, sector + b * spb);
        }
        detail::set_commit_ids(g_, s, seq, sec);
        if (mac_) {
            if (auto r = mac_->write(g_, s, sec); !r) return r;
        }
        if (++s >= n) {
            s = 0;
            seq = (seq + 1) % kCommitSeqs;
        }
    }

    // The commit: the sections out (two writes when they wrap), flushed.
    {
        const uint32_t first = at_.section;
        const uint32_t to_end = std::min(sections, n - first);
        const uint64_t off = journal_offset(g_) + uint64_t(first) * section_bytes;
        if (const Status st = meta_.write(off, ConstBytes(buf_.data(), std::size_t(to_end) * section_bytes)); st != Status::Ok)
            return detail::store_error(st, "writing the journal", off);
        if (to_end < sections) {
            const uint64_t off0 = journal_offset(g_);
            if (const Status st = meta_.write(off0, ConstBytes(buf_.data() + std::size_t(to_end) * section_bytes,
                                                               std::size_t(sections - to_end) * section_bytes));
                st != Status::Ok)
                return detail::store_error(st, "writing the journal", off0);
        }
        if (const Status st = meta_.flush(); st != Status::Ok) return detail::store_error(st, "flushing the journal", 0);
    }
    wrote_ = true;
    at_.section = s;
    at_.commit_seq = seq;

    // The write-back: every block and its tag in place, flushed, before the
    // sections can be written again.
    detail::RunWriter dw(data_, "writing data");
    detail::RunWriter tw(tags_, "writing tags");
    for (uint64_t b = 0; b < blocks; ++b) {
        const uint64_t lsec = sector + b * spb;
        if (auto r = dw.put(g_.data_offset(lsec), data.subspan(b * block_size_, block_size_)); !r) return r;
        if (auto r = tw.put(g_.tag_offset(lsec), tags.subspan(b * g_.tag_size, g_.tag_size)); !r) return r;
    }
    if (auto r = dw.finish(); !r) return r;
    if (auto r = tw.finish(); !r) return r;
    if (const Status st = tags_.flush(); st != Status::Ok) return detail::store_error(st, "flushing tags", 0);
    if (&tags_ != &data_)
        if (const Status st = data_.flush(); st != Status::Ok) return detail::store_error(st, "flushing data", 0);
    return {};
}

Result<void> JournalWriter::close() {
    std::lock_guard lk(mu_);
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
