// PKCS#7 signing and the kernel's verify_pkcs7_signature() trust rules
// (crypto/asymmetric_keys/pkcs7_verify.c, pkcs7_trust.c), on OpenSSL.
#include <blkcrypt/verity/signature.hpp>

#if BLKCRYPT_WITH_OPENSSL
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/pkcs7.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cctype>
#include <ctime>
#include <memory>
#include <optional>
#endif

namespace blkcrypt::verity {

#if !BLKCRYPT_WITH_OPENSSL

namespace {
Error unsupported() {
    return make_error(Status::Unsupported, "signatures need OpenSSL: blkcrypt was built without OpenSSL");
}
}  // namespace

bool signatures_supported() noexcept { return false; }
Result<std::vector<uint8_t>> pkcs7_sign(ConstBytes, const SecureBuffer&, ConstBytes, std::string_view) {
    return unsupported();
}
Result<std::vector<std::vector<uint8_t>>> parse_certificates(ConstBytes) { return unsupported(); }
Result<SignatureCheck> pkcs7_verify(ConstBytes, ConstBytes, const std::vector<std::vector<uint8_t>>&,
                                    const TrustOptions&) {
    return unsupported();
}

#else

namespace {

struct Free {
    void operator()(BIO* p) const { BIO_free_all(p); }
    void operator()(X509* p) const { X509_free(p); }
    void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
    void operator()(PKCS7* p) const { PKCS7_free(p); }
    void operator()(STACK_OF(X509)* p) const { sk_X509_pop_free(p, X509_free); }
};
template <class T>
using Ptr = std::unique_ptr<T, Free>;

Error err(Status s, std::string msg) {
    ERR_clear_error();  // the queue would otherwise leak into the next call's reason
    return make_error(s, std::move(msg));
}

// OpenSSL's reason for the last failure, for messages about the user's files.
std::string ssl_reason() {
    const unsigned long e = ERR_peek_last_error();
    const char* r = e ? ERR_reason_error_string(e) : nullptr;
    return r ? std::string(": ") + r : std::string();
}

Ptr<BIO> mem_bio(ConstBytes b) {
    return Ptr<BIO>(BIO_new_mem_buf(b.data(), static_cast<int>(b.size())));
}

// Never prompts: an encrypted key fails instead of reading the terminal.
int no_passphrase(char*, int, int, void*) { return -1; }

Ptr<X509> load_cert(ConstBytes b) {
    if (b.size() > INT32_MAX) return nullptr;
    auto bio = mem_bio(b);
    Ptr<X509> c(bio ? PEM_read_bio_X509(bio.get(), nullptr, no_passphrase, nullptr) : nullptr);
    if (!c) {
        const unsigned char* p = b.data();
        c.reset(d2i_X509(nullptr, &p, static_cast<long>(b.size())));
    }
    return c;
}

std::string name_of(const X509* c) {
    char buf[256];
    X509_NAME_oneline(X509_get_subject_name(c), buf, sizeof buf);
    return buf;
}

std::string time_text(const ASN1_TIME* t) {
    Ptr<BIO> b(BIO_new(BIO_s_mem()));
    if (!b || !ASN1_TIME_print(b.get(), t)) return "?";
    char* p = nullptr;
    const long n = BIO_get_mem_data(b.get(), &p);
    return std::string(p, static_cast<std::size_t>(n));
}

Result<void> check_dates(const X509* c, const TrustOptions& o) {
    if (!o.check_time) return {};
    time_t now = o.now ? static_cast<time_t>(o.now) : std::time(nullptr);
    if (X509_cmp_time(X509_get0_notAfter(c), &now) < 0)
        return err(Status::NoKey, "certificate '" + name_of(c) + "' expired on " + time_text(X509_get0_notAfter(c)));
    if (X509_cmp_time(X509_get0_notBefore(c), &now) > 0)
        return err(Status::NoKey, "certificate '" + name_of(c) + "' is not valid before " +
                                      time_text(X509_get0_notBefore(c)));
    return {};
}

// The kernel finds a trusted key by issuer + serial or by subject key id.
X509* find_trusted(STACK_OF(X509)* trusted, X509* x) {
    for (int i = 0; i < sk_X509_num(trusted); ++i) {
        X509* t = sk_X509_value(trusted, i);
        if (X509_issuer_and_serial_cmp(t, x) == 0) return t;
        const ASN1_OCTET_STRING* a = X509_get0_subject_key_id(t);
        const ASN1_OCTET_STRING* b = X509_get0_subject_key_id(x);
        if (a && b && ASN1_OCTET_STRING_cmp(a, b) == 0) return t;
    }
    return nullptr;
}

// The certificate in `certs` that issued x (names and key ids agree and its
// key verifies x), nullptr for none; x itself when x is self-signed.
X509* issuer_in(STACK_OF(X509)* certs, X509* x) {
    for (int i = 0; certs && i < sk_X509_num(certs); ++i) {
        X509* c = sk_X509_value(certs, i);
        if (X509_check_issued(c, x) == X509_V_OK) return c;
    }
    return nullptr;
}

bool cert_signed_by(X509* x, X509* issuer) {
    EVP_PKEY* k = X509_get0_pubkey(issuer);
    return k && X509_verify(x, k) == 1;
}

std::string digest_name(PKCS7_SIGNER_INFO* si) {
    const X509_ALGOR* a = si->digest_alg;
    const int nid = OBJ_obj2nid(a->algorithm);
    const char* n = nid != NID_undef ? OBJ_nid2sn(nid) : nullptr;
    std::string s = n ? n : "unknown";
    for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));  // "SHA256"
    return s;
}

}  // namespace

