// LUKS2 reencryption metadata as cryptsetup 2.6.1 writes it
// (lib/luks2/luks2_reencrypt.c, luks2_keyslot_reenc.c,
// luks2_reencrypt_digest.c): the online-reencrypt-v2/-v3 requirement, the
// "reencrypt" keyslot (mode, direction, resilience area), the verification
// digest over those parameters and the backup segments, and the segment map
// of each step. Read, checked and written here; the data is moved elsewhere.
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/bytes.hpp>
#include <blkcrypt/luks/luks2.hpp>
#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/status.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace blkcrypt {
class Registry;
}

namespace blkcrypt::luks::luks2 {

// What a header's reencryption metadata says (LUKS2_reencrypt_status and
// the keyslot's fields).
struct ReencryptState {
    int version = 2;              // the requirement's: 2, 3 (decrypt with a data shift), 1 legacy
    int keyslot = -1;             // the "reencrypt" keyslot
    std::string mode;             // "reencrypt", "encrypt", "decrypt"
    std::string direction;        // "forward", "backward"
    // The resilience area: "checksum", "journal", "none", "datashift",
    // "datashift-checksum", "datashift-journal".
    std::string area_type;
    uint64_t area_offset = 0, area_size = 0;
    std::string hash;             // checksum types
    uint32_t hash_block = 0;      // checksum types: the area's "sector_size"
    uint64_t shift_size = 0;      // datashift types, bytes
    int digest = -1;              // the verification digest (keyslots [keyslot], segments [])
    int seg_previous = -1, seg_final = -1, seg_moved = -1;  // the backup segments
    int digest_old = -1, digest_new = -1;  // of backup-previous / -final (-1: linear)
    bool crashed = false;         // a segment flagged "in-reencryption": recover first
    // cryptsetup's CRYPT_REENCRYPT_REPAIR_NEEDED: the legacy requirement or
    // no verification digest; `cryptsetup repair` rewrites such metadata.
    bool repair_needed = false;
};

// The reencryption state of md, nullopt when md carries none (no
// online-reencrypt requirement and no reencrypt keyslot). Refused (Invalid,
// nothing written) as cryptsetup refuses them: a reencrypt keyslot without
// the requirement or the requirement without the keyslot, two reencrypt
// keyslots, a keyslot whose key_size is not 1, an unknown mode, direction or
// area type, a checksum area without hash or with a sector_size not a power
// of two >= 512, a datashift area without a non-zero 512-aligned
// shift_size, missing or duplicated backup-previous / backup-final segments,
// a backup crypt segment without a digest, an unknown online-reencrypt
// requirement version.
Result<std::optional<ReencryptState>> reencrypt_state(const Metadata& md);

// The bytes the verification digest is taken over
// (reencrypt_assembly_verification_data): 'v', '0' + version, the old and
// (when it has another digest) the new volume key, the keyslot's mode,
// direction and area, then the backup-previous, backup-final and
// backup-moved-segment segments. Keys are those of st.digest_old /
// digest_new (empty for a linear side).
Result<SecureBuffer> reencrypt_verification_data(const Metadata& md, const ReencryptState& st, ConstBytes vk_old,
                                                 ConstBytes vk_new);

// Checks the verification digest (LUKS2_reencrypt_digest_verify): Invalid
// "Reencryption metadata is invalid." when it does not match or is missing.
Result<void> reencrypt_verify(Registry& reg, const Metadata& md, const ReencryptState& st, ConstBytes vk_old,
                              ConstBytes vk_new);

// The volume keys of an in-progress reencryption for a passphrase: every
// luks2 keyslot it opens gives the key of its digest. Old and new are those
// of st.digest_old / digest_new (empty for a linear side). NoKey when the
// passphrase opens neither.
struct ReencryptKeys {
    SecureBuffer old_key, new_key;
};
Result<ReencryptKeys> reencrypt_unlock(Registry& reg, BackingStore& header, const Metadata& md,
                                       const ReencryptState& st, ConstBytes passphrase);

// `cryptsetup reencrypt --init-only` of a re-key (mode reencrypt, forward):
// a new keyslot for the new volume key under the passphrase (the area
// written first), then one header update (seqid + 1, both copies) adding the
// reencrypt keyslot in the largest keyslot-area gap, the segments old |
// backup-previous | backup-final, the new digest, the verification digest
// and the online-reencrypt-v2 requirement. cryptsetup resumes it with
// `reencrypt --resume-only`.
// With an integrity profile: journal or none only, the same sector size,
// and a cipher whose tag size is the dm-integrity device's (Unsupported,
// nothing written, otherwise); the backups carry the segment's integrity.
struct ReencryptInitOptions {
    std::string resilience = "checksum";  // "checksum", "journal", "none"
    std::string hash = "sha256";          // checksum
    std::string cipher;                   // empty: the current one
    uint32_t key_size = 0;                // bytes; 0: the current one (a new cipher needs it)
    uint32_t sector_size = 0;             // 0: the current one
    luks::KeyslotOptions keyslot;         // the new keyslot's KDF (keyslot: -1 = lowest free)
    uint32_t digest_iterations = 1000;
    ConstBytes new_key = {};              // empty: a random one
    // --keep-key: the volume key stays (no new keyslot; backup-final is on
    // the old key's digest, as cryptsetup writes it), so the cipher or the
    // sector size must change; key_size and new_key must be unset.
    bool keep_key = false;
};
Result<ReencryptState> reencrypt_init(Registry& reg, BackingStore& header, ConstBytes passphrase,
                                      const ReencryptInitOptions& opts);

// A resumed reencryption given another resilience (cryptsetup's reencrypt
// --resume-only --resilience MODE [--resilience-hash H]): the reencrypt
// keyslot's area keeps its place and takes the new type (checksum: hash and
// block size), and the verification digest is made again over it, in one
// header update. Refused as cryptsetup refuses it (nothing written): a
// datashift area ("Device is in reencryption using datashift resilience.
// Requested --resilience option cannot be applied."), a datashift type asked
// for, a crashed hotzone (repair first). No change asked: nothing written.
Result<void> reencrypt_set_resilience(Registry& reg, BackingStore& header, ConstBytes passphrase,
                                      const std::string& resilience, const std::string& hash);

// The segment map of a forward reencryption (mode reencrypt) of data_size
// bytes of data after `done` bytes were finished, with [done, done + hot) marked
// "in-reencryption" when hot > 0 (the step in flight): new | hot | old,
// then the backups; each digest names its segments. The keyslots, digests,
// backups and requirement are kept; the verification digest does not cover
// these segments, so it stays valid. Written as one header update.
// fixed: cryptsetup's "fixed size mode" (--device-size): the old data left
// is a segment of data_size - done - hot bytes, not "dynamic".
Result<void> reencrypt_write_progress(Registry& reg, BackingStore& header, const Metadata& md,
                                      const ReencryptState& st, uint64_t data_size, uint64_t done, uint64_t hot,
                                      bool fixed = false);

// The JSON text of that segment map (reencrypt_write_progress writes it).
Result<std::string> reencrypt_progress_json(const Metadata& md, const ReencryptState& st, uint64_t data_size,
                                            uint64_t done, uint64_t hot, bool fixed = false);

// The segment map of a backward reencryption without a data shift
// (cryptsetup's --decrypt of a detached header): old [0, old_end - hot) |
// hot [old_end - hot, old_end) flagged "in-reencryption" when hot > 0 |
// new to the end (dynamic), then the backups (reencrypt_make_hot_segments_
// backward / _post_segments_backward); all done is one new segment.
Result<std::string> reencrypt_backward_progress_json(const Metadata& md, const ReencryptState& st, uint64_t data_size,
                                                     uint64_t old_end, uint64_t hot);

// The end of a reencryption, as cryptsetup leaves it: one segment (the
// backup-final one, without its flag), the keyslots and digest of the old
// key, the reencrypt keyslot, its digest and the requirement dropped; then
// the old keyslot areas and the resilience area are wiped (after the header,
// so a crash before leaves a header whose keyslots are intact).
Result<void> reencrypt_finish(Registry& reg, BackingStore& header, const Metadata& md, const ReencryptState& st);

}  // namespace blkcrypt::luks::luks2

