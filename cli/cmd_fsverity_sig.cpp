// blkcrypt fsverity sign FILE SIG: the built-in signature `fsverity sign`
// makes (PKCS#7 over struct fsverity_formatted_digest, digest = --hash-alg),
// byte for byte; verify-sig checks one as the kernel's
// fsverity_verify_signature() does, against trusted certificates.
#include "fsverity_sig.hpp"

#include "number_option.hpp"
#include "output_file.hpp"
#include "passphrase.hpp"
#include "registry.hpp"
#include "verity_sig.hpp"

#include <blkcrypt/verity/signature.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <iostream>

namespace cli {
namespace {

namespace fsv = blkcrypt::verity;

void add_digest_options(po::options_description& o) {
    o.add_options()
        ("hash-alg", po::value<std::string>()->value_name("ALG"), "sha256 (default) or sha512")
        ("block-size", po::value<std::string>()->value_name("N"), "Merkle tree block size (default 4096)")
        ("salt", po::value<std::string>()->value_name("HEX"), "salt, up to 32 bytes in hex")
        ("threads", threads_value()->value_name("N"), "hashing threads, at most 256 (default: all cores)");
}

fsv::FsverityDigest file_digest(const fsv::FsverityParams& p, const std::string& file) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Failure(errno_message("cannot open '" + file + "'"));
    auto d = fsv::fsverity_compute_fd(registry(), p, fd, {});
    ::close(fd);
    if (!d) throw Failure(file + ": " + d.error().message);
    return std::move(d).value();
}

std::vector<std::string> file_and_sig(const po::variables_map& vm, const char* action) {
    const auto words = vm.count("file") ? vm["file"].as<std::vector<std::string>>() : std::vector<std::string>{};
    if (words.size() != 2) throw UsageError(std::string(action) + " takes FILE and SIG");
    return words;
}

}  // namespace

int run_fsverity_sign(Args args) {
    CommandLine cl{"blkcrypt fsverity sign FILE SIG --key KEY [--cert CERT] [--hash-alg sha256|sha512]\n"
                   "       [--block-size N] [--salt HEX]",
                   "Sign the fs-verity digest of FILE into SIG (DER PKCS#7), byte for byte as\n"
                   "'fsverity sign' (fsverity-utils) does. The certificate defaults to the key file."};
    cl.options.add_options()
        ("key", po::value<std::string>()->value_name("KEY"), "the private key (PEM or DER)")
        ("cert", po::value<std::string>()->value_name("CERT"), "the signer's certificate (default: in KEY)");
    add_digest_options(cl.options);
    cl.actions = {{"sign", "sign the fs-verity digest of a file"}};
    cl.hidden.add_options()("file", po::value<std::vector<std::string>>(), "FILE SIG");
    cl.positional.add("file", -1);
    auto vm = parse_command_line(cl, fsverity_salt_words(args));
    if (!vm) return 0;
    const auto words = file_and_sig(*vm, "sign");
    const fsv::FsverityParams params = fsverity_params(*vm);  // a bad option before any file is read
    if (!vm->count("key")) throw UsageError("sign needs --key KEY");
    if (words[1] == "-") throw UsageError("SIG cannot be stdout: the result line is printed there");
    if (!fsv::signatures_supported()) throw Failure("signatures need OpenSSL: blkcrypt was built without OpenSSL");
    const std::string key_path = (*vm)["key"].as<std::string>();
    const std::string cert_path = vm->count("cert") ? (*vm)["cert"].as<std::string>() : key_path;
    const auto key = read_private_key(key_path);
    const auto cert = read_all(cert_path, kMaxKeyFileSize);
    const auto d = file_digest(params, words[0]);
    // The signed message's digest is the file's hash algorithm, as fsverity sign makes it.
    auto sig = fsv::pkcs7_sign(fsv::fsverity_formatted_digest(d), key, cert, d.alg->name);
    if (!sig) throw UsageError(sig.error().message);
    write_output(words[1], *sig,
                 OutputOptions{.role = "SIG", .can_stream = true,
                               .inputs = {{"FILE", words[0]}, {"--key", key_path}, {"--cert", cert_path}}});
    std::cout << "Signed file '" << words[0] << "' (" << d.alg->name << ':' << encode_hex(d.digest) << ")\n";
    return 0;
}

int run_fsverity_verify_sig(Args args) {
    CommandLine cl{"blkcrypt fsverity verify-sig FILE SIG (--cert CERT... | --trusted-cert CERT... | --trusted-certs DIR)\n"
                   "       [--hash-alg sha256|sha512] [--block-size N] [--salt HEX] [--ignore-cert-time]",
                   "Check the built-in signature SIG of FILE as the kernel does when it enables\n"
                   "fs-verity with a signature, the certificates standing for the .fs-verity keyring."};
    cl.options.add_options()
        ("cert", po::value<std::vector<std::string>>()->value_name("CERT"), "a trusted certificate (PEM or DER; repeatable)")
        ("trusted-cert", po::value<std::vector<std::string>>()->value_name("CERT"),
         "the same as --cert, as 'blkcrypt verity' names it (repeatable)")
        ("trusted-certs", po::value<std::string>()->value_name("DIR"), "every certificate file in DIR is trusted")
        ("ignore-cert-time", po::bool_switch(), "accept expired certificates, as the kernel does");
    add_digest_options(cl.options);
    cl.actions = {{"verify-sig", "check a built-in signature of a file"}};
    cl.hidden.add_options()("file", po::value<std::vector<std::string>>(), "FILE SIG");
    cl.positional.add("file", -1);
    auto vm = parse_command_line(cl, fsverity_salt_words(args));
    if (!vm) return 0;
    const auto words = file_and_sig(*vm, "verify-sig");
    const fsv::FsverityParams params = fsverity_params(*vm);
    if (!fsv::signatures_supported()) throw Failure("signatures need OpenSSL: blkcrypt was built without OpenSSL");
    const auto d = file_digest(params, words[0]);
    check_signature(*vm, words[1], fsv::fsverity_formatted_digest(d), "fs-verity", {"cert", "trusted-cert"});
    std::cout << "Signature OK for file '" << words[0] << "' (" << d.alg->name << ':' << encode_hex(d.digest) << ")\n";
    return 0;
}

}  // namespace cli
