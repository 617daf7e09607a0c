// Password-based key derivation: PBKDF2 (RFC 8018) over any HMAC the
// registry has, and Argon2i/Argon2id (RFC 9106) as LUKS2 and cryptsetup use
// them. Callers keep passwords and derived keys in SecureBuffers; these
// functions keep their own intermediate values in wiping memory.
#pragma once

#include <blkcrypt/bytes.hpp>
#include <blkcrypt/status.hpp>

#include <cstdint>
#include <string_view>

namespace blkcrypt {

class Registry;

// PBKDF2 with HMAC over the registry hash `hash` ("sha256", "sha1",
// "ripemd160", "whirlpool", ...): fills out (any length) from password, salt
// and iterations (>= 1). NotFound if the registry has no hmac(hash).
Result<void> pbkdf2(Registry& reg, std::string_view hash, ConstBytes password, ConstBytes salt,
                    uint32_t iterations, Bytes out);

enum class Argon2Type { I, Id };

// Argon2 version 0x13 with time cost (passes), memory cost in KiB and
// parallelism (lanes), as cryptsetup calls it; fills out. The memory is
// allocated for the call, wiped and freed before it returns.
Result<void> argon2(Argon2Type type, ConstBytes password, ConstBytes salt, uint32_t time_cost,
                    uint32_t memory_kib, uint32_t parallel, Bytes out);

}  // namespace blkcrypt
