// Building and checking a whole dm-verity hash tree, as `veritysetup format`
// and `veritysetup verify` do. Both stream the data once with large
// sequential reads, in bounded memory, hashing on every core.
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/status.hpp>
#include <blkcrypt/verity/block_hasher.hpp>
#include <blkcrypt/verity/params.hpp>

#include <functional>
#include <vector>

namespace blkcrypt {
class Registry;
}

namespace blkcrypt::verity {

using blkcrypt::BackingStore;  // verity::BackingStore, as before

struct TreeOptions {
    unsigned threads = 0;                // 0: every core
    HashMode mode = HashMode::Auto;
    // Called after each chunk with the data bytes hashed so far and the
    // total; returning false stops the run (it fails with "interrupted").
    std::function<bool(uint64_t done, uint64_t total)> progress;
};

struct FormatResult {
    VerityParams params;
    TreeGeometry geometry;
    std::vector<uint8_t> root_hash;
    std::string driver;  // the hash driver that did the work
};

// The geometry for params with the digest size of its hash (which is
// looked up), e.g. to size the hash device before format_tree.
Result<TreeGeometry> plan_tree(Registry& reg, const VerityParams& params);

// Hashes data_blocks blocks of `data` and writes the superblock (if
// params.superblock) and the tree to `hash`, which must be writable and at
// least geometry.hash_device_size() bytes. Nothing outside the superblock
// and the tree blocks is written.
Result<FormatResult> format_tree(Registry& reg, const VerityParams& params, BackingStore& data,
                                 BackingStore& hash, const TreeOptions& opts = {});

// One place where stored data disagrees with the tree. Only the topmost
// disagreement is reported: the blocks under a corrupt hash block cannot be
// judged and are not listed.
struct Corruption {
    enum Kind { DataBlock, HashBlock, RootHash } kind;
    uint64_t block = 0;  // data block number, or hash block number on the hash device
    unsigned level = 0;  // tree level of a hash block (0 = leaves)
};

struct VerifyReport {
    bool ok() const noexcept { return corruptions.empty(); }
    std::vector<Corruption> corruptions;
    std::string driver;
};

// Fails (not ok()) only for I/O or parameter errors; corruption is reported.
Result<VerifyReport> verify_tree(Registry& reg, const VerityParams& params, ConstBytes root_hash,
                                 BackingStore& data, BackingStore& hash,
                                 const TreeOptions& opts = {});

}  // namespace blkcrypt::verity
