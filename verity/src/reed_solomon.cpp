// The dm-verity Reed-Solomon code. Encoding is linear, so instead of running
// the division register once per codeword (libfec's way) the parity is the
// sum over message positions of symbol * coefficient rows: a region multiply-
// accumulate that runs 32 codewords per AVX2 step (GF multiplication by a
// constant as two 16-entry nibble lookups, pshufb). The decoder is the usual
// syndromes + Berlekamp-Massey (seeded with the erasure locator) + Chien
// search + Forney, checked by recomputing the syndromes.
#include <blkcrypt/verity/reed_solomon.hpp>

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace blkcrypt::verity {

namespace {

constexpr unsigned kPoly = 0x11d;

struct Tables {
    uint8_t exp[512];   // alpha^i, doubled so exp[log a + log b] needs no modulo
    uint8_t log[256];   // log[0] unused
    uint8_t mul[256][256];
    // For each constant c: c*x for x = 0..15 (lo), then c*(x<<4) (hi).
    alignas(32) uint8_t nib[256][32];
    Tables() {
        unsigned x = 1;
        for (unsigned i = 0; i < 255; ++i) {
            exp[i] = static_cast<uint8_t>(x);
            log[x] = static_cast<uint8_t>(i);
            x <<= 1;
            if (x & 0x100) x ^= kPoly;
        }
        for (unsigned i = 255; i < 512; ++i) exp[i] = exp[i - 255];
        log[0] = 0;
        for (unsigned a = 0; a < 256; ++a)
            for (unsigned b = 0; b < 256; ++b)
                mul[a][b] = (a && b) ? exp[log[a] + log[b]] : 0;
        for (unsigned c = 0; c < 256; ++c)
            for (unsigned v = 0; v < 16; ++v) {
                nib[c][v] = mul[c][v];
                nib[c][16 + v] = mul[c][v << 4];
            }
    }
};

const Tables& tables() {
    static const Tables t;
    return t;
}

inline uint8_t inv(const Tables& t, uint8_t a) { return t.exp[255 - t.log[a]]; }

// alpha^(power mod 255)
inline uint8_t pow_alpha(const Tables& t, unsigned power) { return t.exp[power % 255]; }

void accumulate_scalar(const uint8_t* coefs, unsigned roots, const uint8_t* col, uint8_t* const* par,
                       std::size_t from, std::size_t n) {
    const Tables& t = tables();
    for (unsigned j = 0; j < roots; ++j) {
        const uint8_t* row = t.mul[coefs[j]];
        uint8_t* out = par[j];
        for (std::size_t p = from; p < n; ++p) out[p] ^= row[col[p]];
    }
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) std::size_t accumulate_avx2(const uint8_t* coefs, unsigned roots,
                                                            const uint8_t* col, uint8_t* const* par,
                                                            std::size_t n) {
    const Tables& t = tables();
    const __m256i mask = _mm256_set1_epi8(0x0f);
    std::size_t p = 0;
    for (; p + 32 <= n; p += 32) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(col + p));
        const __m256i lo = _mm256_and_si256(v, mask);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi64(v, 4), mask);
        for (unsigned j = 0; j < roots; ++j) {
            const uint8_t* nib = t.nib[coefs[j]];
            const __m256i tl = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(nib)));
            const __m256i th =
                _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(nib + 16)));
            const __m256i prod = _mm256_xor_si256(_mm256_shuffle_epi8(tl, lo), _mm256_shuffle_epi8(th, hi));
            auto* out = reinterpret_cast<__m256i*>(par[j] + p);
            _mm256_storeu_si256(out, _mm256_xor_si256(_mm256_loadu_si256(out), prod));
        }
    }
    return p;
}

bool have_avx2() {
    static const bool yes = __builtin_cpu_supports("avx2");
    return yes;
}
#endif

}  // namespace

namespace gf256 {
uint8_t mul(uint8_t a, uint8_t b) noexcept { return tables().mul[a][b]; }
uint8_t exp(unsigned power) noexcept { return pow_alpha(tables(), power); }
}  // namespace gf256