namespace blkcrypt::luks::luks2 {

// The engine: runs (or resumes) a forward re-key (mode reencrypt, forward;
// resilience checksum, journal or none) on `device`, which holds the header
// and the data, to the end, as cryptsetup's reencrypt --resume-only does.
// A header left mid-way by either tool resumes at its segment map; a crashed
// hotzone (an "in-reencryption" segment) is recovered first as
// reencrypt_recover_segment does: checksum = each block whose hash still
// matches the area's is the old ciphertext and is re-encrypted, the others
// are done; journal = the area's copy of the old ciphertext is re-encrypted
// whole; none cannot be recovered. Each step: the hotzone's old ciphertext
// is read, its checksums (or its copy) written to the area, the header
// marks it in-reencryption, the data is re-encrypted through the dm-crypt
// engine, the header advances; every write flushed before the next stage.
// At the end the metadata is cleaned up (reencrypt_finish).
// A segment with an integrity profile (which cryptsetup refuses) is re-keyed
// through two dm-crypt-over-dm-integrity stacks on the one dm-integrity
// device (mode D, its superblock and journal untouched): offsets are then
// logical, each hotzone's tags are checked under the old key before its step
// is marked, the journal area holds the hotzone's data and its tags, and
// recovery writes both back; checksum resilience is refused.
struct ReencryptRunOptions {
    uint64_t hotzone_size = 0;  // bytes; 0: as cryptsetup sizes it (capped by the area)
    // Called after each step with the bytes done and the total; false stops
    // (the header is then left mid-way, resumable).
    std::function<bool(uint64_t done, uint64_t total)> progress;
    // Only recover a crashed hotzone, then stop (the header left clean and
    // resumable), as `cryptsetup repair` does; nothing else is rewritten.
    bool recover_only = false;
    // The data device of a detached header (`device` then holds the header
    // and its resilience area only); nullptr: `device` holds both.
    BackingStore* data = nullptr;
    // --device-size: only the first device_size bytes of the data are
    // converted (a forward run, no integrity profile); the segment maps say
    // so (the old data left has a fixed size), and the finish declares the
    // whole data segment under the new key, as cryptsetup does (what lies
    // beyond is then unreadable: its documented data loss). 0: all the data.
    uint64_t device_size = 0;
};
struct ReencryptRunResult {
    uint64_t data_size = 0, hotzone = 0;
    bool recovered = false;  // a crashed hotzone was recovered first
    bool finished = false;
};
Result<ReencryptRunResult> reencrypt_run(Registry& reg, BackingStore& device, ConstBytes passphrase,
                                         const ReencryptRunOptions& opts = {});

}  // namespace blkcrypt::luks::luks2
