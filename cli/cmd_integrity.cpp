// blkcrypt integrity: dm-integrity devices as integritysetup sees them,
// without root or device-mapper. Today `integrity dump` (integritysetup
// dump); the target itself (read, write, format, serve) is to come.
#include "commands.hpp"
#include "container_common.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/integrity/superblock.hpp>

#include <array>
#include <iostream>
#include <string>
#include <vector>

namespace cli {
namespace {

namespace integrity = blkcrypt::integrity;

int run_dump(const std::vector<std::string>& files) {
    if (files.size() != 1) throw UsageError("integrity dump needs exactly one IMAGE");
    const std::string& path = files[0];
    auto store = open_container_image(path, false);
    // integritysetup's line, then why (exit 1, as integritysetup).
    const std::string invalid = "Device " + path + " is not a valid INTEGRITY device: ";
    std::array<uint8_t, integrity::kSuperblockBytes> head{};
    if (store->size() < head.size()) throw Failure(invalid + "shorter than its 64-byte superblock");
    if (auto st = store->read(0, head); st != blkcrypt::Status::Ok)
        throw Failure(invalid + "cannot read it (" + blkcrypt::to_string(st) + ")");
    auto sb = integrity::decode_superblock(head);
    if (!sb) {
        if (!integrity::has_magic(head)) throw Failure(invalid + "no dm-integrity superblock (magic \"integrt\")");
        throw Failure(invalid + "incompatible kernel dm-integrity metadata (version " + std::to_string(head[8]) +
                      "; integritysetup 2.6.1 reads 1 to 5)");
    }
    std::cout << integrity::dump_text(*sb, path);
    return 0;
}

}  // namespace

int run_integrity(Args args) {
    CommandLine cl{"blkcrypt integrity dump IMAGE",
                   "dm-integrity devices as integritysetup sees them, without root or device-mapper:\n"
                   "dump prints the superblock as `integritysetup dump` does (versions 1 to 5).\n"
                   "IMAGE must be a regular file or a block device holding the superblock at its\n"
                   "start (the metadata device when tags are kept apart with --data-device)."};
    add_action_arguments(cl, {{"dump", "print the superblock as integritysetup dump does"}});
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;
    const auto [action, files] = action_arguments(*vm);
    if (action == "dump") return run_dump(files);
    throw UsageError("unknown action '" + action + "': use dump");
}

}  // namespace cli
