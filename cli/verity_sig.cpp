#include "verity_sig.hpp"

#include "passphrase.hpp"
#include "verity_params.hpp"

#include <blkcrypt/verity/signature.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>

namespace cli {

namespace vy = blkcrypt::verity;

void add_signature_options(po::options_description& opts) {
    opts.add_options()
        ("root-hash-signature", po::value<std::string>()->value_name("SIG"),
         "verify|table|read|serve: check this detached PKCS#7 (DER) signature of the root hash")
        ("trusted-cert", po::value<std::vector<std::string>>()->value_name("FILE"),
         "a trusted certificate (PEM or DER; repeatable), as a key in the kernel's keyring")
        ("trusted-certs", po::value<std::string>()->value_name("DIR"), "every certificate file in DIR is trusted")
        ("ignore-cert-time", po::bool_switch(), "accept expired certificates, as the kernel does")
        ("sig-key-desc", po::value<std::string>()->value_name("DESC"),
         "table: the root_hash_sig_key_desc (default: veritysetup's cryptsetup:<UUID>-<NAME>)")
        ("name", po::value<std::string>()->default_value("verity")->value_name("NAME"),
         "table: the device name in the default key description")
        ("key", po::value<std::string>()->value_name("FILE"), "sign: the private key (PEM or DER)")
        ("cert", po::value<std::string>()->value_name("FILE"), "sign: the signer's certificate (PEM or DER)");
}

std::vector<std::string> signature_check_option_names() {
    return {"root-hash-signature", "trusted-cert", "trusted-certs", "ignore-cert-time"};
}

blkcrypt::SecureBuffer read_private_key(const std::string& path) {
    return read_key_input(path, 0, 0, false);
}

namespace {

std::vector<std::vector<uint8_t>> certificates_in(const std::string& path) {
    const auto bytes = read_all(path, kMaxKeyFileSize);
    auto certs = vy::parse_certificates(bytes);
    if (!certs) {
        if (certs.status() == blkcrypt::Status::Unsupported) throw Failure(certs.error().message);
        throw UsageError(path + ": " + certs.error().message);
    }
    return std::move(certs).value();
}

}  // namespace

std::vector<std::vector<uint8_t>> trusted_certificates(const po::variables_map& vm, const CertOptions& file_options) {
    std::vector<std::vector<uint8_t>> out;
    std::string wanted;  // "--cert FILE, --trusted-cert FILE" for the message
    for (const auto& opt : file_options) {
        wanted += "--" + opt + " FILE, ";
        if (!vm.count(opt)) continue;
        for (const auto& f : vm[opt].as<std::vector<std::string>>()) {
            auto c = certificates_in(f);
            out.insert(out.end(), c.begin(), c.end());
        }
    }
    if (vm.count("trusted-certs")) {
        const std::string dir = vm["trusted-certs"].as<std::string>();
        std::error_code ec;
        std::vector<std::string> files;
        for (const auto& e : std::filesystem::directory_iterator(dir, ec))
            if (e.is_regular_file()) files.push_back(e.path().string());
        if (ec) throw Failure("--trusted-certs " + dir + ": " + ec.message());
        std::sort(files.begin(), files.end());
        for (const auto& f : files) {
            auto c = certificates_in(f);
            out.insert(out.end(), c.begin(), c.end());
        }
        if (files.empty()) throw UsageError("--trusted-certs " + dir + ": no certificate files in it");
    }
    if (out.empty())
        throw UsageError("a signature check needs " + wanted.substr(0, wanted.size() - 2) + " or --trusted-certs DIR");
    return out;
}

void check_signature(const po::variables_map& vm, const std::string& sig_path, blkcrypt::ConstBytes data,
                     const std::string& what, const CertOptions& file_options) {
    if (!vy::signatures_supported())
        throw Failure("signatures need OpenSSL: blkcrypt was built without OpenSSL");
    const auto trusted = trusted_certificates(vm, file_options);
    const auto sig = read_all(sig_path, kMaxKeyFileSize);
    vy::TrustOptions o;
    o.check_time = !vm["ignore-cert-time"].as<bool>();
    auto r = vy::pkcs7_verify(sig, data, trusted, o);
    if (r) return;
    const int status = r.status() == blkcrypt::Status::Invalid ? 1 : 2;
    throw StatusFailure(what + " signature " + sig_path + " refused: " + r.error().message, status);
}

bool check_root_hash_signature(const po::variables_map& vm, const std::vector<uint8_t>& root) {
    if (!vm.count("root-hash-signature")) {
        refuse_given(vm, {"trusted-cert", "trusted-certs", "ignore-cert-time", "sig-key-desc"},
                     "only with --root-hash-signature");
        return false;
    }
    // dm-verity signs the root digest argument of the table: the hex string.
    const std::string hex = encode_hex(root);
    check_signature(vm, vm["root-hash-signature"].as<std::string>(),
                    blkcrypt::ConstBytes(reinterpret_cast<const uint8_t*>(hex.data()), hex.size()), "root hash");
    return true;
}

std::string signature_key_description(const po::variables_map& vm, const vy::VerityParams& p) {
    if (vm.count("sig-key-desc")) {
        const std::string d = vm["sig-key-desc"].as<std::string>();
        // One word of the table line.
        if (d.empty() || d.find_first_of(" \t\n") != std::string::npos)
            throw UsageError("--sig-key-desc: must be one non-empty word");
        return d;
    }
    const std::string name = vm["name"].as<std::string>();
    if (name.empty() || name.find_first_of(" \t\n/") != std::string::npos)
        throw UsageError("--name: '" + name + "' is not a device name");
    const bool has_uuid = p.superblock || given(vm, "uuid");
    return "cryptsetup:" + (has_uuid ? format_uuid(p.uuid) + "-" : std::string()) + name;
}

int run_verity_sign(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.size() != 1) throw UsageError("sign takes ROOT_HEX");
    if (!vm.count("key") || !vm.count("cert")) throw UsageError("sign needs --key FILE and --cert FILE");
    if (!vm.count("out")) throw UsageError("sign needs --out SIG");
    if (!vy::signatures_supported())
        throw Failure("signatures need OpenSSL: blkcrypt was built without OpenSSL");
    // The kernel checks the signature over the root digest as the table
    // spells it, which veritysetup writes in lower case.
    const auto root = decode_hex(files[0], "root hash");
    if (root.empty()) throw UsageError("the root hash is empty");
    const std::string hex = encode_hex(root);
    const std::string key_path = vm["key"].as<std::string>(), cert_path = vm["cert"].as<std::string>();
    const auto key = read_private_key(key_path);
    const auto cert = read_all(cert_path, kMaxKeyFileSize);
    auto sig = vy::pkcs7_sign(blkcrypt::ConstBytes(reinterpret_cast<const uint8_t*>(hex.data()), hex.size()), key,
                              cert);
    if (!sig) throw UsageError(sig.error().message);
    write_output(vm["out"].as<std::string>(), *sig,
                 OutputOptions{.role = "--out", .can_stream = true, .inputs = {{"--key", key_path}, {"--cert", cert_path}}});
    return 0;
}

}  // namespace cli
