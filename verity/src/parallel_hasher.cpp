#include "parallel_hasher.hpp"

#include <algorithm>
#include <array>

namespace blkcrypt::verity {

namespace {

constexpr std::size_t kBatch = 16;          // blocks per HashContext call
constexpr std::size_t kMinPerThread = 16;   // fewer blocks are not worth a thread
// A chunk is cut into parts of about this size that idle workers take in
// turn: a worker slowed down (the reader's thread shares its core, a page
// fault) delays its own part, not the whole chunk.
constexpr std::size_t kPartBytes = 256u << 10;

Status hash_range(HashContext& ctx, const uint8_t* data, uint8_t* digests, std::size_t count,
                  std::size_t bs, std::size_t ds) {
    std::array<ConstBytes, kBatch> in;
    std::array<Bytes, kBatch> out;
    for (std::size_t i = 0; i < count; i += kBatch) {
        const std::size_t n = std::min(kBatch, count - i);
        for (std::size_t k = 0; k < n; ++k) {
            in[k] = ConstBytes(data + (i + k) * bs, bs);
            out[k] = Bytes(digests + (i + k) * ds, ds);
        }
        if (Status s = ctx.hash(in.data(), out.data(), n); s != Status::Ok) return s;
    }
    return Status::Ok;
}

}  // namespace

Result<std::unique_ptr<ParallelHasher>> ParallelHasher::create(std::shared_ptr<const BlockHasher> hasher,
                                                               unsigned threads) {
    threads = hasher->is_async() ? 1 : resolve_threads(threads);
    std::unique_ptr<ParallelHasher> p(new ParallelHasher(hasher, threads));
    // Fewer when thread creation failed; none: the pool hashes on the
    // calling thread, with one context.
    threads = std::max(1u, p->pool_.threads());
    for (unsigned i = 0; i <= threads; ++i) {
        auto c = hasher->new_context();
        if (!c) return c.error();
        if (i == threads) p->own_ = std::move(*c);
        else p->ctx_.push_back(std::move(*c));
    }
    return p;
}

void ParallelHasher::start(const uint8_t* data, std::size_t count, std::size_t bs, uint8_t* digests) {
    const std::size_t threads = std::clamp<std::size_t>(count / kMinPerThread, 1, ctx_.size());
    const std::size_t parts =
        threads == 1 ? 1 : std::max(threads, std::min(count / kMinPerThread, count * bs / kPartBytes));
    const std::size_t ds = ds_;
    pool_.start(parts, [this, data, count, bs, digests, parts, ds](std::size_t part, unsigned worker) {
        const std::size_t b = count * part / parts, e = count * (part + 1) / parts;
        return hash_range(*ctx_[worker], data + b * bs, digests + b * ds, e - b, bs, ds);
    });
}

Status ParallelHasher::wait() { return pool_.wait(); }

}  // namespace blkcrypt::verity
