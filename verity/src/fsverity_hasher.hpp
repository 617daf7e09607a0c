// Internal to fsverity.cpp: salted block hashing, one thread or many.
#pragma once

#include <blkcrypt/bytes.hpp>
#include <blkcrypt/shash.hpp>
#include <blkcrypt/status.hpp>

#include <cstddef>
#include <vector>

namespace blkcrypt::verity::detail {

// H(padded salt || block) for runs of equal-size blocks. The salted state is
// absorbed once; finup_mb then finishes a batch of blocks from it. Drivers
// whose state cannot be exported fall back to init/update/finup per block.
class SaltedHasher {
public:
    static Result<SaltedHasher> create(const Shash& h, ConstBytes padded_salt);

    // data holds whole blocks of block_size; out gets one digest per block.
    Status hash_blocks(ConstBytes data, std::size_t block_size, Bytes out);

private:
    SaltedHasher(ShashDesc desc, ConstBytes padded_salt);
    Status hash_slow(ConstBytes block, Bytes out);

    ShashDesc desc_;
    std::vector<uint8_t> padded_salt_;
    std::size_t ds_;
    bool multi_ = true;
};

// Splits the blocks of a chunk across worker threads, each with its own
// SaltedHasher (descs are not shared between threads).
class LeafHasher {
public:
    static Result<LeafHasher> create(const Shash& h, ConstBytes padded_salt, unsigned threads);

    Status hash_blocks(ConstBytes data, std::size_t block_size, Bytes out);
    // The calling thread's hasher, for tree blocks.
    SaltedHasher& first() { return hashers_.front(); }

private:
    std::vector<SaltedHasher> hashers_;
};

}  // namespace blkcrypt::verity::detail
