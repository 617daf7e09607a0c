#include "aes_xts_vaes.hpp"

// GCC 12's AVX-512 intrinsics initialise their "undefined" operands from
// themselves (GCC bug 105593): silence that inside the headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <blkcrypt/secure_buffer.hpp>


#include <cstring>
#include <utility>

namespace blkcrypt::x86 {

namespace {

// Three targets: the one- and two-block code (key expansion, the first
// tweak, ciphertext stealing) needs only AES-NI and SSE4.1 and is inlined
// into both widths' functions; the ymm code must not use any AVX-512
// instruction (it runs where there is none); the zmm code uses AVX-512 BW
// masks for its last 1..3 blocks.
#define XTS_TARGET_BASE __attribute__((target("aes,pclmul,sse4.1")))
#define XTS_TARGET_YMM __attribute__((target("aes,pclmul,sse4.1,avx2,vaes,vpclmulqdq")))
#define XTS_TARGET_ZMM \
    __attribute__((target("aes,pclmul,sse4.1,avx2,avx512f,avx512bw,avx512vl,vaes,vpclmulqdq")))

// ---- key expansion --------------------------------------------------------
// FIPS-197 word by word, words as little-endian uint32 (byte 0 lowest), so
// RotWord is a rotation right by 8. SubWord comes from aeskeygenassist,
// whose dword 0 is SubWord of the input's dword 1: no tables.
XTS_TARGET_BASE uint32_t sub_word(uint32_t w) noexcept {
    const __m128i r = _mm_aeskeygenassist_si128(_mm_set_epi32(0, 0, static_cast<int>(w), 0), 0);
    return static_cast<uint32_t>(_mm_cvtsi128_si32(r));
}

// nk = 4, 6 or 8 key words; rounds = nk + 6; rk gets rounds + 1 round keys.
XTS_TARGET_BASE void expand_key(const uint8_t* key, unsigned nk, uint8_t rk[15][16]) noexcept {
    const unsigned total = 4 * (nk + 7);
    uint32_t w[60];
    std::memcpy(w, key, 4 * nk);
    uint32_t rcon = 1;
    for (unsigned i = nk; i < total; ++i) {
        uint32_t t = w[i - 1];
        if (i % nk == 0) {
            t = sub_word(t >> 8 | t << 24) ^ rcon;
            rcon = (rcon << 1 ^ (rcon & 0x80 ? 0x1b : 0)) & 0xff;
        } else if (nk == 8 && i % 8 == 4) {
            t = sub_word(t);
        }
        w[i] = w[i - nk] ^ t;
    }
    std::memcpy(rk, w, 4 * total);
    secure_wipe(w, sizeof w);
}

// The equivalent inverse cipher's keys: reversed, InvMixColumns on the inner ones.
XTS_TARGET_BASE void inverse_keys(const uint8_t enc[15][16], uint8_t dec[15][16], unsigned rounds) noexcept {
    std::memcpy(dec[0], enc[rounds], 16);
    for (unsigned i = 1; i < rounds; ++i) {
        const __m128i k = _mm_loadu_si128(reinterpret_cast<const __m128i*>(enc[rounds - i]));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dec[i]), _mm_aesimc_si128(k));
    }
    std::memcpy(dec[rounds], enc[0], 16);
}

// ---- one and two blocks (AES-NI, SSE4.1) ------------------------------------
// Tweaks live in GF(2^128) mod x^128 + x^7 + x^2 + x + 1, little-endian: a
// 128-bit lane holds one tweak as a little-endian integer (bit i = x^i).

XTS_TARGET_BASE inline __m128i load128(const uint8_t* p) noexcept {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
XTS_TARGET_BASE inline void store128(uint8_t* p, __m128i v) noexcept {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v);
}

// t * x: each qword shifted left by one; the low qword's top bit carries into
// the high qword, the high qword's top bit comes back as 0x87 (the 0/1 carries
// times {0x87, 1} with one 32x32 multiply per qword).
XTS_TARGET_BASE inline __m128i mul_x(__m128i t) noexcept {
    const __m128i carries = _mm_shuffle_epi32(_mm_srli_epi64(t, 63), 0x4E);
    return _mm_xor_si128(_mm_slli_epi64(t, 1), _mm_mul_epu32(carries, _mm_set_epi64x(1, 0x87)));
}