bool signatures_supported() noexcept { return true; }

Result<std::vector<std::vector<uint8_t>>> parse_certificates(ConstBytes file) {
    std::vector<std::vector<uint8_t>> out;
    if (file.size() > INT32_MAX) return err(Status::Invalid, "too large for a certificate file");
    auto bio = mem_bio(file);
    if (!bio) return err(Status::NoMem, "out of memory");
    for (;;) {
        Ptr<X509> c(PEM_read_bio_X509(bio.get(), nullptr, no_passphrase, nullptr));
        if (!c) break;
        unsigned char* der = nullptr;
        const int n = i2d_X509(c.get(), &der);
        if (n <= 0) return err(Status::Invalid, "cannot encode a certificate" + ssl_reason());
        out.emplace_back(der, der + n);
        OPENSSL_free(der);
    }
    ERR_clear_error();
    if (out.empty()) {
        const unsigned char* p = file.data();
        Ptr<X509> c(d2i_X509(nullptr, &p, static_cast<long>(file.size())));
        if (!c || p != file.data() + file.size())
            return err(Status::Invalid, "not a PEM or DER X.509 certificate");
        out.emplace_back(file.begin(), file.end());
    }
    return out;
}

Result<std::vector<uint8_t>> pkcs7_sign(ConstBytes data, const SecureBuffer& key, ConstBytes cert,
                                        std::string_view digest) {
    if (data.size() > INT32_MAX || key.size() > INT32_MAX) return err(Status::Invalid, "input too large");
    Ptr<X509> x(load_cert(cert));
    if (!x) return err(Status::Invalid, "the certificate is not a PEM or DER X.509 certificate");
    Ptr<EVP_PKEY> k;
    {
        auto kb = mem_bio(key.span());
        if (kb) k.reset(PEM_read_bio_PrivateKey(kb.get(), nullptr, no_passphrase, nullptr));
        if (!k) {
            const unsigned char* p = key.data();
            k.reset(d2i_AutoPrivateKey(nullptr, &p, static_cast<long>(key.size())));
        }
    }
    if (!k) return err(Status::Invalid, "the key is not an unencrypted PEM or DER private key");
    if (X509_check_private_key(x.get(), k.get()) != 1)
        return err(Status::Invalid, "the key does not match the certificate");
    const EVP_MD* md = nullptr;
    if (!digest.empty()) {
        md = EVP_get_digestbyname(std::string(digest).c_str());
        if (!md) return err(Status::NotFound, "unknown digest '" + std::string(digest) + "'");
    }
    // PARTIAL, then add_signer: the only way to choose the digest (fsverity
    // sign and openssl smime build the message the same way).
    const int flags = PKCS7_BINARY | PKCS7_DETACHED | PKCS7_NOATTR | PKCS7_NOCERTS | PKCS7_PARTIAL;
    auto in = mem_bio(data);
    Ptr<PKCS7> p7(PKCS7_sign(nullptr, nullptr, nullptr, in.get(), flags));
    if (!p7 || !PKCS7_sign_add_signer(p7.get(), x.get(), k.get(), md, flags) ||
        PKCS7_final(p7.get(), in.get(), flags) != 1)
        return err(Status::Invalid, "signing failed" + ssl_reason());
    unsigned char* der = nullptr;
    const int n = i2d_PKCS7(p7.get(), &der);
    if (n <= 0) return err(Status::Invalid, "cannot encode the signature" + ssl_reason());
    std::vector<uint8_t> out(der, der + n);
    OPENSSL_free(der);
    return out;
}

