// What every container command (luks, tcrypt, bitlk, fvault2, loopaes, and
// crypt's serve) does the same way, written once: opening IMAGE, and the
// serve side of a multi-segment mapping. The secret side (--tries, the
// volume-key confirmation, wrong secret -> exit 2) is in passphrase.hpp and
// common.hpp's expect().
#pragma once

#include "common.hpp"

#include <blkcrypt/backing_store.hpp>

#include <memory>
#include <string>

namespace cli {

// Opens IMAGE (or a --header file) whose metadata or data is read in place:
// never blocks (a FIFO is opened O_NONBLOCK, then refused), and anything but
// a regular file or a block device is refused at once, with cryptsetup's
// status 4 and words: "Device X does not exist or access denied." for a
// missing path, "Device X is not compatible." for a FIFO, a directory, a
// socket or a character device. "-" (stdin) is a UsageError: the metadata is
// read before the data. `role` names the option in that message.
std::shared_ptr<blkcrypt::BackingStore> open_container_image(const std::string& path, bool writable,
                                                             const std::string& role = "IMAGE");

// Why a device path did not open, with the status and words above (4: missing
// or not a regular file or block device), else a Failure with `error`, the
// store's message. veritysetup and integritysetup answer the same for their
// DATA, HASH and FEC devices, so `blkcrypt verity` uses it too.
[[noreturn]] void refuse_device(const std::string& path, const std::string& role, const std::string& error);

}  // namespace cli
