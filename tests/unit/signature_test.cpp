// PKCS#7 root-hash and fs-verity signatures (verity/src/signature.cpp)
// against signatures made by openssl smime and fsverity sign
// (tests/verity/sig/make-golden.sh), and the kernel's trust rules.
#include "paths.hpp"
#include "test_util.hpp"

#include <blkcrypt/registry.hpp>
#include <blkcrypt/verity/fsverity.hpp>
#include <blkcrypt/verity/signature.hpp>
#include <blkcrypt/verity/table.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace vy = blkcrypt::verity;
using blkcrypt::Status;

namespace {

// Catch2 2 has no SKIP: a warning says why the case checked nothing.
#define NEED_OPENSSL()                                                          \
    do {                                                                        \
        if (!vy::signatures_supported()) {                                      \
            WARN("built without OpenSSL: signatures are refused, case skipped"); \
            return;                                                             \
        }                                                                       \
    } while (0)

std::vector<uint8_t> file(const std::string& name) {
    std::ifstream in(std::string(testutil::kSourceDir) + "/tests/verity/sig/" + name, std::ios::binary);
    REQUIRE(in);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::vector<uint8_t>> certs(const std::string& name) {
    auto c = vy::parse_certificates(file(name));
    REQUIRE(c);
    return std::move(c).value();
}

std::vector<uint8_t> root() { return file("root.hex"); }

}  // namespace

TEST_CASE("signatures: built without OpenSSL they refuse clearly", "[sig]") {
    if (vy::signatures_supported()) return;  // built with OpenSSL
    auto r = vy::pkcs7_verify(std::vector<uint8_t>{1}, {}, {});
    REQUIRE(r.status() == Status::Unsupported);
    CHECK(r.error().message.find("built without OpenSSL") != std::string::npos);
}

TEST_CASE("pkcs7_sign makes openssl smime's bytes for an RSA key", "[sig]") {
    NEED_OPENSSL();
    const auto key = file("rsa.key");
    auto sig = vy::pkcs7_sign(root(), blkcrypt::SecureBuffer(key), file("rsa.pem"));
    REQUIRE(sig);
    CHECK(*sig == file("rsa.sig"));
    // ECDSA is randomized: ours must verify, and so must openssl's.
    auto ec = vy::pkcs7_sign(root(), blkcrypt::SecureBuffer(file("ec.key")), file("ec.pem"));
    REQUIRE(ec);
    CHECK(vy::pkcs7_verify(*ec, root(), certs("ec.pem")));
    CHECK(vy::pkcs7_verify(file("ec.sig"), root(), certs("ec.pem")));
}

TEST_CASE("pkcs7_sign refuses a key that is not the certificate's", "[sig]") {
    NEED_OPENSSL();
    auto sig = vy::pkcs7_sign(root(), blkcrypt::SecureBuffer(file("other.key")), file("rsa.pem"));
    REQUIRE(sig.status() == Status::Invalid);
    CHECK(sig.error().message == "the key does not match the certificate");
    CHECK(vy::pkcs7_sign(root(), blkcrypt::SecureBuffer(file("rsa.pem")), file("rsa.pem")).status() == Status::Invalid);
}

TEST_CASE("fs-verity signatures equal fsverity sign's", "[sig]") {
    NEED_OPENSSL();
    const auto data = file("fsverity.data");
    auto digest = [&](const vy::FsverityParams& p) {
        std::size_t at = 0;
        auto d = vy::fsverity_compute(testutil::registry(), p, data.size(), [&](blkcrypt::Bytes buf) -> blkcrypt::Result<void> {
            std::copy_n(data.begin() + static_cast<std::ptrdiff_t>(at), buf.size(), buf.begin());
            at += buf.size();
            return {};
        });
        REQUIRE(d);
        return vy::fsverity_formatted_digest(*d);
    };
    const auto signed_bytes = digest({});
    auto sig = vy::pkcs7_sign(signed_bytes, blkcrypt::SecureBuffer(file("rsa.key")), file("rsa.pem"), "sha256");
    REQUIRE(sig);
    CHECK(*sig == file("fsverity.sig"));
    CHECK(vy::pkcs7_verify(file("fsverity.sig"), signed_bytes, certs("rsa.pem")));
    // sha512, 1024-byte blocks, salt 0102, EC key: the digest in the message is sha512.
    vy::FsverityParams p;
    p.hash = "sha512";
    p.block_size = 1024;
    p.salt = {1, 2};
    auto r = vy::pkcs7_verify(file("fsverity-sha512.sig"), digest(p), certs("ec.pem"));
    REQUIRE(r);
    CHECK(r->digest == "sha512");
    // The signed bytes are the formatted digest: the root hash is other bytes.
    CHECK(vy::pkcs7_verify(file("fsverity.sig"), root(), certs("rsa.pem")).status() == Status::BadMsg);
}

TEST_CASE("pkcs7_verify accepts the peers' signatures by a trusted certificate", "[sig]") {
    NEED_OPENSSL();
    auto r = vy::pkcs7_verify(file("rsa.sig"), root(), certs("rsa.pem"));
    REQUIRE(r);
    CHECK(r->signer == "/CN=blkcrypt test rsa");
    CHECK(r->digest == "sha256");
    // Authenticated attributes (openssl smime without -noattr): the kernel
    // checks their messageDigest and accepts them.
    CHECK(vy::pkcs7_verify(file("attrs.sig"), root(), certs("rsa.pem")));
    // One of several trusted certificates is enough.
    auto both = certs("other.pem");
    for (auto& c : certs("rsa.pem")) both.push_back(c);
    CHECK(vy::pkcs7_verify(file("rsa.sig"), root(), both));
}

TEST_CASE("pkcs7_verify refuses wrong data, an untrusted signer, bad bytes", "[sig]") {
    NEED_OPENSSL();
    auto other_root = root();
    other_root[0] ^= 1;
    auto r = vy::pkcs7_verify(file("rsa.sig"), other_root, certs("rsa.pem"));
    REQUIRE(r.status() == Status::BadMsg);
    CHECK(r.error().message == "the signature does not match the data");
    // Upper case hex is other bytes: the kernel checks the string.
    std::vector<uint8_t> upper = root();
    for (auto& c : upper) c = static_cast<uint8_t>(std::toupper(c));
    CHECK(vy::pkcs7_verify(file("rsa.sig"), upper, certs("rsa.pem")).status() == Status::BadMsg);

    r = vy::pkcs7_verify(file("rsa.sig"), root(), certs("other.pem"));
    REQUIRE(r.status() == Status::NoKey);
    CHECK(r.error().message == "the signature is not signed by a trusted certificate");

    auto sig = file("rsa.sig");
    sig.pop_back();
    CHECK(vy::pkcs7_verify(sig, root(), certs("rsa.pem")).status() == Status::Invalid);
    sig = file("rsa.sig");
    sig.push_back(0);
    r = vy::pkcs7_verify(sig, root(), certs("rsa.pem"));
    REQUIRE(r.status() == Status::Invalid);
    CHECK(r.error().message == "the signature has 1 bytes after its PKCS#7 message");
    CHECK(vy::pkcs7_verify({}, root(), certs("rsa.pem")).status() == Status::Invalid);
    CHECK(vy::pkcs7_verify(file("rsa.pem"), root(), certs("rsa.pem")).status() == Status::Invalid);
    // A flipped byte in the RSA signature value (the last bytes).
    sig = file("rsa.sig");
    sig[sig.size() - 5] ^= 0x40;
    CHECK(vy::pkcs7_verify(sig, root(), certs("rsa.pem")).status() == Status::BadMsg);
}

TEST_CASE("pkcs7_verify refuses a signature that carries its content", "[sig]") {
    NEED_OPENSSL();
    auto r = vy::pkcs7_verify(file("attached.sig"), root(), certs("rsa.pem"));
    REQUIRE(r.status() == Status::Invalid);
    CHECK(r.error().message == "the signature carries its content: a detached signature is needed");
}

TEST_CASE("pkcs7_verify follows the kernel's chain rules", "[sig]") {
    NEED_OPENSSL();
    // The leaf certificate in the message, its CA trusted: the issuer of the
    // last message certificate is a trusted key.
    auto r = vy::pkcs7_verify(file("leaf-chain.sig"), root(), certs("ca.pem"));
    REQUIRE(r);
    CHECK(r->signer == "/CN=blkcrypt test leaf");
    CHECK(vy::pkcs7_verify(file("leaf-chain.sig"), root(), certs("leaf.pem")));
    // Without certificates in the message only the signer's own certificate
    // can be found (by issuer and serial): trusting its CA is not enough.
    CHECK(vy::pkcs7_verify(file("leaf-nocerts.sig"), root(), certs("ca.pem")).status() == Status::NoKey);
    CHECK(vy::pkcs7_verify(file("leaf-nocerts.sig"), root(), certs("leaf.pem")));
    CHECK(vy::pkcs7_verify(file("leaf-chain.sig"), root(), certs("other.pem")).status() == Status::NoKey);
}

TEST_CASE("pkcs7_verify refuses expired certificates unless asked", "[sig]") {
    NEED_OPENSSL();
    auto r = vy::pkcs7_verify(file("expired.sig"), root(), certs("expired.pem"));
    REQUIRE(r.status() == Status::NoKey);
    CHECK(r.error().message == "certificate '/CN=blkcrypt test expired' expired on Jan  1 00:00:00 2021 GMT");
    CHECK(vy::pkcs7_verify(file("expired.sig"), root(), certs("expired.pem"), {.check_time = false}));
    // Before its start date.
    r = vy::pkcs7_verify(file("expired.sig"), root(), certs("expired.pem"), {.now = 1500000000});
    REQUIRE(r.status() == Status::NoKey);
    CHECK(r.error().message.find("is not valid before Jan  1 00:00:00 2020 GMT") != std::string::npos);
    CHECK(vy::pkcs7_verify(file("expired.sig"), root(), certs("expired.pem"), {.now = 1600000000}));
    // The CA's dates count too (valid until 2126): far in the future all fail.
    CHECK(vy::pkcs7_verify(file("leaf-chain.sig"), root(), certs("ca.pem"), {.now = 5000000000}).status() ==
          Status::NoKey);
}

TEST_CASE("parse_certificates reads PEM bundles and DER", "[sig]") {
    NEED_OPENSSL();
    auto pem = file("rsa.pem");
    for (auto b : file("ec.pem")) pem.push_back(b);
    auto c = vy::parse_certificates(pem);
    REQUIRE(c);
    REQUIRE(c->size() == 2);
    auto der = vy::parse_certificates((*c)[1]);
    REQUIRE(der);
    CHECK((*der)[0] == (*c)[1]);
    CHECK(vy::parse_certificates(file("rsa.key")).status() == Status::Invalid);
}

TEST_CASE("verity tables carry root_hash_sig_key_desc", "[sig]") {
    const std::string args = "1 /d /h 4096 4096 8 1 sha256 " + std::string(64, 'a') +
                             " - 3 ignore_zero_blocks root_hash_sig_key_desc cryptsetup:x-y";
    auto t = vy::parse_verity_args(args);
    REQUIRE(t);
    CHECK(t->root_hash_sig_key_desc == "cryptsetup:x-y");
    CHECK(t->ignore_zero_blocks);
    CHECK(t->args() == args);
    CHECK(!vy::parse_verity_args("1 /d /h 4096 4096 8 1 sha256 " + std::string(64, 'a') + " - 1 root_hash_sig_key_desc"));
}
