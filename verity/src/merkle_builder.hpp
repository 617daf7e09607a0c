// MerkleBuilder: the one Merkle tree builder of dm-verity and fs-verity.
// It takes the leaf digests in order and keeps one pending block per level;
// a block is hashed and handed to the sink as soon as it is full (or, at
// finish(), zero-padded), and its digest goes up a level. The layout says
// what differs: dm-verity pads each digest to a power-of-two slot and places
// its levels bottom-up after the superblock, fs-verity packs digests and
// stores the levels root-first; where a block goes is the sink's business.
#pragma once

#include <blkcrypt/verity/block_hasher.hpp>

#include <functional>
#include <vector>

namespace blkcrypt::verity {

struct MerkleLayout {
    std::size_t block_size = 0;
    std::size_t digest_size = 0;
    std::size_t slot_size = 0;          // bytes a digest takes in a block (>= digest_size)
    std::size_t hashes_per_block = 0;   // slots filled before a block is full
    std::vector<uint64_t> level_blocks; // blocks per level, the leaves' parents first
};

// A finished block: block `index` of tree level `level` (0 = the leaves'
// parents). Blocks of one level arrive in order; `block` is valid only
// during the call.
using MerkleBlockSink = std::function<Result<void>(std::size_t level, uint64_t index, ConstBytes block)>;

class MerkleBuilder {
public:
    // ctx hashes the tree blocks (with the tree's salt); it must outlive this.
    MerkleBuilder(MerkleLayout layout, HashContext& ctx, MerkleBlockSink sink);

    // Digests of consecutive leaves, digest_size bytes each.
    Result<void> add_leaf_digests(ConstBytes digests);
    // Pads and emits the last block of each level; returns the root hash:
    // the top block's digest, or the single leaf's when there are no levels,
    // or empty when no leaf was added.
    Result<std::vector<uint8_t>> finish();

private:
    struct Level {
        std::vector<uint8_t> block;  // the pending block
        std::size_t slots = 0;       // digests in it
        uint64_t done = 0;           // blocks emitted
    };
    Result<void> push(std::size_t level, const uint8_t* digest);
    Result<void> emit(std::size_t level);

    MerkleLayout layout_;
    HashContext& ctx_;
    MerkleBlockSink sink_;
    std::vector<Level> levels_;
    std::vector<uint8_t> root_;
};

}  // namespace blkcrypt::verity
