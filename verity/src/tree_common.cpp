#include "tree_common.hpp"

namespace blkcrypt::verity {

Result<TreeGeometry> plan_tree(Registry& reg, const VerityParams& p) {
    if (auto ok = check_params(p); !ok) return ok.error();
    auto hasher = BlockHasher::create(reg, p.hash_name, p.salt, SaltPlacement::Before);
    if (!hasher) return hasher.error();
    return compute_geometry(p, static_cast<uint32_t>((*hasher)->digest_size()));
}

Result<TreeSetup> prepare_tree(Registry& reg, const VerityParams& p, BackingStore& data,
                               BackingStore& hash, HashMode mode) {
    if (auto ok = check_params(p); !ok) return ok.error();
    const auto place = p.hash_type == 1 ? SaltPlacement::Before : SaltPlacement::After;
    auto hasher = BlockHasher::create(reg, p.hash_name, p.salt, place, mode);
    if (!hasher) return hasher.error();
    auto g = compute_geometry(p, static_cast<uint32_t>((*hasher)->digest_size()));
    if (!g) return g.error();
    const uint64_t data_end = p.data_blocks * p.data_block_size;
    if (data.size() < data_end)
        return make_error(Status::Invalid,
                          "the data device has " + std::to_string(data.size()) + " bytes; " +
                              std::to_string(p.data_blocks) + " blocks of " +
                              std::to_string(p.data_block_size) + " need " + std::to_string(data_end));
    const uint64_t hash_end = g->hash_device_size(p);
    if (hash.size() < hash_end)
        return make_error(Status::Invalid, "the hash device has " + std::to_string(hash.size()) +
                                               " bytes; the tree needs " + std::to_string(hash_end));
    // Data and hash on one device: the tree must start past the data.
    if (&data == &hash && p.hash_offset < data_end)
        return make_error(Status::Invalid, "the hash offset " + std::to_string(p.hash_offset) +
                                               " overlaps the data, which ends at " +
                                               std::to_string(data_end));
    return TreeSetup{std::move(*hasher), std::move(*g)};
}

}  // namespace blkcrypt::verity
