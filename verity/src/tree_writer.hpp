// TreeWriter: takes the leaf digests in order and builds the levels above
// them, one partial block per level, writing finished blocks in batches to
// their place on the hash device. The top block's salted hash is the root.
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/verity/block_hasher.hpp>
#include <blkcrypt/verity/params.hpp>

#include <vector>

namespace blkcrypt::verity {

class TreeWriter {
public:
    TreeWriter(const VerityParams& p, const TreeGeometry& g, HashContext& ctx, dm::BackingStore& out);
    // Digests of consecutive data blocks, digest_size bytes each.
    Result<void> add_leaf_digests(ConstBytes digests);
    // Pads and hashes the last blocks; returns the root hash.
    Result<std::vector<uint8_t>> finish();

private:
    struct Level {
        std::vector<uint8_t> batch;  // finished blocks not yet written + the open one
        uint64_t batch_first = 0;    // level block number of batch[0]
        std::size_t in_batch = 0;    // finished blocks in batch
        uint32_t slots = 0;          // digests in the open block
        uint64_t written = 0;        // blocks completed at this level
    };
    Result<void> push(std::size_t level, const uint8_t* digest);
    Result<void> complete_block(std::size_t level);
    Result<void> flush(std::size_t level);

    const VerityParams& p_;
    const TreeGeometry& g_;
    HashContext& ctx_;
    dm::BackingStore& out_;
    std::size_t batch_blocks_;
    std::vector<Level> levels_;
    std::vector<uint8_t> root_;
};

}  // namespace blkcrypt::verity
