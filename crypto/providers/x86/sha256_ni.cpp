#include "sha256_ni.hpp"

#include "sha256_k.hpp"

#include <blkcrypt/secure_buffer.hpp>

#include <immintrin.h>

#include <cstring>

namespace blkcrypt::x86 {

namespace {

#define SHA_TARGET __attribute__((target("sha,sse4.1,ssse3")))

// The rounds keep the state as (ABEF, CDGH) pairs of vectors.
struct Lane {
    __m128i abef, cdgh;
};

SHA_TARGET inline Lane load_state(const uint32_t s[8]) {
    const __m128i dcba = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)), 0xB1);
    const __m128i efgh = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 4)), 0x1B);
    return {_mm_alignr_epi8(dcba, efgh, 8), _mm_blend_epi16(efgh, dcba, 0xF0)};
}

SHA_TARGET inline void store_state(uint32_t s[8], Lane l) {
    const __m128i feba = _mm_shuffle_epi32(l.abef, 0x1B);
    const __m128i dchg = _mm_shuffle_epi32(l.cdgh, 0xB1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(s), _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(s + 4), _mm_alignr_epi8(dchg, feba, 8));
}

// The next four message words from the previous sixteen: oldest o, then n1,
// n2, newest n3 (W[t-16..t-13], ..., W[t-4..t-1]).
SHA_TARGET inline __m128i schedule(__m128i o, __m128i n1, __m128i n2, __m128i n3) {
    const __m128i t = _mm_add_epi32(_mm_sha256msg1_epu32(o, n1), _mm_alignr_epi8(n3, n2, 4));
    return _mm_sha256msg2_epu32(t, n3);
}

SHA_TARGET inline void four_rounds(Lane& l, __m128i w, unsigned g) {
    __m128i m = _mm_add_epi32(w, _mm_load_si128(reinterpret_cast<const __m128i*>(kSha256K + 4 * g)));
    l.cdgh = _mm_sha256rnds2_epu32(l.cdgh, l.abef, m);
    m = _mm_shuffle_epi32(m, 0x0E);
    l.abef = _mm_sha256rnds2_epu32(l.abef, l.cdgh, m);
}

SHA_TARGET inline __m128i load_words(const uint8_t* p) {
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    return _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), bswap);
}

// One block per lane. The message words live in four named vectors (not an
// array indexed at run time) so they stay in registers.
template <std::size_t N>
SHA_TARGET inline void blocks(Lane (&l)[N], const uint8_t* const (&p)[N]) {
    Lane saved[N];
    __m128i w0[N], w1[N], w2[N], w3[N];
    for (std::size_t k = 0; k < N; ++k) {
        saved[k] = l[k];
        w0[k] = load_words(p[k]);
        four_rounds(l[k], w0[k], 0);
        w1[k] = load_words(p[k] + 16);
        four_rounds(l[k], w1[k], 1);
        w2[k] = load_words(p[k] + 32);
        four_rounds(l[k], w2[k], 2);
        w3[k] = load_words(p[k] + 48);
        four_rounds(l[k], w3[k], 3);
    }
    for (unsigned g = 4; g < 16; g += 4) {
        for (std::size_t k = 0; k < N; ++k) {
            w0[k] = schedule(w0[k], w1[k], w2[k], w3[k]);
            four_rounds(l[k], w0[k], g);
        }
        for (std::size_t k = 0; k < N; ++k) {
            w1[k] = schedule(w1[k], w2[k], w3[k], w0[k]);
            four_rounds(l[k], w1[k], g + 1);
        }
        for (std::size_t k = 0; k < N; ++k) {
            w2[k] = schedule(w2[k], w3[k], w0[k], w1[k]);
            four_rounds(l[k], w2[k], g + 2);
        }
        for (std::size_t k = 0; k < N; ++k) {
            w3[k] = schedule(w3[k], w0[k], w1[k], w2[k]);
            four_rounds(l[k], w3[k], g + 3);
        }
    }
    for (std::size_t k = 0; k < N; ++k) {
        l[k].abef = _mm_add_epi32(l[k].abef, saved[k].abef);
        l[k].cdgh = _mm_add_epi32(l[k].cdgh, saved[k].cdgh);
    }
}

