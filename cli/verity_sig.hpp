// Root-hash signatures for `blkcrypt verity` (sign, and the
// --root-hash-signature check of verify|table|read|serve) and the trusted
// certificate options shared with `blkcrypt fsverity sign|verify-sig`.
#pragma once

#include "common.hpp"
#include "output_file.hpp"

#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/verity/params.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace cli {

// --root-hash-signature, --trusted-cert, --trusted-certs, --ignore-cert-time,
// --sig-key-desc, --name, --key, --cert.
void add_signature_options(po::options_description& opts);
// Their names, for only_for.
std::vector<std::string> signature_check_option_names();

// The private key file, in a SecureBuffer (never printed).
blkcrypt::SecureBuffer read_private_key(const std::string& path);

// The options naming one trusted certificate file each (repeatable):
// verity's --trusted-cert; fsverity verify-sig's --cert and --trusted-cert.
using CertOptions = std::vector<std::string>;

// Every FILE of the cert options and every regular file of --trusted-certs DIR
// (in name order), as DER certificates. UsageError when none is given.
std::vector<std::vector<uint8_t>> trusted_certificates(const po::variables_map& vm,
                                                       const CertOptions& file_options = {"trusted-cert"});

// Checks `sig_path` over `data` against the trusted certificates; on refusal
// throws StatusFailure: 1 for an unreadable or malformed signature, 2 for a
// signature that does not verify or is not trusted (veritysetup's -EPERM).
// Prints nothing on success.
void check_signature(const po::variables_map& vm, const std::string& sig_path, blkcrypt::ConstBytes data,
                     const std::string& what, const CertOptions& file_options = {"trusted-cert"});

// With --root-hash-signature: checks it over the lowercase hex of root.
// Returns whether a signature was checked.
bool check_root_hash_signature(const po::variables_map& vm, const std::vector<uint8_t>& root);

// The key description the table names (root_hash_sig_key_desc): --sig-key-desc,
// or veritysetup's "cryptsetup:<UUID>-<NAME>" ("cryptsetup:<NAME>" without a UUID).
std::string signature_key_description(const po::variables_map& vm, const blkcrypt::verity::VerityParams& p);

// blkcrypt verity sign ROOT_HEX --key K --cert C --out SIG.
int run_verity_sign(const po::variables_map& vm, const std::vector<std::string>& files);

}  // namespace cli