template <bool Enc>
XTS_TARGET_BASE inline __m128i round128(__m128i x, __m128i k) noexcept {
    return Enc ? _mm_aesenc_si128(x, k) : _mm_aesdec_si128(x, k);
}
template <bool Enc>
XTS_TARGET_BASE inline __m128i last128(__m128i x, __m128i k) noexcept {
    return Enc ? _mm_aesenclast_si128(x, k) : _mm_aesdeclast_si128(x, k);
}

// One block: AES(p ^ t) ^ t (t = 0: plain AES).
template <unsigned R, bool Enc>
XTS_TARGET_BASE inline __m128i xts_one(const uint8_t (*rk)[16], __m128i p, __m128i t) noexcept {
    __m128i x = _mm_xor_si128(_mm_xor_si128(p, t), load128(rk[0]));
#pragma GCC unroll 16
    for (unsigned r = 1; r < R; ++r) x = round128<Enc>(x, load128(rk[r]));
    return last128<Enc>(x, _mm_xor_si128(load128(rk[R]), t));
}

// pshufb controls for moving the partial block's bytes: 16 bytes loaded at
// kShuffle + i select byte j of the source for j = i - 16 + (0..15), zero
// where that falls outside 0..15.
alignas(16) constexpr uint8_t kShuffle[48] = {
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0,    1,    2,    3,    4,    5,    6,    7,    8,    9,    10,   11,   12,   13,   14,   15,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80};

// The last 16..31 bytes. With a partial block of r bytes (IEEE 1619 5.3.2):
//   encrypt  X = E(P[m-1], T[m-1]);  C[m] = X[..r);  C[m-1] = E(P[m] || X[r..), T[m])
//   decrypt  X = D(C[m-1], T[m]);    P[m] = X[..r);  P[m-1] = D(C[m] || X[r..), T[m-1])
// No masked loads (the ymm code has none): the partial block is read as the
// last 16 bytes of the data unit and shifted down, and C[m] is written the
// same way, before C[m-1] overwrites the bytes that do not belong to it.
// Both input blocks are read before anything is written (in place), and
// nothing outside [in, in + len) or [out, out + len) is touched.
template <unsigned R, bool Enc>
XTS_TARGET_BASE inline void finish_core(const uint8_t (*rk)[16], const uint8_t* in, uint8_t* out, std::size_t len,
                                        __m128i t) noexcept {
    const __m128i full = load128(in);
    const std::size_t r = len - 16;
    if (r == 0) {
        store128(out, xts_one<R, Enc>(rk, full, t));
        return;
    }
    const __m128i last = load128(in + r);                  // in[r .. 16 + r)
    const __m128i down = load128(kShuffle + 32 - r);       // byte j <- j + 16 - r for j < r, else 0
    const __m128i t_next = mul_x(t);
    const __m128i x = xts_one<R, Enc>(rk, full, Enc ? t : t_next);
    // P[m] || X[r..): the shifted partial block, X where down's top bit is set.
    const __m128i y = xts_one<R, Enc>(rk, _mm_blendv_epi8(_mm_shuffle_epi8(last, down), x, down),
                                      Enc ? t_next : t);
    // out[r .. 16 + r) = Y[r..) || X[..r), then out[0 .. 16) = Y.
    store128(out + r, _mm_or_si128(_mm_shuffle_epi8(y, load128(kShuffle + 16 + r)),
                                   _mm_shuffle_epi8(x, load128(kShuffle + r))));
    store128(out, y);
}

template <unsigned R>
XTS_TARGET_BASE inline __m128i first_tweak(const AesXtsKey& k, const uint8_t iv[16]) noexcept {
    return xts_one<R, true>(k.tweak, load128(iv), _mm_setzero_si128());
}

