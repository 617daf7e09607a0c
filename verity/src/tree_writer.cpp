#include "tree_writer.hpp"

#include <algorithm>
#include <cstring>

namespace blkcrypt::verity {

namespace {
constexpr std::size_t kWriteBatchBytes = 1u << 20;
}

TreeWriter::TreeWriter(const VerityParams& p, const TreeGeometry& g, HashContext& ctx,
                       dm::BackingStore& out)
    : p_(p), g_(g), ctx_(ctx), out_(out),
      batch_blocks_(std::max<std::size_t>(1, kWriteBatchBytes / p.hash_block_size)),
      levels_(g.levels()) {}

Result<void> TreeWriter::add_leaf_digests(ConstBytes digests) {
    for (std::size_t off = 0; off < digests.size(); off += g_.digest_size) {
        if (levels_.empty()) {  // one data block: its hash is the root
            root_.assign(digests.begin() + off, digests.begin() + off + g_.digest_size);
            continue;
        }
        if (auto r = push(0, digests.data() + off); !r) return r;
    }
    return {};
}

Result<void> TreeWriter::push(std::size_t level, const uint8_t* digest) {
    Level& lv = levels_[level];
    const std::size_t hbs = p_.hash_block_size;
    if (lv.slots == 0) {  // open a new, zeroed block at the end of the batch
        lv.batch.resize((lv.in_batch + 1) * hbs);
        std::fill(lv.batch.begin() + lv.in_batch * hbs, lv.batch.end(), 0);
    }
    std::memcpy(lv.batch.data() + lv.in_batch * hbs + lv.slots * g_.slot_size, digest, g_.digest_size);
    if (++lv.slots == g_.hashes_per_block) return complete_block(level);
    return {};
}

Result<void> TreeWriter::complete_block(std::size_t level) {
    Level& lv = levels_[level];
    const std::size_t hbs = p_.hash_block_size;
    uint8_t digest[64];
    if (g_.digest_size > sizeof digest) return make_error(Status::Invalid, "digest too large");
    const ConstBytes block(lv.batch.data() + lv.in_batch * hbs, hbs);
    if (Status s = ctx_.hash_one(block, Bytes(digest, g_.digest_size)); s != Status::Ok)
        return make_error(s, std::string("hashing a tree block failed: ") + to_string(s));
    lv.slots = 0;
    ++lv.in_batch;
    ++lv.written;
    if (level + 1 < levels_.size()) {
        if (auto r = push(level + 1, digest); !r) return r;
    } else {
        root_.assign(digest, digest + g_.digest_size);
    }
    if (lv.in_batch == batch_blocks_) return flush(level);
    return {};
}

Result<void> TreeWriter::flush(std::size_t level) {
    Level& lv = levels_[level];
    if (lv.in_batch == 0) return {};
    const uint64_t block = g_.level_start[level] + lv.batch_first;
    const std::size_t len = lv.in_batch * p_.hash_block_size;
    if (out_.write(block * p_.hash_block_size, ConstBytes(lv.batch).first(len)) != Status::Ok)
        return make_error(Status::IoError, "cannot write " + std::to_string(len) +
                                               " bytes of the hash tree at offset " +
                                               std::to_string(block * p_.hash_block_size));
    lv.batch_first += lv.in_batch;
    lv.in_batch = 0;
    lv.batch.clear();
    return {};
}

Result<std::vector<uint8_t>> TreeWriter::finish() {
    for (std::size_t i = 0; i < levels_.size(); ++i) {
        if (levels_[i].slots > 0)
            if (auto r = complete_block(i); !r) return r.error();
        if (auto r = flush(i); !r) return r.error();
        if (levels_[i].written != g_.level_blocks[i])
            return make_error(Status::Invalid, "internal error: level " + std::to_string(i) +
                                                   " has " + std::to_string(levels_[i].written) +
                                                   " blocks, expected " +
                                                   std::to_string(g_.level_blocks[i]));
    }
    if (root_.empty()) return make_error(Status::Invalid, "no data was hashed");
    return root_;
}

}  // namespace blkcrypt::verity
