// What the CPU and the OS offer the x86 drivers, read once with CPUID and
// XGETBV. BLKCRYPT_X86_DISABLE (a comma-separated list of sha_ni, avx512,
// vaes, or all) hides features, so the fallbacks run on a CPU that has them:
// the tests use it, and a user can rule out a suspect driver.
#pragma once

namespace blkcrypt::x86 {

// SHA extensions with SSSE3 and SSE4.1.
bool have_sha_ni() noexcept;
// AVX-512 F, BW and VL, with the opmask and ZMM state saved by the OS.
bool have_avx512() noexcept;
// have_avx512() plus AES-NI, PCLMULQDQ, VAES and VPCLMULQDQ.
bool have_vaes_avx512() noexcept;

}  // namespace blkcrypt::x86
