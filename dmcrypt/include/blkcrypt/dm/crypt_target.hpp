// CryptTarget: a userspace dm-crypt target. Built from a table (see
// table.hpp) over a BackingStore; bios are encrypted/decrypted by handing
// each whole bio (split at TargetOptions::max_request) to the IV-generation
// template as one request, on worker threads. Output is byte-identical to
// the kernel's dm-crypt for the same table.
//
// Writes encrypt into target-owned bounce buffers (never the caller's
// memory) and then write the backing store; reads fill the caller's memory
// from the store and decrypt it in place. Misaligned bios (start or size not
// a multiple of the sector size) are refused, as the kernel does.
#pragma once

#include <blkcrypt/dm/backing_store.hpp>
#include <blkcrypt/dm/bio.hpp>
#include <blkcrypt/dm/table.hpp>
#include <blkcrypt/registry.hpp>

#include <memory>

namespace blkcrypt::dm {

struct TargetOptions {
    unsigned threads = 0;               // crypt workers; 0 = one per core
    std::size_t queue_depth = 0;        // bios queued before submit blocks; 0 = 4 per worker
    std::size_t max_request = 1 << 20;  // bytes per IV-template request
};

class CryptTarget {
public:
    // length_sectors: the target's size in 512-byte sectors (0: the store's
    // size after table.offset). The table's device field is informational.
    static Result<std::unique_ptr<CryptTarget>> create(Registry& reg, const CryptTable& table,
                                                       std::shared_ptr<BackingStore> store,
                                                       uint64_t length_sectors = 0,
                                                       TargetOptions opts = {});
    virtual ~CryptTarget() = default;

    // Queue a bio; its on_complete reports the result. A bio refused at once
    // (misaligned, past the end) returns the error and is not completed.
    virtual Status submit(Bio& bio) = 0;
    // Submit and wait.
    virtual Status submit_sync(Bio& bio) = 0;
    // Wait until every submitted bio has completed.
    virtual void drain() = 0;

    virtual const CryptTable& table() const = 0;
    virtual uint64_t length_sectors() const = 0;
    virtual const AlgInfo& cipher_info() const = 0;  // the transform in use
};

}  // namespace blkcrypt::dm
