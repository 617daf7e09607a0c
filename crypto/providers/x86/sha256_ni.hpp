// SHA-256 compression with the x86 SHA extensions (SHA-NI): one message, or
// two independent messages interleaved so the CPU overlaps their round
// chains (what the kernel's sha256_ni_finup2x does for dm-verity/fs-verity).
#pragma once

#include <cstddef>
#include <cstdint>

namespace blkcrypt::x86 {

// state: a, b, ..., h. nblocks 64-byte blocks from data.
void sha256_ni_blocks(uint32_t state[8], const uint8_t* data, std::size_t nblocks) noexcept;
// Two states, one block each from a and b, interleaved.
void sha256_ni_blocks2(uint32_t sa[8], uint32_t sb[8], const uint8_t* a, const uint8_t* b,
                       std::size_t nblocks) noexcept;

// ShashDesc::chain for two-block messages (72 <= len <= 119: the digest in
// the first block, the 8-byte counter in the second), as BitLocker's
// stretch hashes 88 bytes 2^20 times.
void sha256_ni_chain(uint8_t* msg, std::size_t len, uint64_t rounds) noexcept;

}  // namespace blkcrypt::x86
