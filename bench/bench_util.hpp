// Shared by the benchmark files: one registry with the defaults, the sizes,
// and registration of a benchmark only for names that resolve.
//
// Benchmarks are registered from static initialisers (benchmark_main gives
// no other hook before the run). That is safe here: the registry and the
// vectors it self-tests with are reached through function-local statics or
// constant-initialised data, whatever the order of initialisation.
#pragma once

#include <blkcrypt/alg_info.hpp>
#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/registry.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <cstdlib>
#include <vector>

namespace bench {

inline blkcrypt::Registry& registry() {
    static blkcrypt::Registry* reg = [] {
        auto* r = new blkcrypt::Registry;  // never freed: benchmarks may run until exit
        if (!blkcrypt::register_defaults(*r)) std::abort();  // a build defect, not a condition
        return r;
    }();
    return *reg;
}

// 16 B (one block), 256 B (a small message), 512 B (a sector), 4 KiB (a
// page), 64 KiB (a large I/O).
inline const std::vector<std::size_t>& sizes() {
    static const std::vector<std::size_t> s = {16, 256, 512, 4096, 65536};
    return s;
}

// A recognisable, non-zero key of n bytes (the two xts halves differ).
inline std::vector<uint8_t> key_bytes(std::size_t n) {
    std::vector<uint8_t> k(n);
    for (std::size_t i = 0; i < n; ++i) k[i] = static_cast<uint8_t>(i * 7 + 1);
    return k;
}

inline std::string bm_name(const char* type, const std::string& driver, std::size_t bytes) {
    return std::string("BM_") + type + "/" + driver + "/" + std::to_string(bytes);
}

// BM_direct/<what>/<bytes> for every size: a library's SHA-256 called without
// the registry; fn(state, data, out[32]) runs the timing loop.
template <class Fn>
void register_direct(const char* what, Fn fn) {
    for (std::size_t n : sizes())
        benchmark::RegisterBenchmark(bm_name("direct", what, n).c_str(), [fn, n](benchmark::State& st) {
            std::vector<uint8_t> data(n, 0x5a);
            uint8_t out[32];
            fn(st, data, out);
            st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(n));
        });
}

// Every name worth measuring: each template over Crypto++'s AES or SHA-256
// (whatever templates exist: each is tried, those that resolve are kept),
// the OpenSSL and x86 drivers (where the CPU has them), and the multi-argument compositions on either
// provider. Sorted by generic name, then driver, so rivals run side by side.
// Async transforms (cryptd) are left out: they measure the queue.
struct Candidate {
    std::string name, driver;
    blkcrypt::AlgType type;
};

inline std::vector<Candidate> candidates(blkcrypt::AlgType type) {
    std::vector<std::string> names = {
        "xts-aes-openssl", "xts-aes-vaes", "xts-aes-vaes-avx2", "cbc-aes-openssl", "ctr-aes-openssl", "ecb-aes-openssl",
        "gcm-aes-openssl", "aegis128-generic", "aegis128-aesni",
        "sha1-cryptopp", "sha1-openssl", "sha256-cryptopp", "sha256-openssl", "sha256-ni",
        "sha512-cryptopp", "sha512-openssl", "hmac-sha256-openssl", "hmac(sha256-openssl)",
        "essiv(cbc(aes-cryptopp),sha256-cryptopp)", "essiv(cbc-aes-openssl,sha256-openssl)",
        "essiv(xts(aes-cryptopp),sha256-cryptopp)", "essiv(xts-aes-openssl,sha256-openssl)",
        "rfc4106(gcm(aes-cryptopp))", "rfc4106(gcm-aes-openssl)",
        "rfc4543(gcm(aes-cryptopp))", "rfc4543(gcm-aes-openssl)",
        "rfc4309(ccm(aes-cryptopp))",
        "authenc(hmac(sha256-cryptopp),cbc(aes-cryptopp))",
        "authenc(hmac-sha256-openssl,cbc-aes-openssl)",
    };
    for (const auto& t : registry().template_names()) {
        if (t == "cryptd") continue;
        for (const char* inner : {"aes-cryptopp", "sha256-cryptopp"}) names.push_back(t + "(" + inner + ")");
    }
    std::vector<Candidate> out;
    for (const auto& n : names) {
        auto a = registry().lookup_any(n);
        if (!a || (*a)->info().type != type || (*a)->info().async) continue;
        if ((*a)->info().driver != n) continue;  // not reached by this driver name
        bool dup = false;
        for (const auto& c : out) dup = dup || c.driver == n;
        if (!dup) out.push_back({(*a)->info().name, n, type});
    }
    std::sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
        return a.name != b.name ? a.name < b.name : a.driver < b.driver;
    });
    return out;
}

// The key a transform gets: its largest (AES-256, two for xts), 32 bytes for
// hmac (any length), the kernel's rtattr blob for authenc.
inline std::vector<uint8_t> bench_key(const blkcrypt::AlgInfo& info) {
    if (info.name.rfind("authenc(", 0) == 0) {
        std::vector<uint8_t> k = {8, 0, 1, 0, 0, 0, 0, 32};  // rta_len, KEYA_PARAM, be32 enckeylen
        auto ak = key_bytes(32), ek = key_bytes(32);
        k.insert(k.end(), ak.begin(), ak.end());
        k.insert(k.end(), ek.begin(), ek.end());
        return k;
    }
    return key_bytes(info.max_keysize ? info.max_keysize : 32);
}

}  // namespace bench
