// BlockDevice: what a device-mapper table is built of and what a server
// exports. One abstraction for every target (a plain BackingStore, dm-crypt,
// dm-verity, linear, zero, error, a stack of them; targets.hpp), in the
// shape of a kernel block device: a size, a logical
// block size, read-only or not, and asynchronous whole-block I/O.
//
// I/O is in whole blocks: offset and length multiples of block_size(),
// inside size(). A submit returns InProgress and `done` reports the result
// exactly once, on any thread, possibly before submit returns; any other
// return means the I/O was refused and `done` is not called. The memory must
// stay valid until `done`. A write never modifies its source memory.
// Callers that need byte granularity (NBD clients) go through the server's
// read-modify-write, which locks the blocks it rewrites.
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/bytes.hpp>
#include <blkcrypt/request.hpp>
#include <blkcrypt/status.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace blkcrypt::integrity {
class TaggedDevice;
}

namespace blkcrypt::dm {

class BlockDevice {
public:
    virtual ~BlockDevice() = default;
    virtual uint64_t size() const = 0;
    virtual uint32_t block_size() const = 0;  // 512..4096, a power of two
    virtual bool read_only() const = 0;

    virtual Status submit_read(uint64_t offset, Bytes out, Completion done) = 0;
    virtual Status submit_write(uint64_t offset, ConstBytes in, Completion done) = 0;
    // Every write completed before the call is on stable storage (fdatasync).
    virtual Status flush() = 0;
    // True when discard() may work (advertised to clients as TRIM).
    virtual bool can_discard() const { return false; }
    // Synchronous; whole blocks. The data there then reads as anything.
    virtual Status discard(uint64_t /*offset*/, uint64_t /*len*/) { return Status::Unsupported; }
    // base:allocation (NBD block status): runs of [offset, offset+len) in
    // order, at least one and at most max, covering at most len (it may stop
    // early). hole: not allocated; zero: reads as zeros. The default, right
    // for every view that transforms its data (an encrypted hole does not
    // decrypt to zeros): one run of data.
    struct Extent {
        uint64_t length;
        bool hole, zero;
    };
    virtual std::vector<Extent> extents(uint64_t /*offset*/, uint64_t len, unsigned /*max*/) {
        return {{len, false, false}};
    }
    // Waits for every I/O submitted so far.
    virtual void drain() = 0;
    // For logs: what is served ("plain image.raw", "crypt aes-xts-plain64 over ...").
    virtual std::string describe() const = 0;
    // Data with a tag per block (a dm-integrity device), for a crypt line
    // with the integrity feature stacked on it; nullptr for every other device.
    virtual std::shared_ptr<integrity::TaggedDevice> tagged() { return nullptr; }
};

// Submits and waits; returns the final status.
Status read_sync(BlockDevice& dev, uint64_t offset, Bytes out);
Status write_sync(BlockDevice& dev, uint64_t offset, ConstBytes in);

struct StoreDeviceOptions {
    uint32_t block_size = 512;
    bool read_only = false;
    unsigned threads = 0;  // I/O threads; 0 = one per core (at least 2)
    std::string description;  // for describe(); default "plain <store name>"
    bool discard = false;     // pass discards to the store
};

// A BackingStore as a block device: its I/O runs on a pool of threads so that
// several requests proceed at once. The size is the store's, rounded down to
// the block size. Refuses a block size that is not 512..4096, a power of two.
Result<std::shared_ptr<BlockDevice>> make_store_device(std::shared_ptr<BackingStore> store,
                                                       StoreDeviceOptions opts = {});

// A block device as a synchronous BackingStore (for a target stacked on it).
// I/O must be in whole blocks of the device.
std::shared_ptr<BackingStore> device_store(std::shared_ptr<BlockDevice> dev, std::string name);

}  // namespace blkcrypt::dm
