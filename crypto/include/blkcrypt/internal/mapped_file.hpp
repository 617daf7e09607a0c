// MappedFile: a read-only shared mapping of a file that survives the file
// being truncated under it by another process.
//
// Reading a mapped page past the (new) end of a file raises SIGBUS, which
// would kill the process. Every MappedFile registers its range with one
// process-wide SIGBUS handler: for a fault inside a registered range the
// handler maps a zero page over the faulting page (mmap is async-signal-safe),
// marks that mapping truncated and returns, so the read completes (with
// zeros). Readers call truncated() after each chunk and report the error;
// they must not trust anything read from the mapping once it is set. A fault
// outside every registered range gets the previous disposition (by default
// the process dies of SIGBUS, as before).  A media error under a mapped page also
// raises SIGBUS; it is caught and flagged the same way (readers then report
// the file as changed, which is the likely cause, not a proven one).
#pragma once

#include <blkcrypt/bytes.hpp>

#include <cstdint>
#include <memory>

namespace blkcrypt {

class MappedFile {
public:
    // Maps [0, size) of fd read-only; nullptr when the file cannot be mapped
    // (a pipe, some devices, size 0, or no registration slot left): the
    // caller then reads with pread.
    static std::unique_ptr<MappedFile> map(int fd, uint64_t size) noexcept;
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    ConstBytes bytes() const noexcept { return {base_, size_}; }
    // A read faulted past the end of the file: it shrank while mapped, and
    // some bytes read from the mapping were zeros that are not in the file.
    bool truncated() const noexcept;
    // Drops [offset, offset+len) from this process's resident memory.
    void release(uint64_t offset, uint64_t len) const noexcept;

private:
    MappedFile(const uint8_t* base, std::size_t size, int slot) noexcept
        : base_(base), size_(size), slot_(slot) {}
    const uint8_t* base_;
    std::size_t size_;
    int slot_;
};

}  // namespace blkcrypt
