// blkcrypt aead: authenticated encryption of a whole input. The ciphertext is
// followed by the tag, as the kernel lays it out; decryption writes nothing
// at all unless the tag verifies.
#include "commands.hpp"
#include "oneshot.hpp"
#include "output_file.hpp"
#include "number_option.hpp"

#include <blkcrypt/aead.hpp>
#include <blkcrypt/registry.hpp>

#include <string>
#include <vector>

namespace cli {

int run_aead(Args args) {
    CommandLine cl{"blkcrypt aead --alg NAME --key HEX --iv HEX [--aad HEX] --authsize N\n"
                   "                     (--encrypt|--decrypt) [--in FILE] [--out FILE]",
                   "Encrypt to ciphertext||tag, or verify and decrypt ciphertext||tag. On a\n"
                   "failed tag check nothing is written and the exit status is 1."};
    add_oneshot_options(cl.options, "AEAD name, e.g. gcm(aes)");
    cl.options.add_options()
        ("aad", po::value<std::string>()->default_value("")->value_name("HEX"), "associated data in hex")
        ("authsize", number_value<std::size_t>(0, 255)->required()->value_name("N"), "tag length in bytes");
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;
    const bool enc = encrypt_requested(*vm);
    const auto& in_path = (*vm)["in"].as<std::string>();
    const auto& out_path = (*vm)["out"].as<std::string>();
    const auto aad = decode_hex((*vm)["aad"].as<std::string>(), "--aad");

    auto tfm = alloc_keyed<blkcrypt::Aead>(*vm);
    const blkcrypt::AlgInfo& info = tfm.info();
    const std::size_t authsize = (*vm)["authsize"].as<std::size_t>();
    if (tfm.setauthsize(authsize) != blkcrypt::Status::Ok)
        throw UsageError("authsize " + std::to_string(authsize) + " rejected by " + info.driver +
                         " (max " + std::to_string(info.maxauthsize) + ")");
    auto iv = iv_option(*vm, tfm.ivsize(), info.driver);

    // Opened before reading, so a refused output fails before any work; the
    // plaintext of a decryption goes to a new file only as 0600.
    Output out(out_path, {.role = "--out", .secret = !enc, .can_stream = true,
                          .inputs = {{"--in", in_path}}});
    const auto input = read_all(in_path);
    if (!enc && input.size() < authsize)
        throw Failure("input of " + std::to_string(input.size()) + " bytes is shorter than the " +
                      std::to_string(authsize) + "-byte tag");
    std::vector<uint8_t> output(enc ? input.size() + authsize : input.size() - authsize);
    const blkcrypt::Status s =
        enc ? tfm.encrypt(aad, input, output, iv) : tfm.decrypt(aad, input, output, iv);
    if (s == blkcrypt::Status::BadMsg) throw Failure("authentication failed");
    if (s == blkcrypt::Status::Invalid)
        throw Failure(info.driver + " cannot " + (enc ? "encrypt " : "decrypt ") +
                      std::to_string(input.size()) + " bytes");
    if (s != blkcrypt::Status::Ok) throw Failure(info.driver + ": " + blkcrypt::to_string(s));
    out.write(output);
    out.commit();
    return 0;
}

}  // namespace cli
