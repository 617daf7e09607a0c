#include "block_stream.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14; older kernels refuse it (harmless)
#endif

namespace blkcrypt::verity {

namespace {

constexpr std::size_t kChunkBytes = 4u << 20;
// How far ahead of the hashing position the page cache is asked to be
// filled: several chunks, so the disk always has requests queued.
constexpr uint64_t kReadAheadBytes = 32u << 20;
// The kernel caps one WILLNEED request at the device's readahead or I/O size
// (often 128 KiB to 8 MiB) and drops the rest, so the window is asked for in
// pieces no larger than the smallest usual cap.
constexpr uint64_t kAdvicePiece = 128u << 10;

Error read_error(uint64_t offset, std::size_t len) {
    return make_error(Status::IoError, "cannot read " + std::to_string(len) + " bytes at offset " +
                                           std::to_string(offset));
}

Error changed_error(const dm::BackingStore& store) {
    const std::string name = store.name();
    return make_error(Status::IoError, (name.empty() ? "the input" : name) + ": changed size while being read");
}

// madvise wants a page-aligned start; the advice is only advice, so its
// failure (an old kernel, a range past a shrunk end) is ignored.
void advise(ConstBytes map, uint64_t off, uint64_t len, int advice) noexcept {
    static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    if (off >= map.size()) return;
    len = std::min<uint64_t>(len, map.size() - off);
    const uint64_t start = off / page * page;
    void* addr = const_cast<uint8_t*>(map.data() + start);
    (void)::madvise(addr, static_cast<std::size_t>(off + len - start), advice);
}

}  // namespace

Result<void> hash_blocks(ParallelHasher& pool, dm::BackingStore& store, uint64_t offset, uint32_t bs,
                         uint64_t length, const ProgressFn& progress, const DigestSink& sink) {
    const std::size_t ds = pool.digest_size();
    const uint64_t nblocks = length / bs;  // whole blocks; a short tail comes last
    const uint64_t chunk_blocks = std::max<uint64_t>(1, kChunkBytes / bs);
    const std::size_t buf_blocks = static_cast<std::size_t>(std::clamp<uint64_t>(nblocks, 1, chunk_blocks));
    store.hint_sequential();
    // A mapped file is hashed in place (no copy out of the page cache); other
    // stores are read into two buffers, the next while the current is hashed.
    const ConstBytes map = store.mapped();
    const bool in_place = nblocks > 0 && map.size() >= offset + nblocks * bs;
    std::vector<uint8_t> buf[2];
    if (!in_place && nblocks > 0) buf[0].resize(buf_blocks * bs), buf[1].resize(buf_blocks * bs);
    std::vector<uint8_t> digests(buf_blocks * ds);
    uint64_t ahead = offset;  // the page cache has been asked for up to here

    // The chunk starting at block `first`, in buffer `which` when read. For
    // the mapping: the readahead window is moved on, and the chunk's pages
    // are mapped here, on the reading thread, instead of faulting one by one
    // in the workers (for an uncached file, this is where we wait for the disk).
    auto fetch = [&](uint64_t first, int which) -> Result<const uint8_t*> {
        const std::size_t len = static_cast<std::size_t>(std::min(chunk_blocks, nblocks - first)) * bs;
        const uint64_t at = offset + first * bs;
        if (in_place) {
            const uint64_t want = std::min<uint64_t>(offset + nblocks * bs, at + len + kReadAheadBytes);
            for (; ahead < want; ahead += kAdvicePiece)
                advise(map, ahead, std::min(kAdvicePiece, want - ahead), MADV_WILLNEED);
            advise(map, at, len, MADV_POPULATE_READ);
            return map.data() + at;
        }
        if (store.read(at, Bytes(buf[which]).first(len)) != Status::Ok) return read_error(at, len);
        return static_cast<const uint8_t*>(buf[which].data());
    };
    Result<const uint8_t*> cur = static_cast<const uint8_t*>(nullptr);
    if (nblocks > 0) cur = fetch(0, 0);
    if (!cur) return cur.error();
    int which = 0;
    for (uint64_t first = 0; first < nblocks; first += chunk_blocks, which ^= 1) {
        const std::size_t count = static_cast<std::size_t>(std::min(chunk_blocks, nblocks - first));
        pool.start(*cur, count, bs, digests.data());
        Result<const uint8_t*> next = static_cast<const uint8_t*>(nullptr);
        if (first + chunk_blocks < nblocks) next = fetch(first + chunk_blocks, which ^ 1);
        if (Status s = pool.wait(); s != Status::Ok)
            return make_error(s, std::string("hashing failed: ") + to_string(s));
        if (in_place) {
            store.release_mapped(offset + first * bs, count * bs);  // bounded memory
            // Truncated under us: some of those blocks were zeros, not the file.
            if (store.changed()) return changed_error(store);
        }
        if (!next) return next.error();
        if (auto r = sink(first, count, ConstBytes(digests).first(count * ds)); !r) return r;
        if (progress && !progress((first + count) * bs, length)) return make_error(Status::Interrupted, "interrupted");
        cur = next;
    }
    if (const auto tail = static_cast<std::size_t>(length - nblocks * bs); tail > 0) {
        std::vector<uint8_t> last(bs, 0);  // zero-padded
        const uint64_t at = offset + nblocks * bs;
        if (store.read(at, Bytes(last).first(tail)) != Status::Ok) {
            if (store.changed()) return changed_error(store);
            return read_error(at, tail);
        }
        if (Status s = pool.own_context().hash_one(last, Bytes(digests).first(ds)); s != Status::Ok)
            return make_error(s, std::string("hashing failed: ") + to_string(s));
        if (auto r = sink(nblocks, 1, ConstBytes(digests).first(ds)); !r) return r;
        if (progress && !progress(length, length)) return make_error(Status::Interrupted, "interrupted");
    }
    if (store.changed()) return changed_error(store);  // grew (or shrank) meanwhile
    return {};
}

}  // namespace blkcrypt::verity
