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

}  // namespace

Result<void> hash_blocks(const std::shared_ptr<BlockHasher>& hasher, dm::BackingStore& store, uint64_t offset,
                         uint32_t bs, uint64_t nblocks, const TreeOptions& opts,
                         const DigestSink& sink) {
    auto workers = ParallelHasher::create(hasher, opts.threads);
    if (!workers) return workers.error();
    ParallelHasher& pool = **workers;
    const std::size_t ds = hasher->digest_size();
    const uint64_t chunk_blocks = std::max<uint64_t>(1, kChunkBytes / bs);
    const std::size_t buf_blocks = static_cast<std::size_t>(std::min(chunk_blocks, nblocks));
    std::vector<uint8_t> buf[2] = {std::vector<uint8_t>(buf_blocks * bs),
                                   std::vector<uint8_t>(buf_blocks * bs)};
    std::vector<uint8_t> digests[2] = {std::vector<uint8_t>(buf_blocks * ds),
                                       std::vector<uint8_t>(buf_blocks * ds)};
    store.hint_sequential();

    auto read_chunk = [&](uint64_t first, int which) -> Result<void> {
        const std::size_t len = static_cast<std::size_t>(std::min(chunk_blocks, nblocks - first)) * bs;
        if (store.read(offset + first * bs, Bytes(buf[which]).first(len)) != Status::Ok)
            return read_error(offset + first * bs, len);
        return {};
    };
    if (nblocks == 0) return {};
    if (auto r = read_chunk(0, 0); !r) return r;

    int cur = 0;
    for (uint64_t first = 0; first < nblocks; first += chunk_blocks, cur ^= 1) {
        const std::size_t count = static_cast<std::size_t>(std::min(chunk_blocks, nblocks - first));
        pool.start(buf[cur].data(), count, bs, digests[cur].data());
        Result<void> next;
        if (first + chunk_blocks < nblocks) next = read_chunk(first + chunk_blocks, cur ^ 1);
        if (Status s = pool.wait(); s != Status::Ok)
            return make_error(s, std::string("hashing failed: ") + to_string(s));
        if (!next) return next;
        if (auto r = sink(first, count, ConstBytes(digests[cur]).first(count * ds)); !r) return r;
        if (opts.progress && !opts.progress((first + count) * bs, nblocks * bs))
            return make_error(Status::IoError, "interrupted");
    }
    return {};
}

}  // namespace blkcrypt::verity