// start() and finish(), one instantiation per key size and direction.
template <unsigned R, bool Enc>
struct Narrow {
    XTS_TARGET_BASE static void start(const AesXtsKey& k, const uint8_t* iv, uint8_t* tweak) noexcept {
        store128(tweak, first_tweak<R>(k, iv));
    }
    XTS_TARGET_BASE static void finish(const AesXtsKey& k, const uint8_t* in, uint8_t* out, std::size_t len,
                                       const uint8_t* tweak) noexcept {
        finish_core<R, Enc>(Enc ? k.enc : k.dec, in, out, len, load128(tweak));
    }
};

// ---- the two widths ----------------------------------------------------------
// Traits: the vector type, how many AES blocks (128-bit lanes) it holds, how
// many registers the bulk loop keeps in flight, and the operations the
// generic code (aes_xts_vaes_wide.inc) is written in. Shifts and clmul work
// per 128-bit lane (per qword for the *64 ones).

struct V512 {
    using vec = __m512i;
    static constexpr unsigned kBlocks = 4;
    static constexpr unsigned kInFlight = 4;  // 16 blocks; 32 registers hold all round keys too
    static constexpr bool kMaskedTail = true;  // the last 1..3 blocks in one masked register

    XTS_TARGET_ZMM static vec load(const uint8_t* p) noexcept { return _mm512_loadu_si512(p); }
    XTS_TARGET_ZMM static void store(uint8_t* p, vec v) noexcept { _mm512_storeu_si512(p, v); }
    XTS_TARGET_ZMM static vec broadcast(__m128i x) noexcept { return _mm512_broadcast_i32x4(x); }
    XTS_TARGET_ZMM static vec set1_64(long long q) noexcept { return _mm512_set1_epi64(q); }
    // Each qword: f plus the index of its lane.
    XTS_TARGET_ZMM static vec lane_counts(long long f) noexcept {
        return _mm512_set_epi64(f + 3, f + 3, f + 2, f + 2, f + 1, f + 1, f, f);
    }
    XTS_TARGET_ZMM static vec sub64(vec a, vec b) noexcept { return _mm512_sub_epi64(a, b); }
    template <int K>
    XTS_TARGET_ZMM static vec sll64(vec a) noexcept { return _mm512_slli_epi64(a, K); }
    template <int K>
    XTS_TARGET_ZMM static vec srl64(vec a) noexcept { return _mm512_srli_epi64(a, K); }
    XTS_TARGET_ZMM static vec sllv64(vec a, vec n) noexcept { return _mm512_sllv_epi64(a, n); }
    XTS_TARGET_ZMM static vec srlv64(vec a, vec n) noexcept { return _mm512_srlv_epi64(a, n); }
    template <int N>
    XTS_TARGET_ZMM static vec bsll(vec a) noexcept { return _mm512_bslli_epi128(a, N); }
    template <int N>
    XTS_TARGET_ZMM static vec bsrl(vec a) noexcept { return _mm512_bsrli_epi128(a, N); }
    XTS_TARGET_ZMM static vec swap64(vec a) noexcept { return _mm512_shuffle_epi32(a, _MM_PERM_BADC); }
    // r with h xored into the high qword of each lane.
    XTS_TARGET_ZMM static vec xor_high(vec r, vec h) noexcept { return _mm512_mask_xor_epi64(r, 0xAA, r, h); }
    XTS_TARGET_ZMM static vec clmul_lo(vec a, vec b) noexcept { return _mm512_clmulepi64_epi128(a, b, 0x00); }
    XTS_TARGET_ZMM static vec xor2(vec a, vec b) noexcept { return _mm512_xor_si512(a, b); }
    XTS_TARGET_ZMM static vec xor3(vec a, vec b, vec c) noexcept { return _mm512_ternarylogic_epi64(a, b, c, 0x96); }
    XTS_TARGET_ZMM static vec aesenc(vec x, vec k) noexcept { return _mm512_aesenc_epi128(x, k); }
    XTS_TARGET_ZMM static vec aesenclast(vec x, vec k) noexcept { return _mm512_aesenclast_epi128(x, k); }
    XTS_TARGET_ZMM static vec aesdec(vec x, vec k) noexcept { return _mm512_aesdec_epi128(x, k); }
    XTS_TARGET_ZMM static vec aesdeclast(vec x, vec k) noexcept { return _mm512_aesdeclast_epi128(x, k); }
    XTS_TARGET_ZMM static __m128i low(vec v) noexcept { return _mm512_castsi512_si128(v); }
    // Lane i (0..3) of v.
    XTS_TARGET_ZMM static __m128i lane(vec v, std::size_t i) noexcept {
        const long long q = 2 * static_cast<long long>(i);
        return _mm512_castsi512_si128(_mm512_permutexvar_epi64(_mm512_set_epi64(0, 0, 0, 0, 0, 0, q + 1, q), v));
    }
    // The first n (1..3) blocks at p, the rest zero; stored back likewise.
    XTS_TARGET_ZMM static vec maskz_load(std::size_t n, const uint8_t* p) noexcept {
        return _mm512_maskz_loadu_epi8((__mmask64{1} << (16 * n)) - 1, p);
    }
    XTS_TARGET_ZMM static void mask_store(uint8_t* p, std::size_t n, vec v) noexcept {
        _mm512_mask_storeu_epi8(p, (__mmask64{1} << (16 * n)) - 1, v);
    }
};

