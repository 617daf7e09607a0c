// blkcrypt reencrypt / repair (cmd_reencrypt.cpp): what the re-key path and
// the encrypt/decrypt paths (reencrypt_shift.cpp) share. The command line is
// cryptsetup 2.6.1's `reencrypt` action, parsed once in cmd_reencrypt.cpp;
// each path gets the parsed options, IMAGE and the header device, with the
// lock already held.
#pragma once

#include "common.hpp"
#include "progress.hpp"

#include <blkcrypt/secure_buffer.hpp>

#include <memory>
#include <string>
#include <vector>

namespace cli {

// An exclusive flock(2) on each path (IMAGE and a detached --header), taken
// without waiting before anything is read for writing: a second `blkcrypt
// reencrypt` or `repair` on the same image fails at once ("... is in use by
// another reencryption"). Not cryptsetup's lock (/run/cryptsetup, root's):
// it needs no privileges, so it is taken whatever --disable-locks says.
class ImageLock {
public:
    ImageLock() = default;
    // Locks path; a path that does not exist yet (a new --header) is skipped.
    void add(const std::string& path, const std::string& role);
    ~ImageLock();
    ImageLock(const ImageLock&) = delete;
    ImageLock& operator=(const ImageLock&) = delete;

private:
    std::vector<int> fds_;
};

// One reencrypt run as the command line asked for it.
struct ReencryptRequest {
    const po::variables_map& vm;
    std::string image;        // IMAGE, the data device
    std::string header_path;  // --header, else IMAGE
    bool detached = false;    // --header given
    bool init_only = false, resume_only = false;
    ProgressSettings progress;
};

// The passphrase as cryptsetup's reencrypt reads it (--key-file,
// --keyfile-offset, --keyfile-size, --passphrase-file, else a prompt).
blkcrypt::SecureBuffer reencrypt_passphrase(const ReencryptRequest& rq, bool verify = false);

// Runs (or resumes) the LUKS2 reencryption the header on rq.header_path is
// marked for, to the end (or, with stop_after_recovery, only the recovery of
// a crashed hotzone), with the progress display; SIGINT/SIGTERM stop it
// between steps, resumable. Returns the exit status.
int run_luks2_reencryption(const ReencryptRequest& rq, const blkcrypt::SecureBuffer& passphrase);

// A resume given --resilience [--resilience-hash]: the header's reencrypt
// keyslot and verification digest rewritten for it, as cryptsetup allows
// (refused, in its words, for a datashift area); nothing without --resilience.
void apply_resume_resilience(const ReencryptRequest& rq, const blkcrypt::SecureBuffer& passphrase);

// --encrypt and --decrypt (reencrypt_shift.cpp): the exit status.
int reencrypt_encrypt(const ReencryptRequest& rq);
int reencrypt_decrypt(const ReencryptRequest& rq);

}  // namespace cli
