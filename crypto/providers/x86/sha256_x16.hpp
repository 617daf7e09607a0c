// SHA-256 compression of 16 independent messages at once, one message per
// 32-bit lane of the AVX-512 registers (the multi-buffer "x16" technique of
// isa-l_crypto's sha256_mb). SHA-NI runs one message's round chain at a
// time; here every instruction advances sixteen chains, so hashing many
// equal-length blocks (dm-verity, fs-verity) gets more bytes per cycle.
#pragma once

#include <cstddef>
#include <cstdint>

namespace blkcrypt::x86 {

// states[k]: message k's a, b, ..., h. nblocks 64-byte blocks from each of
// data[0..16). Call only when have_avx512() (cpu.hpp).
void sha256_x16_blocks(uint32_t states[16][8], const uint8_t* const data[16], std::size_t nblocks) noexcept;

// The same with a given transpose of the message words (the tests run both):
// Shuffle needs have_avx512(), Vbmi have_avx512_vbmi(); sha256_x16_blocks
// takes Vbmi where the CPU has it.
enum class X16Load { Shuffle, Vbmi };
void sha256_x16_blocks_with(X16Load load, uint32_t states[16][8], const uint8_t* const data[16],
                            std::size_t nblocks) noexcept;

}  // namespace blkcrypt::x86
