// TLS credentials and sessions for the NBD server, on GnuTLS.
#include <blkcrypt/nbd/tls.hpp>

#ifdef BLKCRYPT_WITH_TLS
#include <blkcrypt/hex.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include "send_wait.hpp"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <type_traits>

#include <dlfcn.h>
#include <gnutls/gnutls.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#endif

namespace blkcrypt::nbd {

#ifndef BLKCRYPT_WITH_TLS

bool tls_built() { return false; }

Result<std::shared_ptr<TlsCredentials>> TlsCredentials::load(const TlsOptions&) {
    return make_error(Status::Unsupported, "TLS: this blkcrypt was built without it (-DBLKCRYPT_WITH_TLS=OFF; "
                                           "GnuTLS, Debian: libgnutls28-dev)");
}

#else

bool tls_built() { return true; }

namespace {

// GnuTLS is opened when TLS credentials are first loaded, not linked: the
// library and the eight it needs (p11-kit, nettle, gmp, libtasn1...) cost
// every command some 4 million instructions of relocation and GnuTLS's own
// constructor, more than a whole `fsverity digest` of a small file
// (docs/architecture.md, "Registration and start-up cost"). The table holds
// the functions with the types of the header, so a call that does not match
// the prototype does not compile.
struct GnuTlsApi {
#define BLKCRYPT_GNUTLS_FUNCTIONS(X)                                                                     \
    X(gnutls_strerror) X(gnutls_bye) X(gnutls_deinit) X(gnutls_record_recv) X(gnutls_record_send)     \
    X(gnutls_record_cork) X(gnutls_record_uncork) X(gnutls_certificate_free_credentials)               \
    X(gnutls_psk_free_server_credentials) X(gnutls_certificate_allocate_credentials)                   \
    X(gnutls_certificate_set_x509_key_file) X(gnutls_certificate_set_x509_trust_file)                  \
    X(gnutls_psk_allocate_server_credentials) X(gnutls_psk_set_server_credentials_function2)           \
    X(gnutls_init) X(gnutls_priority_set_direct) X(gnutls_credentials_set) X(gnutls_session_set_ptr)   \
    X(gnutls_session_get_ptr) X(gnutls_set_default_priority) X(gnutls_certificate_server_set_request) \
    X(gnutls_session_set_verify_cert) X(gnutls_transport_set_int2) X(gnutls_transport_set_push_function) \
    X(gnutls_handshake_set_timeout) X(gnutls_handshake) X(gnutls_error_is_fatal)
#define BLKCRYPT_GNUTLS_MEMBER(f) decltype(&::f) f = nullptr;
    BLKCRYPT_GNUTLS_FUNCTIONS(BLKCRYPT_GNUTLS_MEMBER)
#undef BLKCRYPT_GNUTLS_MEMBER
    gnutls_alloc_function* malloc = nullptr;  // the variable gnutls_malloc
};

// The loaded library's functions, or why it could not be loaded. Loaded once
// and never unloaded (sessions may outlive any one owner).
const Result<const GnuTlsApi*>& gnutls_api() {
    static const Result<const GnuTlsApi*> api = []() -> Result<const GnuTlsApi*> {
        void* h = ::dlopen(BLKCRYPT_GNUTLS_SONAME, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
        if (!h) return make_error(Status::Unsupported, std::string("TLS: GnuTLS could not be loaded: ") + ::dlerror());
        static GnuTlsApi t;
        auto sym = [&](const char* name, auto& slot) -> bool {
            slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(::dlsym(h, name));
            return slot != nullptr;
        };
#define BLKCRYPT_GNUTLS_LOAD(f) \
    if (!sym(#f, t.f)) return make_error(Status::Unsupported, std::string("TLS: " BLKCRYPT_GNUTLS_SONAME " has no ") + #f);
        BLKCRYPT_GNUTLS_FUNCTIONS(BLKCRYPT_GNUTLS_LOAD)
#undef BLKCRYPT_GNUTLS_LOAD
#undef BLKCRYPT_GNUTLS_FUNCTIONS
        if (!sym("gnutls_malloc", t.malloc) || !*t.malloc)
            return make_error(Status::Unsupported, "TLS: " BLKCRYPT_GNUTLS_SONAME " has no gnutls_malloc");
        return &t;
    }();
    return api;
}

// Only reached once load() has the library.
const GnuTlsApi& gt() { return *gnutls_api().value(); }

std::string gnutls_text(const std::string& what, int rc) { return what + ": " + gt().gnutls_strerror(rc); }

// A private key readable by its group or others is refused, as ssh refuses one.
Result<void> check_private(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        return make_error(Status::Invalid, path + ": " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) return make_error(Status::Invalid, path + ": not a regular file");
    if (st.st_mode & 077) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        return make_error(Status::Invalid, path + ": permissions " + mode +
                                               " are too open (it holds a private key): chmod 600 it");
    }
    return {};
}

bool exists(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0;
}

// The stream after the handshake: records through the session. One thread
// reads while another writes, which GnuTLS allows on one session.
class TlsTransport final : public Transport {
public:
    explicit TlsTransport(gnutls_session_t s) : s_(s) {}
    ~TlsTransport() override {
        (void)gt().gnutls_bye(s_, GNUTLS_SHUT_WR);  // best effort: the socket closes next
        gt().gnutls_deinit(s_);
    }
    bool read(Bytes out) override {
        std::size_t done = 0;
        while (done < out.size()) {
            const ssize_t n = gt().gnutls_record_recv(s_, out.data() + done, out.size() - done);
            if (n == GNUTLS_E_INTERRUPTED) continue;
            if (n <= 0) return false;
            done += static_cast<std::size_t>(n);
        }
        return true;
    }
    bool write(ConstBytes in) override { return send(in); }
    // A header with small data is corked into one record; large data is not
    // (corking copies all of it), and the header's own record costs little.
    bool write2(ConstBytes a, ConstBytes b) override {
        if (b.size() > kCorkMax) return send(a) && send(b);
        gt().gnutls_record_cork(s_);
        const bool ok = send(a) && send(b);
        while (ok) {
            const int rc = gt().gnutls_record_uncork(s_, GNUTLS_RECORD_WAIT);
            if (rc == GNUTLS_E_INTERRUPTED) continue;
            return rc >= 0;
        }
        // A failed send leaves the stream broken: nothing more is sent on it.
        return false;
    }

private:
    bool send(ConstBytes in) {
        std::size_t done = 0;
        while (done < in.size()) {
            const ssize_t n = gt().gnutls_record_send(s_, in.data() + done, in.size() - done);
            if (n == GNUTLS_E_INTERRUPTED) continue;
            // E_AGAIN: the socket's send timeout passed (SO_SNDTIMEO): broken.
            if (n <= 0) return false;
            done += static_cast<std::size_t>(n);
        }
        return true;
    }
    static constexpr std::size_t kCorkMax = 16 * 1024;  // one TLS record
    gnutls_session_t s_;
};

class GnuTls final : public TlsCredentials {
public:
    ~GnuTls() override {
        if (x509_) gt().gnutls_certificate_free_credentials(x509_);
        if (psk_) gt().gnutls_psk_free_server_credentials(psk_);
    }

    Result<void> load_x509(const std::string& dir, bool verify) {
        const std::string ca = dir + "/ca-cert.pem", cert = dir + "/server-cert.pem", key = dir + "/server-key.pem";
        if (auto r = check_private(key); !r) return r;
        if (int rc = gt().gnutls_certificate_allocate_credentials(&x509_); rc < 0)
            return make_error(Status::NoMem, gnutls_text("TLS", rc));
        if (int rc = gt().gnutls_certificate_set_x509_key_file(x509_, cert.c_str(), key.c_str(), GNUTLS_X509_FMT_PEM);
            rc < 0)
            return make_error(Status::Invalid, gnutls_text(cert + ", " + key, rc));
        // The CA is what client certificates are checked against: needed
        // only to verify peers, loaded whenever it is there (as qemu does).
        if (verify || exists(ca)) {
            const int rc = gt().gnutls_certificate_set_x509_trust_file(x509_, ca.c_str(), GNUTLS_X509_FMT_PEM);
            if (rc < 0) return make_error(Status::Invalid, gnutls_text(ca, rc));
            if (rc == 0) return make_error(Status::Invalid, ca + ": no certificate in it");
        }
        verify_ = verify;
        return {};
    }

    Result<void> load_psk(const std::string& path) {
        if (auto r = check_private(path); !r) return r;
        std::ifstream in(path);
        if (!in) return make_error(Status::Invalid, path + ": cannot be read");
        std::string line;
        for (unsigned n = 1; std::getline(in, line); ++n) {
            if (!line.empty() && line.back() == '\r') line.pop_back();
            if (line.empty()) continue;
            const auto colon = line.find(':');
            const std::string where = path + " line " + std::to_string(n);
            if (colon == std::string::npos || colon == 0)
                return make_error(Status::Invalid, where + ": not username:hexkey");
            const std::string user = line.substr(0, colon);
            auto key = hex_decode_secret(std::string_view(line).substr(colon + 1));
            std::fill(line.begin(), line.end(), '\0');  // the key's hex
            if (!key || key->empty()) return make_error(Status::Invalid, where + ": the key is not hex");
            keys_[user] = std::move(*key);
        }
        if (keys_.empty()) return make_error(Status::Invalid, path + ": no key in it");
        if (int rc = gt().gnutls_psk_allocate_server_credentials(&psk_); rc < 0)
            return make_error(Status::NoMem, gnutls_text("TLS", rc));
        gt().gnutls_psk_set_server_credentials_function2(psk_, &GnuTls::psk_lookup);
        return {};
    }

    Result<std::unique_ptr<Transport>> handshake(int fd) override {
        gnutls_session_t s = nullptr;
        if (int rc = gt().gnutls_init(&s, GNUTLS_SERVER); rc < 0) return make_error(Status::NoMem, gnutls_text("TLS", rc));
        auto fail = [&](const std::string& what, int rc) -> Error {
            gt().gnutls_deinit(s);
            return make_error(Status::IoError, gnutls_text(what, rc));
        };
        int rc;
        if (psk_) {
            // As libnbd and qemu do for PSK: the normal suites plus (EC)DHE-PSK.
            rc = gt().gnutls_priority_set_direct(s, "NORMAL:+ECDHE-PSK:+DHE-PSK:+PSK", nullptr);
            if (rc >= 0) rc = gt().gnutls_credentials_set(s, GNUTLS_CRD_PSK, psk_);
            gt().gnutls_session_set_ptr(s, this);
        } else {
            rc = gt().gnutls_set_default_priority(s);
            if (rc >= 0) rc = gt().gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, x509_);
            if (rc >= 0 && verify_) {
                gt().gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUIRE);
                gt().gnutls_session_set_verify_cert(s, nullptr, 0);  // chain to ca-cert.pem, no host name
            }
        }
        if (rc < 0) return fail("TLS set-up", rc);
        // Our own push: GnuTLS's send() would raise SIGPIPE when the client
        // has gone (MSG_NOSIGNAL makes that EPIPE), and would wait out the
        // send timeout once per part of a record; as on the plain path.
        gt().gnutls_transport_set_int2(s, fd, fd);
        gt().gnutls_transport_set_push_function(s, [](gnutls_transport_ptr_t p, const void* d, size_t n) -> ssize_t {
            iovec iov{const_cast<void*>(d), n};
            msghdr m{};
            m.msg_iov = &iov;
            m.msg_iovlen = 1;
            const ssize_t sent = detail::send_waiting(static_cast<int>(reinterpret_cast<intptr_t>(p)), m);
            if (sent < 0 && errno == ETIMEDOUT) errno = EAGAIN;  // GnuTLS: E_AGAIN, handled as a broken stream
            return sent;
        });
        gt().gnutls_handshake_set_timeout(s, GNUTLS_DEFAULT_HANDSHAKE_TIMEOUT);
        do {
            rc = gt().gnutls_handshake(s);
        } while (rc < 0 && !gt().gnutls_error_is_fatal(rc));
        if (rc < 0) return fail("TLS handshake", rc);
        return std::unique_ptr<Transport>(std::make_unique<TlsTransport>(s));
    }

    std::string kind() const override { return psk_ ? "psk" : "x509"; }

private:
    // GnuTLS asks for the key of the user the client names; it frees the copy
    // (zeroing it) after the handshake.
    static int psk_lookup(gnutls_session_t s, const gnutls_datum_t* user, gnutls_datum_t* key) {
        auto* self = static_cast<GnuTls*>(gt().gnutls_session_get_ptr(s));
        const auto it = self->keys_.find(std::string(reinterpret_cast<const char*>(user->data), user->size));
        if (it == self->keys_.end()) return -1;  // unknown user: the handshake fails
        key->data = static_cast<unsigned char*>((*gt().malloc)(it->second.size()));
        if (!key->data) return -1;
        std::memcpy(key->data, it->second.data(), it->second.size());
        key->size = static_cast<unsigned>(it->second.size());
        return 0;
    }

    gnutls_certificate_credentials_t x509_ = nullptr;
    gnutls_psk_server_credentials_t psk_ = nullptr;
    bool verify_ = false;
    std::map<std::string, SecureBuffer> keys_;
};

}  // namespace

Result<std::shared_ptr<TlsCredentials>> TlsCredentials::load(const TlsOptions& o) {
    if (o.certs_dir.empty() == o.psk_file.empty())
        return make_error(Status::Invalid, "TLS needs either a certificate directory or a PSK file");
    if (o.verify_peer && o.certs_dir.empty())
        return make_error(Status::Invalid, "verifying peers needs x509 certificates (a CA), not PSK");
    if (const auto& api = gnutls_api(); !api) return api.error();
    auto c = std::make_shared<GnuTls>();
    auto r = o.certs_dir.empty() ? c->load_psk(o.psk_file) : c->load_x509(o.certs_dir, o.verify_peer);
    if (!r) return r.error();
    return std::shared_ptr<TlsCredentials>(std::move(c));
}

#endif

}  // namespace blkcrypt::nbd
