// CryptTarget: a userspace dm-crypt target. Built from a table (see
// table.hpp) over a BackingStore; bios are encrypted/decrypted by handing
// each whole bio (split at CryptTargetOptions::max_request) to the IV-generation
// template as one request, on worker threads. Output is byte-identical to
// the kernel's dm-crypt for the same table.
//
// Writes encrypt into target-owned bounce buffers (never the caller's
// memory) and then write the backing store; reads fill the caller's memory
// from the store and decrypt it in place. Misaligned bios (start or size not
// a multiple of the sector size) are refused, as the kernel does.
//
// At most queue_depth bios are in flight (queued, converting or waiting for
// an async transform); submit blocks while all are taken. Each in-flight bio
// owns a preallocated bounce buffer of max_request bytes, so memory is
// bounded by queue_depth x max_request and the data path does not allocate
// (with a synchronous cipher; docs/architecture.md says what that covers).
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/bio.hpp>
#include <blkcrypt/dm/table.hpp>
#include <blkcrypt/registry.hpp>

#include <memory>

namespace blkcrypt::dm {

struct CryptTargetOptions {
    unsigned threads = 0;               // crypt workers; 0 = one per core
    std::size_t queue_depth = 0;        // bios in flight before submit blocks; 0 = 4 per worker
    std::size_t max_request = 1 << 20;  // bytes per IV-template request (rounded down to sectors)
    bool force_async = false;           // allocate "cryptd(<alg_name>)": async completions
};

class CryptTarget {
public:
    // length_sectors: the target's size in 512-byte sectors (0: table.length
    // if set, else the store's size after table.offset); a multiple of the
    // sector size. The table's device field is informational. Errors name the
    // table's cipher (unknown cipher, wrong key length, IV mode refusing the
    // sector size or key count...).
    static Result<std::unique_ptr<CryptTarget>> create(Registry& reg, const CryptTable& table,
                                                       std::shared_ptr<BackingStore> store,
                                                       uint64_t length_sectors = 0,
                                                       CryptTargetOptions opts = {});
    virtual ~CryptTarget() = default;  // waits for the bios in flight

    // Queue a bio: returns InProgress and its on_complete later reports the
    // result, once, on a worker thread. A bio refused at once (misaligned,
    // empty, past the end, no on_complete) returns Invalid and is not
    // completed. Thread-safe; blocks while queue_depth bios are in flight.
    // on_complete may submit further bios (a worker waiting for room runs
    // queued work meanwhile), but must not wait for bios to complete (drain,
    // submit_sync) nor destroy the target.
    // The bio and its memory must stay valid until on_complete is called.
    virtual Status submit(Bio& bio) = 0;
    // Submit and wait; returns the final status. Uses its own completion:
    // bio.on_complete is left as it was and not called.
    virtual Status submit_sync(Bio& bio) = 0;
    // Runs the bio in the calling thread, without a worker's turn: for small
    // bios, where handing over to a worker costs more than the work. Returns
    // the bio's final status and does not call on_complete; or InProgress
    // when an async transform took it after all (on_complete then reports
    // it, as after submit). Invalid as submit refuses; blocks as submit does.
    virtual Status run_inline(Bio& bio) = 0;
    // Wait until every submitted bio has completed.
    virtual void drain() = 0;

    virtual const CryptTable& table() const = 0;
    virtual uint64_t length_sectors() const = 0;
    virtual const AlgInfo& cipher_info() const = 0;  // the transform in use
};

}  // namespace blkcrypt::dm
