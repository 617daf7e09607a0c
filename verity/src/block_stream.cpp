#include "block_stream.hpp"

#include "task_pool.hpp"

#include <algorithm>
#include <array>

namespace blkcrypt::verity {

namespace {

constexpr std::size_t kChunkBytes = 4u << 20;
constexpr std::size_t kBatch = 16;  // blocks per HashContext call

Error read_error(uint64_t offset, std::size_t len) {
    return make_error(Status::IoError, "cannot read " + std::to_string(len) + " bytes at offset " +
                                           std::to_string(offset));
}

// Hashes count blocks of buf into digests, in batches.
Status hash_range(HashContext& ctx, const uint8_t* buf, uint8_t* digests, std::size_t count,
                  uint32_t bs, std::size_t ds) {
    std::array<ConstBytes, kBatch> in;
    std::array<Bytes, kBatch> out;
    for (std::size_t i = 0; i < count; i += kBatch) {
        const std::size_t n = std::min(kBatch, count - i);
        for (std::size_t k = 0; k < n; ++k) {
            in[k] = ConstBytes(buf + (i + k) * bs, bs);
            out[k] = Bytes(digests + (i + k) * ds, ds);
        }
        if (Status s = ctx.hash(in.data(), out.data(), n); s != Status::Ok) return s;
    }
    return Status::Ok;
}

}  // namespace

Result<void> hash_blocks(const BlockHasher& hasher, dm::BackingStore& store, uint64_t offset,
                         uint32_t bs, uint64_t nblocks, const TreeOptions& opts,
                         const DigestSink& sink) {
    // An async driver does its own parallelism: one submitting thread.
    const unsigned threads = hasher.is_async() ? 1 : resolve_threads(opts.threads);
    std::vector<std::unique_ptr<HashContext>> ctx;
    for (unsigned i = 0; i < threads; ++i) {
        auto c = hasher.new_context();
        if (!c) return c.error();
        ctx.push_back(std::move(*c));
    }
    const std::size_t ds = hasher.digest_size();
    const uint64_t chunk_blocks = std::max<uint64_t>(1, kChunkBytes / bs);
    const std::size_t buf_blocks = static_cast<std::size_t>(std::min(chunk_blocks, nblocks));
    std::vector<uint8_t> buf[2] = {std::vector<uint8_t>(buf_blocks * bs),
                                   std::vector<uint8_t>(buf_blocks * bs)};
    std::vector<uint8_t> digests[2] = {std::vector<uint8_t>(buf_blocks * ds),
                                       std::vector<uint8_t>(buf_blocks * ds)};
    TaskPool pool(threads);
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
        const std::size_t per = (count + threads - 1) / threads;
        const uint8_t* data = buf[cur].data();
        uint8_t* dig = digests[cur].data();
        pool.start(threads, [&, data, dig, per, count](std::size_t part, unsigned worker) {
            const std::size_t b = std::min(count, part * per);
            const std::size_t e = std::min(count, b + per);
            return hash_range(*ctx[worker], data + b * bs, dig + b * ds, e - b, bs, ds);
        });
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
