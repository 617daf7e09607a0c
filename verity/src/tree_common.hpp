// What format_tree and verify_tree share: the hasher for a parameter set and
// the size checks on the two devices.
#pragma once

#include <blkcrypt/verity/tree.hpp>

#include <memory>

namespace blkcrypt::verity {

struct TreeSetup {
    std::shared_ptr<BlockHasher> hasher;
    TreeGeometry geometry;
};

Result<TreeSetup> prepare_tree(Registry& reg, const VerityParams& p, BackingStore& data,
                               BackingStore& hash, HashMode mode);

}  // namespace blkcrypt::verity
