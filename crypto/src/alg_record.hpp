// The registry's bookkeeping of one algorithm, private to the library
// (registry.cpp, alg_ref.cpp, testmgr.cpp): plugin authors subclass Alg and
// never see these fields.
#pragma once

#include <blkcrypt/internal/alg.hpp>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace blkcrypt::detail {

struct AlgRecord {
    // What an instance was built from (recorded by its Spawn<T> members).
    // The registry marks instances superseded when a better one registers.
    std::vector<std::shared_ptr<const Alg>> spawns;
    // The generic name whose vectors test it, when not info().name.
    std::string test_name;
    std::atomic<int> users{0};  // AlgRef holders
    std::atomic<bool> superseded{false};
};

}  // namespace blkcrypt::detail
