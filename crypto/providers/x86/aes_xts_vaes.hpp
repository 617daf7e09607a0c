// AES-XTS on VAES (+ VPCLMULQDQ for the tweak steps), in two vector widths:
//   Zmm: AVX-512, four AES blocks per zmm register, four registers (16 blocks)
//        in flight, the tweaks of four blocks advanced at once (the kernel's
//        aes-xts-vaes-avx512 / avx10_512 does the same);
//   Ymm: AVX2 only (no AVX-512 instruction or register, for CPUs such as AMD
//        Zen 3 or Intel Alder Lake), two blocks per ymm register, four
//        registers (8 blocks) in flight (as the kernel's aes-xts-vaes-avx2).
// The same code for both, generic over the width; an independent
// implementation in C++ intrinsics. Call Zmm only when have_vaes_avx512(),
// Ymm only when have_vaes_avx2() (cpu.hpp).
//
// A data unit is processed as start() (the first tweak, E_K2(IV)), blocks()
// over the whole blocks (any number of calls, the tweak carried between
// them), and finish() over the last 16..31 bytes when the length is not a
// multiple of 16 (ciphertext stealing). crypt() does all three on one
// contiguous buffer. in and out may be the same memory, or not overlap.
// start() and finish() work on one or two blocks and need only AES-NI and
// SSE4.1, whatever the width.
#pragma once

#include <cstddef>
#include <cstdint>

namespace blkcrypt::x86 {

// The expanded keys of one XTS key (K1 || K2). Secret: the owner wipes it.
struct AesXtsKey {
    alignas(64) uint8_t enc[15][16];  // K1, encryption rounds
    alignas(64) uint8_t dec[15][16];  // K1, decryption rounds (equivalent inverse cipher)
    alignas(64) uint8_t tweak[15][16];  // K2, encryption rounds
    unsigned rounds = 0;              // 10, 12 or 14
};

// key = K1 || K2 with halves of 16, 24 or 32 bytes; false for another length.
// Equal halves are accepted (as the generic xts template does).
bool aes_xts_setkey(AesXtsKey& k, const uint8_t* key, std::size_t keylen) noexcept;

enum class XtsWidth { Ymm, Zmm };

// tweak = E_K2(iv): the tweak of the first block.
void aes_xts_start(const AesXtsKey& k, const uint8_t iv[16], uint8_t tweak[16]) noexcept;
// nblocks whole blocks; tweak is advanced past them.
void aes_xts_blocks(const AesXtsKey& k, XtsWidth w, bool enc, const uint8_t* in, uint8_t* out, std::size_t nblocks,
                    uint8_t tweak[16]) noexcept;
// The last len bytes of a data unit, 16 <= len < 32: the last full block and
// a partial one, with ciphertext stealing (len == 16: one plain block).
void aes_xts_finish(const AesXtsKey& k, bool enc, const uint8_t* in, uint8_t* out, std::size_t len,
                    const uint8_t tweak[16]) noexcept;
// A whole data unit of len >= 16 bytes, contiguous.
void aes_xts_crypt(const AesXtsKey& k, XtsWidth w, bool enc, const uint8_t* in, uint8_t* out, std::size_t len,
                   const uint8_t iv[16]) noexcept;

}  // namespace blkcrypt::x86
