// The LUKS front API: what kind of container a header is, unlocking it with a
// passphrase into a Volume (its dm-crypt table with the volume key), the dm
// table `cryptsetup open` loads for it, which any engine (copy, serve) builds
// its device from, and the keyslot and header actions of either version
// (Container). The version split lives here, as cryptsetup's lib/setup.c
// keeps it: callers never branch on LUKS1 against LUKS2 to change a header.
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/bytes.hpp>
#include <blkcrypt/dm/dm_table.hpp>
#include <blkcrypt/dm/table.hpp>
#include <blkcrypt/integrity/geometry.hpp>
#include <blkcrypt/luks/luks1.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/status.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace blkcrypt::luks {

namespace luks2 {
struct Metadata;
}

enum class Version { Luks1 = 1, Luks2 = 2 };

// The LUKS version of the header at the start of `header`, or LUKS2 when
// only a secondary LUKS2 copy is left (at 16 KiB .. 4 MiB, as cryptsetup
// searches): Invalid "not a LUKS device" for anything else (a wrong magic,
// an unknown version).
Result<Version> detect(BackingStore& header);

// A LUKS2 segment with integrity (luksFormat --integrity): dm-crypt runs over
// a dm-integrity device whose superblock sits at the segment offset of the
// data device (even with a detached header), as cryptsetup stacks them.
struct VolumeIntegrity {
    std::string type;        // the segment's "integrity" type: "hmac(sha256)", "aead", "poly1305"
    uint64_t offset = 0;     // 512-byte sectors: the dm-integrity superblock on the data device
    uint32_t tag_size = 0;   // bytes of tag per crypt sector (integrity:N:aead)
};

// What cryptsetup derives from a segment's cipher and integrity type
// (cipher_c2dm, INTEGRITY_tag_size, crypt_parse_integrity_mode): the
// kernel's capi: cipher, the tag bytes per sector and the integrity key
// bytes at the end of the volume key (an HMAC's). Unsupported for pairs
// cryptsetup 2.6.1 cannot map.
struct IntegrityProfile {
    std::string cipher;      // "capi:authenc(hmac(sha256),xts(aes))-plain64", "capi:gcm(aes)-random"
    uint32_t tag_size = 0;   // auth tag + stored IV (random IVs)
    uint32_t iv_stored = 0;  // bytes of the tag that are the IV
    uint32_t key_size = 0;   // integrity key bytes (0 for aead, poly1305)
};
Result<IntegrityProfile> integrity_profile(std::string_view encryption, std::string_view integrity);

struct Volume {
    Version version = Version::Luks1;
    std::string uuid, label;
    // cipher, key, sector_size, iv_large_sectors, offset (512-byte sectors
    // into the data device), iv_offset.
    dm::CryptTable table;
    uint64_t length_sectors = 0;  // 0 = to the end of the data device
    int keyslot = -1;             // the keyslot that opened it
    // LUKS2 --integrity: then `table` (integrity fields set, offset 0) maps
    // the dm-integrity device, not the data device.
    std::optional<VolumeIntegrity> integrity;
};

// One set of options for both versions (luks2::OpenOptions is this struct).
struct OpenOptions {
    int keyslot = -1;  // try only this keyslot (-1: every one, in order)
    // LUKS2: header warnings (a damaged copy read from the other) are
    // appended here, for the caller to print as cryptsetup does.
    std::vector<std::string>* warnings = nullptr;
    // LUKS2: unlock despite mandatory requirements, and with `keyslot` an
    // unbound keyslot too (its Volume then has no table), for a passphrase
    // test only (cryptsetup open --test-passphrase): the Volume must not be
    // used for data.
    bool ignore_requirements = false;
};

// Unlocks the container whose header is in `header` (the data device itself,
// or a detached header). A passphrase that opens no keyslot: NoKey "No key
// available with this passphrase.".
Result<Volume> open(Registry& reg, BackingStore& header, ConstBytes passphrase, OpenOptions opts = {});

// The same from the volume key itself (cryptsetup's --volume-key-file): NoKey
// "Volume key does not match the volume." when the digest disagrees.
// opts.keyslot is not used.
Result<Volume> open_with_volume_key(Registry& reg, BackingStore& header, ConstBytes volume_key,
                                    OpenOptions opts = {});

// The table `cryptsetup open` loads: one crypt line over the data segment
// of `data`, which the line names `device`. Invalid when `data` ends before
// the payload or before a fixed-size segment's end. With integrity, the line
// maps the dm-integrity device (`device` is its name, /dev/mapper/NAME_dif)
// over its whole provided size, read from the superblock on `data`.
Result<dm::DmTable> dm_table(const Volume& vol, BackingStore& data, const std::string& device);

