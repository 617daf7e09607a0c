// Root-hash / fs-verity signatures: the input is a detached PKCS#7
// signature and a certificate file, checked as --root-hash-signature and
// --trusted-cert would be. Layout: 2 bytes (big endian) signature length,
// the signature, then the certificate file (PEM or DER) that is trusted.
// The signed data is the root hash string of tests/verity/sig/root.hex.
#include <blkcrypt/verity/signature.hpp>

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <vector>

using namespace blkcrypt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    std::size_t n = static_cast<std::size_t>(data[0]) << 8 | data[1];
    n = std::min(n, size - 2);
    const ConstBytes sig(data + 2, n), cert_file(data + 2 + n, size - 2 - n);
    constexpr std::string_view root = "5b1b4a1ba2e1e7a2b1f0cbd4d2f61d2db1a7e3b6f9c55a8d11e6c4f2b0d9a7e1";
    const ConstBytes signed_data(reinterpret_cast<const uint8_t*>(root.data()), root.size());
    std::vector<std::vector<uint8_t>> trusted;
    if (auto c = verity::parse_certificates(cert_file)) {
        trusted = std::move(c).value();
        // Every certificate read back is DER that parses again to itself.
        for (const auto& der : trusted) {
            auto again = verity::parse_certificates(der);
            if (!again || again->size() != 1 || (*again)[0] != der) std::abort();
        }
    }
    auto r = verity::pkcs7_verify(sig, signed_data, trusted);
    // Accepted only with something trusted, and then with a signer named.
    if (r && (trusted.empty() || r->signer.empty())) std::abort();
    (void)verity::pkcs7_verify(sig, signed_data, trusted, {.check_time = false});
    return 0;
}
