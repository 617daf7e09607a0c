// GUID and UUID text as libuuid's uuid_unparse prints it (lower case,
// 8-4-4-4-12): the one home for the formats' 16-byte identifiers.
#pragma once

#include <cstdint>
#include <string>

namespace blkcrypt {

// The 16 bytes at b in order (RFC 4122 byte order: FileVault 2, LUKS).
std::string uuid_text(const uint8_t* b);
// A Microsoft GUID at b: its first three fields are little-endian (BitLocker).
std::string guid_text(const uint8_t* b);

}  // namespace blkcrypt
