#include "cpu.hpp"

#include <cpuid.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace blkcrypt::x86 {
namespace {

struct Features {
    bool aesni = false, sha_ni = false, avx512 = false, avx512_vbmi = false, vaes_avx2 = false;
};

bool listed(const std::string& list, const std::string& name) {
    std::size_t start = 0;
    while (start <= list.size()) {
        const std::size_t end = std::min(list.find(',', start), list.size());
        const std::string item = list.substr(start, end - start);
        if (item == name || item == "all") return true;
        start = end + 1;
    }
    return false;
}

Features detect() noexcept {
    Features f;
    unsigned a = 0, b = 0, c1 = 0, d = 0, b7 = 0, c7 = 0;
    if (!__get_cpuid(1, &a, &b, &c1, &d) || !__get_cpuid_count(7, 0, &a, &b7, &c7, &d)) return f;
    f.aesni = (c1 & bit_AES) != 0;  // SSE2 is part of x86-64
    f.sha_ni = (c1 & bit_SSSE3) && (c1 & bit_SSE4_1) && (b7 & bit_SHA);
    if (c1 & bit_OSXSAVE) {
        unsigned lo = 0, hi = 0;
        __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        // XCR0: SSE and AVX (XMM, upper halves of YMM); for AVX-512 also
        // opmask, upper halves of ZMM0-15, ZMM16-31.
        const bool ymm_saved = (lo & 0x06) == 0x06;
        const bool zmm_saved = (lo & 0xe6) == 0xe6;
        f.avx512 = zmm_saved && (b7 & bit_AVX2) && (b7 & bit_AVX512F) && (b7 & bit_AVX512BW) &&
                   (b7 & bit_AVX512VL);
        f.avx512_vbmi = f.avx512 && (c7 & bit_AVX512VBMI);
        f.vaes_avx2 = ymm_saved && (c1 & bit_AVX) && (b7 & bit_AVX2) && (c1 & bit_AES) && (c1 & bit_PCLMUL) &&
                      (c7 & bit_VAES) && (c7 & bit_VPCLMULQDQ);
    }
    try {
        if (const char* off = std::getenv("BLKCRYPT_X86_DISABLE")) {
            const std::string list = off;
            if (listed(list, "aesni")) f.aesni = false;
            if (listed(list, "sha_ni")) f.sha_ni = false;
            if (listed(list, "avx512")) f.avx512 = f.avx512_vbmi = false;
            if (listed(list, "avx512_vbmi")) f.avx512_vbmi = false;
            if (listed(list, "vaes")) f.vaes_avx2 = false;
        }
    } catch (...) {  // out of memory reading the variable: keep what the CPU has
    }
    return f;
}

const Features& features() noexcept {
    static const Features f = detect();
    return f;
}

}  // namespace

bool have_aesni() noexcept { return features().aesni; }
bool have_sha_ni() noexcept { return features().sha_ni; }
bool have_avx512() noexcept { return features().avx512; }
bool have_avx512_vbmi() noexcept { return features().avx512_vbmi; }
bool have_vaes_avx2() noexcept { return features().vaes_avx2; }
bool have_vaes_avx512() noexcept { return features().vaes_avx2 && features().avx512; }

}  // namespace blkcrypt::x86
