// replay_journal and do_journal_write(from_replay) of
// drivers/md/dm-integrity.c, on a journal read from untrusted bytes: the
// same decisions in the same order, with the kernel's failures (which make
// it fail every later I/O) as Corrupt.
#include <blkcrypt/integrity/journal.hpp>

#include "journal_internal.hpp"

#include <algorithm>
#include <cstring>

namespace blkcrypt::integrity {

namespace {

unsigned prev_seq(unsigned s) { return (s + kCommitSeqs - 1) % kCommitSeqs; }
unsigned next_seq(unsigned s) { return (s + 1) % kCommitSeqs; }

Error kernel_failure(const std::string& what, const std::string& detail) {
    return make_error(Status::Corrupt, "journal: " + detail + " (the kernel fails the device: \"Error on " + what +
                                           "\", every I/O then returns an error)");
}

std::string at(uint32_t section, uint32_t sector) {
    return "section " + std::to_string(section) + " sector " + std::to_string(sector);
}

}  // namespace

Result<Journal> Journal::parse(std::vector<uint8_t> bytes, const Superblock& sb, const Geometry& g,
                               const ReplayOptions& opts) {
    const uint32_t n = g.journal_sections, S = g.journal_section_sectors, E = g.journal_section_entries;
    if (n == 0 || S == 0 || E == 0 || g.journal_entry_size < 16)
        return make_error(Status::Invalid, "journal: the geometry has no journal");
    if (bytes.size() != journal_bytes(g))
        return make_error(Status::Invalid, "journal: " + std::to_string(bytes.size()) + " bytes, the geometry says " +
                                               std::to_string(journal_bytes(g)));
    if (sb.has(kFlagJournalMac) != (opts.mac != nullptr))
        return make_error(Status::Invalid, opts.mac ? "journal: a journal MAC was given but the superblock has none"
                                                    : "journal: the superblock has a journal MAC (journal_mac:): its "
                                                      "algorithm and key are needed (\"Journal mac mismatch\")");
    const uint32_t spb = sb.sectors_per_block();
    if (opts.tag_hash && opts.tag_hash->tag_size() != g.tag_size)
        return make_error(Status::Invalid, "journal: the internal hash's tag size differs from the superblock's");

    Journal J;
    J.geo_ = g;
    J.bytes_ = std::move(bytes);
    J.mac_ = opts.mac;
    const uint8_t* base = J.bytes_.data();
    const std::size_t section_bytes = std::size_t(S) * kSectorSize;
    auto sector_id = [&](uint32_t i, uint32_t j) {
        return detail::get_le64(base + std::size_t(i) * section_bytes + std::size_t(j) * kSectorSize + kJournalSectorData);
    };

    // Every sector's commit id names its sequence; the last section each
    // sequence appears in.
    bool used[kCommitSeqs] = {};
    uint32_t max_section[kCommitSeqs] = {};
    bool empty = true;
    for (uint32_t i = 0; i < n; ++i) {
        for (uint32_t j = 0; j < S; ++j) {
            const uint64_t id = sector_id(i, j);
            unsigned k = 0;
            while (k < kCommitSeqs && commit_id(i, j, k) != id) ++k;
            if (k == kCommitSeqs) return kernel_failure("journal commit id: -5", "the commit id of " + at(i, j) + " belongs to no commit sequence");
            used[k] = true;
            max_section[k] = i;
        }
        if (empty) {
            for (uint32_t e = 0; e < E; ++e)
                if (!detail::is_unused(base + std::size_t(i) * section_bytes + detail::entry_offset(g, e))) {
                    empty = false;
                    break;
                }
        }
    }

    // The first unused sequence after the used ones; the one before it is
    // the newest.
    unsigned unused;
    if (!used[kCommitSeqs - 1]) {
        unused = kCommitSeqs - 1;
        while (unused && !used[unused - 1]) --unused;
    } else {
        unused = 0;
        while (unused < kCommitSeqs && used[unused]) ++unused;
        if (unused == kCommitSeqs) return kernel_failure("journal commit ids: -5", "all four commit sequences are in use");
    }
    const unsigned last_used = prev_seq(unused);
    unsigned want = prev_seq(last_used);
    if (!used[want] && used[prev_seq(want)]) empty = true;

    // From the section after the newest sequence's last one: sections whose
    // every id is the expected sequence's (a torn commit stops the run).
    uint32_t write_start = max_section[last_used] + 1;
    if (write_start >= n) {
        want = next_seq(want);
        write_start -= n;
    }
    uint32_t write_sections = 0;
    for (uint32_t i = write_start; write_sections < n; ++write_sections) {
        bool whole = true;
        for (uint32_t j = 0; j < S && whole; ++j) whole = sector_id(i, j) == commit_id(i, j, want);
        if (!whole) break;
        if (++i >= n) {
            want = next_seq(want);
            i = 0;
        }
    }
    J.empty_ = empty;
    J.write_start_ = write_start;
    J.write_sections_ = write_sections;

    if (!empty) {
        std::vector<uint8_t> block(std::size_t(spb) * kSectorSize), tag(g.tag_size);
        for (uint32_t k = 0, i = write_start; k < write_sections; ++k, i = (i + 1) % n) {
            ConstBytes sec(base + std::size_t(i) * section_bytes, section_bytes);
            if (opts.mac) {
                auto ok = opts.mac->check(g, i, sec);
                if (!ok) return ok.error();
                if (!*ok) return kernel_failure("journal mac: -84", "the MAC of section " + std::to_string(i) + " does not match");
            }
            for (uint32_t e = 0; e < E; ++e) {
                const uint8_t* ent = sec.data() + detail::entry_offset(g, e);
                if (detail::is_unused(ent)) continue;
                uint64_t sector = detail::get_le64(ent);
                if (sector & (spb - 1))
                    return kernel_failure("invalid sector in journal: -5",
                                          "entry " + std::to_string(e) + " of section " + std::to_string(i) +
                                              " names sector " + std::to_string(sector) + ", not a block's first");
                if (sector >= g.provided_data_sectors) continue;  // dropped, as the kernel drops it
                const Block b{sector, i, e};
                if (opts.tag_hash) {
                    J.block_data(b, block);
                    if (const Status st = opts.tag_hash->compute(sector, block, tag); st != Status::Ok)
                        return make_error(st, "journal: hashing a replayed block");
                    const ConstBytes stored = J.block_tag(b);
                    if (!std::equal(tag.begin(), tag.end(), stored.begin()))
                        return kernel_failure("tag mismatch when replaying journal: -84",
                                              "the tag of sector " + std::to_string(sector) + " (entry " +
                                                  std::to_string(e) + " of section " + std::to_string(i) +
                                                  ") does not match its data");
                }
                J.blocks_.push_back(b);
            }
        }
    }

    if (write_sections == n && (opts.mode == 'J' || empty)) {
        J.reinit_ = false;
        J.next_ = {write_start, want};
    } else {
        J.reinit_ = true;
        J.erase_seq_ = prev_seq(prev_seq(last_used));
        J.next_ = {0, next_seq(J.erase_seq_)};
    }
    return J;
}

Result<Journal> Journal::read(BackingStore& meta, const Superblock& sb, const Geometry& g, const ReplayOptions& opts) {
    const uint64_t len = journal_bytes(g), off = journal_offset(g);
    if (len == 0 || off + len > meta.size() || off + len < off)
        return make_error(Status::Invalid, "journal: it does not fit on the device (" + std::to_string(off + len) +
                                               " bytes needed, " + std::to_string(meta.size()) + " there)");
    std::vector<uint8_t> bytes(len);
    if (const Status st = meta.read(off, bytes); st != Status::Ok) return detail::store_error(st, "reading the journal", off).error();
    return parse(std::move(bytes), sb, g, opts);
}

void Journal::block_data(const Block& b, Bytes out) const {
    const std::size_t section_bytes = std::size_t(geo_.journal_section_sectors) * kSectorSize;
    const uint8_t* sec = bytes_.data() + std::size_t(b.section) * section_bytes;
    const uint8_t* ent = sec + detail::entry_offset(geo_, b.entry);
    const uint32_t spb = 1u << geo_.log2_sectors_per_block;
    std::memcpy(out.data(), sec + detail::data_offset_in_section(geo_, b.entry), std::size_t(spb) * kSectorSize);
    for (uint32_t s = 0; s < spb; ++s)  // restore_last_bytes
        std::memcpy(out.data() + std::size_t(s) * kSectorSize + kJournalSectorData, ent + 8 + 8 * s, 8);
}

ConstBytes Journal::block_tag(const Block& b) const {
    const std::size_t section_bytes = std::size_t(geo_.journal_section_sectors) * kSectorSize;
    const uint32_t spb = 1u << geo_.log2_sectors_per_block;
    return ConstBytes(bytes_.data() + std::size_t(b.section) * section_bytes + detail::entry_offset(geo_, b.entry) + 8 +
                          8 * std::size_t(spb),
                      geo_.tag_size);
}

Result<ReplayResult> Journal::apply(BackingStore& meta, BackingStore& data, BackingStore& tags) const {
    ReplayResult res;
    res.first_section = write_start_;
    res.sections = write_sections_;
    res.next = next_;
    if (!blocks_.empty()) {
        detail::RunWriter dw(data, "replaying the journal: writing data");
        detail::RunWriter tw(tags, "replaying the journal: writing tags");
        std::vector<uint8_t> block(std::size_t(1u << geo_.log2_sectors_per_block) * kSectorSize);
        for (const Block& b : blocks_) {
            block_data(b, block);
            if (auto r = dw.put(geo_.data_offset(b.sector), block); !r) return r.error();
            if (auto r = tw.put(geo_.tag_offset(b.sector), block_tag(b)); !r) return r.error();
        }
        if (auto r = dw.finish(); !r) return r.error();
        if (auto r = tw.finish(); !r) return r.error();
        // dm_integrity_flush_buffers(ic, true): tags, then data.
        if (const Status st = tags.flush(); st != Status::Ok) return detail::store_error(st, "flushing tags", 0).error();
        if (&tags != &data)
            if (const Status st = data.flush(); st != Status::Ok) return detail::store_error(st, "flushing data", 0).error();
        res.blocks = blocks_.size();
    }
    if (reinit_) {
        // clear_journal: the first section, the middle ones, the last, from
        // where the replay started.
        const uint32_t n = geo_.journal_sections;
        uint32_t s = write_start_;
        if (auto r = detail::write_clean(meta, geo_, s, 1, erase_seq_, mac_); !r) return r.error();
        s = (s + 1) % n;
        if (n >= 2) {
            if (auto r = detail::write_clean(meta, geo_, s, n - 2, erase_seq_, mac_); !r) return r.error();
            s = (s + n - 2) % n;
            if (auto r = detail::write_clean(meta, geo_, s, 1, erase_seq_, mac_); !r) return r.error();
        }
        if (const Status st = meta.flush(); st != Status::Ok) return detail::store_error(st, "flushing the journal", 0).error();
        res.reinitialised = true;
    }
    return res;
}

Result<ReplayResult> replay_journal(BackingStore& meta, BackingStore& data, BackingStore& tags, const Superblock& sb,
                                    const Geometry& g, const ReplayOptions& opts) {
    if (opts.mode == 'R') return ReplayResult{};
    auto j = Journal::read(meta, sb, g, opts);
    if (!j) return j.error();
    return j->apply(meta, data, tags);
}

}  // namespace blkcrypt::integrity
