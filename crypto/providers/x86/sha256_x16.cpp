#include "sha256_x16.hpp"

#include "sha256_k.hpp"

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_epi32() (a self-
// initialised variable) as the unused merge source of unmasked operations,
// which -Wall reports as uninitialised (GCC bug 105593). The warnings point
// into the header, so they are silenced around its inclusion and our uses.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <utility>

namespace blkcrypt::x86 {

namespace {

// The library is built for baseline x86-64; only these functions use
// AVX-512, and only after have_avx512().
#define X16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline

template <int N>
X16_TARGET __m512i ror(__m512i x) {
    return _mm512_ror_epi32(x, N);
}

// vpternlogd truth tables: bit (a << 2 | b << 1 | c) of the immediate is f(a, b, c).
X16_TARGET __m512i xor3(__m512i a, __m512i b, __m512i c) { return _mm512_ternarylogic_epi32(a, b, c, 0x96); }
X16_TARGET __m512i ch(__m512i e, __m512i f, __m512i g) { return _mm512_ternarylogic_epi32(e, f, g, 0xCA); }
X16_TARGET __m512i maj(__m512i a, __m512i b, __m512i c) { return _mm512_ternarylogic_epi32(a, b, c, 0xE8); }

X16_TARGET __m512i add(__m512i a, __m512i b) { return _mm512_add_epi32(a, b); }

// Round T. The working variables are not moved between rounds: round T
// finds a at s[-T mod 8], b at s[1 - T mod 8], ..., so the names rotate
// through the array instead, which full unrolling turns into register names.
template <int T>
X16_TARGET void round(__m512i (&s)[8], __m512i w, const uint32_t* k_table) {
    __m512i& a = s[(0 - T) & 7];
    __m512i& b = s[(1 - T) & 7];
    __m512i& c = s[(2 - T) & 7];
    __m512i& d = s[(3 - T) & 7];
    __m512i& e = s[(4 - T) & 7];
    __m512i& f = s[(5 - T) & 7];
    __m512i& g = s[(6 - T) & 7];
    __m512i& h = s[(7 - T) & 7];
    const __m512i k = _mm512_set1_epi32(static_cast<int>(k_table[T]));
    const __m512i t1 = add(add(add(h, xor3(ror<6>(e), ror<11>(e), ror<25>(e))), add(ch(e, f, g), k)), w);
    const __m512i t2 = add(xor3(ror<2>(a), ror<13>(a), ror<22>(a)), maj(a, b, c));
    d = add(d, t1);
    h = add(t1, t2);  // the next round's a
}

// Message word T >= 16 into w[T mod 16] (which held word T - 16): a rolling
// window of sixteen words, so the schedule stays in registers.
template <int T>
X16_TARGET void schedule(__m512i (&w)[16]) {
    const __m512i w15 = w[(T - 15) & 15], w2 = w[(T - 2) & 15];
    const __m512i s0 = xor3(ror<7>(w15), ror<18>(w15), _mm512_srli_epi32(w15, 3));
    const __m512i s1 = xor3(ror<17>(w2), ror<19>(w2), _mm512_srli_epi32(w2, 10));
    w[T & 15] = add(add(w[T & 15], s0), add(w[(T - 7) & 15], s1));
}

template <int... T>
X16_TARGET void rounds(__m512i (&s)[8], __m512i (&w)[16], std::integer_sequence<int, T...>) {
    // Hidden from the optimiser so that K[t] stays a broadcast memory operand
    // of vpaddd ({1to16}) rather than a mov + vpbroadcastd: one uop less a
    // round on the two vector ports, about 3% faster.
    const uint32_t* k = kSha256K;
    asm("" : "+r"(k));
    (round<T>(s, w[T], k), ...);
    ((schedule<T + 16>(w), round<T + 16>(s, w[T], k)), ...);
    ((schedule<T + 32>(w), round<T + 32>(s, w[T], k)), ...);
    ((schedule<T + 48>(w), round<T + 48>(s, w[T], k)), ...);
}

// Block `off` of each message as sixteen big-endian words, transposed so that
// w[t] holds word t of message k in lane k: the 16x16 transpose of 32-bit
// elements in four shuffle stages (32-bit, 64-bit, then 128-bit twice).
X16_TARGET void load_words(__m512i (&w)[16], const uint8_t* const data[16], std::size_t off) {
    const __m512i bswap = _mm512_set4_epi32(0x0c0d0e0f, 0x08090a0b, 0x04050607, 0x00010203);
    __m512i r[16], t[16];
    for (int k = 0; k < 16; ++k) r[k] = _mm512_shuffle_epi8(_mm512_loadu_si512(data[k] + off), bswap);
    // In each 128-bit lane: rows 2i, 2i+1 interleaved by word (t), then rows
    // 4g..4g+3 by word pair (r again); r[4g + j] then holds, in 128-bit lane
    // L, word 4L + j of rows 4g..4g+3.
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int g = 0; g < 16; g += 4) {
        r[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
        r[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
        r[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
        r[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
    }
    // A 4x4 transpose of 128-bit lanes for each j: w[4L + j] gathers lane L
    // of r[j], r[4 + j], r[8 + j], r[12 + j].
    for (int j = 0; j < 4; ++j) {
        const __m512i v0 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0x88);  // r[j].L0, .L2, r[4+j].L0, .L2
        const __m512i v1 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0xDD);  // the odd lanes
        const __m512i v2 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0x88);
        const __m512i v3 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0xDD);
        w[j] = _mm512_shuffle_i32x4(v0, v2, 0x88);
        w[4 + j] = _mm512_shuffle_i32x4(v1, v3, 0x88);
        w[8 + j] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
        w[12 + j] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
    }
}

}  // namespace

__attribute__((target("avx512f,avx512bw,avx512vl"))) void sha256_x16_blocks(
    uint32_t states[16][8], const uint8_t* const data[16], std::size_t nblocks) noexcept {
    // Lane k of s[i] is states[k][i]: a gather (and a scatter at the end) per
    // call, not per block.
    const __m512i idx = _mm512_set_epi32(120, 112, 104, 96, 88, 80, 72, 64, 56, 48, 40, 32, 24, 16, 8, 0);
    __m512i s[8];
    for (int i = 0; i < 8; ++i) s[i] = _mm512_i32gather_epi32(idx, &states[0][i], 4);
    for (std::size_t off = 0; off < nblocks * 64; off += 64) {
        __m512i w[16];
        load_words(w, data, off);
        __m512i v[8];
        for (int i = 0; i < 8; ++i) v[i] = s[i];
        rounds(v, w, std::make_integer_sequence<int, 16>{});
        for (int i = 0; i < 8; ++i) s[i] = add(s[i], v[i]);
    }
    for (int i = 0; i < 8; ++i) _mm512_i32scatter_epi32(&states[0][i], idx, s[i], 4);
}

}  // namespace blkcrypt::x86

#pragma GCC diagnostic pop
