// Hex encoding and decoding: the one codec for keys, salts, digests and
// vector files. Decoding accepts either case; encoding writes lower case.
// Error messages never quote the input, which may be key material.
#pragma once

#include <blkcrypt/bytes.hpp>
#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/status.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace blkcrypt {

// Lower-case hex of b, two digits a byte.
std::string hex_encode(ConstBytes b);

// The value of one hex digit, or -1 if c is not one.
constexpr int hex_digit_value(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Why hex does not decode: Ok, or Invalid with a message naming the first
// fault ("odd number of hex digits", "not a hex digit at position N", N
// counting from 1).
Result<void> hex_check(std::string_view hex);

// Decodes hex into out, which must be hex.size() / 2 bytes long. On a fault
// nothing of out is meaningful: a caller holding a secret wipes it.
Result<void> hex_decode_into(std::string_view hex, Bytes out);

Result<std::vector<uint8_t>> hex_decode(std::string_view hex);

// For keys: the bytes live in a SecureBuffer from the start, never in an
// ordinary heap block.
Result<SecureBuffer> hex_decode_secret(std::string_view hex);

}  // namespace blkcrypt
