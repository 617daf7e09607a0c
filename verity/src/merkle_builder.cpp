#include "merkle_builder.hpp"

#include <algorithm>
#include <cstring>

namespace blkcrypt::verity {

namespace {
constexpr std::size_t kMaxDigest = 64;
}

MerkleBuilder::MerkleBuilder(MerkleLayout layout, HashContext& ctx, MerkleBlockSink sink)
    : layout_(std::move(layout)), ctx_(ctx), sink_(std::move(sink)), levels_(layout_.level_blocks.size()) {}

Result<void> MerkleBuilder::add_leaf_digests(ConstBytes digests) {
    const std::size_t ds = layout_.digest_size;
    for (std::size_t off = 0; off + ds <= digests.size(); off += ds)
        if (auto r = push(0, digests.data() + off); !r) return r;
    return {};
}

Result<void> MerkleBuilder::push(std::size_t level, const uint8_t* digest) {
    if (level == levels_.size()) {  // above the top level: the root
        root_.assign(digest, digest + layout_.digest_size);
        return {};
    }
    Level& lv = levels_[level];
    // Zeroed when opened: the padding of slots and of a short last block.
    if (lv.slots == 0) lv.block.assign(layout_.block_size, 0);
    std::memcpy(lv.block.data() + lv.slots * layout_.slot_size, digest, layout_.digest_size);
    if (++lv.slots == layout_.hashes_per_block) return emit(level);
    return {};
}

Result<void> MerkleBuilder::emit(std::size_t level) {
    Level& lv = levels_[level];
    if (lv.done >= layout_.level_blocks[level])
        return make_error(Status::Invalid, "internal error: tree level " + std::to_string(level) + " overflows");
    uint8_t digest[kMaxDigest];
    if (layout_.digest_size > sizeof digest) return make_error(Status::Invalid, "digest too large");
    if (Status s = ctx_.hash_one(lv.block, Bytes(digest, layout_.digest_size)); s != Status::Ok)
        return make_error(s, std::string("hashing a tree block failed: ") + to_string(s));
    if (sink_)
        if (auto r = sink_(level, lv.done, lv.block); !r) return r;
    ++lv.done;
    lv.slots = 0;
    return push(level + 1, digest);
}

Result<std::vector<uint8_t>> MerkleBuilder::finish() {
    for (std::size_t i = 0; i < levels_.size(); ++i) {
        if (levels_[i].slots > 0)
            if (auto r = emit(i); !r) return r.error();
        if (levels_[i].done != layout_.level_blocks[i])
            return make_error(Status::Invalid, "internal error: tree level " + std::to_string(i) + " has " +
                                                   std::to_string(levels_[i].done) + " blocks, expected " +
                                                   std::to_string(layout_.level_blocks[i]));
    }
    return root_;
}

}  // namespace blkcrypt::verity
