// Helpers every test file wants: hex in both directions and one registry
// with the built-in algorithms, shared by the tests of a file (and process).
#pragma once

#include <blkcrypt/bytes.hpp>
#include <blkcrypt/hex.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/request.hpp>
#include <blkcrypt/sg.hpp>
#include <blkcrypt/skcipher.hpp>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace testutil {

// Whether the library was built with the OpenSSL provider
// (-DBLKCRYPT_WITH_OPENSSL, tests/CMakeLists.txt).
constexpr bool kWithOpenssl = BLKCRYPT_WITH_OPENSSL != 0;

// The driver a test about our own code compares with: the OpenSSL one when
// it is built, else the Crypto++ one (or composition) serving the same name.
inline const char* openssl_or(const char* openssl_driver, const char* otherwise) {
    return kWithOpenssl ? openssl_driver : otherwise;
}

// n pseudo-random bytes from rng (any std random engine), for reproducible tests.
template <class Rng>
std::vector<uint8_t> random_bytes(Rng& rng, std::size_t n) {
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
    return v;
}

// Test data is well-formed hex; a typo in it fails loudly.
inline std::vector<uint8_t> unhex(std::string_view h) {
    auto r = blkcrypt::hex_decode(h);
    if (!r) throw std::invalid_argument("bad hex in test data: " + r.error().message);
    return std::move(r).value();
}

inline std::string hex(blkcrypt::ConstBytes b) { return blkcrypt::hex_encode(b); }

// The bytes of a string (passphrases, key file text) as the byte interfaces
// take them: a view, valid while s is.
inline blkcrypt::ConstBytes text(std::string_view s) {
    return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// The same bytes, copied (for tables and messages a test keeps).
inline std::vector<uint8_t> text_copy(std::string_view s) { return {s.begin(), s.end()}; }

// Whether BLKCRYPT_X86_DISABLE (a comma-separated list) names one of names.
inline bool x86_disabled(std::initializer_list<const char*> names) {
    const char* off = std::getenv("BLKCRYPT_X86_DISABLE");
    if (!off) return false;
    const std::string list = std::string(",") + off + ",";
    for (const char* f : names)
        if (list.find(std::string(",") + f + ",") != std::string::npos) return true;
    return false;
}

// Whether aegis128-aesni should be registered: AES-NI, and
// BLKCRYPT_X86_DISABLE not hiding aesni.
inline bool cpu_has_aesni() {
#if defined(__x86_64__) && defined(__GNUC__)
    if (x86_disabled({"aesni", "all"})) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("aes");
#else
    return false;
#endif
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
