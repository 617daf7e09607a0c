// format_tree: the leaves are hashed in parallel while the data streams in;
// the TreeWriter builds the (128x smaller) upper levels on this thread.
#include <blkcrypt/verity/superblock.hpp>
#include <blkcrypt/verity/tree.hpp>

#include "block_stream.hpp"
#include "tree_common.hpp"
#include "tree_writer.hpp"

namespace blkcrypt::verity {

Result<FormatResult> format_tree(Registry& reg, const VerityParams& params, BackingStore& data,
                                 BackingStore& hash, const TreeOptions& opts) {
    auto setup = prepare_tree(reg, params, data, hash, opts.mode);
    if (!setup) return setup.error();
    auto& [hasher, geometry] = *setup;
    VerityParams recorded = params;  // what the superblock and the summary name
    recorded.hash_name = hasher->algorithm();
    auto ctx = hasher->new_context();
    if (!ctx) return ctx.error();

    TreeWriter writer(params, geometry, **ctx, hash);
    auto streamed = hash_blocks(hasher, data, 0, params.data_block_size, params.data_blocks, opts,
                                [&](uint64_t, uint64_t, ConstBytes digests) {
                                    return writer.add_leaf_digests(digests);
                                });
    if (!streamed) return streamed.error();
    auto root = writer.finish();
    if (!root) return root.error();

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
