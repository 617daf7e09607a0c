// Reed-Solomon RS(255, 255 - roots) over GF(2^8), the code of dm-verity FEC:
// field polynomial x^8+x^4+x^3+x^2+1 (0x11d), generator roots alpha^0 ..
// alpha^(roots-1) with alpha = x, systematic (message first, parity last),
// the code libfec's init_rs_char(8, 0x11d, 0, 1, roots, 0) builds.
#pragma once

#include <blkcrypt/status.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace blkcrypt::verity {

class ReedSolomon {
public:
    static constexpr unsigned kSymbols = 255;  // codeword length
    static constexpr unsigned kMaxRoots = 64;

    // roots in 1..kMaxRoots (dm-verity uses 2..24).
    static Result<ReedSolomon> create(unsigned roots);

    unsigned roots() const noexcept { return roots_; }
    unsigned message_size() const noexcept { return kSymbols - roots_; }

    // One codeword: message_size() bytes in, roots() parity bytes out.
    void encode(const uint8_t* message, uint8_t* parity) const noexcept;

    // Column form, for interleaved codes: `n` codewords at once, where
    // message symbol `symbol` of codeword p is column[p] and parity symbol j
    // of codeword p accumulates into parity[j][p]. Calling it for every
    // symbol 0..message_size()-1 on zeroed parity rows gives the parity of
    // the n codewords; symbols may come in any order (the code is linear).
    void accumulate(unsigned symbol, const uint8_t* column, uint8_t* const* parity,
                    std::size_t n) const noexcept;

    // Decodes a codeword (message then parity, kSymbols bytes) in place.
    // `erasures` are known-bad positions (0..254, distinct). Returns the
    // number of symbols corrected, or -1 when the word is beyond the code's
    // reach (2 * errors + erasures > roots); the word is then left unchanged.
    int decode(uint8_t* codeword, std::span<const uint8_t> erasures = {}) const noexcept;

private:
    explicit ReedSolomon(unsigned roots);
    unsigned roots_ = 0;
    // Parity contribution of a unit symbol at each message position:
    // coef_[symbol * roots + j].
    std::vector<uint8_t> coef_;
    std::vector<uint8_t> genpoly_;  // generator, genpoly_[k] is the x^k coefficient
};

// GF(2^8) arithmetic with the dm-verity field, for the codec and its tests.
namespace gf256 {
uint8_t mul(uint8_t a, uint8_t b) noexcept;
uint8_t exp(unsigned power) noexcept;  // alpha^power
}  // namespace gf256

}  // namespace blkcrypt::verity
