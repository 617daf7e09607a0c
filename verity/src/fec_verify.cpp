// verify_tree_fec: verification through an overlay of FEC-corrected blocks.
// Correcting a hash block makes the blocks under it checkable, so the check
// repeats (at most once per tree level, plus one) until it finds nothing new.
#include <blkcrypt/verity/fec.hpp>
#include <blkcrypt/verity/tree.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

namespace blkcrypt::verity {

namespace {

// Reads through to the base store, with corrected message blocks laid over it.
class Overlay final : public BackingStore {
public:
    Overlay(BackingStore& base, const FecGeometry& g, bool data, bool hash,
            const std::map<uint64_t, std::vector<uint8_t>>& fixed)
        : base_(base), g_(g), data_(data), hash_(hash), fixed_(fixed) {}

    Status read(uint64_t offset, Bytes out) override {
        if (Status st = base_.read(offset, out); st != Status::Ok) return st;
        const uint64_t bs = g_.block_size;
        for (const auto& [m, content] : fixed_) {
            uint64_t at;  // byte offset of block m on this store
            if (m < g_.data_blocks) {
                if (!data_) continue;
                at = m * bs;
            } else {
                if (!hash_) continue;
                at = (g_.hash_start + m - g_.data_blocks) * bs;
            }
            const uint64_t lo = std::max(at, offset), hi = std::min(at + bs, offset + out.size());
            if (lo < hi) std::memcpy(out.data() + (lo - offset), content.data() + (lo - at), hi - lo);
        }
        return Status::Ok;
    }
    Status write(uint64_t, ConstBytes) override { return Status::Unsupported; }
    uint64_t size() const override { return base_.size(); }

private:
    BackingStore& base_;
    const FecGeometry& g_;
    bool data_, hash_;
    const std::map<uint64_t, std::vector<uint8_t>>& fixed_;
};

uint64_t message_block(const FecGeometry& g, const Corruption& c) {
    if (c.kind == Corruption::DataBlock) return c.block;
    return fec_message_block_of_hash(g, c.block);  // hash block or the top block (root mismatch)
}

}  // namespace

Result<FecVerifyReport> verify_tree_fec(Registry& reg, const VerityParams& params, ConstBytes root_hash,
                                        BackingStore& data, BackingStore& hash, const FecGeometry& g,
                                        BackingStore& fec, const TreeOptions& opts) {
    std::map<uint64_t, std::vector<uint8_t>> fixed;
    std::map<uint64_t, uint64_t> bytes_of;
    std::set<uint64_t> bad_set;
    const bool same = &data == &hash;
    Overlay data_o(data, g, true, same, fixed), hash_o(hash, g, same, true, fixed);
    BackingStore& hash_view = same ? static_cast<BackingStore&>(data_o) : hash_o;
    FecVerifyReport out;
    TreeOptions quiet = opts;
    for (unsigned pass = 0;; ++pass) {
        auto report = verify_tree(reg, params, root_hash, data_o, hash_view, pass ? quiet : opts);
        if (!report) return report.error();
        quiet.progress = {};  // progress only for the first pass
        out.driver = report->driver;
        std::vector<uint64_t> fresh;
        for (const auto& c : report->corruptions) {
            const uint64_t m = message_block(g, c);
            if (m != UINT64_MAX && !fixed.count(m) && !bad_set.count(m)) fresh.push_back(m);
        }
        if (fresh.empty()) {
            out.corruptions = report->corruptions;
            break;
        }
        bad_set.insert(fresh.begin(), fresh.end());
        const std::vector<uint64_t> bad(bad_set.begin(), bad_set.end());
        for (uint64_t m : fresh) {
            std::vector<uint8_t> block(g.block_size);
            // Hash-marked erasures first (2x the reach); without, should a mark be wrong.
            auto r = fec_correct_block(g, data_o, hash_view, fec, m, block, bad);
            if (!r.ok() && r.error().status == Status::Corrupt)
                r = fec_correct_block(g, data_o, hash_view, fec, m, block);
            if (r.ok()) {
                fixed.emplace(m, std::move(block));
                bytes_of[m] = *r;
            } else if (r.error().status != Status::Corrupt) {
                return r.error();
            }
        }
    }
    // Repaired: corrected and no longer reported (itself or as a root mismatch).
    std::set<uint64_t> still;
    for (const auto& c : out.corruptions) still.insert(message_block(g, c));
    for (auto& [m, content] : fixed) {
        if (still.count(m)) continue;
        FecRepair r;
        r.message_block = m;
        r.data = m < g.data_blocks;
        r.block = r.data ? m : g.hash_start + (m - g.data_blocks);
        r.bytes = bytes_of[m];
        r.content = content;
        out.corrected_bytes += r.bytes;
        out.repaired.push_back(std::move(r));
    }
    return out;
}

}  // namespace blkcrypt::verity
