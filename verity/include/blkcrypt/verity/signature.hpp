// Detached PKCS#7 signatures as the kernel checks them for dm-verity root
// hashes (root_hash_sig_key_desc) and fs-verity built-in signatures:
// verify_pkcs7_signature() over the signed bytes, trust from a set of
// certificates standing in for the kernel's trusted keyring.
//
// Needs OpenSSL (BLKCRYPT_WITH_OPENSSL); without it every call returns
// Status::Unsupported "built without OpenSSL".
#pragma once

#include <blkcrypt/bytes.hpp>
#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/status.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace blkcrypt::verity {

bool signatures_supported() noexcept;

// A detached PKCS#7 signedData (DER) over `data`, no certificates and no
// authenticated attributes: the bytes of `openssl smime -sign -nocerts
// -noattr -binary -outform der` (digest empty: the key's default, SHA-256
// for RSA and EC) or of `fsverity sign` (digest = its --hash-alg). `key` is
// a PEM or DER private key (unencrypted), `cert` a PEM or DER certificate
// matching it.
Result<std::vector<uint8_t>> pkcs7_sign(ConstBytes data, const SecureBuffer& key, ConstBytes cert,
                                        std::string_view digest = {});

// Every certificate in a PEM file (one or more) or a DER file; Invalid when
// there is none.
Result<std::vector<std::vector<uint8_t>>> parse_certificates(ConstBytes file);

struct TrustOptions {
    // The kernel ignores certificate validity dates; blkcrypt refuses an
    // expired or not yet valid certificate on the trust path unless this is
    // false.
    bool check_time = true;
    int64_t now = 0;  // seconds since the epoch for the date check; 0: the current time
};

struct SignatureCheck {
    std::string signer;   // subject of the certificate that verified the signature
    std::string digest;   // the signer's digest algorithm, e.g. "sha256"
};

// The kernel's verify_pkcs7_signature(data, sig, keyring,
// VERIFYING_UNSPECIFIED_SIGNATURE) with `trusted` (DER certificates) as the
// keyring: signedData whose content is pkcs7-data, detached; every signer
// whose certificate is in the message must verify; at least one signer must
// reach a trusted certificate (a message certificate that is trusted, the
// issuer of the last one, or the signer's issuer and serial directly).
// Errors: Invalid (malformed), BadMsg (a signature does not match the data
// or a certificate in it), NoKey (no trusted certificate; expired).
Result<SignatureCheck> pkcs7_verify(ConstBytes sig, ConstBytes data,
                                    const std::vector<std::vector<uint8_t>>& trusted,
                                    const TrustOptions& opts = {});

}  // namespace blkcrypt::verity
