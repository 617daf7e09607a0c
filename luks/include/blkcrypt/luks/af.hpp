// The LUKS anti-forensic splitter (cryptsetup lib/luks1/af.c; LUKS1 and
// LUKS2 "af": "luks1"): a key of n bytes is stored as `stripes` blocks of n
// bytes, all of which are needed to recover it, so that destroying a small
// part of a keyslot area destroys the key. Blocks are diffused with `hash`
// (the keyslot's hash: sha1, sha256, ...).
#pragma once

#include <blkcrypt/bytes.hpp>
#include <blkcrypt/status.hpp>

#include <cstdint>
#include <string_view>

namespace blkcrypt {
class Registry;
}

namespace blkcrypt::luks {

// Splits key into out (key.size() * stripes bytes): stripes - 1 random
// blocks and a last block that makes af_merge give the key back.
Result<void> af_split(Registry& reg, std::string_view hash, ConstBytes key, uint32_t stripes,
                      Bytes out);

// Recovers key (key.size() bytes) from in (key.size() * stripes bytes).
Result<void> af_merge(Registry& reg, std::string_view hash, ConstBytes in, uint32_t stripes,
                      Bytes key);

}  // namespace blkcrypt::luks
