// PBKDF benchmarks after cryptsetup's pbkdf_check.c: the same search (start
// points, growth steps, acceptance window), so the costs chosen for a given
// --iter-time match what cryptsetup chooses on the same machine.
#include <blkcrypt/dm/plain_key.hpp>
#include <blkcrypt/luks/pbkdf_bench.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <vector>

namespace blkcrypt::luks {

namespace {

// A fixed dummy passphrase and salt: the cost does not depend on them.
constexpr uint8_t kPass[] = {'f', 'o', 'o', 'b', 'a', 'r', 'f', 'o'};
constexpr uint8_t kSalt[32] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};

long cpu_ms() {
    rusage r{};
    getrusage(RUSAGE_SELF, &r);
    return r.ru_utime.tv_sec * 1000L + r.ru_utime.tv_usec / 1000;
}

// The shortest of `samples` runs, stopping early below at_least.
Result<long> measure_argon2(Argon2Type type, Bytes key, uint32_t t, uint32_t m, uint32_t p, int samples,
                            long at_least) {
    long best = std::numeric_limits<long>::max();
    for (int i = 0; i < samples; ++i) {
        const auto start = std::chrono::steady_clock::now();
        if (auto r = argon2(type, kPass, kSalt, t, m, p, key); !r) return r.error();
        const long ms = static_cast<long>(
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count());
        best = std::min(best, ms);
        if (ms < at_least) break;
    }
    return best;
}

// One step of the estimate; true when nothing better can be had.
bool next_params(uint32_t& t, uint32_t& m, uint32_t min_t, uint32_t min_m, uint32_t max_m, long ms, uint32_t target) {
    const uint32_t old_t = t, old_m = m;
    const uint64_t ums = static_cast<uint64_t>(std::max(ms, 1L));
    if (ums > target) {
        // Too slow: fewer passes first, then less memory.
        const uint64_t nt = uint64_t{t} * target / ums;
        if (nt < min_t) {
            const uint64_t nm = uint64_t{t} * m * target / (uint64_t{min_t} * ums);
            t = min_t;
            if (nm < min_m) {
                m = min_m;
                return true;
            }
            m = static_cast<uint32_t>(nm);
        } else {
            t = static_cast<uint32_t>(nt);
        }
    } else {
        // Too fast: more memory first, then more passes.
        const uint64_t nm = uint64_t{m} * target / ums;
        if (nm > max_m) {
            const uint64_t nt = uint64_t{t} * m * target / (uint64_t{max_m} * ums);
            m = max_m;
            if (nt <= min_t) {
                t = min_t;
                return true;
            }
            t = static_cast<uint32_t>(std::min<uint64_t>(nt, std::numeric_limits<uint32_t>::max()));
        } else if (nm < min_m) {
            m = min_m;
            return true;
        } else {
            m = static_cast<uint32_t>(nm);
        }
    }
    return old_t == t && old_m == m;
}

}  // namespace

Result<uint32_t> benchmark_pbkdf2(Registry& reg, std::string_view hash, std::size_t key_size, uint32_t target_ms) {
    if (key_size == 0 || target_ms == 0) return make_error(Status::Invalid, "PBKDF2 benchmark needs a key size and a time");
    SecureBuffer key(key_size);
    uint32_t iterations = 1u << 15;
    uint64_t result = 0;
    for (int step = 0;; ++step) {
        const long start = cpu_ms();
        if (auto r = pbkdf2(reg, dm::plain_hash_alg(hash), kPass, kSalt, iterations, key.span()); !r) return r.error();
        const long ms = cpu_ms() - start;
        if (ms > 0) result = static_cast<uint64_t>(static_cast<double>(iterations) * target_ms / static_cast<double>(ms));
        if (result > std::numeric_limits<uint32_t>::max())
            return make_error(Status::Invalid, "PBKDF2 benchmark: iteration count out of range");
        if (ms > 500) break;
        // Grow faster the further from half a second.
        iterations <<= ms <= 62 ? 4 : ms <= 125 ? 3 : ms <= 250 ? 2 : 1;
        if (step >= 10 || iterations == 0) return make_error(Status::Invalid, "PBKDF2 benchmark did not converge");
    }
    return static_cast<uint32_t>(std::max<uint64_t>(result, 1000));
}

Result<Argon2Cost> benchmark_argon2(Argon2Type type, std::size_t key_size, uint32_t target_ms, uint32_t max_memory_kib,
                                    uint32_t parallel) {
    constexpr uint32_t kMinT = 4, kMinM = 32;
    constexpr long kMinMs = 250, kFastMs = 10;
    if (key_size == 0 || target_ms == 0 || parallel == 0)
        return make_error(Status::Invalid, "Argon2 benchmark needs a key size, a time and lanes");
    const uint32_t min_m = std::max(kMinM, parallel * 8);
    if (max_memory_kib < min_m) return make_error(Status::Invalid, "Argon2 benchmark: memory limit too small");
    const long at_least = static_cast<long>(target_ms) * 95 / 100, at_most = static_cast<long>(target_ms) * 110 / 100;
    SecureBuffer key(key_size);
    uint32_t t = kMinT, m = min_m;
    Argon2Cost out{t, m, parallel};
    // 1. Small costs that take at least 250 ms.
    Result<long> ms = measure_argon2(type, key.span(), t, m, parallel, 3, kMinMs);
    for (;;) {
        if (!ms) return ms.error();
        out = {t, m, parallel};
        if (*ms >= kMinMs) break;
        uint32_t& grow = m == max_memory_kib ? t : m;
        if (*ms < kFastMs) {
            grow *= 16;
        } else {
            const uint32_t next = static_cast<uint32_t>(uint64_t{grow} * kMinMs / static_cast<uint64_t>(*ms));
            if (next == grow) break;
            grow = next;
        }
        m = std::min(m, max_memory_kib);
        ms = measure_argon2(type, key.span(), t, m, parallel, 3, kMinMs);
    }
    // 2. Estimate from them; 3. measure until within -5 % .. +10 %.
    do {
        if (next_params(t, m, kMinT, min_m, max_memory_kib, *ms, target_ms)) {
            out = {t, m, parallel};
            break;
        }
        ms = measure_argon2(type, key.span(), t, m, parallel, 1, at_least);
        if (!ms) return ms.error();
        out = {t, m, parallel};
    } while (*ms < at_least || *ms > at_most);
    return out;
}

uint32_t default_argon2_parallel(uint32_t max_threads) {
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return static_cast<uint32_t>(std::clamp<long>(cpus, 1, max_threads));
}

uint32_t default_argon2_memory_kib(uint32_t max_kib) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return max_kib;
    const uint64_t half_kib = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 1024 / 2;
    return static_cast<uint32_t>(std::min<uint64_t>(max_kib, half_kib));
}

}  // namespace blkcrypt::luks
