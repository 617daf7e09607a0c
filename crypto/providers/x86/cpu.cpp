#include "cpu.hpp"

#include <cpuid.h>

#include <cstdlib>
#include <string>

namespace blkcrypt::x86 {
namespace {

struct Features {
    bool sha_ni = false, avx512 = false, vaes = false;
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
    f.sha_ni = (c1 & bit_SSSE3) && (c1 & bit_SSE4_1) && (b7 & bit_SHA);
    if (c1 & bit_OSXSAVE) {
        unsigned lo = 0, hi = 0;
        __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        // XCR0: SSE, AVX, opmask, upper halves of ZMM0-15, ZMM16-31.
        const bool zmm_saved = (lo & 0xe6) == 0xe6;
        f.avx512 = zmm_saved && (b7 & bit_AVX2) && (b7 & bit_AVX512F) && (b7 & bit_AVX512BW) &&
                   (b7 & bit_AVX512VL);
    }
    f.vaes = f.avx512 && (c1 & bit_AES) && (c1 & bit_PCLMUL) && (c7 & bit_VAES) && (c7 & bit_VPCLMULQDQ);
    try {
        if (const char* off = std::getenv("BLKCRYPT_X86_DISABLE")) {
            const std::string list = off;
            if (listed(list, "sha_ni")) f.sha_ni = false;
            if (listed(list, "avx512")) f.avx512 = f.vaes = false;
            if (listed(list, "vaes")) f.vaes = false;
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

bool have_sha_ni() noexcept { return features().sha_ni; }
bool have_avx512() noexcept { return features().avx512; }
bool have_vaes_avx512() noexcept { return features().vaes; }

}  // namespace blkcrypt::x86
