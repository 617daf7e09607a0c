// verify_tree: recomputes every digest from what is stored and compares it
// with the slot the stored parent block holds (the top block against the root
// hash). A node is reported only if its parent chain up to the root agrees;
// the nodes under a corrupt hash block cannot be judged. A top block that
// disagrees with the root hash is a corrupt hash block unless it is exactly
// what format writes over its children's digests: then only the root hash is
// wrong (veritysetup, which checks bottom-up, tells the two apart the same way).
#include <blkcrypt/verity/tree.hpp>

#include "block_stream.hpp"
#include "tree_common.hpp"

#include <algorithm>
#include <cstring>
#include <set>

namespace blkcrypt::verity {

namespace {

// Node (l, j): l == 0 is data block j; l >= 1 is block j of tree level l-1.
using Node = std::pair<unsigned, uint64_t>;

class Checker {
public:
    Checker(const VerityParams& p, const TreeGeometry& g, BackingStore& hash, ConstBytes root)
        : p_(p), g_(g), hash_(hash), root_(root) {}

    // Compares the digests of nodes [first, first+n) at node level l with
    // their parents' slots.
    Result<void> compare(unsigned l, uint64_t first, uint64_t n, ConstBytes digests) {
        const std::size_t ds = g_.digest_size;
        if (l == g_.levels()) {  // the single top node: against the root hash
            if (std::memcmp(digests.data(), root_.data(), ds) != 0) bad_.insert({l, first});
            return {};
        }
        const uint64_t pb0 = first >> g_.bits, pb1 = (first + n - 1) >> g_.bits;
        const std::size_t hbs = p_.hash_block_size;
        parents_.resize(static_cast<std::size_t>(pb1 - pb0 + 1) * hbs);
        const uint64_t off = (g_.level_start[l] + pb0) * hbs;
        if (hash_.read(off, parents_) != Status::Ok)
            return make_error(Status::IoError, "cannot read the hash tree at offset " + std::to_string(off));
        for (uint64_t i = 0; i < n; ++i) {
            const uint64_t j = first + i;
            const std::size_t slot = static_cast<std::size_t>((j >> g_.bits) - pb0) * hbs +
                                     static_cast<std::size_t>(j & (g_.hashes_per_block - 1)) * g_.slot_size;
            if (std::memcmp(digests.data() + i * ds, parents_.data() + slot, ds) != 0)
                bad_.insert({l, j});
        }
        if (l + 1 == g_.levels() && !top_padding_zero(l)) top_noncanonical_ = true;
        return {};
    }

    std::vector<Corruption> topmost() const {
        std::vector<Corruption> out;
        for (const auto& [l, j] : bad_) {
            bool ancestor_bad = false;
            for (unsigned up = l + 1; up <= g_.levels() && !ancestor_bad; ++up)
                ancestor_bad = bad_.count({up, j >> ((up - l) * g_.bits)}) > 0;
            if (ancestor_bad) continue;
            if (l == 0 || g_.levels() == 0) out.push_back({Corruption::DataBlock, j, 0});
            else if (l == g_.levels() && top_block_canonical())
                out.push_back({Corruption::RootHash, g_.level_start[l - 1], l - 1});
            else out.push_back({Corruption::HashBlock, g_.level_start[l - 1] + j, l - 1});
        }
        return out;
    }

private:
    // parents_ holds the top block: every byte outside the children's
    // digests must be zero, as format leaves it.
    bool top_padding_zero(unsigned l) const {
        const uint64_t children = l == 0 ? p_.data_blocks : g_.level_blocks[l - 1];
        const std::size_t ds = g_.digest_size;
        for (std::size_t b = 0; b < p_.hash_block_size; ++b) {
            const uint64_t j = b / g_.slot_size;
            if (j < children && b % g_.slot_size < ds) continue;
            if (parents_[b] != 0) return false;
        }
        return true;
    }

    bool top_block_canonical() const {
        if (top_noncanonical_) return false;
        const unsigned l = static_cast<unsigned>(g_.levels()) - 1;
        return std::none_of(bad_.begin(), bad_.end(), [l](const Node& n) { return n.first == l; });
    }

    const VerityParams& p_;
    const TreeGeometry& g_;
    BackingStore& hash_;
    ConstBytes root_;
    std::vector<uint8_t> parents_;
    std::set<Node> bad_;
    bool top_noncanonical_ = false;
};

}  // namespace

Result<VerifyReport> verify_tree(Registry& reg, const VerityParams& params, ConstBytes root_hash,
                                 BackingStore& data, BackingStore& hash, const TreeOptions& opts) {
    auto setup = prepare_tree(reg, params, data, hash, opts.mode);
    if (!setup) return setup.error();
    auto& [hasher, g] = *setup;
    if (root_hash.size() != g.digest_size)
        return make_error(Status::Invalid, "the root hash has " + std::to_string(root_hash.size()) +
                                               " bytes; " + params.hash_name + " digests have " +
                                               std::to_string(g.digest_size));
    Checker checker(params, g, hash, root_hash);
    // One pool for the data and every tree level.
    auto pool = ParallelHasher::create(hasher, opts.threads);
    if (!pool) return pool.error();
    auto data_pass = hash_blocks(**pool, data, 0, params.data_block_size,
                                 params.data_blocks * params.data_block_size, opts.progress,
                                 [&](uint64_t first, uint64_t n, ConstBytes d) {
                                     return checker.compare(0, first, n, d);
                                 });
    if (!data_pass) return data_pass.error();
    for (unsigned lv = 0; lv < g.levels(); ++lv) {
        auto pass = hash_blocks(**pool, hash, g.level_start[lv] * params.hash_block_size,
                                params.hash_block_size, g.level_blocks[lv] * params.hash_block_size, {},
                                [&](uint64_t first, uint64_t n, ConstBytes d) {
                                    return checker.compare(lv + 1, first, n, d);
                                });
        if (!pass) return pass.error();
    }
    return VerifyReport{checker.topmost(), hasher->driver()};
}

}  // namespace blkcrypt::verity
