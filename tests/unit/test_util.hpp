// Helpers every test file wants: hex in both directions and one registry
// with the built-in algorithms, shared by the tests of a file (and process).
#pragma once

#include <blkcrypt/bytes.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/request.hpp>
#include <blkcrypt/sg.hpp>
#include <blkcrypt/skcipher.hpp>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

namespace testutil {

inline std::vector<uint8_t> unhex(std::string_view h) {
    std::vector<uint8_t> out;
    for (std::size_t i = 0; i + 1 < h.size(); i += 2)
        out.push_back(static_cast<uint8_t>(std::stoul(std::string(h.substr(i, 2)), nullptr, 16)));
    return out;
}

inline std::string hex(blkcrypt::ConstBytes b) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string s;
    for (uint8_t c : b) s += {kDigits[c >> 4], kDigits[c & 15]};
    return s;
}

// Whether BLKCRYPT_X86_DISABLE (a comma-separated list) names one of names.
inline bool x86_disabled(std::initializer_list<const char*> names) {
    const char* off = std::getenv("BLKCRYPT_X86_DISABLE");
    if (!off) return false;
    const std::string list = std::string(",") + off + ",";
    for (const char* f : names)
        if (list.find(std::string(",") + f + ",") != std::string::npos) return true;
    return false;
}

// Whether xts-aes-vaes-avx2 should be registered, judged independently of
// the library (libgcc's CPUID reading, which checks XCR0 for the AVX state):
// VAES, VPCLMULQDQ, AES-NI, PCLMULQDQ, AVX2, and BLKCRYPT_X86_DISABLE not
// hiding vaes.
inline bool cpu_has_vaes_avx2() {
#if defined(__x86_64__) && defined(__GNUC__)
    if (x86_disabled({"vaes", "all"})) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("aes") && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("avx2") &&
           __builtin_cpu_supports("vaes") && __builtin_cpu_supports("vpclmulqdq");
#else
    return false;
#endif
}

// Whether xts-aes-vaes should be registered: cpu_has_vaes_avx2() plus
// AVX-512 F/BW/VL (XCR0 checked for the ZMM state), and BLKCRYPT_X86_DISABLE
// not hiding avx512 either.
inline bool cpu_has_vaes_avx512() {
#if defined(__x86_64__) && defined(__GNUC__)
    if (!cpu_has_vaes_avx2() || x86_disabled({"avx512"})) return false;
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
#else
    return false;
#endif
}

// The whole file, or false.
inline bool read_file(const std::string& path, std::vector<uint8_t>* out) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return false;
    out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    return true;
}

// Never destroyed: tests may leave transforms alive until exit.
inline blkcrypt::Registry& registry() {
    static blkcrypt::Registry* reg = [] {
        auto* r = new blkcrypt::Registry;
        if (!blkcrypt::register_defaults(*r)) std::abort();  // a build defect, not a condition
        return r;
    }();
    return *reg;
}

// One skcipher request over scatter-gather lists, waited for (sync or async).
inline blkcrypt::Status crypt_sg(const blkcrypt::Skcipher& tfm, bool enc, blkcrypt::SgList src,
                                 blkcrypt::SgList dst, std::size_t len, blkcrypt::Bytes iv) {
    blkcrypt::SkcipherRequest req;
    req.src = src;
    req.dst = dst;
    req.len = len;
    req.iv = iv;
    req.flags = blkcrypt::kMayBacklog;
    blkcrypt::CryptoWait wait;
    if (tfm.is_async()) req.complete = wait.callback();
    return wait.wait(enc ? tfm.encrypt(req) : tfm.decrypt(req));
}

}  // namespace testutil