// With integrity: the dm-integrity line cryptsetup loads as NAME_dif, as
// the kernel reports it back (`dmsetup table`): `device` (naming `data`),
// the segment offset, the tag size, J, block_size, the journal, interleave
// and buffer sizes the kernel derives, fix_padding when the superblock has
// it. NotFound without a dm-integrity superblock at the segment offset.
Result<std::string> integrity_table_line(const Volume& vol, BackingStore& data, const std::string& device);

// With integrity: the dm-integrity layout the kernel opens on `data` (the
// superblock checked as integrity_table_line checks it), for callers that
// move a sector's data and tag as stored (reencryption's journal).
Result<integrity::Geometry> integrity_geometry(const Volume& vol, BackingStore& data);

// With integrity: the two tables cryptsetup loads, lowest first, as
// dm::build_dm_stack builds them: NAME_dif (integrity_table_line, naming
// `data` `device`) and NAME (dm_table over /dev/mapper/NAME_dif).
Result<std::vector<dm::NamedDmTable>> integrity_tables(const Volume& vol, BackingStore& data,
                                                       const std::string& device, const std::string& name);

// With integrity: the plaintext device cryptsetup's two tables make, built
// from integrity_tables through the dm layer: the dm-integrity target
// (journal mode; a committed journal is replayed as the kernel replays it
// on open, or only shown when read-only) on `data`, and the AEAD crypt
// target over its tags. A block
// whose tag does not match (tampered, or never written since a format with
// --integrity-no-wipe) fails to read with BadMsg naming its sector, as the
// kernel's read fails with EIO ("INTEGRITY AEAD ERROR, sector N").
struct IntegrityDeviceOptions {
    bool read_only = true;
    char mode = 'J';       // what cryptsetup loads; 'D' for format's wipe (CRYPT_ACTIVATE_NO_JOURNAL)
    unsigned threads = 0;  // crypt workers; 0: one per core
};
Result<std::shared_ptr<dm::BlockDevice>> integrity_device(Registry& reg, const Volume& vol,
                                                          std::shared_ptr<BackingStore> data,
                                                          IntegrityDeviceOptions opts = {});

// The KDF of a new keyslot, either version (cryptsetup's --pbkdf, --hash,
// --pbkdf-force-iterations, --iter-time, --pbkdf-memory, --pbkdf-parallel).
// LUKS1 keyslots are PBKDF2 over the header's hash: pbkdf, hash, memory_kib
// and parallel are not used there.
struct KeyslotOptions {
    std::string pbkdf = "argon2id", hash = "sha256";
    uint32_t iterations = 0;               // forced iterations (argon2: passes); 0: benchmarked
    uint32_t memory_kib = 0, parallel = 0; // argon2; 0: cryptsetup's defaults
    uint32_t iter_time_ms = 2000;          // the benchmark's target
    int keyslot = -1;                      // -1: the lowest free one
    int priority = 1;                      // LUKS2: 1 (normal) is not written, as cryptsetup
};

// The KDF a user asks for a new keyslot: each option as given, or unset for
// the version's default.
struct KdfRequest {
    std::optional<std::string> pbkdf, hash;
    std::optional<uint32_t> iterations, iter_time_ms, memory_kib, parallel;
};

// A request's KeyslotOptions for a `version` container, checked as each
// version's cryptsetup checks it, with its words. Status::Invalid marks a
// request the version cannot take at all (LUKS1: another PBKDF, Argon2
// costs, both iteration options; the CLI's usage error), Unsupported a value
// cryptsetup refuses (its exit 1: every LUKS2 check, the iteration floors).
// LUKS2 Argon2 with forced passes takes cryptsetup's 1 GiB and min(4, CPUs).
Result<KeyslotOptions> keyslot_options(Version version, const KdfRequest& req);

// cryptsetup luksFormat's options, either version; what is unset takes the
// version's default (cryptsetup 2.6.1's: aes-xts-plain64, 512-bit XTS key,
// else 256; LUKS2: argon2id benchmarked to 2 s, 4096-byte sectors, 16 MiB
// data offset; LUKS1: PBKDF2, payload aligned to 1 MiB).
struct FormatOptions {
    Version version = Version::Luks2;
    std::string cipher = "aes-xts-plain64";
    std::optional<uint32_t> key_bits;
    KdfRequest kdf;                 // the first keyslot's KDF (hash: LUKS1's header hash too)
    int keyslot = -1;               // -1: keyslot 0
    std::string uuid;               // empty: random; else as valid_uuid takes it
    std::optional<uint64_t> offset; // --offset: the data's 512-byte sector
    std::optional<uint64_t> align;  // --align-payload in 512-byte sectors
    bool detached = false;          // the header device holds no data (--header)
    // LUKS2 only (Invalid for LUKS1):
    std::optional<uint32_t> sector_size;  // 512..4096
    std::string label, subsystem;
    std::optional<uint64_t> metadata_size, keyslots_size;  // bytes
    // --integrity as cryptsetup takes it (hmac-sha256, hmac-sha512,
    // hmac-sha1, cmac-aes, aead, poly1305); LUKS2 only. The volume key then
    // holds the cipher key (--key-size) and the integrity key after it. The
    // header is all format() writes: format_integrity then makes the data
    // device's dm-integrity device.
    std::string integrity;
};

