// What the CPU and the OS offer the x86 drivers, read once with CPUID and
// XGETBV. BLKCRYPT_X86_DISABLE (a comma-separated list of aesni, sha_ni, avx512,
// avx512_vbmi, vaes, or all) hides features, so the fallbacks run on a CPU
// that has them: the tests use it, and a user can rule out a suspect driver.
// "avx512" hides everything on AVX-512 (the 16-way sha256-ni lanes, the zmm
// xts-aes-vaes; the ymm xts-aes-vaes-avx2 stays), "avx512_vbmi" only the
// byte-permute load of the lanes, "vaes" both VAES drivers, "sha_ni" the SHA
// extensions, "aesni" the AES instructions on xmm registers (aegis128-aesni;
// the VAES drivers check their own bits), "all" every feature.
#pragma once

namespace blkcrypt::x86 {

// AES-NI (aesenc on xmm registers).
bool have_aesni() noexcept;
// SHA extensions with SSSE3 and SSE4.1.
bool have_sha_ni() noexcept;
// AVX-512 F, BW and VL, with the opmask and ZMM state saved by the OS.
bool have_avx512() noexcept;
// have_avx512() and AVX512_VBMI (vpermt2b, used by the x16 message load).
bool have_avx512_vbmi() noexcept;
// AES-NI, PCLMULQDQ, AVX2, VAES and VPCLMULQDQ (on ymm registers), with the
// XMM and YMM state saved by the OS.
bool have_vaes_avx2() noexcept;
// have_vaes_avx2() && have_avx512(): VAES and VPCLMULQDQ on zmm registers.
bool have_vaes_avx512() noexcept;

}  // namespace blkcrypt::x86
