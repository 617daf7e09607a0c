// The journal's on-disk form and the clean journal the kernel writes at
// format (init_journal). Replay and the J-mode writer build on the section
// helpers here.
#include <blkcrypt/integrity/journal.hpp>

#include "journal_internal.hpp"

#include <blkcrypt/shash.hpp>

#include <algorithm>
#include <array>
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

void clean_section_meta(const Geometry& g, uint32_t section, unsigned seq, Bytes out) noexcept {
    std::fill_n(out.begin(), std::size_t(kJournalBlockSectors) * kSectorSize, uint8_t(0));
    const std::size_t end = data_offset_in_section(g, g.journal_section_entries);
    if (end < out.size()) std::fill(out.begin() + std::ptrdiff_t(end), out.end(), uint8_t(0));
    set_commit_ids(g, section, seq, out);
    for (uint32_t n = 0; n < g.journal_section_entries; ++n) set_unused(out.data() + entry_offset(g, n));
}

void clear_blocks(const Geometry& g, uint32_t from, Bytes out) noexcept {
    const std::size_t end = data_offset_in_section(g, g.journal_section_entries);
    for (std::size_t at = data_offset_in_section(g, from); at < end; at += kSectorSize)
        std::memset(out.data() + at, 0, kJournalSectorData);
}

void set_commit_ids(const Geometry& g, uint32_t section, unsigned seq, Bytes out) noexcept {
    for (uint32_t j = 0; j < g.journal_section_sectors; ++j)
        put_le64(out.data() + std::size_t(j) * kSectorSize + kJournalSectorData, commit_id(section, j, seq));
}

}  // namespace detail

namespace {

// section_mac and sb_mac on a Shash.
class ShashJournalMac final : public JournalMac {
public:
    ShashJournalMac(Shash h, const Superblock& sb) : h_(std::move(h)), fixed_(sb.has(kFlagFixedHmac)), salt_(sb.salt) {}

    Result<void> write(const Geometry& g, uint32_t section, Bytes sec) const override {
        uint8_t mac[kJournalMacSize];
        if (auto r = compute(g, section, sec, mac); !r) return r;
        for (uint32_t j = 0; j < kJournalBlockSectors; ++j)
            std::memcpy(sec.data() + std::size_t(j) * kSectorSize + kJournalSectorData - kJournalMacPerSector,
                        mac + j * kJournalMacPerSector, kJournalMacPerSector);
        return {};
    }
    Result<bool> check(const Geometry& g, uint32_t section, ConstBytes sec) const override {
        uint8_t mac[kJournalMacSize];
        if (auto r = compute(g, section, sec, mac); !r) return r.error();
        uint8_t diff = 0;
        for (uint32_t j = 0; j < kJournalBlockSectors; ++j)
            for (uint32_t b = 0; b < kJournalMacPerSector; ++b)
                diff |= sec[std::size_t(j) * kSectorSize + kJournalSectorData - kJournalMacPerSector + b] ^
                        mac[j * kJournalMacPerSector + b];
        return diff == 0;
    }
    Result<void> write_superblock(Bytes area) const override {
        const std::size_t n = h_.digestsize();
        if (n + 64 > kSectorSize || area.size() < kSectorSize) return make_error(Status::Invalid, "digest is too long");
        if (const Status st = h_.digest(area.first(kSectorSize - n), area.subspan(kSectorSize - n, n)); st != Status::Ok)
            return make_error(st, "superblock MAC");
        return {};
    }
    Result<bool> check_superblock(ConstBytes area) const override {
        const std::size_t n = h_.digestsize();
        if (n + 64 > kSectorSize || area.size() < kSectorSize) return make_error(Status::Invalid, "digest is too long");
        std::vector<uint8_t> mac(n);
        if (const Status st = h_.digest(area.first(kSectorSize - n), mac); st != Status::Ok)
            return make_error(st, "superblock MAC");
        uint8_t diff = 0;
        for (std::size_t i = 0; i < n; ++i) diff |= mac[i] ^ area[kSectorSize - n + i];
        return diff == 0;
    }

private:
    // The salt and le64 section (fix_hmac), then every entry's 8-byte sector
    // field; the first 64 bytes of the digest, zero-padded when shorter.
    Result<void> compute(const Geometry& g, uint32_t section, ConstBytes sec, uint8_t out[kJournalMacSize]) const {
        auto d = h_.new_desc();
        if (!d) return d.error();
        d->init();
        if (fixed_) {
            uint8_t le[8];
            detail::put_le64(le, section);
            d->update(salt_);
            d->update(ConstBytes(le, 8));
        }
        for (uint32_t n = 0; n < g.journal_section_entries; ++n)
            d->update(sec.subspan(detail::entry_offset(g, n), 8));
        std::vector<uint8_t> digest(h_.digestsize());
        if (const Status st = d->final(digest); st != Status::Ok) return make_error(st, "journal MAC");
        std::memset(out, 0, kJournalMacSize);
        std::memcpy(out, digest.data(), std::min<std::size_t>(digest.size(), kJournalMacSize));
        return {};
    }

