// dm-verity parameters and hash-tree geometry, as veritysetup and the kernel
// define them (see docs/verity.md for the layout).
#pragma once

#include <blkcrypt/status.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace blkcrypt::verity {

struct VerityParams {
    std::string hash_name = "sha256";  // any registry name, including a driver name
    uint32_t hash_type = 1;            // 1: salt before the block; 0: Chrome OS, salt after
    uint32_t data_block_size = 4096;
    uint32_t hash_block_size = 4096;
    uint64_t data_blocks = 0;          // blocks covered by the tree
    uint64_t hash_offset = 0;          // bytes: where the superblock (or tree) starts
    std::vector<uint8_t> salt;         // 0..256 bytes
    std::array<uint8_t, 16> uuid{};    // stored in the superblock only
    bool superblock = true;
};

// Sizes must be powers of two in 512..512 KiB, salt at most 256 bytes,
// hash_offset a multiple of 512, at least one data block.
Result<void> check_params(const VerityParams& p);

// Where every level of the tree lives. Level 0 hashes the data blocks; the
// top level (levels-1) is one block whose salted hash is the root hash.
struct TreeGeometry {
    uint32_t digest_size = 0;
    uint32_t slot_size = 0;        // bytes per digest in a hash block (format 1 pads)
    uint32_t hashes_per_block = 0; // a power of two
    uint32_t bits = 0;             // log2(hashes_per_block)
    uint64_t hash_start_block = 0; // first tree block, in hash blocks from device start
    std::vector<uint64_t> level_blocks;  // blocks per level, [0] = leaves
    std::vector<uint64_t> level_start;   // first block of each level (absolute)

    std::size_t levels() const noexcept { return level_blocks.size(); }
    uint64_t total_hash_blocks() const noexcept;
    // Bytes the hash device needs: up to the end of the last tree block (or
    // just the superblock when the tree is empty).
    uint64_t hash_device_size(const VerityParams& p) const noexcept;
};

Result<TreeGeometry> compute_geometry(const VerityParams& p, uint32_t digest_size);

}  // namespace blkcrypt::verity
