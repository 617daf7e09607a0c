// format_tree: the leaves are hashed in parallel while the data streams in
// (hash_blocks); the MerkleBuilder builds the (128x smaller) upper levels on
// this thread, and their blocks are written in batches to their place on the
// hash device, levels bottom-up from the superblock.
#include <blkcrypt/verity/superblock.hpp>
#include <blkcrypt/verity/tree.hpp>

#include "block_stream.hpp"
#include "merkle_builder.hpp"
#include "tree_common.hpp"

namespace blkcrypt::verity {

namespace {

constexpr std::size_t kWriteBatchBytes = 1u << 20;

// Collects each level's consecutive blocks and writes them 1 MiB at a time.
class TreeWriter {
public:
    TreeWriter(const VerityParams& p, const TreeGeometry& g, BackingStore& out)
        : bs_(p.hash_block_size), g_(g), out_(out), batch_(g.levels()) {}

    Result<void> add(std::size_t level, uint64_t index, ConstBytes block) {
        Batch& b = batch_[level];
        if (b.bytes.empty()) b.first = index;
        b.bytes.insert(b.bytes.end(), block.begin(), block.end());
        return b.bytes.size() >= kWriteBatchBytes ? write(level) : Result<void>{};
    }

    Result<void> write_all() {
        for (std::size_t i = 0; i < batch_.size(); ++i)
            if (auto r = write(i); !r) return r;
        return {};
    }

private:
    struct Batch {
        uint64_t first = 0;  // level block number of bytes[0]
        std::vector<uint8_t> bytes;
    };
    Result<void> write(std::size_t level) {
        Batch& b = batch_[level];
        if (b.bytes.empty()) return {};
        const uint64_t at = (g_.level_start[level] + b.first) * bs_;
        if (out_.write(at, b.bytes) != Status::Ok)
            return make_error(Status::IoError, "cannot write " + std::to_string(b.bytes.size()) +
                                                   " bytes of the hash tree at offset " + std::to_string(at));
        b.bytes.clear();
        return {};
    }

    uint64_t bs_;
    const TreeGeometry& g_;
    BackingStore& out_;
    std::vector<Batch> batch_;
};

}  // namespace

Result<FormatResult> format_tree(Registry& reg, const VerityParams& params, BackingStore& data,
                                 BackingStore& hash, const TreeOptions& opts) {
    auto setup = prepare_tree(reg, params, data, hash, opts.mode);
    if (!setup) return setup.error();
    auto& [hasher, geometry] = *setup;
    VerityParams recorded = params;  // what the superblock and the summary name
    recorded.hash_name = hasher->algorithm();
    auto pool = ParallelHasher::create(hasher, opts.threads);
    if (!pool) return pool.error();

    TreeWriter writer(params, geometry, hash);
    MerkleLayout layout{params.hash_block_size, geometry.digest_size, geometry.slot_size,
                        geometry.hashes_per_block, geometry.level_blocks};
    MerkleBuilder tree(std::move(layout), (*pool)->own_context(),
                       [&](std::size_t level, uint64_t index, ConstBytes block) {
                           return writer.add(level, index, block);
                       });
    auto streamed = hash_blocks(**pool, data, 0, params.data_block_size,
                                params.data_blocks * params.data_block_size, opts.progress,
                                [&](uint64_t, uint64_t, ConstBytes digests) {
                                    return tree.add_leaf_digests(digests);
                                });
    if (!streamed) return streamed.error();
    auto root = tree.finish();
    if (!root) return root.error();
    if (root->empty()) return make_error(Status::Invalid, "no data was hashed");
    if (auto w = writer.write_all(); !w) return w.error();

    if (params.superblock) {
        auto sb = encode_superblock(recorded);
        if (!sb) return sb.error();
        if (hash.write(params.hash_offset, *sb) != Status::Ok)
            return make_error(Status::IoError, "cannot write the superblock");
    }
    if (hash.flush() != Status::Ok) return make_error(Status::IoError, "cannot flush the hash device");
    return FormatResult{recorded, std::move(geometry), std::move(*root), hasher->driver()};
}

}  // namespace blkcrypt::verity
