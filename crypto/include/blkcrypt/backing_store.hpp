// BackingStore: where a target's data lives (a file, a block device, memory
// in tests): dm-crypt's ciphertext, dm-verity's data and hash devices, the
// file fs-verity hashes. Offsets are bytes; calls may come from many threads.
// A transfer that fails or reaches past size() returns IoError.
#pragma once

#include <blkcrypt/bytes.hpp>
#include <blkcrypt/request.hpp>
#include <blkcrypt/status.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace blkcrypt {

class BackingStore {
public:
    virtual ~BackingStore() = default;
    virtual Status read(uint64_t offset, Bytes out) = 0;
    // Starts read(offset, out) without waiting, where the store can keep
    // many reads in flight (the NBD store); false when it cannot (the
    // default), and nothing is started: call read(). When it returns true,
    // done runs exactly once with the read's status, possibly before the
    // call returns and on any thread (the store's own: it must neither
    // block nor call the store); out is the store's until then. A worker
    // that waited on each read kept one request per worker in flight, and
    // a remote image read at the speed of its round trips.
    virtual bool start_read(uint64_t /*offset*/, Bytes /*out*/, const Completion& /*done*/) { return false; }
    // How many reads a client that starts them (start_read) should keep in
    // flight: 0 for a store without start_read. A remote store answers each
    // read a round trip later, so more in flight hide more of that wait.
    virtual std::size_t read_depth() const { return 0; }
    virtual Status write(uint64_t offset, ConstBytes in) = 0;
    virtual uint64_t size() const = 0;
    virtual Status flush() { return Status::Ok; }
    // Gives [offset, offset+len) back (a file gets a hole there, reading as
    // zeros); Unsupported where the store cannot (the default).
    virtual Status discard(uint64_t /*offset*/, uint64_t /*len*/) { return Status::Unsupported; }
    // The caller will read the whole store in order (enables OS readahead).
    virtual void hint_sequential() noexcept {}
    // The whole store as read-only memory, when it can be mapped (a regular
    // file); empty otherwise. Readers that only look (hashing) avoid a copy.
    // Pages past the end of a file shrunk by someone else while mapped read
    // as zeros (see blkcrypt/internal/mapped_file.hpp): readers of mapped()
    // check changed() after each chunk and at the end.
    virtual ConstBytes mapped() { return {}; }
    // True when the file no longer has the size it had when opened (shrunk
    // or grown), or a read of mapped() went past its end.
    virtual bool changed() noexcept { return false; }
    // The path it was opened from, for messages ("" for memory).
    virtual std::string name() const { return {}; }
    // Drops [offset, offset+len) of the mapping from this process's resident
    // memory (the data stays in the page cache), to keep memory bounded.
    virtual void release_mapped(uint64_t /*offset*/, uint64_t /*len*/) noexcept {}
    // The same file opened again with O_DIRECT, owned by the store (closed
    // with it), for reading what is not in the page cache straight from the
    // disk without filling the cache; -1 when the store has no such thing or
    // the file system refuses it. Reads through it must have offset, length
    // and buffer aligned to kDirectAlign.
    static constexpr std::size_t kDirectAlign = 4096;
    virtual int direct_fd() noexcept { return -1; }
    // Starts writing [offset, offset+len) out without waiting, so a streaming
    // writer's final flush() waits for the tail only, not the whole image.
    virtual void start_writeback(uint64_t /*offset*/, uint64_t /*len*/) noexcept {}
    // Allocation maps (NBD block status): whether offset (< size()) is in a
    // hole (reads as zeros) or in data, and how far that run goes, at most
    // len bytes (len > 0). Stores that cannot tell say data (the default).
    struct Run {
        uint64_t length;
        bool hole;
    };
    virtual Run allocation(uint64_t /*offset*/, uint64_t len) noexcept { return {len, false}; }
};

// A file or block device opened for pread/pwrite (read-only unless writable;
// writes to a read-only store fail). Its size is fixed at open.
Result<std::shared_ptr<BackingStore>> open_file_store(const std::string& path, bool writable);
// A regular file of `size` bytes already open for reading, read-only; the
// store owns fd (pass a dup to keep yours).
std::shared_ptr<BackingStore> adopt_file_store(int fd, uint64_t size, std::string name);

// The one opener of an image a user names (IMAGE, DATA, HASH, FEC, a
// header, an output): an NBD URI (nbd://host[:port]/export, nbds://...,
// nbd+unix:///export?socket=PATH, as libnbd's nbd_connect_uri reads them) is
// reached through libnbd (docs/remote.md), any other path as open_file_store.
// A writable NBD store refuses a read-only export. Unsupported for a URI when
// libnbd is not built in or cannot be loaded.
Result<std::shared_ptr<BackingStore>> open_store(const std::string& path, bool writable);
// True when open_store reads path as an NBD URI rather than a file name.
bool is_nbd_uri(std::string_view path) noexcept;

// Memory, for tests and examples.
class MemoryStore final : public BackingStore {
public:
    explicit MemoryStore(std::size_t size) : data_(size) {}
    Status read(uint64_t offset, Bytes out) override;
    Status write(uint64_t offset, ConstBytes in) override;
    uint64_t size() const override { return data_.size(); }
    // Hashed in place, as a mapped file is: without it the verity engines
    // copied every chunk on their reader thread, and benchmarks on memory
    // measured that copy rather than the engine.
    ConstBytes mapped() override { return data_; }
    std::vector<uint8_t>& data() noexcept { return data_; }

private:
    std::vector<uint8_t> data_;
};

// The names' first home was blkcrypt::dm; code spelling them so still builds.
namespace dm {
using blkcrypt::BackingStore;
using blkcrypt::MemoryStore;
using blkcrypt::open_file_store;
using blkcrypt::adopt_file_store;
}  // namespace dm

}  // namespace blkcrypt
