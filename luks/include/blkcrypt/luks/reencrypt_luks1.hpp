// LUKS1 reencryption in cryptsetup's legacy protocol (cryptsetup 2.6.1
// src/utils_reencrypt_luks1.c), so that either tool can take over what the
// other started:
//  - the header is marked unusable by rewriting its magic to LUKS\xde\xad;
//  - three files beside it, named after the UUID, in the working directory:
//    LUKS-<uuid>.log (one 512-byte text sector: version, UUID, direction,
//    mode, offset, shift), LUKS-<uuid>.org (the old header, a header backup)
//    and LUKS-<uuid>.new (the new header);
//  - the data is read through the old header's dm-crypt mapping and written
//    through the new one, block by block, the log's offset (bytes into the
//    mapping) recording how far it got;
//  - at the end the new header is restored onto the image (LUKS magic back)
//    and the three files removed.
// Run as a plain user on an image file, cryptsetup stops after marking the
// header (it needs device-mapper), leaving an image nothing opens: recover()
// finds such leftovers, rollback() puts the old header back and finish()
// completes the reencryption in userspace.
//
// Crash safety beyond cryptsetup's: before a block is overwritten, its old
// bytes go to a fourth file, LUKS-<uuid>.blk (ours; cryptsetup ignores it),
// fsynced; a resume first puts them back when they belong to the block the
// log says is next, so a write torn mid-block is redone from the old bytes.
// The log is rewritten and fsynced after every block (cryptsetup only does
// so with --write-log; otherwise only when it stops on a signal).
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/bytes.hpp>
#include <blkcrypt/luks/luks1.hpp>
#include <blkcrypt/status.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace blkcrypt {
class Registry;
}

