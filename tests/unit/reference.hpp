// Independent references for the tests: Crypto++ called directly, never
// through the registry, so a test of our templates, drivers or engines
// compares against code that is not ours. The same in both configurations
// (BLKCRYPT_WITH_OPENSSL on or off), so the tests never need libcrypto.
#pragma once

#include <blkcrypt/bytes.hpp>

#include <crypto++/aes.h>
#include <crypto++/filters.h>
#include <crypto++/modes.h>
#include <crypto++/sha.h>
#include <crypto++/sm3.h>
#include <crypto++/xts.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ref {

template <class H>
std::vector<uint8_t> digest(blkcrypt::ConstBytes m) {
    H h;
    std::vector<uint8_t> out(H::DIGESTSIZE);
    h.CalculateDigest(out.data(), m.data(), m.size());
    return out;
}

inline std::vector<uint8_t> sha256(blkcrypt::ConstBytes m) { return digest<CryptoPP::SHA256>(m); }
inline std::vector<uint8_t> sm3(blkcrypt::ConstBytes m) { return digest<CryptoPP::SM3>(m); }

namespace detail {
template <class Mode>
std::vector<uint8_t> run(blkcrypt::ConstBytes key, blkcrypt::ConstBytes iv, blkcrypt::ConstBytes in) {
    Mode m;
    if (iv.empty()) m.SetKey(key.data(), key.size());
    else m.SetKeyWithIV(key.data(), key.size(), iv.data(), iv.size());
    std::string out;
    // The filter handles xts's ciphertext stealing of a partial last block.
    CryptoPP::StringSource(in.data(), in.size(), true,
                           new CryptoPP::StreamTransformationFilter(
                               m, new CryptoPP::StringSink(out),
                               CryptoPP::BlockPaddingSchemeDef::NO_PADDING));
    return {out.begin(), out.end()};
}

template <template <class> class M>
std::vector<uint8_t> dir(bool enc, blkcrypt::ConstBytes key, blkcrypt::ConstBytes iv, blkcrypt::ConstBytes in) {
    using Mode = M<CryptoPP::AES>;
    return enc ? run<typename Mode::Encryption>(key, iv, in) : run<typename Mode::Decryption>(key, iv, in);
}
}  // namespace detail

// AES in mode "ecb", "cbc", "ctr" (128-bit big-endian counter) or "xts"
// (the double key, ciphertext stealing), no padding; iv empty for ecb.
inline std::vector<uint8_t> aes(std::string_view mode, blkcrypt::ConstBytes key, blkcrypt::ConstBytes iv,
                                blkcrypt::ConstBytes in, bool enc) {
    if (mode == "ecb") return detail::dir<CryptoPP::ECB_Mode>(enc, key, {}, in);
    if (mode == "cbc") return detail::dir<CryptoPP::CBC_Mode>(enc, key, iv, in);
    if (mode == "ctr") return detail::dir<CryptoPP::CTR_Mode>(enc, key, iv, in);
    if (mode == "xts") return detail::dir<CryptoPP::XTS_Mode>(enc, key, iv, in);
    throw std::invalid_argument("ref::aes: no mode " + std::string(mode));
}

}  // namespace ref
