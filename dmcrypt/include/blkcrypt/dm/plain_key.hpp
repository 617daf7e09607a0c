// cryptsetup's plain mode: the volume key made from a passphrase, as
// `cryptsetup open --type plain --hash H --key-size S` computes it
// (lib/crypt_plain.c and process_key in lib/setup.c of cryptsetup 2.6).
//
// With a hash H of digest size L, the key is the concatenation of
//   H(passphrase), H("A" || passphrase), H("AA" || passphrase), ...
// cut to the key size. "H:N" hashes into the first N bytes only and leaves
// the rest zero; "plain:N" copies the first N bytes of the passphrase (which
// must be that long). With no hash at all (cryptsetup's `--hash plain` and
// every key file) the passphrase is the key: cut to the key size, or
// zero-padded when shorter.
#pragma once

#include <blkcrypt/bytes.hpp>
#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/status.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace blkcrypt {
class Registry;
}

namespace blkcrypt::dm {

// The registry name for a cryptsetup hash name, compared case-insensitively
// as OpenSSL does: "ripemd160" -> "rmd160", "whirlpool" -> "wp512",
// "stribog512" -> "streebog512"; other names are lowercased ("SHA256" ->
// "sha256"). Registry names themselves pass through.
std::string plain_hash_alg(std::string_view name);

// The key of key_size bytes for the passphrase. hash is the --hash value
// ("sha256", "sha256:16", "plain:32"), or nullopt for no hashing.
Result<SecureBuffer> plain_key(Registry& reg, std::optional<std::string_view> hash,
                               std::size_t key_size, ConstBytes passphrase);

}  // namespace blkcrypt::dm