// AVX2 + VAES + VPCLMULQDQ, nothing of AVX-512: VEX encodings and ymm0-15
// only, no masks (the last block goes through xts_one).
struct V256 {
    using vec = __m256i;
    static constexpr unsigned kBlocks = 2;
    static constexpr unsigned kInFlight = 4;  // 8 blocks: with 16 registers, round keys come from memory
    static constexpr bool kMaskedTail = false;

    XTS_TARGET_YMM static vec load(const uint8_t* p) noexcept {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    }
    XTS_TARGET_YMM static void store(uint8_t* p, vec v) noexcept {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
    }
    XTS_TARGET_YMM static vec broadcast(__m128i x) noexcept { return _mm256_broadcastsi128_si256(x); }
    XTS_TARGET_YMM static vec set1_64(long long q) noexcept { return _mm256_set1_epi64x(q); }
    XTS_TARGET_YMM static vec lane_counts(long long f) noexcept { return _mm256_set_epi64x(f + 1, f + 1, f, f); }
    XTS_TARGET_YMM static vec sub64(vec a, vec b) noexcept { return _mm256_sub_epi64(a, b); }
    template <int K>
    XTS_TARGET_YMM static vec sll64(vec a) noexcept { return _mm256_slli_epi64(a, K); }
    template <int K>
    XTS_TARGET_YMM static vec srl64(vec a) noexcept { return _mm256_srli_epi64(a, K); }
    XTS_TARGET_YMM static vec sllv64(vec a, vec n) noexcept { return _mm256_sllv_epi64(a, n); }
    XTS_TARGET_YMM static vec srlv64(vec a, vec n) noexcept { return _mm256_srlv_epi64(a, n); }
    template <int N>
    XTS_TARGET_YMM static vec bsll(vec a) noexcept { return _mm256_bslli_epi128(a, N); }
    template <int N>
    XTS_TARGET_YMM static vec bsrl(vec a) noexcept { return _mm256_bsrli_epi128(a, N); }
    XTS_TARGET_YMM static vec swap64(vec a) noexcept { return _mm256_shuffle_epi32(a, 0x4E); }
    XTS_TARGET_YMM static vec xor_high(vec r, vec h) noexcept {
        return _mm256_xor_si256(r, _mm256_blend_epi32(_mm256_setzero_si256(), h, 0xCC));
    }
    XTS_TARGET_YMM static vec clmul_lo(vec a, vec b) noexcept { return _mm256_clmulepi64_epi128(a, b, 0x00); }
    XTS_TARGET_YMM static vec xor2(vec a, vec b) noexcept { return _mm256_xor_si256(a, b); }
    XTS_TARGET_YMM static vec xor3(vec a, vec b, vec c) noexcept { return _mm256_xor_si256(_mm256_xor_si256(a, b), c); }
    XTS_TARGET_YMM static vec aesenc(vec x, vec k) noexcept { return _mm256_aesenc_epi128(x, k); }
    XTS_TARGET_YMM static vec aesenclast(vec x, vec k) noexcept { return _mm256_aesenclast_epi128(x, k); }
    XTS_TARGET_YMM static vec aesdec(vec x, vec k) noexcept { return _mm256_aesdec_epi128(x, k); }
    XTS_TARGET_YMM static vec aesdeclast(vec x, vec k) noexcept { return _mm256_aesdeclast_epi128(x, k); }
    XTS_TARGET_YMM static __m128i low(vec v) noexcept { return _mm256_castsi256_si128(v); }
    XTS_TARGET_YMM static __m128i lane(vec v, std::size_t i) noexcept {
        return i ? _mm256_extracti128_si256(v, 1) : _mm256_castsi256_si128(v);
    }
};

