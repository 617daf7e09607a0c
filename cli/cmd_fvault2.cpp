// blkcrypt fvault2: FileVault 2 (Core Storage) volumes as cryptsetup's
// FVAULT2 reads them, without root or device-mapper: `fvault2 dump` is
// fvault2Dump, `fvault2 decrypt` writes what `cryptsetup open --type fvault2`
// maps (one aes-xts-plain64 segment), `fvault2 serve` exports it over NBD.
// The actions are container_driver's; this is how a volume opens.
#include "commands.hpp"
#include "container_common.hpp"
#include "container_driver.hpp"
#include "passphrase.hpp"

#include <blkcrypt/fvault2/fvault2.hpp>

namespace cli {
namespace {

namespace fvault2 = blkcrypt::fvault2;

class Volume final : public OpenedContainer {
public:
    Volume(const std::string& path, bool writable) : OpenedContainer(path, open_container_image(path, writable)) {
        auto md = fvault2::read_metadata(registry(), *store);
        // cryptsetup's line, then why.
        if (!md) throw Failure("Device " + path + " is not a valid FVAULT2 device: " + md.error().message);
        md_ = std::move(md).value();
    }
    // The passphrase as every format reads it (passphrase.hpp).
    void unlock(const po::variables_map& vm) override {
        key_ = unlock_with_tries<blkcrypt::SecureBuffer>(
            vm, path, [&](const blkcrypt::SecureBuffer& pass) { return fvault2::unlock(registry(), md_, pass); });
    }
    blkcrypt::Result<blkcrypt::dm::DmTable> table() const override {
        return fvault2::dm_table(md_, key_, store->size(), path);
    }
    std::string dump() const override { return fvault2::dump(md_, path); }
    blkcrypt::SecureBuffer dump_volume_key() const override { return fvault2::dump_volume_key(md_, path, key_); }
    TableDevice serve_how(const blkcrypt::dm::DmTable& t) const override {
        return {.description = "crypt " + t.front().crypt->cipher + " over " + store->name(),
                .what_failed = path + ": "};
    }

private:
    fvault2::Metadata md_;
    blkcrypt::SecureBuffer key_;
};

}  // namespace

const ContainerFormat kFvault2Format{
    .name = "fvault2",
    .summary = "FileVault 2 (Core Storage) volumes as cryptsetup's FVAULT2 reads them, without\n"
               "root or device-mapper: dump is fvault2Dump (also blkcrypt fvault2Dump), decrypt\n"
               "writes the plaintext `cryptsetup open --type fvault2` maps, serve exports it\n"
               "over NBD (docs/nbd.md), read-write unless --read-only. The passphrase is prompted\n"
               "for on a terminal (--tries times), else one line of stdin; --key-file reads it\n"
               "as cryptsetup does, --passphrase-file takes the first line of a file. A\n"
               "passphrase that opens nothing exits 2 (\"No key available with this\n"
               "passphrase.\").",
    .actions = {"dump", "test-passphrase", "decrypt", "serve", "table"},
    .open_name = "open --type fvault2",
    .dump_name = "fvault2Dump",
    .key_file_help = "read the passphrase from FILE ('-': all of stdin)",
    .dump_volume_key_help = "dump: also print the volume key (asks for the passphrase)",
    .precheck = true,
    .open = open_as<Volume>,
};

int run_fvault2(Args args) { return run_container(kFvault2Format, args); }

}  // namespace cli