Result<ReedSolomon> ReedSolomon::create(unsigned roots) {
    if (roots < 1 || roots > kMaxRoots)
        return make_error(Status::Invalid, "Reed-Solomon roots must be in 1.." + std::to_string(kMaxRoots) +
                                               ", not " + std::to_string(roots));
    return ReedSolomon(roots);
}

ReedSolomon::ReedSolomon(unsigned roots) : roots_(roots) {
    const Tables& t = tables();
    // g(x) = prod_{i < roots} (x - alpha^i), monic, coefficient k of x^k.
    genpoly_.assign(roots + 1, 0);
    genpoly_[0] = 1;
    for (unsigned i = 0; i < roots; ++i) {
        const uint8_t a = pow_alpha(t, i);
        for (unsigned k = i + 1; k > 0; --k) genpoly_[k] = genpoly_[k - 1] ^ t.mul[genpoly_[k]][a];
        genpoly_[0] = t.mul[genpoly_[0]][a];
    }
    // Each unit message symbol through the division register once.
    coef_.assign(static_cast<std::size_t>(message_size()) * roots, 0);
    std::vector<uint8_t> unit(message_size(), 0);
    for (unsigned s = 0; s < message_size(); ++s) {
        unit[s] = 1;
        std::vector<uint8_t> reg(roots, 0);
        for (unsigned i = s; i < message_size(); ++i) {  // zeros before s leave the register at 0
            const uint8_t fb = unit[i] ^ reg[0];
            std::memmove(reg.data(), reg.data() + 1, roots - 1);
            reg[roots - 1] = 0;
            if (fb)
                for (unsigned j = 0; j < roots; ++j) reg[j] ^= t.mul[fb][genpoly_[roots - 1 - j]];
        }
        std::copy(reg.begin(), reg.end(), coef_.begin() + static_cast<std::ptrdiff_t>(s) * roots);
        unit[s] = 0;
    }
}

void ReedSolomon::encode(const uint8_t* message, uint8_t* parity) const noexcept {
    const Tables& t = tables();
    std::memset(parity, 0, roots_);
    for (unsigned s = 0; s < message_size(); ++s) {
        const uint8_t* row = t.mul[message[s]];
        const uint8_t* c = &coef_[static_cast<std::size_t>(s) * roots_];
        for (unsigned j = 0; j < roots_; ++j) parity[j] ^= row[c[j]];
    }
}

void ReedSolomon::accumulate(unsigned symbol, const uint8_t* column, uint8_t* const* parity,
                             std::size_t n) const noexcept {
    const uint8_t* c = &coef_[static_cast<std::size_t>(symbol) * roots_];
    std::size_t done = 0;
#if defined(__x86_64__)
    if (have_avx2()) done = accumulate_avx2(c, roots_, column, parity, n);
#endif
    if (done < n) accumulate_scalar(c, roots_, column, parity, done, n);
}