// The generic code once per width, each copy compiled for its target (GCC
// needs the target attribute on every function holding the intrinsics, and
// an attribute cannot depend on a template parameter).
namespace zmm {
#define XTS_TARGET XTS_TARGET_ZMM
#include "aes_xts_vaes_wide.inc"
#undef XTS_TARGET
template <unsigned R, bool Enc>
using Impl = Wide<V512, R, Enc>;
}  // namespace zmm

namespace ymm {
#define XTS_TARGET XTS_TARGET_YMM
#include "aes_xts_vaes_wide.inc"
#undef XTS_TARGET
template <unsigned R, bool Enc>
using Impl = Wide<V256, R, Enc>;
}  // namespace ymm

// Impl<rounds, enc>::fn(args...) for the key's size and the direction.
#define XTS_DISPATCH(Impl, fn, rounds, enc, ...)                    \
    switch ((rounds) * 2 + ((enc) ? 1 : 0)) {                       \
    case 20: Impl<10, false>::fn(__VA_ARGS__); break;               \
    case 21: Impl<10, true>::fn(__VA_ARGS__); break;                \
    case 24: Impl<12, false>::fn(__VA_ARGS__); break;               \
    case 25: Impl<12, true>::fn(__VA_ARGS__); break;                \
    case 28: Impl<14, false>::fn(__VA_ARGS__); break;               \
    case 29: Impl<14, true>::fn(__VA_ARGS__); break;                \
    default: break;                                                 \
    }

}  // namespace

bool aes_xts_setkey(AesXtsKey& k, const uint8_t* key, std::size_t keylen) noexcept {
    if (keylen != 32 && keylen != 48 && keylen != 64) return false;
    const std::size_t half = keylen / 2;
    const unsigned nk = static_cast<unsigned>(half / 4);
    k.rounds = nk + 6;
    expand_key(key, nk, k.enc);
    inverse_keys(k.enc, k.dec, k.rounds);
    expand_key(key + half, nk, k.tweak);
    return true;
}

void aes_xts_start(const AesXtsKey& k, const uint8_t iv[16], uint8_t tweak[16]) noexcept {
    XTS_DISPATCH(Narrow, start, k.rounds, true, k, iv, tweak)
}

void aes_xts_blocks(const AesXtsKey& k, XtsWidth w, bool enc, const uint8_t* in, uint8_t* out, std::size_t nblocks,
                    uint8_t tweak[16]) noexcept {
    if (!nblocks) return;
    if (w == XtsWidth::Zmm) {
        XTS_DISPATCH(zmm::Impl, blocks, k.rounds, enc, k, in, out, nblocks, tweak)
    } else {
        XTS_DISPATCH(ymm::Impl, blocks, k.rounds, enc, k, in, out, nblocks, tweak)
    }
}

void aes_xts_finish(const AesXtsKey& k, bool enc, const uint8_t* in, uint8_t* out, std::size_t len,
                    const uint8_t tweak[16]) noexcept {
    XTS_DISPATCH(Narrow, finish, k.rounds, enc, k, in, out, len, tweak)
}

void aes_xts_crypt(const AesXtsKey& k, XtsWidth w, bool enc, const uint8_t* in, uint8_t* out, std::size_t len,
                   const uint8_t iv[16]) noexcept {
    if (w == XtsWidth::Zmm) {
        XTS_DISPATCH(zmm::Impl, crypt, k.rounds, enc, k, in, out, len, iv)
    } else {
        XTS_DISPATCH(ymm::Impl, crypt, k.rounds, enc, k, in, out, len, iv)
    }
}

}  // namespace blkcrypt::x86