// Where a checked format puts things, before anything is asked or written.
struct FormatLayout {
    Version version = Version::Luks2;
    uint32_t key_size = 0;     // volume key bytes
    uint32_t sector_size = 0;  // encryption sector (512 for LUKS1)
    uint64_t data_offset = 0;  // bytes into the data device
    // What an image file holding the header grows to, as cryptsetup leaves
    // it: the header areas and, when the data follows, up to its offset.
    uint64_t file_size = 0;
};

// Checks `opts` as cryptsetup's luksFormat does (Status as keyslot_options:
// Invalid for LUKS1's usage errors, Unsupported for the rest, with
// cryptsetup's words such as "Unsupported encryption sector size.") and lays
// the container out. Writes nothing.
Result<FormatLayout> format_layout(Registry& reg, const FormatOptions& opts);

// cryptsetup luksFormat: the version's header for `opts` written to
// `header` (which must hold the header areas; the CLI grows an image file
// to layout.file_size first), volume_key (empty: a random one of layout.key_size bytes) under
// `passphrase` in the first keyslot, its KDF benchmarked unless forced.
// Errors as format_layout's; I/O errors keep their status.
Result<void> format(Registry& reg, BackingStore& header, const FormatOptions& opts, ConstBytes volume_key,
                    ConstBytes passphrase);

// luksFormat --integrity's second half, on the data device of a container
// just formatted (vol: opened with its volume key): the 4 KiB superblock area
// at the segment offset zeroed, the clean journal and the superblock the
// kernel writes at format (initialize_superblock: no internal hash, so no
// salt; fix_padding; journal mode), the superblock last after a flush. Then,
// unless no_wipe, every block made valid as cryptsetup's wipe makes it: zeros
// written through the crypt target (the AEAD of zeros and its tag; encrypted
// zeros are not zeros, so the data is written). progress(done, total) may
// stop the wipe (Interrupted). With no_wipe every block fails to read until
// written, as with cryptsetup --integrity-no-wipe.
struct IntegrityFormatOptions {
    bool no_wipe = false;
    bool legacy_padding = false;  // --integrity-legacy-padding: no fix_padding (superblock version 1)
    unsigned threads = 0;
    std::function<bool(uint64_t done, uint64_t total)> progress;
};
Result<void> format_integrity(Registry& reg, const Volume& vol, std::shared_ptr<BackingStore> data,
                              const IntegrityFormatOptions& opts = {});

// A passphrase's keyslot and the volume key it opened.
struct Unlocked {
    int keyslot = -1;
    SecureBuffer volume_key;
};

// A LUKS1 or LUKS2 header device and its parsed header: what cryptsetup's
// crypt_device is after crypt_load. Every action here dispatches on the
// version; each write is the version's crash-safe one, and the header read
// here follows it. Errors carry cryptsetup's messages ("All key slots
// full.", "Keyslot 3 is not active.").
class Container {
public:
    // Reads the header in `store` (the data device or a detached header):
    // Invalid "not a LUKS device" for anything else, or the version's
    // parse error. LUKS2 warnings (one damaged copy) are kept in warnings().
    static Result<Container> load(Registry& reg, std::shared_ptr<BackingStore> store);

    Version version() const noexcept { return version_; }
    const std::vector<std::string>& warnings() const noexcept { return warnings_; }
    // The same device reopened for writing (the header read stays).
    void use_store(std::shared_ptr<BackingStore> store) { store_ = std::move(store); }
    BackingStore& store() const noexcept { return *store_; }

    // The version's header: luks1() for LUKS1, luks2() for LUKS2 only.
    const luks1::Header& luks1() const { return *luks1_; }
    const luks2::Metadata& luks2() const { return *luks2_; }

    std::string uuid() const;
    // The volume key bytes (LUKS2: of a keyslot bound to segment 0, as
    // cryptsetup's LUKS2_get_volume_key_size); Invalid without one.
    Result<std::size_t> volume_key_size() const;
    // Keyslot numbers: 0..7 (LUKS1) or 0..31 (LUKS2).
    int keyslot_limit() const noexcept;
    bool keyslot_active(int k) const;
    std::vector<int> active_keyslots() const;

