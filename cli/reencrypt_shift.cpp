// blkcrypt reencrypt --encrypt / --decrypt: encrypting a plain image in
// place (data shift, or a detached header) and removing the encryption.
#include "reencrypt_cli.hpp"

namespace cli {

int reencrypt_encrypt(const ReencryptRequest&) {
    throw Failure("reencrypt --encrypt is not supported yet (use luks encrypt into a new image)");
}

int reencrypt_decrypt(const ReencryptRequest&) {
    throw Failure("reencrypt --decrypt is not supported yet (use luks decrypt into a new file)");
}

}  // namespace cli
