// ParallelHasher: hashes runs of equal-sized blocks with a BlockHasher on a
// pool of threads, one HashContext each, contiguous block ranges per thread.
// start() returns at once so the caller can read the next chunk meanwhile.
// Shared by dm-verity (format/verify) and fs-verity.
#pragma once

#include <blkcrypt/verity/block_hasher.hpp>

#include "task_pool.hpp"

#include <memory>
#include <vector>

namespace blkcrypt::verity {

class ParallelHasher {
public:
    // threads 0: one per core. An async hasher gets one submitting thread:
    // the driver does its own parallelism.
    static Result<std::unique_ptr<ParallelHasher>> create(std::shared_ptr<const BlockHasher> hasher,
                                                          unsigned threads);

    // Hashes count blocks of bs bytes at data into digests (digest_size each).
    // The buffers must stay untouched until its wait() returns. A second run
    // may be started before the first is waited for (the workers go on to
    // it); each wait() finishes the oldest run.
    void start(const uint8_t* data, std::size_t count, std::size_t bs, uint8_t* digests);
    Status wait();
    Status hash(ConstBytes data, std::size_t bs, Bytes digests) {
        start(data.data(), data.size() / bs, bs, digests.data());
        return wait();
    }
    // A context for the calling thread (tree blocks), never used by the pool.
    HashContext& own_context() noexcept { return *own_; }
    std::size_t digest_size() const noexcept { return ds_; }

private:
    ParallelHasher(std::shared_ptr<const BlockHasher> h, unsigned threads)
        : hasher_(std::move(h)), pool_(threads), ds_(hasher_->digest_size()) {}
    std::shared_ptr<const BlockHasher> hasher_;  // the contexts use it
    TaskPool pool_;
    std::vector<std::unique_ptr<HashContext>> ctx_;
    std::unique_ptr<HashContext> own_;
    std::size_t ds_;
};

}  // namespace blkcrypt::verity
