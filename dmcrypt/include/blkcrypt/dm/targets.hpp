// The device-mapper targets as block devices: each kernel target type a
// table line can name (linear, zero, error, crypt, verity, integrity) and the stack of
// lines a table makes. One source file per type under src/targets/.
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/block_device.hpp>
#include <blkcrypt/status.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace blkcrypt::verity {
class VerityTarget;
}
namespace blkcrypt::integrity {
class IntegrityTarget;
}

namespace blkcrypt::dm {

class CryptTarget;

// [offset, offset + length) of `lower`, bytes; both multiples of its block size.
Result<std::shared_ptr<BlockDevice>> make_linear_device(std::shared_ptr<BlockDevice> lower, uint64_t offset,
                                                        uint64_t length);
// Reads zeros, drops writes (dm-zero).
std::shared_ptr<BlockDevice> make_zero_device(uint64_t size, bool read_only);
// Every read and write fails with IoError (dm-error).
std::shared_ptr<BlockDevice> make_error_device(uint64_t size);

// A dm-crypt target as a block device: each I/O is one bio on the target's
// async path; the block size is the table's sector size, flush flushes the
// target's store. read_only refuses writes. Discards reach the store (a hole
// in the ciphertext) when the table has allow_discards, as dm-crypt passes them.
std::shared_ptr<BlockDevice> make_crypt_device(std::shared_ptr<CryptTarget> target,
                                               std::shared_ptr<BackingStore> store, bool read_only);

// The verified data of a dm-verity target, read-only, on a pool of `threads`
// I/O threads (0: one per core); a block that fails verification fails its read.
Result<std::shared_ptr<BlockDevice>> make_verity_device(std::unique_ptr<verity::VerityTarget> target,
                                                        unsigned threads, std::string description);

// A dm-integrity target. With an internal hash, reads check every tag
// (Corrupt on a mismatch) and writes compute them; without one, plain I/O
// is refused (Unsupported) and tagged() gives the target above its data and
// tags. On a pool of `threads` I/O threads (0: one per core).
// on_failure, when set, hears each request the target fails before it fails
// (from the I/O threads, one at a time): a tag mismatch's message names the
// block as the kernel's log line does ("...: Checksum failed at sector 0x..").
using IntegrityFailure = std::function<void(const Error&)>;
Result<std::shared_ptr<BlockDevice>> make_integrity_device(std::shared_ptr<integrity::IntegrityTarget> target,
                                                           unsigned threads, IntegrityFailure on_failure = {});

// One line of a stack: a device placed at `start`.
struct Segment {
    uint64_t start = 0;  // bytes into the whole device
    std::shared_ptr<BlockDevice> dev;  // its size is the segment's length
};
// Segments back to back from 0 (the lines of one table). An I/O across a
// boundary is split; its result is the first failure of its parts. The block
// size is the largest of the segments'; every boundary must be a multiple of
// it. Read-only when read_only is set or any segment is.
Result<std::shared_ptr<BlockDevice>> make_concat_device(std::vector<Segment> segments, bool read_only,
                                                        std::string description);

}  // namespace blkcrypt::dm