    Shash h_;
    bool fixed_;
    std::array<uint8_t, kSaltSize> salt_;
};

}  // namespace

Result<std::shared_ptr<JournalMac>> JournalMac::create(Registry& reg, std::string_view alg, ConstBytes key,
                                                        const Superblock& sb) {
    auto h = Shash::alloc(reg, alg);
    if (!h) return make_error(h.status(), "journal MAC " + std::string(alg) + ": " + h.error().message);
    if (!key.empty()) {
        if (const Status st = h->setkey(key); st != Status::Ok)
            return make_error(Status::Invalid, "journal MAC " + std::string(alg) + ": the key is refused (" + to_string(st) + ")");
    } else if (auto d = h->new_desc(); !d) {
        return make_error(Status::Invalid, "journal MAC " + std::string(alg) + " needs a key (--journal-integrity-key-file)");
    }
    return std::shared_ptr<JournalMac>(std::make_shared<ShashJournalMac>(std::move(*h), sb));
}

Result<void> init_journal(BackingStore& meta, const Superblock& sb, const Geometry& g) {
    return init_journal(meta, sb, g, nullptr);
}

Result<void> init_journal(BackingStore& meta, const Superblock& sb, const Geometry& g, const JournalMac* mac) {
    if (sb.has(kFlagJournalMac) && !mac)
        return make_error(Status::Unsupported, "the journal has a MAC (journal_mac): its algorithm and key are needed to write it");
    if (!sb.has(kFlagJournalMac) && mac)
        return make_error(Status::Invalid, "a journal MAC was given but the superblock has no journal MAC flag");
    if (auto r = detail::write_clean(meta, g, 0, g.journal_sections, 0, mac); !r) return r;
    if (const Status st = meta.flush(); st != Status::Ok) return detail::store_error(st, "flushing the journal", 0);
    return {};
}

namespace detail {

Result<void> write_clean(BackingStore& meta, const Geometry& g, uint32_t first, uint32_t count, unsigned seq,
                         const JournalMac* mac) {
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
        if (const Status st = meta.write(off, buf); st != Status::Ok) return store_error(st, "writing the journal", off);
        done += n;
    }
    return {};
}

Result<void> store_error(Status st, const char* what, uint64_t off) {
    return make_error(st, std::string(what) + " at byte " + std::to_string(off) + ": " + to_string(st));
}

Result<void> RunWriter::put(uint64_t off, ConstBytes in) {
    constexpr std::size_t kCap = std::size_t(4) << 20;
    if (!buf_.empty() && (off != start_ + buf_.size() || buf_.size() + in.size() > kCap)) {
        if (auto r = finish(); !r) return r;
    }
    if (buf_.empty()) start_ = off;
    buf_.insert(buf_.end(), in.begin(), in.end());
    return {};
}

Result<void> RunWriter::finish() {
    if (buf_.empty()) return {};
    const Status st = s_.write(start_, buf_);
    buf_.clear();
    if (st != Status::Ok) return store_error(st, what_, start_);
    return {};
}

}  // namespace detail

}  // namespace blkcrypt::integrity
