// The dm-integrity journal parser and replay (Journal::parse, apply). A
// journal is tens of KiB even at its smallest, so the input describes one
// rather than being one: 6 header bytes choose the geometry (tag size,
// block size, 1-3 sections), the internal hash, the journal MAC, the mode
// and how many blocks the J-mode writer commits into the clean journal
// first; the rest are patches (le24 offset into the journal, length byte,
// bytes) laid over it, so mutations land on commit ids, entries, MACs and
// data of a journal that is otherwise well formed. Parsing must refuse or
// give blocks inside the device; a replay must succeed on memory, leave
// every replayed block's tag in place, and a re-read journal must then be
// valid, empty when it was rewritten.
#include <blkcrypt/integrity/geometry.hpp>
#include <blkcrypt/integrity/journal.hpp>
#include <blkcrypt/integrity/superblock.hpp>
#include <blkcrypt/integrity/tag_hash.hpp>
#include <blkcrypt/registry.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

using namespace blkcrypt;
using namespace blkcrypt::integrity;

namespace {

Registry& reg() {
    static Registry* r = [] {
        auto* x = new Registry;
        if (!register_defaults(*x)) std::abort();
        return x;
    }();
    return *r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size < 6) return 0;
    const uint8_t flags = data[3];
    const bool hashed = flags & 1, mode_d = flags & 2, with_mac = flags & 4, fix_hmac = flags & 8;
    FormatParams p;
    p.tag_size = hashed ? 4 : uint16_t(1 + data[0] % 64);
    p.sector_size = 512u << (data[1] % 4);
    p.internal_hash = hashed;
    p.journal_mac = with_mac;
    p.fix_hmac = fix_hmac;
    p.salt.fill(0xA5);
    Devices dev;
    dev.data_sectors = 8192;
    p.journal_sectors = 1;
    auto probe = format_superblock(p, dev);
    if (!probe) return 0;
    auto pg = open_geometry(*probe, dev);
    if (!pg) return 0;
    p.journal_sectors = (1 + data[2] % 3) * pg->journal_section_sectors;
    auto sb = format_superblock(p, dev);
    if (!sb) return 0;
    auto g = open_geometry(*sb, dev);
    if (!g) return 0;

    std::optional<TagHash> hash;
    if (hashed) {
        auto h = TagHash::create(reg(), "crc32c", {}, *sb);
        if (!h) std::abort();
        hash.emplace(std::move(*h));
    }
    std::shared_ptr<JournalMac> mac;
    if (with_mac) {
        static const uint8_t key[32] = {1, 2, 3};
        auto m = JournalMac::create(reg(), "hmac(sha256)", key, *sb);
        if (!m) std::abort();
        mac = *m;
    }
    ReplayOptions opts{mode_d ? 'D' : 'J', hash ? &*hash : nullptr, mac.get()};

    MemoryStore store(dev.data_sectors * kSectorSize);
    if (!init_journal(store, *sb, *g, mac.get())) std::abort();
    const uint32_t bs = sb->sector_size(), spb = bs / 512;
    const uint64_t nblocks = g->provided_data_sectors / spb;
    if (data[4] % 8) {
        auto clean = Journal::read(store, *sb, *g, opts);
        if (!clean || !clean->empty()) std::abort();
        JournalWriter w(store, store, store, *sb, *g, clean->next(), mac.get());
        // Blocks spread over the device, some written twice.
        for (unsigned k = 0; k < data[4] % 8u; ++k) {
            const uint64_t first = (uint64_t(data[5]) * 37 + k * 101) % nblocks;
            const uint64_t count = std::min<uint64_t>(1 + (data[5] + k * 13) % (2 * g->journal_section_entries), nblocks - first);
            std::vector<uint8_t> blk(count * bs, uint8_t(k + 1)), tags(count * g->tag_size, uint8_t(0x40 + k));
            for (uint64_t b = 0; b < count; ++b) blk[b * bs + bs - 1] = uint8_t(b);
            if (hash && hash->compute(first * spb, blk, tags) != Status::Ok) std::abort();
            if (!w.write(first * bs, blk, tags)) std::abort();
        }
    }
    // Patches over the journal.
    std::vector<uint8_t>& img = store.data();
    const uint64_t jo = journal_offset(*g), jl = journal_bytes(*g);
    for (std::size_t i = 6; i + 4 <= size;) {
        const uint64_t off = (uint64_t(data[i]) | uint64_t(data[i + 1]) << 8 | uint64_t(data[i + 2]) << 16) % jl;
        const std::size_t len = std::min<std::size_t>({data[i + 3], size - (i + 4), std::size_t(jl - off)});
        std::memcpy(img.data() + jo + off, data + i + 4, len);
        i += 4 + len;
    }

    std::vector<uint8_t> bytes(img.begin() + jo, img.begin() + jo + jl);
    auto j = Journal::parse(std::move(bytes), *sb, *g, opts);
    if (!j) {
        if (j.status() != Status::Corrupt) std::abort();  // the geometry is fine: only the bytes can be wrong
        return 0;
    }
    std::vector<uint8_t> blk(bs);
    for (const auto& b : j->blocks()) {
        if (b.sector >= g->provided_data_sectors || b.sector % spb || b.section >= g->journal_sections ||
            b.entry >= g->journal_section_entries)
            std::abort();
        j->block_data(b, blk);
        if (j->block_tag(b).size() != g->tag_size) std::abort();
    }
    if (j->next().section >= g->journal_sections || j->next().commit_seq >= kCommitSeqs) std::abort();
    auto r = j->apply(store, store, store);
    if (!r) std::abort();
    // The last block replayed for each sector is in place with its tag.
    if (!j->blocks().empty()) {
        const auto& b = j->blocks().back();
        j->block_data(b, blk);
        if (std::memcmp(img.data() + g->data_offset(b.sector), blk.data(), bs) != 0) std::abort();
        const auto t = j->block_tag(b);
        if (std::memcmp(img.data() + g->tag_offset(b.sector), t.data(), t.size()) != 0) std::abort();
    }
    auto again = Journal::read(store, *sb, *g, opts);
    if (r->reinitialised) {
        if (!again || !again->empty() || !again->blocks().empty()) std::abort();
    } else if (!again) {
        std::abort();  // nothing was written to the journal: it parses as before
    }
    return 0;
}