int ReedSolomon::decode(uint8_t* word, std::span<const uint8_t> erasures) const noexcept {
    const Tables& t = tables();
    const unsigned nr = roots_;
    if (erasures.size() > nr) return -1;
    // Position k holds the coefficient of x^(254-k).
    auto degree = [](unsigned k) { return kSymbols - 1 - k; };

    std::array<uint8_t, kMaxRoots> syn{};
    auto syndromes = [&] {
        bool zero = true;
        for (unsigned i = 0; i < nr; ++i) {
            const uint8_t a = pow_alpha(t, i);
            uint8_t s = 0;
            for (unsigned k = 0; k < kSymbols; ++k) s = t.mul[s][a] ^ word[k];
            syn[i] = s;
            zero = zero && s == 0;
        }
        return zero;
    };
    if (syndromes()) return 0;

    // Erasure locator: prod (1 + X x), X = alpha^degree.
    std::array<uint8_t, kMaxRoots + 1> lambda{}, b{}, tmp{};
    lambda[0] = 1;
    const unsigned neras = static_cast<unsigned>(erasures.size());
    for (unsigned e = 0; e < neras; ++e) {
        if (erasures[e] >= kSymbols) return -1;
        const uint8_t x = pow_alpha(t, degree(erasures[e]));
        for (unsigned k = e + 1; k > 0; --k) lambda[k] ^= t.mul[lambda[k - 1]][x];
    }
    b = lambda;
    unsigned el = neras;
    for (unsigned r = neras + 1; r <= nr; ++r) {
        uint8_t delta = 0;
        for (unsigned i = 0; i < r; ++i) delta ^= t.mul[lambda[i]][syn[r - 1 - i]];
        // b <- x * b is needed in both the zero and the no-length-change case.
        if (delta == 0) {
            std::memmove(&b[1], &b[0], nr);
            b[0] = 0;
            continue;
        }
        tmp[0] = lambda[0];
        for (unsigned i = 1; i <= nr; ++i) tmp[i] = lambda[i] ^ t.mul[delta][b[i - 1]];
        if (2 * el <= r + neras - 1) {
            el = r + neras - el;
            const uint8_t di = inv(t, delta);
            for (unsigned i = 0; i <= nr; ++i) b[i] = t.mul[lambda[i]][di];
        } else {
            std::memmove(&b[1], &b[0], nr);
            b[0] = 0;
        }
        lambda = tmp;
    }
    unsigned deg = 0;
    for (unsigned i = 0; i <= nr; ++i)
        if (lambda[i]) deg = i;
    if (deg == 0) return -1;

    // Chien search: position k is in error when lambda(X_k^-1) == 0.
    std::array<uint8_t, kMaxRoots> where{};
    unsigned found = 0;
    for (unsigned k = 0; k < kSymbols && found <= deg; ++k) {
        const uint8_t xinv = pow_alpha(t, 255 - degree(k));
        uint8_t v = 0;
        for (unsigned i = deg + 1; i > 0; --i) v = t.mul[v][xinv] ^ lambda[i - 1];
        if (v == 0) {
            if (found == deg) return -1;
            where[found++] = static_cast<uint8_t>(k);
        }
    }
    if (found != deg) return -1;

    // Forney (first consecutive root 0): e = X * omega(X^-1) / lambda'(X^-1).
    std::array<uint8_t, kMaxRoots> omega{};
    for (unsigned i = 0; i < nr; ++i) {
        uint8_t o = 0;
        for (unsigned j = 0; j <= std::min(i, deg); ++j) o ^= t.mul[syn[i - j]][lambda[j]];
        omega[i] = o;
    }
    std::array<uint8_t, kMaxRoots> fix{};
    for (unsigned n = 0; n < found; ++n) {
        const unsigned d = degree(where[n]);
        const uint8_t xinv = pow_alpha(t, 255 - d);
        uint8_t num = 0, den = 0;
        for (unsigned i = nr; i > 0; --i) num = t.mul[num][xinv] ^ omega[i - 1];
        // Formal derivative: only odd powers survive, lambda_i x^(i-1).
        uint8_t xp = 1;
        const uint8_t x2 = t.mul[xinv][xinv];
        for (unsigned i = 1; i <= deg; i += 2) {
            den ^= t.mul[lambda[i]][xp];
            xp = t.mul[xp][x2];
        }
        if (den == 0) return -1;
        fix[n] = t.mul[t.mul[num][inv(t, den)]][pow_alpha(t, d)];
    }
    for (unsigned n = 0; n < found; ++n) word[where[n]] ^= fix[n];
    // Beyond the limit the locator can land on another codeword's
    // neighbourhood only if the result is a codeword; anything else is undone.
    if (!syndromes()) {
        for (unsigned n = 0; n < found; ++n) word[where[n]] ^= fix[n];
        return -1;
    }
    return static_cast<int>(found);
}

}  // namespace blkcrypt::verity
