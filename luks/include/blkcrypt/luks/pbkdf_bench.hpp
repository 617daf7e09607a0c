// PBKDF cost benchmarks as cryptsetup runs them (lib/crypto_backend/
// pbkdf_check.c) to pick keyslot costs for --iter-time: PBKDF2 iterations
// from CPU time, Argon2 passes and memory from wall-clock time.
#pragma once

#include <blkcrypt/kdf.hpp>
#include <blkcrypt/status.hpp>

#include <cstdint>
#include <string_view>

namespace blkcrypt {
class Registry;
}

namespace blkcrypt::luks {

// Iterations of PBKDF2-HMAC-hash giving key_size bytes in about target_ms of
// CPU time (at least 1000, cryptsetup's minimum).
Result<uint32_t> benchmark_pbkdf2(Registry& reg, std::string_view hash, std::size_t key_size, uint32_t target_ms);

struct Argon2Cost {
    uint32_t time = 0, memory_kib = 0, parallel = 0;
};

// Argon2 costs for about target_ms: memory grows first (up to
// max_memory_kib), then passes (at least 4); parallel lanes as given.
Result<Argon2Cost> benchmark_argon2(Argon2Type type, std::size_t key_size, uint32_t target_ms,
                                    uint32_t max_memory_kib, uint32_t parallel);

// cryptsetup's default lanes (min(4, online CPUs)) and memory limit
// (min(max_kib, half of physical memory)).
uint32_t default_argon2_parallel(uint32_t max_threads = 4);
uint32_t default_argon2_memory_kib(uint32_t max_kib = 1024 * 1024);

}  // namespace blkcrypt::luks
