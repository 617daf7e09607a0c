// dm-verity forward error correction: Reed-Solomon parity over the data and
// hash areas, laid out as veritysetup writes it and the kernel's
// dm-verity-fec reads it (../shared/docs/formats.md section 4.5).
//
// The message is data blocks [0, data_blocks) then `covered - data_blocks`
// blocks of the hash device from the tree start (no superblock), zero-padded
// to rounds * rsn blocks, rounds = ceil(covered / rsn), rsn = 255 - roots.
// Codeword c (0 <= c < rounds * block_size) takes byte c % block_size of
// message blocks i * rounds + c / block_size, i = 0..rsn-1; its `roots` parity
// bytes are at fec_offset + c * roots.
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/status.hpp>
#include <blkcrypt/verity/params.hpp>
#include <blkcrypt/verity/tree.hpp>  // Corruption, TreeOptions for verify_tree_fec

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace blkcrypt::verity {

constexpr uint32_t kFecMinRoots = 2, kFecMaxRoots = 24, kFecDefaultRoots = 2;

struct FecGeometry {
    uint32_t roots = kFecDefaultRoots;
    uint32_t rsn = 255 - kFecDefaultRoots;
    uint32_t block_size = 4096;
    uint64_t data_blocks = 0;  // message blocks read from the data device
    uint64_t hash_start = 0;   // first covered block on the hash device
    uint64_t covered = 0;      // data + hash blocks protected (the table's fec_blocks)
    uint64_t rounds = 0;
    uint64_t offset = 0;       // bytes: the parity's start on the FEC device (fec_start * block_size)

    uint64_t parity_blocks() const noexcept { return rounds * roots; }  // veritysetup's "FEC blocks"
    uint64_t parity_bytes() const noexcept { return parity_blocks() * block_size; }
    // Where message block m sits in its codewords: round m % rounds, symbol m / rounds.
    uint64_t round_of(uint64_t m) const noexcept { return m % rounds; }
    unsigned symbol_of(uint64_t m) const noexcept { return static_cast<unsigned>(m / rounds); }
};

// The blocks veritysetup covers: the data, then the hash device from the tree
// start up to `hash_end` bytes (the device's size, or the FEC offset when the
// FEC area is on the hash device), rounded down to blocks.
uint64_t fec_covered_blocks(const VerityParams& p, const TreeGeometry& g, uint64_t hash_end) noexcept;

// Checks veritysetup's rules: equal block sizes, roots 2..24, offset a
// multiple of 512, the covered area at least the data and the tree.
Result<FecGeometry> fec_geometry(const VerityParams& p, const TreeGeometry& g, uint32_t roots,
                                 uint64_t covered, uint64_t offset);

// Computes the parity of the message and writes parity_bytes() at
// g.offset on `fec`, using `threads` threads (0: one per core). The stores
// may be the same object. progress(done, total) is called with message
// blocks done; returning false stops the run ("interrupted").
Result<void> fec_encode(const FecGeometry& g, BackingStore& data, BackingStore& hash, BackingStore& fec,
                        unsigned threads, const std::function<bool(uint64_t, uint64_t)>& progress = {});

// Reconstructs message block m (data block m, or hash block m - data_blocks
// past the tree start) into `out` (block_size bytes) from the other blocks
// of its codewords and the parity. `bad` lists message blocks known to be
// wrong (including m if known), passed to the decoder as erasures while
// they fit (the first `roots` of m's round). Returns the number of bytes
// corrected, or Status::Corrupt when a codeword is beyond the code's reach.
// Erasures that are not wrong cost correction power: callers retry without.
Result<uint64_t> fec_correct_block(const FecGeometry& g, BackingStore& data, BackingStore& hash,
                                   BackingStore& fec, uint64_t m, Bytes out,
                                   std::span<const uint64_t> bad = {});

// The message block of a data block and of a hash block (absolute block
// number on the hash device); none (UINT64_MAX) when it is not covered.
uint64_t fec_message_block_of_hash(const FecGeometry& g, uint64_t hash_block) noexcept;

}  // namespace blkcrypt::verity

namespace blkcrypt::verity {

// A block FEC restored: its message block, where it lives, the corrected
// bytes and its content.
struct FecRepair {
    uint64_t message_block = 0;
    bool data = true;      // data block `block`, else hash block `block` of the hash device
    uint64_t block = 0;
    uint64_t bytes = 0;    // bytes that differed
    std::vector<uint8_t> content;
};

struct FecVerifyReport {
    std::vector<Corruption> corruptions;  // what is still wrong after correction
    std::vector<FecRepair> repaired;      // corrected blocks whose hashes then matched
    uint64_t corrected_bytes = 0;         // veritysetup's "repairable errors"
    std::string driver;
    bool ok() const noexcept { return corruptions.empty(); }
};

// verify_tree, and for each corrupted block its FEC reconstruction (the
// blocks found corrupted serve as erasures), checked again through the tree
// until nothing new is found: a block counts as repaired only when the
// corrected content matches its hash, as the kernel requires.
Result<FecVerifyReport> verify_tree_fec(Registry& reg, const VerityParams& params, ConstBytes root_hash,
                                        BackingStore& data, BackingStore& hash, const FecGeometry& g,
                                        BackingStore& fec, const TreeOptions& opts);

}  // namespace blkcrypt::verity
