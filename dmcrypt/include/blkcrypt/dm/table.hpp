// dm-crypt table lines, parsed as the kernel's crypt_ctr does.
//
//   crypt args:  <cipher> <key> <iv_offset> [<#opt_params> <opt_params>...]
//   table line:  <start> <len> crypt <cipher> <key> <iv_offset> <device> <offset> [<#opts> <opts>...]
//
// <cipher> in either grammar:
//   legacy  cipher[:keycount]-chainmode-ivmode[:ivopts]   aes-xts-plain64, aes:64-cbc-lmk
//   capi    capi:<crypto api spec>-ivmode[:ivopts]          capi:cbc(aes)-essiv:sha256
// and becomes a registry name for the IV-generation template family:
//   aes-xts-plain64 -> plain64(xts(aes)); aes-cbc-essiv:sha256 -> plain64(essiv(cbc(aes),sha256));
//   aes-ecb -> ecb(aes) (no IV).
// With the integrity feature (integrity:<bytes>:aead|none, dm-integrity
// underneath) the IV is made per sector by the AEAD engine (aead_target.hpp)
// and alg_name is the bare transform: capi:gcm(aes)-random -> gcm(aes). The
// IV mode `random` is accepted only then, as only then can the kernel store it.
#pragma once

#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/status.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace blkcrypt::dm {

struct CryptTable {
    std::string cipher;       // as written in the table
    std::string api;          // the crypto API spec without the IV mode: "xts(aes)"
    std::string ivmode;       // "plain64", "essiv", ... or empty
    std::string ivopts;       // "sha256" for essiv
    std::string alg_name;     // what to allocate: "plain64(xts(aes))"
    unsigned key_count = 1;
    SecureBuffer key;
    uint64_t iv_offset = 0;   // 512-byte sectors

    std::size_t sector_size = 512;
    bool iv_large_sectors = false;
    bool allow_discards = false;
    bool same_cpu_crypt = false;
    bool submit_from_crypt_cpus = false;
    bool no_read_workqueue = false;
    bool no_write_workqueue = false;
    // integrity:<integrity_tag_size>:<integrity_auth>: bytes of dm-integrity
    // metadata per crypt sector (auth tag, then the IV for random IVs, then
    // zeros), 1..480; 0 without the feature. integrity_auth is "aead" (the
    // cipher is an AEAD: AAD = le64 sector || IV, tag after the data) or
    // "none" (a plain skcipher whose random IVs are stored), as written.
    unsigned integrity_tag_size = 0;
    std::string integrity_auth;
    bool integrity_aead() const;

    // Only for a whole table line.
    uint64_t start = 0, length = 0;  // 512-byte sectors
    std::string device;
    uint64_t offset = 0;              // 512-byte sectors into the device

    // "<cipher> <key> <iv_offset>" plus the optional parameters, as the
    // kernel reports them (dmsetup table); the key only with show_key.
    std::string crypt_args(bool show_key) const;
    // The whole line: "<start> <len> crypt <crypt args with device/offset>".
    std::string table_line(bool show_key) const;
};

// Parse the crypt-specific arguments (no device/offset).
Result<CryptTable> parse_crypt_args(std::string_view args);
// Parse a whole dm table line for the crypt target.
Result<CryptTable> parse_table_line(std::string_view line);

// Map a cipher string to its parts and registry name (no key, no options).
// Refuses the IV mode `random` (it needs the integrity option): for an
// integrity table parse crypt args, e.g. "capi:gcm(aes)-random <key> 0 1
// integrity:28:aead".
Result<CryptTable> parse_cipher_spec(std::string_view cipher);

}  // namespace blkcrypt::dm
