// blkcrypt skcipher: one-shot encryption or decryption of a whole input with
// a symmetric cipher ("aes" as ECB, "cbc(aes)", "xts(aes)", ...).
#include "commands.hpp"
#include "oneshot.hpp"
#include "output_file.hpp"

#include <blkcrypt/registry.hpp>
#include <blkcrypt/skcipher.hpp>

#include <string>
#include <vector>

namespace cli {

int run_skcipher(Args args) {
    CommandLine cl{"blkcrypt skcipher --alg NAME --key HEX [--iv HEX] (--encrypt|--decrypt)\n"
                   "                         [--in FILE] [--out FILE]",
                   "Encrypt or decrypt the whole input (stdin by default) to --out (stdout by\n"
                   "default). --out follows the output policy (docs/outputs.md)."};
    add_oneshot_options(cl.options, "cipher name, e.g. aes, cbc(aes), xts(aes)");
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;
    const bool enc = encrypt_requested(*vm);
    const auto& in_path = (*vm)["in"].as<std::string>();
    const auto& out_path = (*vm)["out"].as<std::string>();

    // Every usage check happens before any input is read.
    auto tfm = alloc_keyed<blkcrypt::Skcipher>(*vm);
    const blkcrypt::AlgInfo& info = tfm.info();
    auto iv = iv_option(*vm, tfm.ivsize(), info.driver);

    // Opened before reading, so a refused output fails before any work; the
    // plaintext of a decryption goes to a new file only as 0600.
    Output out(out_path, {.role = "--out", .secret = !enc, .can_stream = true,
                          .inputs = {{"--in", in_path}}});
    const auto input = read_all(in_path);
    std::vector<uint8_t> output(input.size());
    const blkcrypt::Status s = enc ? tfm.encrypt(input, output, iv) : tfm.decrypt(input, output, iv);
    if (s == blkcrypt::Status::Invalid)
        throw Failure(info.driver + " cannot " + (enc ? "encrypt " : "decrypt ") +
                      std::to_string(input.size()) + " bytes (blocksize " +
                      std::to_string(info.blocksize) + ")");
    if (s != blkcrypt::Status::Ok) throw Failure(info.driver + ": " + blkcrypt::to_string(s));
    out.write(output);
    out.commit();
    return 0;
}

}  // namespace cli
