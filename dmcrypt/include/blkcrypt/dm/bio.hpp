// Bio: one I/O to a dm target — a starting sector, a direction and the
// caller's memory as scatter-gather segments, completed through a callback.
#pragma once

#include <blkcrypt/request.hpp>
#include <blkcrypt/sg.hpp>

#include <cstdint>
#include <vector>

namespace blkcrypt::dm {

enum class BioDir { Read, Write };

struct Bio {
    uint64_t sector = 0;          // 512-byte sectors from the start of the target
    BioDir dir = BioDir::Read;
    std::vector<SgEntry> vecs;    // a write never modifies this memory
    Completion on_complete;       // final status; called once, from a worker thread

    std::size_t size() const noexcept { return sg_total(vecs); }
};

}  // namespace blkcrypt::dm
