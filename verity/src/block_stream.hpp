// The one reader of the verity engines: streams a run of blocks from a store
// and hashes them on the caller's ParallelHasher. Each chunk is hashed while
// the next ones are read. A chunk of a mapped file that is in the page cache
// is hashed in place (its pages mapped before the workers reach them); one
// that is not is read with O_DIRECT (three requests queued), so a file that
// is not cached is hashed as fast as the disk delivers it and stays uncached.
// A mapped file truncated meanwhile reads as zeros (MappedFile, through the
// store), a direct read comes back short: both are reported, never trusted.
// Memory: a few chunks of a few MiB.
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/verity/block_hasher.hpp>

#include "parallel_hasher.hpp"

#include <functional>

namespace blkcrypt::verity {

// digests holds count * digest_size bytes for blocks [first, first+count).
using DigestSink = std::function<Result<void>(uint64_t first, uint64_t count, ConstBytes digests)>;
// After each chunk: bytes hashed so far and the total; false stops the run
// ("interrupted").
using ProgressFn = std::function<bool(uint64_t done, uint64_t total)>;

// Hashes the `length` bytes at `offset` of `store` as blocks of bs bytes; a
// short last block is zero-padded. IoError when the store changes size.
Result<void> hash_blocks(ParallelHasher& pool, dm::BackingStore& store, uint64_t offset, uint32_t bs,
                         uint64_t length, const ProgressFn& progress, const DigestSink& sink);

}  // namespace blkcrypt::verity
