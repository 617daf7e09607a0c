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
// of stdin; --passphrase-file (a blkcrypt extension) its first line; else a
// prompt on a terminal, or one line of piped stdin. A repeatable --key-file
// (tcrypt's keyfiles) is not the passphrase and is left to the command.
blkcrypt::SecureBuffer read_passphrase(const po::variables_map& vm, const std::string& device, bool verify = false);

// cryptsetup's --tries (set_tries_tty): how often a passphrase is asked for
// when the last one opened nothing. A passphrase typed at the terminal prompt
// is asked up to --tries times (default 3, 0: no limit); one from a file or a
// pipe is tried once.
void add_tries_option(po::options_description& opts);
unsigned passphrase_tries(const po::variables_map& vm);
// The line said before asking again (the library's message).
void report_retry(const std::string& message);

// Reads a passphrase (read_passphrase) and hands it to attempt, which
// returns the library's Result; a NoKey result is said on stderr and the
// passphrase asked again, passphrase_tries times. Returns the last result.
template <class T, class Attempt>
blkcrypt::Result<T> retry_passphrase(const po::variables_map& vm, const std::string& device, Attempt&& attempt) {
    const unsigned tries = passphrase_tries(vm);
    for (unsigned t = 1;; ++t) {
        blkcrypt::Result<T> r = attempt(read_passphrase(vm, device));
        if (r || r.status() != blkcrypt::Status::NoKey || (tries && t >= tries)) return r;
        report_retry(r.error().message);
    }
}
// The same, through expect(): a secret that opens nothing exits 2, other errors 1.
template <class T, class Attempt>
T unlock_with_tries(const po::variables_map& vm, const std::string& device, Attempt&& attempt) {
    return expect(retry_passphrase<T>(vm, device, std::forward<Attempt>(attempt)));
}
// -q/--batch-mode: no confirmation questions.
void add_batch_mode_option(po::options_description& opts);

// cryptsetup's yesDialog: `question`, then "Are you sure? (Type 'yes' in
// capital letters): ", asked only on a terminal and without --batch-mode
// (which the command declares); anything but "YES" throws
// Failure("Operation aborted.").
void yes_dialog(const po::variables_map& vm, const std::string& question);

// Before a --dump-volume-key dump: cryptsetup's warning in a yes_dialog.
void confirm_volume_key_dump(const po::variables_map& vm);

}  // namespace cli