// The 64 rounds of one block whose words are w0..w3 (W0..W15) on l.
SHA_TARGET __attribute__((always_inline)) inline void block_words(Lane& l, __m128i w0, __m128i w1, __m128i w2, __m128i w3) {
    const Lane saved = l;
    four_rounds(l, w0, 0);
    four_rounds(l, w1, 1);
    four_rounds(l, w2, 2);
    four_rounds(l, w3, 3);
    for (unsigned g = 4; g < 16; g += 4) {
        w0 = schedule(w0, w1, w2, w3);
        four_rounds(l, w0, g);
        w1 = schedule(w1, w2, w3, w0);
        four_rounds(l, w1, g + 1);
        w2 = schedule(w2, w3, w0, w1);
        four_rounds(l, w2, g + 2);
        w3 = schedule(w3, w0, w1, w2);
        four_rounds(l, w3, g + 3);
    }
    l.abef = _mm_add_epi32(l.abef, saved.abef);
    l.cdgh = _mm_add_epi32(l.cdgh, saved.cdgh);
}

// The state as message words H0..H3 and H4..H7: a digest's big-endian words
// are the state words themselves, so the next block takes them unconverted.
SHA_TARGET inline void state_words(Lane l, __m128i& lo, __m128i& hi) {
    const __m128i feba = _mm_shuffle_epi32(l.abef, 0x1B);
    const __m128i dchg = _mm_shuffle_epi32(l.cdgh, 0xB1);
    lo = _mm_blend_epi16(feba, dchg, 0xF0);
    hi = _mm_alignr_epi8(dchg, feba, 8);
}

}  // namespace

SHA_TARGET void sha256_ni_chain(uint8_t* msg, std::size_t len, uint64_t rounds) noexcept {
    static constexpr uint32_t kIv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    // The second block: the message's tail, its padding and bit length; only
    // the counter's bytes [len - 72, len - 64) of it change between rounds.
    alignas(16) uint8_t tail[64] = {};
    std::memcpy(tail, msg + 64, len - 64);
    tail[len - 64] = 0x80;
    for (int b = 0; b < 8; ++b) tail[56 + b] = static_cast<uint8_t>(uint64_t{len} * 8 >> (56 - 8 * b));
    const std::size_t at = len - 72;
    // Loop invariants, loaded once: words W8..W15 of the first block, and the
    // second block's words outside the counter (with W0..W3 and W6..W15
    // constant, the schedule's W16..W18 are too, but SHA-NI computes W16..W19
    // together, W19 from the counter, so only the loads are saved).
    const __m128i b1w2 = load_words(msg + 32), b1w3 = load_words(msg + 48);
    const Lane iv = load_state(kIv);
    __m128i lo = load_words(msg), hi = load_words(msg + 16);
    for (uint64_t i = 0; i < rounds; ++i) {
        std::memcpy(tail + at, &i, 8);  // little-endian, as x86 stores it
        Lane l = iv;
        block_words(l, lo, hi, b1w2, b1w3);
        block_words(l, load_words(tail), load_words(tail + 16), load_words(tail + 32), load_words(tail + 48));
        state_words(l, lo, hi);
    }
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(msg), _mm_shuffle_epi8(lo, bswap));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(msg + 16), _mm_shuffle_epi8(hi, bswap));
    std::memcpy(msg + len - 8, &rounds, 8);
    blkcrypt::secure_wipe(tail, sizeof tail);  // the caller's message may be secret beyond the digest
}

SHA_TARGET void sha256_ni_blocks(uint32_t state[8], const uint8_t* data, std::size_t nblocks) noexcept {
    Lane l[1] = {load_state(state)};
    for (; nblocks; --nblocks, data += 64) {
        const uint8_t* const p[1] = {data};
        blocks<1>(l, p);
    }
    store_state(state, l[0]);
}

SHA_TARGET void sha256_ni_blocks2(uint32_t sa[8], uint32_t sb[8], const uint8_t* a, const uint8_t* b,
                                  std::size_t nblocks) noexcept {
    // Both chains in one body: independent instructions the CPU issues together.
    Lane l[2] = {load_state(sa), load_state(sb)};
    for (; nblocks; --nblocks, a += 64, b += 64) {
        const uint8_t* const p[2] = {a, b};
        blocks<2>(l, p);
    }
    store_state(sa, l[0]);
    store_state(sb, l[1]);
}

}  // namespace blkcrypt::x86
