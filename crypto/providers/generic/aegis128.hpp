// AEGIS-128 (Wu and Preneel, the CAESAR final version) as the kernel's
// aegis128 AEAD: 16-byte key, 16-byte IV, tags of 8 to 16 bytes. The request
// handling (scatter-gather walks, padding of the last partial block, the tag)
// is shared here; a driver supplies only the five block operations on the
// 80-byte state, so the portable driver (aegis128.cpp) and the AES-NI one
// (x86/aegis128_aesni.cpp) differ in nothing but the AES round.
#pragma once

#include <blkcrypt/internal/alg.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace blkcrypt::aegis128 {

constexpr std::size_t kKeySize = 16, kIvSize = 16, kBlock = 16, kMinTag = 8, kMaxTag = 16;

// The state S0..S4, each block as its 16 bytes in memory order.
struct State {
    alignas(16) uint8_t s[5][kBlock];
};

// A driver's block operations. n counts 16-byte blocks; in and out may be
// the same memory.
struct Ops {
    void (*init)(State&, const uint8_t* key, const uint8_t* iv);
    void (*absorb)(State&, const uint8_t* ad, std::size_t n);
    void (*encrypt)(State&, const uint8_t* in, uint8_t* out, std::size_t n);
    void (*decrypt)(State&, const uint8_t* in, uint8_t* out, std::size_t n);
    // The last len (< 16) bytes of ciphertext: the state absorbs the
    // plaintext padded with zeros, not the keystream.
    void (*decrypt_tail)(State&, const uint8_t* in, uint8_t* out, std::size_t len);
    // Seven updates with S3 ^ (le64 assoc bits || le64 text bits); the tag is
    // the XOR of the five blocks.
    void (*final)(State&, uint64_t assoc_bits, uint64_t text_bits, uint8_t* tag);
};

// An AeadAlg named "aegis128" running ops; info carries the driver name,
// module and priority, the rest is filled in here.
std::shared_ptr<Alg> make_alg(AlgInfo info, const Ops& ops);

// The constants of the initialisation (the Fibonacci numbers mod 256).
extern const uint8_t kConst0[kBlock];
extern const uint8_t kConst1[kBlock];

}  // namespace blkcrypt::aegis128
