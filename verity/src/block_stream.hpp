// Streams a run of equal-sized blocks from a store and hashes them: each
// chunk is hashed on the pool while the next one is read, and the chunk's
// digests go to a sink in block order. Memory: two chunks of a few MiB.
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/verity/block_hasher.hpp>
#include <blkcrypt/verity/tree.hpp>

#include <functional>
#include <memory>

namespace blkcrypt::verity {

// digests holds count * digest_size bytes for blocks [first, first+count).
using DigestSink = std::function<Result<void>(uint64_t first, uint64_t count, ConstBytes digests)>;

Result<void> hash_blocks(const std::shared_ptr<BlockHasher>& hasher, dm::BackingStore& store, uint64_t offset,
                         uint32_t block_size, uint64_t nblocks, const TreeOptions& opts,
                         const DigestSink& sink);

}  // namespace blkcrypt::verity
