// "aegis128-aesni": AEGIS-128 with the AES round on the aesenc instruction,
// the state in five xmm registers across a whole run of blocks. Registered
// only when CPUID reports AES-NI (BLKCRYPT_X86_DISABLE=aesni hides it), at
// priority 400 above aegis128-generic's 100, as the kernel's
// arch/x86/crypto/aegis128-aesni-glue.c. The request handling is the
// generic driver's (generic/aegis128.hpp).
#include "cpu.hpp"

#include "generic/aegis128.hpp"

#include <blkcrypt/registry.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <immintrin.h>

#include <cstring>

namespace blkcrypt {
namespace {

using aegis128::kBlock;
using aegis128::State;

// GCC needs the target on every function holding the intrinsics.
#define AEGIS_TARGET __attribute__((target("aes,sse2")))

struct Regs {
    __m128i s0, s1, s2, s3, s4;
};

AEGIS_TARGET inline Regs load(const State& st) {
    return {_mm_load_si128(reinterpret_cast<const __m128i*>(st.s[0])),
            _mm_load_si128(reinterpret_cast<const __m128i*>(st.s[1])),
            _mm_load_si128(reinterpret_cast<const __m128i*>(st.s[2])),
            _mm_load_si128(reinterpret_cast<const __m128i*>(st.s[3])),
            _mm_load_si128(reinterpret_cast<const __m128i*>(st.s[4]))};
}

AEGIS_TARGET inline void save(State& st, const Regs& r) {
    _mm_store_si128(reinterpret_cast<__m128i*>(st.s[0]), r.s0);
    _mm_store_si128(reinterpret_cast<__m128i*>(st.s[1]), r.s1);
    _mm_store_si128(reinterpret_cast<__m128i*>(st.s[2]), r.s2);
    _mm_store_si128(reinterpret_cast<__m128i*>(st.s[3]), r.s3);
    _mm_store_si128(reinterpret_cast<__m128i*>(st.s[4]), r.s4);
}

AEGIS_TARGET inline void update(Regs& r, __m128i m) {
    const __m128i s4 = r.s4;
    r.s4 = _mm_aesenc_si128(r.s3, r.s4);
    r.s3 = _mm_aesenc_si128(r.s2, r.s3);
    r.s2 = _mm_aesenc_si128(r.s1, r.s2);
    r.s1 = _mm_aesenc_si128(r.s0, r.s1);
    r.s0 = _mm_aesenc_si128(s4, _mm_xor_si128(r.s0, m));
}

AEGIS_TARGET inline __m128i keystream(const Regs& r) {
    return _mm_xor_si128(_mm_xor_si128(r.s1, r.s4), _mm_and_si128(r.s2, r.s3));
}

AEGIS_TARGET inline __m128i loadu(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
AEGIS_TARGET inline void storeu(uint8_t* p, __m128i v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); }

AEGIS_TARGET void ni_init(State& st, const uint8_t* key, const uint8_t* iv) {
    const __m128i k = loadu(key), kiv = _mm_xor_si128(k, loadu(iv));
    const __m128i c0 = loadu(aegis128::kConst0), c1 = loadu(aegis128::kConst1);
    Regs r{kiv, c1, c0, _mm_xor_si128(k, c0), _mm_xor_si128(k, c1)};
    for (int i = 0; i < 5; ++i) {
        update(r, k);
        update(r, kiv);
    }
    save(st, r);
}

AEGIS_TARGET void ni_absorb(State& st, const uint8_t* ad, std::size_t n) {
    Regs r = load(st);
    for (std::size_t i = 0; i < n; ++i) update(r, loadu(ad + i * kBlock));
    save(st, r);
}

AEGIS_TARGET void ni_encrypt(State& st, const uint8_t* in, uint8_t* out, std::size_t n) {
    Regs r = load(st);
    for (std::size_t i = 0; i < n; ++i) {
        const __m128i p = loadu(in + i * kBlock);
        storeu(out + i * kBlock, _mm_xor_si128(p, keystream(r)));
        update(r, p);
    }
    save(st, r);
}

AEGIS_TARGET void ni_decrypt(State& st, const uint8_t* in, uint8_t* out, std::size_t n) {
    Regs r = load(st);
    for (std::size_t i = 0; i < n; ++i) {
        const __m128i p = _mm_xor_si128(loadu(in + i * kBlock), keystream(r));
        storeu(out + i * kBlock, p);
        update(r, p);
    }
    save(st, r);
}

AEGIS_TARGET void ni_decrypt_tail(State& st, const uint8_t* in, uint8_t* out, std::size_t len) {
    Regs r = load(st);
    alignas(16) uint8_t buf[kBlock] = {};
    std::memcpy(buf, in, len);
    storeu(buf, _mm_xor_si128(loadu(buf), keystream(r)));
    std::memset(buf + len, 0, kBlock - len);
    std::memcpy(out, buf, len);
    update(r, loadu(buf));
    save(st, r);
    secure_wipe(buf, sizeof buf);
}

AEGIS_TARGET void ni_final(State& st, uint64_t assoc_bits, uint64_t text_bits, uint8_t* tag) {
    Regs r = load(st);
    // _mm_set_epi64x takes the high half first; x86 is little-endian.
    const __m128i t = _mm_xor_si128(
        _mm_set_epi64x(static_cast<long long>(text_bits), static_cast<long long>(assoc_bits)), r.s3);
    for (int i = 0; i < 7; ++i) update(r, t);
    storeu(tag, _mm_xor_si128(_mm_xor_si128(_mm_xor_si128(r.s0, r.s1), _mm_xor_si128(r.s2, r.s3)), r.s4));
}

constexpr aegis128::Ops kNiOps = {ni_init, ni_absorb, ni_encrypt, ni_decrypt, ni_decrypt_tail, ni_final};

}  // namespace

// Called by register_x86_provider (provider.cpp).
Result<void> register_aegis128_aesni(Registry& reg) {
    if (!x86::have_aesni()) return {};
    AlgInfo info;
    info.driver = "aegis128-aesni";
    info.module = "x86";
    info.priority = 400;  // as the kernel's aegis128-aesni
    return reg.register_alg(aegis128::make_alg(std::move(info), kNiOps));
}

}  // namespace blkcrypt
