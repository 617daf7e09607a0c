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

namespace blkcrypt::x86 {

namespace {

#define XTS_TARGET \
    __attribute__((target("aes,pclmul,sse4.1,avx2,avx512f,avx512bw,avx512vl,vaes,vpclmulqdq")))

// ---- key expansion --------------------------------------------------------
// FIPS-197 word by word, words as little-endian uint32 (byte 0 lowest), so
// RotWord is a rotation right by 8. SubWord comes from aeskeygenassist,
// whose dword 0 is SubWord of the input's dword 1: no tables.
XTS_TARGET uint32_t sub_word(uint32_t w) noexcept {
    const __m128i r = _mm_aeskeygenassist_si128(_mm_set_epi32(0, 0, static_cast<int>(w), 0), 0);
    return static_cast<uint32_t>(_mm_cvtsi128_si32(r));
}

// nk = 4, 6 or 8 key words; rounds = nk + 6; rk gets rounds + 1 round keys.
XTS_TARGET void expand_key(const uint8_t* key, unsigned nk, uint8_t rk[15][16]) noexcept {
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
XTS_TARGET void inverse_keys(const uint8_t enc[15][16], uint8_t dec[15][16], unsigned rounds) noexcept {
    std::memcpy(dec[0], enc[rounds], 16);
    for (unsigned i = 1; i < rounds; ++i) {
        const __m128i k = _mm_loadu_si128(reinterpret_cast<const __m128i*>(enc[rounds - i]));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dec[i]), _mm_aesimc_si128(k));
    }
    std::memcpy(dec[rounds], enc[0], 16);
}

// ---- tweaks: GF(2^128) mod x^128 + x^7 + x^2 + x + 1, little-endian --------
// A 128-bit lane holds one tweak as a little-endian integer (bit i = x^i).

XTS_TARGET inline __m128i load128(const uint8_t* p) noexcept {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
XTS_TARGET inline void store128(uint8_t* p, __m128i v) noexcept {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v);
}

// t * x: each qword shifted left by one; the low qword's top bit carries into
// the high qword, the high qword's top bit comes back as 0x87 (the 0/1 carries
// times {0x87, 1} with one 32x32 multiply per qword).
XTS_TARGET inline __m128i mul_x(__m128i t) noexcept {
    const __m128i carries = _mm_shuffle_epi32(_mm_srli_epi64(t, 63), 0x4E);
    return _mm_xor_si128(_mm_slli_epi64(t, 1), _mm_mul_epu32(carries, _mm_set_epi64x(1, 0x87)));
}

XTS_TARGET inline __m512i poly512() noexcept { return _mm512_set1_epi64(0x87); }

// Every lane times x^K (K <= 57): the bits shifted out of the high qword,
// times x^128 = x^7 + x^2 + x + 1 (a carry-less multiply, at most K + 7 bits),
// go back into the low qword; those of the low qword into the high one.
template <int K>
XTS_TARGET inline __m512i mul_xk(__m512i t) noexcept {
    static_assert(K >= 1 && K <= 57);
    const __m512i out = _mm512_shuffle_epi32(_mm512_srli_epi64(t, 64 - K), _MM_PERM_BADC);  // swapped
    __m512i r = _mm512_slli_epi64(t, K);
    r = _mm512_mask_xor_epi64(r, 0xAA, r, out);  // high qwords: the low qword's top bits
    return _mm512_xor_si512(r, _mm512_clmulepi64_epi128(out, poly512(), 0x00));
}

// Every lane times x^16: a two-byte shift of the lane, plus its top 16 bits
// times x^128.
XTS_TARGET inline __m512i mul_x16(__m512i t) noexcept {
    const __m512i top = _mm512_bsrli_epi128(t, 14);
    return _mm512_xor_si512(_mm512_bslli_epi128(t, 2), _mm512_clmulepi64_epi128(top, poly512(), 0x00));
}

// [t*x^F, t*x^(F+1), t*x^(F+2), t*x^(F+3)] from t broadcast to every lane:
// lane i shifted by F + i bits (a variable shift by 64 gives zero, so a lane
// shifted by 0 carries nothing). Independent of each other for every F, so
// the first four vectors of a data unit need no chain of multiplications.
template <int F>
XTS_TARGET inline __m512i four_tweaks(__m512i b) noexcept {
    static_assert(F >= 0 && F + 3 <= 57);
    const __m512i n = _mm512_set_epi64(F + 3, F + 3, F + 2, F + 2, F + 1, F + 1, F, F);
    const __m512i inv = _mm512_sub_epi64(_mm512_set1_epi64(64), n);
    const __m512i out = _mm512_shuffle_epi32(_mm512_srlv_epi64(b, inv), _MM_PERM_BADC);
    __m512i r = _mm512_sllv_epi64(b, n);
    r = _mm512_mask_xor_epi64(r, 0xAA, r, out);
    return _mm512_xor_si512(r, _mm512_clmulepi64_epi128(out, poly512(), 0x00));
}

// Lane i (0..3) of v.
XTS_TARGET inline __m128i lane(__m512i v, unsigned i) noexcept {
    const long long q = 2 * static_cast<long long>(i);
    return _mm512_castsi512_si128(_mm512_permutexvar_epi64(_mm512_set_epi64(0, 0, 0, 0, 0, 0, q + 1, q), v));
}

// ---- AES ------------------------------------------------------------------
XTS_TARGET inline __m512i xor3(__m512i a, __m512i b, __m512i c) noexcept {
    return _mm512_ternarylogic_epi64(a, b, c, 0x96);
}

template <bool Enc>
XTS_TARGET inline __m512i round512(__m512i x, __m512i k) noexcept {
    return Enc ? _mm512_aesenc_epi128(x, k) : _mm512_aesdec_epi128(x, k);
}
template <bool Enc>
XTS_TARGET inline __m512i last512(__m512i x, __m512i k) noexcept {
    return Enc ? _mm512_aesenclast_epi128(x, k) : _mm512_aesdeclast_epi128(x, k);
}
template <bool Enc>
XTS_TARGET inline __m128i round128(__m128i x, __m128i k) noexcept {
    return Enc ? _mm_aesenc_si128(x, k) : _mm_aesdec_si128(x, k);
}
template <bool Enc>
XTS_TARGET inline __m128i last128(__m128i x, __m128i k) noexcept {
    return Enc ? _mm_aesenclast_si128(x, k) : _mm_aesdeclast_si128(x, k);
}

// One block: AES(p ^ t) ^ t (t = 0: plain AES).
template <unsigned R, bool Enc>
XTS_TARGET inline __m128i xts_one(const uint8_t (*rk)[16], __m128i p, __m128i t) noexcept {
    __m128i x = _mm_xor_si128(_mm_xor_si128(p, t), load128(rk[0]));
#pragma GCC unroll 16
    for (unsigned r = 1; r < R; ++r) x = round128<Enc>(x, load128(rk[r]));
    return last128<Enc>(x, _mm_xor_si128(load128(rk[R]), t));
}

// N registers of four blocks each, x[j] = P ^ T ^ k[0] on entry. The tweak is
// folded into the last round key: aes*last(x, k ^ T) = aes*last(x, k) ^ T.
template <unsigned R, bool Enc, unsigned N>
XTS_TARGET inline void rounds512(__m512i (&x)[N], const __m512i (&k)[R + 1], const __m512i (&t)[N]) noexcept {
#pragma GCC unroll 16
    for (unsigned r = 1; r < R; ++r) {
#pragma GCC unroll 4
        for (unsigned j = 0; j < N; ++j) x[j] = round512<Enc>(x[j], k[r]);
    }
#pragma GCC unroll 4
    for (unsigned j = 0; j < N; ++j) x[j] = last512<Enc>(x[j], _mm512_xor_si512(k[R], t[j]));
}

// n whole blocks from tweak t; returns the tweak of the block after them.
template <unsigned R, bool Enc>
XTS_TARGET inline __m128i blocks_core(const uint8_t (*rk)[16], const uint8_t* in, uint8_t* out, std::size_t n,
                                      __m128i t0) noexcept {
    __m512i k[R + 1];
#pragma GCC unroll 16
    for (unsigned i = 0; i <= R; ++i) k[i] = _mm512_broadcast_i32x4(load128(rk[i]));
    const __m512i b = _mm512_broadcast_i32x4(t0);
    __m512i t[4];
    t[0] = four_tweaks<0>(b);
    if (n >= 16) {
        t[1] = four_tweaks<4>(b);
        t[2] = four_tweaks<8>(b);
        t[3] = four_tweaks<12>(b);
        do {
            __m512i x[4];
#pragma GCC unroll 4
            for (unsigned j = 0; j < 4; ++j) x[j] = xor3(_mm512_loadu_si512(in + 64 * j), t[j], k[0]);
            rounds512<R, Enc, 4>(x, k, t);
#pragma GCC unroll 4
            for (unsigned j = 0; j < 4; ++j) {
                _mm512_storeu_si512(out + 64 * j, x[j]);
                t[j] = mul_x16(t[j]);
            }
            in += 256;
            out += 256;
            n -= 16;
        } while (n >= 16);
    }
    while (n >= 4) {
        __m512i x[1] = {xor3(_mm512_loadu_si512(in), t[0], k[0])};
        const __m512i tt[1] = {t[0]};
        rounds512<R, Enc, 1>(x, k, tt);
        _mm512_storeu_si512(out, x[0]);
        t[0] = mul_xk<4>(t[0]);
        in += 64;
        out += 64;
        n -= 4;
    }
    if (n == 0) return _mm512_castsi512_si128(t[0]);
    // 1..3 blocks: byte-masked loads and stores.
    const __mmask64 m = (__mmask64{1} << (16 * n)) - 1;
    __m512i x[1] = {xor3(_mm512_maskz_loadu_epi8(m, in), t[0], k[0])};
    const __m512i tt[1] = {t[0]};
    rounds512<R, Enc, 1>(x, k, tt);
    _mm512_mask_storeu_epi8(out, m, x[0]);
    return lane(t[0], static_cast<unsigned>(n));
}

// The last 16..31 bytes. With a partial block of r bytes (IEEE 1619 5.3.2):
//   encrypt  X = E(P[m-1], T[m-1]);  C[m] = X[..r);  C[m-1] = E(P[m] || X[r..), T[m])
//   decrypt  X = D(C[m-1], T[m]);    P[m] = X[..r);  P[m-1] = D(C[m] || X[r..), T[m-1])
// Both input blocks are read before anything is written (in place).
template <unsigned R, bool Enc>
XTS_TARGET inline void finish_core(const uint8_t (*rk)[16], const uint8_t* in, uint8_t* out, std::size_t len,
                                   __m128i t) noexcept {
    const __m128i full = load128(in);
    const std::size_t r = len - 16;
    if (r == 0) {
        store128(out, xts_one<R, Enc>(rk, full, t));
        return;
    }
    const __m128i t_next = mul_x(t);
    const __mmask16 m = static_cast<__mmask16>((1u << r) - 1);
    const __m128i part = _mm_maskz_loadu_epi8(m, in + 16);
    const __m128i x = xts_one<R, Enc>(rk, full, Enc ? t : t_next);
    const __m128i y = xts_one<R, Enc>(rk, _mm_mask_blend_epi8(m, x, part), Enc ? t_next : t);
    _mm_mask_storeu_epi8(out + 16, m, x);
    store128(out, y);
}

template <unsigned R>
XTS_TARGET inline __m128i first_tweak(const AesXtsKey& k, const uint8_t iv[16]) noexcept {
    return xts_one<R, true>(k.tweak, load128(iv), _mm_setzero_si128());
}

// The entry points, one instantiation per key size and direction: the
// pieces, and a whole contiguous data unit with the tweak kept in a register.
template <unsigned R, bool Enc>
struct Impl {
    XTS_TARGET static void start(const AesXtsKey& k, const uint8_t* iv, uint8_t* tweak) noexcept {
        store128(tweak, first_tweak<R>(k, iv));
    }
    XTS_TARGET static void blocks(const AesXtsKey& k, const uint8_t* in, uint8_t* out, std::size_t n,
                                  uint8_t* tweak) noexcept {
        store128(tweak, blocks_core<R, Enc>(Enc ? k.enc : k.dec, in, out, n, load128(tweak)));
    }
    XTS_TARGET static void finish(const AesXtsKey& k, const uint8_t* in, uint8_t* out, std::size_t len,
                                  const uint8_t* tweak) noexcept {
        finish_core<R, Enc>(Enc ? k.enc : k.dec, in, out, len, load128(tweak));
    }
    XTS_TARGET static void crypt(const AesXtsKey& k, const uint8_t* in, uint8_t* out, std::size_t len,
                                 const uint8_t* iv) noexcept {
        const uint8_t (*rk)[16] = Enc ? k.enc : k.dec;
        const std::size_t tail = len % 16;
        const std::size_t bulk = len / 16 - (tail ? 1 : 0);  // a partial block steals from the last full one
        __m128i t = first_tweak<R>(k, iv);
        if (bulk) t = blocks_core<R, Enc>(rk, in, out, bulk, t);
        if (tail) finish_core<R, Enc>(rk, in + 16 * bulk, out + 16 * bulk, 16 + tail, t);
    }
};

// Impl<rounds, enc>::fn(args...) for the key's size and the direction.
#define XTS_DISPATCH(fn, rounds, enc, ...)                          \
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
    XTS_DISPATCH(start, k.rounds, true, k, iv, tweak)
}

void aes_xts_blocks(const AesXtsKey& k, bool enc, const uint8_t* in, uint8_t* out, std::size_t nblocks,
                    uint8_t tweak[16]) noexcept {
    if (nblocks) XTS_DISPATCH(blocks, k.rounds, enc, k, in, out, nblocks, tweak)
}

void aes_xts_finish(const AesXtsKey& k, bool enc, const uint8_t* in, uint8_t* out, std::size_t len,
                    const uint8_t tweak[16]) noexcept {
    XTS_DISPATCH(finish, k.rounds, enc, k, in, out, len, tweak)
}

void aes_xts_crypt(const AesXtsKey& k, bool enc, const uint8_t* in, uint8_t* out, std::size_t len,
                   const uint8_t iv[16]) noexcept {
    XTS_DISPATCH(crypt, k.rounds, enc, k, in, out, len, iv)
}

}  // namespace blkcrypt::x86
