// blkcrypt bitlk: BitLocker volumes as cryptsetup's BITLK reads them, without
// root or device-mapper: `bitlk dump` is bitlkDump, `bitlk decrypt` writes
// what bitlkOpen maps (the same segments, read in userspace). The actions
// are container_driver's; this is how a volume opens and unlocks.
#include "commands.hpp"
#include "container_common.hpp"
#include "container_driver.hpp"
#include "passphrase.hpp"

#include <blkcrypt/bitlk/bitlk.hpp>

#include <iostream>

namespace cli {
namespace {

namespace bitlk = blkcrypt::bitlk;

void warn(const std::string& msg) {
    std::cout.flush();
    std::cerr << "blkcrypt: warning: " << msg << "\n";
}

bool has_clear_key(const bitlk::Metadata& md) {
    for (const bitlk::Vmk& v : md.vmks)
        if (v.protection == bitlk::kClearKey && !v.clear_key.empty()) return true;
    return false;
}

// As bitlkOpen maps it: dm-zero over the metadata areas (writes dropped),
// dm-crypt over the boot region and the rest, a paused conversion's tail
// linear; so a served write lands encrypted in place.
class Volume final : public OpenedContainer {
public:
    Volume(const std::string& path, bool writable) : OpenedContainer(path, open_container_image(path, writable)) {
        auto md = bitlk::read_metadata(registry(), *store);
        if (!md) throw Failure(md.error().message);
        md_ = std::move(md).value();
        // Where blkcrypt reads more than cryptsetup would, it says so.
        if (md_.damaged_first)
            warn("the first FVE metadata block is damaged; using copy " + std::to_string(md_.copy + 1) +
                 " at offset " + std::to_string(md_.metadata_offset[md_.copy]));
        if (md_.partial())
            warn(std::string(md_.next_state == 1 ? "decryption" : "encryption") + " of this volume is paused: the " +
                 std::to_string(md_.volume_size) +
                 " bytes from the start are decrypted, the rest is read as stored (cryptsetup refuses it)");
    }
    // The FVEK: from a clear-key protector when the volume has one (no secret
    // needed; cryptsetup 2.6 cannot), else from the passphrase, recovery
    // password or .BEK file read as cryptsetup reads a passphrase.
    void unlock(const po::variables_map& vm) override {
        if (has_clear_key(md_) && !vm.count("key-file") && !vm.count("passphrase-file")) {
            key_ = expect(bitlk::unlock_clear_key(registry(), md_)).key;
            return;
        }
        key_ = unlock_with_tries<bitlk::Unlocked>(vm, path, [&](const blkcrypt::SecureBuffer& secret) {
                   auto u = bitlk::unlock(registry(), md_, secret);
                   // cryptsetup's words whichever protector said no (a .BEK of another VMK, ...)
                   if (!u && u.status() == blkcrypt::Status::NoKey)
                       return blkcrypt::Result<bitlk::Unlocked>(blkcrypt::make_error(
                           blkcrypt::Status::NoKey, "No key available with this passphrase."));
                   return u;
               }).key;
    }
    blkcrypt::Result<blkcrypt::dm::DmTable> table() const override {
        return bitlk::dm_table(md_, key_, store->size() / 512, path);
    }
    std::string dump() const override { return bitlk::dump(md_, path); }
    blkcrypt::SecureBuffer dump_volume_key() const override { return bitlk::dump_volume_key(md_, path, key_); }
    TableDevice serve_how(const blkcrypt::dm::DmTable&) const override {
        return {.description = "bitlk " + path, .what_failed = path + ": "};
    }

private:
    bitlk::Metadata md_;
    blkcrypt::SecureBuffer key_;
};

}  // namespace

const ContainerFormat kBitlkFormat{
    .name = "bitlk",
    .summary = "BitLocker volumes (also To Go) as cryptsetup's BITLK reads them, without root\n"
               "or device-mapper: dump is bitlkDump, decrypt writes the plaintext bitlkOpen\n"
               "maps, serve exports it over NBD (docs/nbd.md), read-write unless --read-only.\n"
               "The secret is a passphrase or a 48-digit recovery password (prompted for on a\n"
               "terminal, --tries times, else one line of stdin), or --key-file: a .BEK\n"
               "startup key or a file holding the passphrase. A volume with a clear key\n"
               "(suspended protection) opens without one. A secret that opens nothing exits 2\n"
               "(\"No key available with this passphrase.\").",
    .actions = {"dump", "test-passphrase", "decrypt", "serve", "table"},
    .open_name = "bitlkOpen",
    .dump_name = "bitlkDump",
    .key_file_help = "read the secret from FILE ('-': all of stdin), e.g. a .BEK",
    .dump_volume_key_help = "dump: also print the volume key (asks for the secret, and to confirm)",
    .precheck = true,
    .open = open_as<Volume>,
};

int run_bitlk(Args args) { return run_container(kBitlkFormat, args); }

}  // namespace cli