namespace blkcrypt::luks::luks1::legacy {

constexpr uint8_t kUnusableMagic[6] = {'L', 'U', 'K', 'S', 0xde, 0xad};
constexpr std::size_t kLogSize = 512;

enum class Direction : int { Forward = 0, Backward = 1 };
enum class Mode : int { Reencrypt = 0, Encrypt = 1, Decrypt = 2 };

// The log, as cryptsetup's write_log prints it and parse_log reads it.
struct Log {
    std::string uuid;
    Direction direction = Direction::Forward;
    Mode mode = Mode::Reencrypt;
    uint64_t offset = 0;  // bytes into the data mapping already done (backward: not yet done below)
    uint64_t shift = 0;
};

// One sector of text, NUL-padded, byte for byte what cryptsetup writes.
std::array<uint8_t, kLogSize> format_log(const Log& log);
// Parses as cryptsetup does: '#' lines skipped, "version = 1|2", a UUID that
// must equal expected_uuid, direction, mode (0..2), offset, shift; any other
// line is "Wrong log format.".
Result<Log> parse_log(ConstBytes sector, const std::string& expected_uuid);

// The UUID of a header marked LUKS\xde\xad (version 1), or nullopt when the
// store does not start so (a normal LUKS header, anything else).
Result<std::optional<std::string>> unusable_uuid(BackingStore& store);

// A reencryption in progress: the image's UUID and the files of it.
struct Leftover {
    std::string uuid;
    std::string log_path, org_path, new_path, blk_path;
    Log log;
    Header org, neu;  // the old and the new header, parsed from the files
};

// Finds the reencryption in progress of store: its header must be marked
// LUKS\xde\xad, and LUKS-<uuid>.log/.org/.new must be in dir ("" or "." the
// working directory, where cryptsetup puts them). Errors name what is missing.
Result<Leftover> find(Registry& reg, BackingStore& store, const std::string& dir = "");

// Puts the old header back (LUKS magic, old keyslots) and removes the files.
// Only before any data was converted (forward at offset 0, backward at or
// past the end): Invalid otherwise ("finish it instead"); mode must be
// Reencrypt. Needs no passphrase.
// With a detached header, store holds it and data is the data device.
Result<void> rollback(Registry& reg, BackingStore& store, const Leftover& lo, BackingStore* data = nullptr);

struct RunOptions {
    std::size_t block_size = 1 << 20;  // bytes converted per step (cryptsetup: --block-size MiB)
    // Called after each block with (bytes done, total); false stops the run
    // as an interrupt would (Status::Interrupted), the log saying how far.
    std::function<bool(uint64_t, uint64_t)> progress;
    // cryptsetup's --device-size: only the first device_size bytes of the
    // data mapping are converted (0: all of it); the rest is left under the
    // old key, i.e. lost, as cryptsetup documents.
    uint64_t device_size = 0;
    // A detached header (cryptsetup's --header): the store given to
    // reencrypt()/finish() holds the header (marked, restored) and this one
    // the data. Re-key only (encrypt() and decrypt() refuse it).
    BackingStore* data = nullptr;
};

// Converts the rest of the data (old key from .org, new key from .new, each
// unlocked with passphrase), updating the log after every block, then
// restores the .new header onto the image and removes the files. When both
// headers hold the same volume key, cipher and payload offset (a --keep-key
// run) there is nothing to convert and the data is not touched. The header
// is restored with its magic written last, so that a crash inside the
// restore leaves the image marked and resumable. Interrupted
// (an I/O error, a kill), it is resumed by calling it again; cryptsetup (as
// root) can resume it too. Mode Reencrypt only (Unsupported otherwise).
Result<void> finish(Registry& reg, BackingStore& store, const Leftover& lo, ConstBytes passphrase,
                    const RunOptions& opts = {});

struct ReencryptParams {
    std::string cipher;       // "" keeps the old one ("aes-xts-plain64" form)
    uint32_t key_bytes = 0;   // 0: the old size (or the new cipher's default if it cannot be kept)
    std::string hash;         // "" keeps the old header's hash
    uint32_t iter_time_ms = 2000;
    uint32_t force_iterations = 0;  // keyslot iterations without a benchmark
    int keyslot = -1;               // the keyslot to unlock (-1: any)
    std::string dir;                // where the log and header files go ("": working directory)
    // cryptsetup's --keep-key: the new header keeps the volume key and the
    // cipher (cipher must be "" or the old one; key_bytes is ignored, as
    // cryptsetup ignores -s), only the header and keyslot are rewritten.
    bool keep_key = false;
    // cryptsetup's --reduce-device-size: the new payload offset is the old
    // one plus this many bytes (a multiple of 512, at most 1 GiB, the offset
    // staying a multiple of 4096); the data moves that far towards the end,
    // converted backward, and its last reduce_bytes are lost.
    uint64_t reduce_bytes = 0;
};

// LUKS1 re-key in place, as `cryptsetup reencrypt` on LUKS1 (legacy path):
// a new random volume key (and params' cipher/key size/hash), the unlocked
// keyslot carried over to the new header under the same passphrase (other
// keyslots are dropped, as cryptsetup does for keyslots it was given no
// passphrase for), the UUID kept. Writes the log, .org and .new, marks the
// header LUKS\xde\xad, then runs finish(). Refuses when a log for this UUID
// already exists in dir (resume with find() + finish()), and keep_key with a
// new cipher or with reduce_bytes (cryptsetup 2.6.1 writes such a header over
// data it does not convert or move, losing it).
Result<void> reencrypt(Registry& reg, BackingStore& store, ConstBytes passphrase, const ReencryptParams& params,
                       const RunOptions& opts = {});

// --- The legacy --encrypt and --decrypt (log modes 1 and 2). The side that
// is plaintext is a "fake" header, as cryptsetup's backup_fake_header makes
// it: LUKS1 with cipher_null-ecb, payload 0, UUID kEncryptUuid, a keyslot
// under the passphrase (cipher_null: any passphrase opens it; it is never
// unlocked here).

// cryptsetup's NO_UUID: it names the files of every encryption.
inline constexpr char kEncryptUuid[] = "cafecafe-cafe-cafe-cafe-cafecafeeeee";

struct EncryptParams {
    std::string cipher = "aes-xts-plain64";  // cryptsetup's LUKS1 defaults
    uint32_t key_bytes = 32;                 // DEFAULT_LUKS1_KEYBITS 256
    std::string hash = "sha256";
    uint32_t iter_time_ms = 2000;
    uint32_t force_iterations = 0;
    unsigned keyslot = 0;
    uint64_t reduce_bytes = 0;  // required: the new payload offset (bytes), where the data moves
    std::string uuid;           // the new header's ("": random)
    std::string dir;
};

// `cryptsetup reencrypt --encrypt --type luks1 --reduce-device-size N`: the
// plaintext's first size - N bytes move N on, encrypted backward from the
// end, then the new header goes in front. Writes the log (mode 1, backward,
// offset ~0), the fake .org and the .new, no mark (the image has no header
// yet), then finish(). A run interrupted is resumed by find_unmarked(
// kEncryptUuid) + finish(), as cryptsetup resumes it by running --encrypt
// again in the same directory.
Result<void> encrypt(Registry& reg, BackingStore& store, ConstBytes passphrase, const EncryptParams& params,
                     const RunOptions& opts = {});

struct DecryptParams {
    int keyslot = -1;
    std::string dir;
};

// `cryptsetup reencrypt --decrypt` of a LUKS1 image: the log (mode 2,
// forward), .org (the header), the fake .new, the mark, then finish(): the
// data moves back to offset 0 in plaintext, the freed tail (the old payload
// offset's worth) is zeroed, and no header is left. Once the first block has
// landed the mark is overwritten: resume with find_unmarked(uuid), the
// UUID naming the files (cryptsetup: --decrypt --uuid).
Result<void> decrypt(Registry& reg, BackingStore& store, ConstBytes passphrase, const DecryptParams& params,
                     const RunOptions& opts = {});

// A run whose image carries no mark: an encryption (kEncryptUuid) or a
// decryption past its first block. The files are read and checked as find()
// does; the log's mode must be Encrypt or Decrypt.
Result<Leftover> find_unmarked(Registry& reg, const std::string& uuid, const std::string& dir = "");

}  // namespace blkcrypt::luks::luks1::legacy
