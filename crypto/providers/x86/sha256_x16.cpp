#include "sha256_x16.hpp"

#include "cpu.hpp"
#include "sha256_k.hpp"

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_epi32() (a self-
// initialised variable) as the unused merge source of unmasked operations,
// which -Wall reports as uninitialised (GCC bug 105593). The warnings point
// into the header, so they are silenced around its inclusion and our uses.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <utility>

namespace blkcrypt::x86 {

namespace {

// The library is built for baseline x86-64; only these functions use
// AVX-512, and only after have_avx512() (the vpermt2b variant after
// have_avx512_vbmi()).
namespace base {
#define X16_ISA "avx512f,avx512bw,avx512vl"
#define X16_VBMI 0
#include "sha256_x16.inc"
#undef X16_VBMI
#undef X16_ISA
}  // namespace base

namespace vbmi {
#define X16_ISA "avx512f,avx512bw,avx512vl,avx512vbmi"
#define X16_VBMI 1
#include "sha256_x16.inc"
#undef X16_VBMI
#undef X16_ISA
}  // namespace vbmi

}  // namespace

void sha256_x16_blocks_with(X16Load load, uint32_t states[16][8], const uint8_t* const data[16],
                            std::size_t nblocks) noexcept {
    if (load == X16Load::Vbmi) vbmi::blocks(states, data, nblocks);
    else base::blocks(states, data, nblocks);
}

void sha256_x16_blocks(uint32_t states[16][8], const uint8_t* const data[16], std::size_t nblocks) noexcept {
    sha256_x16_blocks_with(have_avx512_vbmi() ? X16Load::Vbmi : X16Load::Shuffle, states, data, nblocks);
}

}  // namespace blkcrypt::x86

#pragma GCC diagnostic pop
