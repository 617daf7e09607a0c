// Passphrases and key files read as cryptsetup 2.6 reads them (its
// tools_get_key, crypt_get_key_tty and crypt_keyfile_device_read), so the
// same input gives the same bytes: a terminal prompt without echo, one line
// of piped stdin, or a key file (all of it, or an exact size, after an offset).
// Everything read lands in SecureBuffers; nothing is ever printed.
#pragma once

#include "common.hpp"

#include <blkcrypt/secure_buffer.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace cli {

// A key input that holds too little or too much (offset past its end, short,
// empty, over the maximum size): exit 2 as a usage error, except where a
// command follows cryptsetup's status for it, 1 (luks).
class KeyInputError : public UsageError {
    using UsageError::UsageError;
};

// cryptsetup's compiled-in limits (cryptsetup --help).
constexpr std::size_t kMaxPassphraseTty = 512;           // characters, interactive
constexpr std::size_t kMaxKeyFileSize = 8192 * 1024;     // bytes, key files and pipes

// Reads path ("-": stdin) as crypt_keyfile_device_read does: skips offset
// bytes, then reads exactly size bytes (size > 0) or everything up to
// kMaxKeyFileSize (size == 0); with stop_at_newline, stops at the first '\n'
// (not included). A terminal is refused; so is piped input that holds nothing.
blkcrypt::SecureBuffer read_key_input(const std::string& path, uint64_t offset, std::size_t size,
                                      bool stop_at_newline);

// Prompts on /dev/tty (stderr and stdin without one) with echo off and reads
// one line, at most kMaxPassphraseTty bytes; with verify, asks again
// ("Verify passphrase: ") and refuses a mismatch ("Passphrases do not match.").
// The terminal is restored on every exit path, signals included.
blkcrypt::SecureBuffer prompt_passphrase(const std::string& prompt, bool verify);

// The passphrase as cryptsetup's tools_get_key reads it from the options
// key-file, keyfile-offset and keyfile-size (those the command declares):
// --key-file whole (or --keyfile-size bytes) after --keyfile-offset, '-' all
// of stdin; else a prompt on a terminal, or one line of piped stdin.
blkcrypt::SecureBuffer read_passphrase(const po::variables_map& vm, const std::string& device, bool verify = false);

// Before a --dump-volume-key dump: cryptsetup's warning and yesDialog, asked
// only on a terminal and without --batch-mode (which the command declares);
// anything but "YES" throws Failure("Operation aborted.").
void confirm_volume_key_dump(const po::variables_map& vm);

}  // namespace cli
