// The 512-byte veritysetup superblock at the hash offset of the hash device.
// The kernel never reads it; veritysetup and blkcrypt keep the parameters in it.
#pragma once

#include <blkcrypt/bytes.hpp>
#include <blkcrypt/status.hpp>
#include <blkcrypt/verity/params.hpp>

#include <array>

namespace blkcrypt::verity {

inline constexpr std::size_t kSuperblockSize = 512;

// Fails when a field does not fit (a hash name of 32 bytes or more).
Result<std::array<uint8_t, kSuperblockSize>> encode_superblock(const VerityParams& p);
// Checks magic, version, hash type, block sizes, salt length and the name's
// terminator, with a message naming the bad field (Status::Corrupt).
Result<VerityParams> decode_superblock(ConstBytes sb);

}  // namespace blkcrypt::verity
