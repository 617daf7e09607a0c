// In-place encryption of a plaintext image with a data shift, as
// cryptsetup 2.6.1's `reencrypt --encrypt --reduce-device-size N` does it
// (src/utils_reencrypt.c encrypt_luks2_init, lib/luks2/luks2_reencrypt.c
// with CRYPT_REENCRYPT_MOVE_FIRST_SEGMENT): the data moves N/2 bytes
// towards the end, backward, so the LUKS2 header fits at its start.
//
// Layout of an image of size D, shift S = N/2, plaintext length L = D - N:
// the first min(S, L) bytes of the plaintext are copied to S + L (the
// "moved segment"; [D - S, D) when L >= S), the header (data offset S) is written over [0, S), then the
// data is encrypted from its end to [S, S + L) in hotzones of S bytes
// (resilience "datashift": a hotzone's source is never overwritten before
// the header says it is done, so a crash is recovered by re-reading it);
// the last hotzone reads the moved segment, which is then wiped (random
// bytes) before the header is finished. The LUKS2 device then spans
// [S, D), the data its first L bytes.
#pragma once

#include <blkcrypt/luks/reencrypt.hpp>

namespace blkcrypt::luks::luks2 {

struct EncryptShiftOptions {
    uint64_t reduce_size = 0;  // --reduce-device-size, bytes (N); the data moves by N/2
    // The new header: cipher, key size, sector size (cryptsetup's encrypt
    // takes 512 unless --sector-size), KDF, uuid, label. Its data_offset and
    // keyslots_size are set from the shift, as cryptsetup sets --offset.
    FormatOptions format;
};

// `cryptsetup reencrypt --encrypt --reduce-device-size N --init-only` on
// `device` (the plaintext, L = size - N bytes of it): the moved segment is
// copied and flushed, then the header (keyslot 0 for the passphrase, the
// reencrypt keyslot with a "datashift" area, the segments moved | rest |
// backup-moved-segment | backup-previous | backup-final, the verification
// digest, online-reencrypt-v2) is written over [0, S), keyslot areas first.
// Refused with nothing written: N not a non-zero multiple of 2 x 4096, a
// device not larger than N, a plaintext or shift not a multiple of the
// sector size, a device that already holds a LUKS header.
Result<ReencryptState> encrypt_shift_init(Registry& reg, BackingStore& device, ConstBytes passphrase,
                                          const EncryptShiftOptions& opts);

// The segment map of that encryption when the data from logical offset
// `done_from` to the end is encrypted and [done_from - hot, done_from) is in
// flight ("in-reencryption"): moved | rest | hot | done, then backup-previous,
// backup-final, backup-moved-segment, as cryptsetup writes each step; all
// done is one "dynamic" crypt segment. The new key's digest lists
// backup-final first, then its live segments.
Result<std::string> encrypt_shift_progress_json(const Metadata& md, const ReencryptState& st, uint64_t done_from,
                                                uint64_t hot);

// Runs (or resumes, after either tool left it, recovering a crashed
// hotzone by re-reading its source) such an encryption to the end. Called
// by reencrypt_run for a header in mode encrypt with a datashift area.
Result<ReencryptRunResult> encrypt_shift_run(Registry& reg, BackingStore& device, ConstBytes passphrase,
                                             const ReencryptRunOptions& opts);

// `cryptsetup reencrypt --encrypt --header HDR --init-only`: a detached
// header (data offset 0, keyslots filling 16 MiB unless the format says
// otherwise) written to `header`, whose reencrypt keyslot (mode encrypt,
// forward, resilience checksum / journal / none over the largest keyslot
// area gap) and segments linear | backup-previous (linear) | backup-final
// (crypt) are run by reencrypt_run with the data device. Nothing is written
// to the data. header must hold the header areas.
struct EncryptDetachedOptions {
    FormatOptions format;                 // its data_offset is ignored: see data_offset
    // Where the data starts in the data device (--offset, --align-payload:
    // cryptsetup's keyslots area then ends there); 0: at its start.
    uint64_t data_offset = 0;
    std::string resilience = "checksum";  // "checksum", "journal", "none"
    std::string hash = "sha256";          // checksum
    // The checksum block: cryptsetup takes the largest of the data device's
    // block size (4096 for an image file) and the sector sizes.
    uint32_t checksum_block = 4096;
};
Result<ReencryptState> encrypt_detached_init(Registry& reg, BackingStore& header, ConstBytes passphrase,
                                             const EncryptDetachedOptions& opts);

// `cryptsetup reencrypt --decrypt --header HDR --init-only` of a LUKS2
// detached header (one crypt segment): the reencrypt keyslot (mode decrypt,
// direction backward, resilience over the largest keyslot-area gap), the
// segments old | backup-previous | backup-final (linear at the old data
// offset), the verification digest and online-reencrypt-v2, in one header
// update. reencrypt_run then decrypts the data in place from its end.
struct DecryptDetachedOptions {
    std::string resilience = "checksum";  // "checksum", "journal", "none"
    std::string hash = "sha256";
    uint32_t checksum_block = 4096;       // as EncryptDetachedOptions
    uint32_t digest_iterations = 1000;
};
Result<ReencryptState> decrypt_detached_init(Registry& reg, BackingStore& header, ConstBytes passphrase,
                                             const DecryptDetachedOptions& opts);

// `cryptsetup reencrypt --decrypt --header NEW --init-only` of an image
// holding its own LUKS2 header (one crypt segment at data offset S > 0):
// the header and keyslot areas are copied to `header` (NEW, at least
// hdr_and_areas_size bytes), the ciphertext of the data's first
// M = min(S, D) bytes (D = image size - S) is copied to offset 0 of the
// image, over its header, and flushed; then NEW's metadata gets the
// reencrypt keyslot (mode decrypt, direction forward, area
// "datashift-checksum" or "datashift-journal" over the largest gap, with
// shift_size S), the segments crypt {0, M} | crypt {S + M, dynamic} |
// backup-moved-segment | backup-previous | backup-final (linear
// {0, dynamic}), the verification digest and online-reencrypt-v3.
// cryptsetup's order (src/utils_reencrypt.c decrypt_luks2 with
// lib/luks2/luks2_reencrypt.c's datashift decrypt init): until that last
// write NEW is a plain copy of the header, which still describes the
// ciphertext from S on, untouched. Refused with nothing written: a header
// copy damaged, requirements, other than one crypt segment at S > 0, an
// integrity profile, a wrong passphrase, resilience other than checksum or
// journal, a journal smaller than M (cryptsetup's "Moved segment too
// large").
struct DecryptShiftOptions {
    std::string resilience = "checksum";  // "checksum"/"datashift-checksum", "journal"/"datashift-journal"
    std::string hash = "sha256";
    uint32_t checksum_block = 4096;       // as EncryptDetachedOptions
    uint32_t digest_iterations = 1000;
};
Result<ReencryptState> decrypt_shift_init(Registry& reg, BackingStore& image, BackingStore& header, ConstBytes passphrase,
                                          const DecryptShiftOptions& opts);

// The segment map of that decryption (cryptsetup's
// reencrypt_make_hot_segments_decrypt_shift / _dec_create_segments_shift_after):
// with the plaintext written over [M, done) and [done, done + hot) in
// flight, moved crypt {0, M} | linear {M, done - M} | hot linear
// (in-reencryption) | old crypt {S + done + hot, dynamic}; with moved_hot,
// the last step (the moved segment decrypted in place): hot linear {0, M} |
// linear {M, dynamic}. Then backup-previous, backup-final,
// backup-moved-segment; the old key's digest on every crypt segment.
Result<std::string> decrypt_shift_progress_json(const Metadata& md, const ReencryptState& st, uint64_t data_size,
                                                uint64_t done, uint64_t hot, bool moved_hot);

}  // namespace blkcrypt::luks::luks2