Result<SignatureCheck> pkcs7_verify(ConstBytes sig, ConstBytes data,
                                    const std::vector<std::vector<uint8_t>>& trusted_der,
                                    const TrustOptions& opts) {
    if (sig.empty()) return err(Status::Invalid, "the signature is empty");
    if (sig.size() > INT32_MAX || data.size() > INT32_MAX) return err(Status::Invalid, "input too large");
    const unsigned char* p = sig.data();
    Ptr<PKCS7> p7(d2i_PKCS7(nullptr, &p, static_cast<long>(sig.size())));
    if (!p7) return err(Status::Invalid, "the signature is not a DER PKCS#7 message");
    if (p != sig.data() + sig.size())
        return err(Status::Invalid, "the signature has " + std::to_string(sig.data() + sig.size() - p) +
                                        " bytes after its PKCS#7 message");
    if (!PKCS7_type_is_signed(p7.get()) || !p7->d.sign || !p7->d.sign->contents)
        return err(Status::Invalid, "the PKCS#7 message is not signedData");
    // VERIFYING_UNSPECIFIED_SIGNATURE: the content must be plain data, and
    // detached (pkcs7_supply_detached_data refuses a message with content).
    if (OBJ_obj2nid(p7->d.sign->contents->type) != NID_pkcs7_data)
        return err(Status::Invalid, "the signed content type is not pkcs7-data");
    if (!PKCS7_get_detached(p7.get()))
        return err(Status::Invalid, "the signature carries its content: a detached signature is needed");
    STACK_OF(PKCS7_SIGNER_INFO)* sis = PKCS7_get_signer_info(p7.get());
    if (!sis || sk_PKCS7_SIGNER_INFO_num(sis) == 0) return err(Status::Invalid, "the signature has no signer");

    Ptr<STACK_OF(X509)> trusted(sk_X509_new_null());
    if (!trusted) return err(Status::NoMem, "out of memory");
    for (const auto& der : trusted_der) {
        const unsigned char* q = der.data();
        Ptr<X509> c(d2i_X509(nullptr, &q, static_cast<long>(der.size())));
        if (!c) return err(Status::Invalid, "a trusted certificate is not DER X.509");
        if (!sk_X509_push(trusted.get(), c.get())) return err(Status::NoMem, "out of memory");
        c.release();
    }
    STACK_OF(X509)* certs = p7->d.sign->cert;  // may be null (-nocerts)

    // The digests of the data, one per signer digest algorithm.
    auto data_bio = mem_bio(data);
    BIO* chain = data_bio ? PKCS7_dataInit(p7.get(), data_bio.get()) : nullptr;
    if (!chain) return err(Status::Invalid, "unsupported digest in the signature" + ssl_reason());
    data_bio.release();  // now the tail of `chain`
    Ptr<BIO> p7bio(chain);
    char buf[4096];
    while (BIO_read(p7bio.get(), buf, sizeof buf) > 0) {}

    auto signs = [&](PKCS7_SIGNER_INFO* si, X509* by) {
        return PKCS7_signatureVerify(p7bio.get(), p7.get(), si, by) == 1;
    };
    std::optional<SignatureCheck> ok;
    std::optional<Error> refused;  // the first reason a signer was not trusted
    for (int i = 0; i < sk_PKCS7_SIGNER_INFO_num(sis); ++i) {
        PKCS7_SIGNER_INFO* si = sk_PKCS7_SIGNER_INFO_value(sis, i);
        PKCS7_ISSUER_AND_SERIAL* ias = si->issuer_and_serial;
        X509* signer = certs ? X509_find_by_issuer_and_serial(certs, ias->issuer, ias->serial) : nullptr;
        // pkcs7_verify: a signer whose certificate is in the message must
        // verify, and so must the chain of message certificates above it.
        if (signer && !signs(si, signer)) return err(Status::BadMsg, "the signature does not match the data");
        for (X509* x = signer; x;) {
            X509* up = issuer_in(certs, x);
            if (!up) break;
            if (!cert_signed_by(x, up))
                return err(Status::BadMsg, "certificate '" + name_of(x) + "' in the signature has a bad signature");
            if (up == x) break;
            x = up;
        }
        // pkcs7_validate_trust_one: walk up from the signer to a trusted key.
        X509* anchor = nullptr;  // the trusted certificate
        std::vector<X509*> path;  // message certificates between signer and anchor
        bool rejected = false, self_signed_end = false;
        X509* last = nullptr;
        for (X509* x = signer; x;) {
            if (X509* t = find_trusted(trusted.get(), x)) {
                // The trusted key must verify what this certificate vouches for.
                rejected = last ? !cert_signed_by(last, t) : !signs(si, t);
                anchor = t;
                break;
            }
            X509* up = issuer_in(certs, x);
            if (up == x) {
                self_signed_end = true;
                break;
            }
            path.push_back(x);
            last = x;
            x = up;
        }
        if (!anchor && !self_signed_end && last) {
            for (int j = 0; j < sk_X509_num(trusted.get()); ++j) {
                X509* t = sk_X509_value(trusted.get(), j);
                if (X509_check_issued(t, last) == X509_V_OK) {
                    anchor = t;
                    rejected = !cert_signed_by(last, t);
                    break;
                }
            }
        }
        if (!anchor && !self_signed_end) {
            // Last resort: the signer's issuer and serial name a trusted key.
            if (X509* t = X509_find_by_issuer_and_serial(trusted.get(), ias->issuer, ias->serial)) {
                anchor = t;
                rejected = !signs(si, t);
                path.clear();
            }
        }
        if (anchor && rejected)
            return err(Status::BadMsg, signer || path.empty() ? "the signature does not match the data"
                                                               : "the signature does not verify with the trusted certificate");
        if (!anchor) {
            if (!refused)
                refused = Error{Status::NoKey, self_signed_end
                                                   ? "the signer's certificate chain ends in an untrusted self-signed certificate"
                                                   : "the signature is not signed by a trusted certificate"};
            continue;
        }
        path.push_back(anchor);
        Result<void> dates;
        for (X509* c : path)
            if (dates = check_dates(c, opts); !dates) break;
        if (!dates) {
            if (!refused) refused = dates.error();
            continue;
        }
        if (!ok) ok = SignatureCheck{name_of(signer ? signer : anchor), digest_name(si)};
    }
    ERR_clear_error();
    if (ok) return *ok;
    return *refused;
}

#endif

}  // namespace blkcrypt::verity
