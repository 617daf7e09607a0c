// Data with a tag beside every block: what dm-integrity stores for the
// target above it (the bio integrity payload dm-crypt fills with its AEAD
// tags and random IVs). dm-integrity implements it; dm-crypt's integrity
// feature is built on it.
#pragma once

#include <blkcrypt/bytes.hpp>
#include <blkcrypt/status.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace blkcrypt::integrity {

class TaggedDevice {
public:
    virtual ~TaggedDevice() = default;
    virtual uint64_t size() const = 0;        // bytes the device provides (provided_data_sectors * 512)
    virtual uint32_t block_size() const = 0;  // 512..4096: one tag per block
    virtual uint32_t tag_size() const = 0;    // bytes of tag per block
    virtual bool read_only() const = 0;

    // Whole blocks at `offset`: data.size() a multiple of block_size(), and
    // tags exactly (data.size() / block_size()) * tag_size() bytes, block i's
    // tag at i * tag_size(). Thread-safe: callers run several at once, on
    // disjoint or overlapping ranges (a read overlapping a write sees each
    // block old or new, with its matching tag). A failure names the first
    // failing sector in its message, in 512-byte units of this device.
    virtual Result<void> read(uint64_t offset, Bytes data, Bytes tags) = 0;
    virtual Result<void> write(uint64_t offset, ConstBytes data, ConstBytes tags) = 0;
    // A read that needs no copy of the data: the stored data of whole
    // blocks [offset, offset + len) as read-only memory (a mapped image),
    // with their tags read into `tags` as read() reads them. Empty when the
    // device cannot offer it (then read() copies): it may only where no
    // write can change the blocks meanwhile (a read-only device) and no
    // newer version lies elsewhere (a journal). release_view(offset, len)
    // once done with the memory.
    virtual ConstBytes read_view(uint64_t /*offset*/, std::size_t /*len*/, Bytes /*tags*/) { return {}; }
    virtual void release_view(uint64_t /*offset*/, std::size_t /*len*/) noexcept {}
    // Every write completed before the call is on stable storage.
    virtual Result<void> flush() = 0;
    // For logs: "integrity J tag 28 over image.raw".
    virtual std::string describe() const = 0;
};

}  // namespace blkcrypt::integrity