    // Refuses a LUKS2 header with mandatory requirements (reencryption, or
    // unknown ones) before any change; LUKS1 has none.
    Result<void> check_requirements() const;

    // The keyslot `passphrase` opens (only `keyslot` when >= 0): NoKey
    // "No key available with this passphrase." when none does.
    Result<Unlocked> unlock(ConstBytes passphrase, int keyslot = -1) const;
    // NoKey "Volume key does not match the volume." for a wrong key.
    Result<void> check_volume_key(ConstBytes volume_key) const;

    // The keyslot add_keyslot will fill for `requested` (-1: the lowest
    // free one): "Key slot N is invalid.", "Key slot N is full, please
    // select another one.", "All key slots full.".
    Result<int> free_keyslot(int requested) const;
    // cryptsetup luksAddKey: volume_key under `passphrase` in
    // free_keyslot(opts.keyslot). Returns the keyslot.
    Result<int> add_keyslot(ConstBytes volume_key, ConstBytes passphrase, const KeyslotOptions& opts);

    // cryptsetup luksChangeKey in two steps, so that a caller checks the
    // old passphrase before asking for the new one. LUKS1's `requested`
    // names the keyslot the new passphrase goes to (a free one: the change
    // writes it first and removes the old one after, crash-safe); LUKS2's
    // names the keyslot to change, which keeps its number.
    Result<Unlocked> unlock_to_change(ConstBytes old_passphrase, int requested) const;
    // The keyslot the new passphrase will be in: "Key slot N is invalid.",
    // or "All key slots full: a crash-safe change needs a free keyslot.".
    Result<int> change_target(const Unlocked& old, int requested) const;
    Result<void> change_keyslot(const Unlocked& old, int target, ConstBytes old_passphrase,
                                ConstBytes new_passphrase, const KeyslotOptions& opts);

    // cryptsetup luksKillSlot / luksRemoveKey: keyslot k's area wiped, then
    // the header written without it. "Key slot N is invalid." for a number
    // past the limit, "Keyslot N is not active." for a free one.
    Result<void> check_removable(int k) const;
    Result<void> remove_keyslot(int k);
    // cryptsetup luksErase: every active keyslot removed.
    Result<void> erase();

    // cryptsetup luksUUID --uuid (the caller checks its form: valid_uuid).
    Result<void> set_uuid(std::string_view uuid);

    // cryptsetup luksHeaderBackup: the bytes of the backup file.
    Result<std::vector<uint8_t>> header_backup() const;

    // cryptsetup luksDump, byte for byte (device names the header device in
    // LUKS1's first line).
    std::string dump(std::string_view device) const;
    // The lines luksDump --dump-volume-key prints (the same for both
    // versions), in wiping memory.
    SecureBuffer dump_volume_key(std::string_view device, ConstBytes volume_key) const;
    // luksDump --dump-json-metadata (LUKS2): Unsupported for LUKS1.
    Result<std::string> dump_json_metadata() const;
    // blkcrypt's `luks dump --json` (docs/json.md): one object on one line,
    // without the newline, with the fields both versions share where the
    // formats agree and `device` naming the header device; never the key.
    // Invalid as volume_key_size() for a LUKS2 header without a keyslot.
    Result<std::string> dump_summary_json(std::string_view device) const;

    // cryptsetup config and token: LUKS2 only (Unsupported "Device ... is
    // not a valid LUKS2 device." for LUKS1). See luks2.hpp for each.
    Result<void> set_labels(std::string_view label, std::string_view subsystem);
    Result<void> set_priority(int k, int priority);
    Result<int> import_token(std::string_view token, int id, bool replace);
    Result<void> assign_token(int id, int k);
    Result<void> remove_token(int id);
    // The token's JSON as stored: "Failed to get token N for export." when free.
    Result<std::string> export_token(int id) const;

private:
    Container() = default;
    Result<void> reread();  // after a LUKS2 write
    Result<void> only_luks2() const;

    Registry* reg_ = nullptr;
    std::shared_ptr<BackingStore> store_;
    Version version_ = Version::Luks1;
    std::optional<luks1::Header> luks1_;
    std::shared_ptr<const luks2::Metadata> luks2_;  // shared: Metadata is only declared here
    std::vector<std::string> warnings_;
};

// cryptsetup luksHeaderRestore: the backup's own version picks the format;
// each version's checks against a header already on `device`.
Result<void> header_restore(Registry& reg, BackingStore& device, BackingStore& backup);

// A UUID as libuuid's uuid_parse (and so cryptsetup --uuid) takes it:
// 8-4-4-4-12 hex digits.
bool valid_uuid(std::string_view u) noexcept;

}  // namespace blkcrypt::luks
