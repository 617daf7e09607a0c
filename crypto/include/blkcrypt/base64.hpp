// base64 (RFC 4648, padded): the one codec for LUKS2 JSON salts and digests
// and FileVault 2's plist keys. Decoding is strict, as cryptsetup's decoder.
#pragma once

#include <blkcrypt/bytes.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace blkcrypt {

// nullopt for whitespace, a bad character, missing padding or data after '='.
std::optional<std::vector<uint8_t>> base64_decode(std::string_view s);
std::string base64_encode(ConstBytes b);

}  // namespace blkcrypt
