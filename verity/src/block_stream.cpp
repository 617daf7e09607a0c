#include "block_stream.hpp"

#include "parallel_hasher.hpp"

#include <algorithm>
#include <array>

namespace blkcrypt::verity {

namespace {

constexpr std::size_t kChunkBytes = 4u << 20;

Error read_error(uint64_t offset, std::size_t len) {
    return make_error(Status::IoError, "cannot read " + std::to_string(len) + " bytes at offset " +
                                           std::to_string(offset));
}

Error changed_error(const dm::BackingStore& store) {
    const std::string name = store.name();
    return make_error(Status::IoError, (name.empty() ? "the input" : name) + ": changed size while being read");
}

}  // namespace

Result<void> hash_blocks(const std::shared_ptr<BlockHasher>& hasher, dm::BackingStore& store, uint64_t offset,
                         uint32_t bs, uint64_t nblocks, const TreeOptions& opts,
                         const DigestSink& sink) {
    auto workers = ParallelHasher::create(hasher, opts.threads);
    if (!workers) return workers.error();
    ParallelHasher& pool = **workers;
    const std::size_t ds = hasher->digest_size();
    if (nblocks == 0) return {};
    const uint64_t chunk_blocks = std::max<uint64_t>(1, kChunkBytes / bs);
    const std::size_t buf_blocks = static_cast<std::size_t>(std::min(chunk_blocks, nblocks));
    store.hint_sequential();
    // A mapped file is hashed in place (no copy out of the page cache); other
    // stores are read into two buffers, the next while the current is hashed.
    const ConstBytes map = store.mapped();
    const bool in_place = map.size() >= offset + nblocks * bs;
    std::vector<uint8_t> buf[2];
    if (!in_place) buf[0].resize(buf_blocks * bs), buf[1].resize(buf_blocks * bs);
    std::vector<uint8_t> digests(buf_blocks * ds);

    // The chunk starting at block `first`, in buffer `which` when read.
    auto fetch = [&](uint64_t first, int which) -> Result<const uint8_t*> {
        if (in_place) return map.data() + offset + first * bs;
        const std::size_t len = static_cast<std::size_t>(std::min(chunk_blocks, nblocks - first)) * bs;
        if (store.read(offset + first * bs, Bytes(buf[which]).first(len)) != Status::Ok)
            return read_error(offset + first * bs, len);
        return static_cast<const uint8_t*>(buf[which].data());
    };
    auto cur = fetch(0, 0);
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
        if (opts.progress && !opts.progress((first + count) * bs, nblocks * bs))
            return make_error(Status::Interrupted, "interrupted");
        cur = next;
    }
    if (store.changed()) return changed_error(store);  // grew (or shrank) meanwhile
    return {};
}

}  // namespace blkcrypt::verity
