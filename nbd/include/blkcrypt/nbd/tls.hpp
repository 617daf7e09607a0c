// TLS for the NBD server (NBD_OPT_STARTTLS), as qemu-nbd and nbdkit offer it:
// x509 from a directory in qemu's layout (ca-cert.pem, server-cert.pem,
// server-key.pem) or pre-shared keys in psktool's "username:hexkey" format.
// Built on GnuTLS when the library is configured with BLKCRYPT_WITH_TLS;
// without it, load() fails with Unsupported and a message saying so.
#pragma once

#include <blkcrypt/nbd/server.hpp>
#include <blkcrypt/status.hpp>

#include <memory>
#include <string>

namespace blkcrypt::nbd {

struct TlsOptions {
    std::string certs_dir;     // x509: DIR/server-cert.pem, DIR/server-key.pem (DIR/ca-cert.pem)
    std::string psk_file;      // PSK: lines "username:hexkey"
    bool verify_peer = false;  // x509: clients must show a certificate signed by DIR/ca-cert.pem
};

// Whether this build has TLS at all.
bool tls_built();

// Server credentials, shared (read-only) by every connection.
class TlsCredentials {
public:
    // Exactly one of certs_dir and psk_file. A private key file (server-key.pem,
    // the PSK file) that its group or others may read is refused, as ssh does.
    static Result<std::shared_ptr<TlsCredentials>> load(const TlsOptions& opts);
    virtual ~TlsCredentials() = default;
    // The server side of a TLS handshake on the connected socket fd (after
    // the NBD_OPT_STARTTLS ACK); then the stream goes through the returned
    // transport. The fd stays the caller's.
    virtual Result<std::unique_ptr<Transport>> handshake(int fd) = 0;
    // "x509" or "psk", for logs.
    virtual std::string kind() const = 0;
};

}  // namespace blkcrypt::nbd
