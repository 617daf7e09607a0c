// AlgInfo: the static description of one registered algorithm, as
// /proc/crypto shows it.
#pragma once

#include <cstddef>
#include <string>

namespace blkcrypt {

enum class AlgType { Cipher, Skcipher, Aead, Shash, Ahash };

const char* to_string(AlgType t) noexcept;

enum class SelftestState {
    Pending,   // registered, not yet tested: the first lookup that would return it tests it
    Passed,    // every known-answer vector passed
    NoVectors, // no vectors for this generic name; usable, like the kernel's "No test"
    Failed,    // never returned by lookup
};

const char* to_string(SelftestState s) noexcept;

struct AlgInfo {
    std::string name;    // generic name, e.g. "xts(aes)"
    std::string driver;  // implementation name, e.g. "xts(aes-cryptopp)"
    std::string module;  // who registered it: "cryptopp", "openssl", "blkcrypt", a plugin path
    int priority = 0;
    AlgType type = AlgType::Cipher;
    bool async = false;
    bool needs_key = false; // must be keyed before use (hmac, ciphers)

    std::size_t blocksize = 1;
    std::size_t min_keysize = 0;
    std::size_t max_keysize = 0;
    std::size_t ivsize = 0;      // skcipher, aead
    std::size_t chunksize = 1;   // skcipher: the unit a stream mode processes
    std::size_t digestsize = 0;  // shash, ahash
    std::size_t statesize = 0;   // shash, ahash: bytes of export_state()
    std::size_t maxauthsize = 0; // aead
};

}  // namespace blkcrypt
