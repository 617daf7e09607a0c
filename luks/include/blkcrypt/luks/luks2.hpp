// LUKS2 (cryptsetup's on-disk format 2): the two binary headers, the JSON
// metadata, keyslot unlock and luksDump, read as cryptsetup 2.6 reads them.
//
// A header store holds, from offset 0: the primary binary header (4096
// bytes) and its JSON area (hdr_size - 4096 bytes), the secondary copy at
// hdr_size, then the keyslot areas (config.keyslots_size bytes) from
// 2 * hdr_size. It is the data device itself or a detached header file.
// Nothing here writes to the store.
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/bytes.hpp>
#include <blkcrypt/luks/container.hpp>
#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/status.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace blkcrypt {
class Registry;
}

namespace blkcrypt::luks::luks2 {

inline constexpr std::size_t kBinHeaderSize = 4096;
inline constexpr uint64_t kMinHdrSize = 16 * 1024, kMaxHdrSize = 4 * 1024 * 1024;
inline constexpr uint64_t kMaxKeyslotsSize = 128ull * 1024 * 1024;
inline constexpr int kMaxKeyslots = 32, kMaxTokens = 32, kMaxSegments = 32, kMaxDigests = 32;

// One copy's binary header (big-endian on disk).
struct BinaryHeader {
    uint64_t hdr_size = 0, seqid = 0, hdr_offset = 0;
    std::string label, checksum_alg, uuid, subsystem;  // NUL-terminated fields
    std::array<uint8_t, 64> salt{}, csum{};
};

struct Kdf {
    std::string type;         // "pbkdf2", "argon2i", "argon2id" (or an old "argon2", opened as argon2i)
    std::string hash;         // pbkdf2
    uint32_t iterations = 0;  // pbkdf2
    uint32_t time = 0, memory = 0, cpus = 0;  // argon2: passes, KiB, lanes
    std::vector<uint8_t> salt;
};

struct Keyslot {
    std::string type;         // "luks2"; others ("reencrypt") are kept but never unlocked
    uint32_t key_size = 0;    // volume key bytes
    int priority = 1;         // 0 ignore, 1 normal (absent), 2 prefer
    // The fields below are filled for type "luks2" only.
    Kdf kdf;
    std::string af_type;      // "luks1"
    uint32_t stripes = 0;
    std::string af_hash;
    std::string area_type;    // "raw"
    uint64_t area_offset = 0, area_size = 0;
    std::string area_encryption;
    uint32_t area_key_size = 0;
    // The bytes of the area the AF-split key occupies (whole 512-byte sectors).
    uint64_t af_size() const;
};

struct Digest {
    std::string type;         // "pbkdf2"
    std::vector<int> keyslots, segments;
    std::string hash;
    uint32_t iterations = 0;
    std::vector<uint8_t> salt, digest;
};

// A crypt segment's "integrity" object (luksFormat --integrity): dm-crypt
// runs over a dm-integrity device at the segment's offset of the data device.
struct SegmentIntegrity {
    std::string type;                // "hmac(sha256)", "aead", "poly1305", ...
    std::string journal_encryption;  // "none": cryptsetup 2.6.1 writes nothing else
    std::string journal_integrity;   // "none"
    std::optional<uint32_t> key_size;  // bytes; cryptsetup 2.8's optional "key_size"
};

struct Segment {
    std::string type;                 // "crypt", or "linear" during reencryption
    uint64_t offset = 0;              // bytes
    std::optional<uint64_t> size;     // bytes; empty = "dynamic" (to the end)
    uint64_t iv_tweak = 0;            // 512-byte sectors
    std::string encryption;           // crypt only
    uint32_t sector_size = 512;       // crypt only
    std::optional<SegmentIntegrity> integrity;  // crypt only, when present
    std::vector<std::string> flags;
};

struct Token {
    std::string type;
    std::vector<int> keyslots;
    std::string json;  // the whole token object as compact JSON, kept intact
};

struct Config {
    uint64_t json_size = 0, keyslots_size = 0;
    std::vector<std::string> flags;
    std::vector<std::string> requirements;  // requirements.mandatory
};

struct Metadata {
    BinaryHeader hdr;  // of the copy in use
    std::map<int, Keyslot> keyslots;
    std::map<int, Token> tokens;
    std::map<int, Segment> segments;
    std::map<int, Digest> digests;
    Config config;
    std::string json;  // the JSON text as stored (no NUL padding)

    uint64_t metadata_size() const { return config.json_size + kBinHeaderSize; }
    // Both header copies and the keyslot areas.
    uint64_t hdr_and_areas_size() const { return 2 * metadata_size() + config.keyslots_size; }
    // The digest that references keyslot k (for segment s when s >= 0), or -1.
    int digest_for_keyslot(int k, int s = -1) const;
};

// Parses and checks one binary header copy (magic for `secondary`, version 2,
// hdr_offset == offset, hdr_size a power of two in 16 KiB..4 MiB, the
// secondary at offset hdr_size). The checksum is checked by read_copy.
Result<BinaryHeader> parse_binary_header(ConstBytes bin, bool secondary, uint64_t offset);

// Checks the JSON area (hdr_size - 4096 bytes: '{', the JSON text, only NULs
// after it) and parses and validates the metadata as cryptsetup's
// LUKS2_hdr_validate does: numbered objects, 64-bit numbers as strings of
// digits, references between keyslots, digests, segments and tokens,
// keyslot areas inside the keyslots area and not overlapping, the data
// offset past the keyslots area, sizes that fit.
Result<Metadata> parse_metadata(ConstBytes json_area, const BinaryHeader& hdr);

// One header copy as stored (hdr.hdr_size bytes): the binary header for
// `secondary` (its magic, hdr_offset 0 or hdr_size), json NUL-padded, and
// the checksum over both. The caller sets hdr_size, seqid, labels, uuid,
// checksum_alg and salt. Invalid if the JSON does not fit.
Result<std::vector<uint8_t>> build_copy(Registry& reg, const BinaryHeader& hdr, bool secondary,
                                        std::string_view json);

// Reads one copy at offset: binary header, JSON area, checksum, metadata.
Result<Metadata> read_copy(Registry& reg, BackingStore& store, uint64_t offset, bool secondary);

struct Header {
    Metadata md;                        // the copy in use
    bool primary_ok = false, secondary_ok = false;
    std::vector<std::string> warnings;  // e.g. the primary copy is damaged
};

// Both copies as cryptsetup reads them: the primary at 0, the secondary at
// the primary's hdr_size (or, the primary being unusable, at every size
// 16 KiB..4 MiB); of two good copies the higher seqid wins. One damaged copy
// gives a warning; two give an error. Nothing is repaired on disk.
Result<Header> read_header(Registry& reg, BackingStore& store);

// Refuses metadata carrying mandatory requirements (reencryption in
// progress, or requirements unknown to cryptsetup 2.6 and to us).
Result<void> check_requirements(const Metadata& md);

// {keyslot, warnings, ignore_requirements}: the front's options.
using OpenOptions = luks::OpenOptions;

// The volume key in keyslot k for passphrase: KDF, keyslot area decrypted
// through the dm-crypt engine, AF merge, checked against its digest.
// NoKey "No key available with this passphrase." when it does not match.
Result<SecureBuffer> unlock_keyslot(Registry& reg, BackingStore& header, const Metadata& md, int k,
                                    ConstBytes passphrase);

// Tries the keyslots of segment 0 in cryptsetup's order (priority 2, then 1;
// 0 only when named) and returns the data segment's table with the volume
// key. NoKey with cryptsetup's message when no keyslot opens.
Result<luks::Volume> open(Registry& reg, BackingStore& header, ConstBytes passphrase,
                          OpenOptions opts = {});

// The Volume of md's segment 0 for an already known volume key (checked
// against the segment's digest).
Result<luks::Volume> volume_from_key(Registry& reg, const Metadata& md, ConstBytes volume_key,
                                     int keyslot = -1);

// A new LUKS2 container, laid out as cryptsetup 2.6.1's luksFormat lays it
// out. KDF costs: `iterations` given = cryptsetup's --pbkdf-force-iterations
// (with --pbkdf-memory / --pbkdf-parallel); 0 = benchmarked for
// iter_time_ms (--iter-time) as cryptsetup does, memory_kib then being the
// limit (0: min(1 GiB, half of RAM)) and parallel the lanes (0: min(4, CPUs)).
struct FormatOptions {
    std::string cipher = "aes-xts-plain64";
    uint32_t key_size = 64;            // volume key bytes
    uint32_t sector_size = 4096;
    std::string hash = "sha256";       // AF, digest and (pbkdf2) KDF hash
    std::string pbkdf = "argon2id";    // "pbkdf2", "argon2i", "argon2id"
    uint32_t iterations = 0;           // pbkdf2 iterations or argon2 passes; 0: benchmark
    uint32_t memory_kib = 0, parallel = 0;  // argon2; 0: cryptsetup's defaults
    uint32_t iter_time_ms = 2000;      // the benchmark's target
    uint32_t digest_iterations = 1000;
    uint64_t metadata_size = 16384;    // hdr_size of each copy: 16 KiB..4 MiB
    uint64_t keyslots_size = 0;        // 0: up to the data offset (at most 128 MiB)
    uint64_t data_offset = 16u << 20;  // bytes; 0 for a detached header
    std::string label, subsystem, uuid;  // uuid empty: a random one
    int keyslot = 0;
    ConstBytes volume_key = {};        // empty: a random key
    // The segment's integrity type, kernel form ("hmac(sha256)", "aead",
    // "poly1305"); empty: none. key_size then counts the integrity key too.
    std::string integrity;
};

// Writes the keyslot area, then the primary and the secondary header copy
// (seqid 1) into `header` (zeroing the metadata areas first), and returns
// the new container's Volume (keyslot = the one written).
Result<luks::Volume> format(Registry& reg, BackingStore& header, ConstBytes passphrase, const FormatOptions& opts);

// The LUKS2 FormatOptions luksFormat's checked options give (what format()
// above writes for them, the digest's PBKDF2 iterations benchmarked as
// cryptsetup's), for a caller that lays the header out itself
// (reencrypt --encrypt). Errors as luks::format_layout's.
Result<FormatOptions> resolve_format(Registry& reg, const luks::FormatOptions& opts);

// {pbkdf, hash, costs, keyslot, priority}: the front's options.
using KeyslotOptions = luks::KeyslotOptions;

// The keyslot costs FormatOptions (its first keyslot) and KeyslotOptions
// both hold, copied from one to the other (either way).
template <class To, class From>
void copy_keyslot_costs(To& to, const From& from) {
    to.pbkdf = from.pbkdf;
    to.hash = from.hash;
    to.iterations = from.iterations;
    to.memory_kib = from.memory_kib;
    to.parallel = from.parallel;
    to.iter_time_ms = from.iter_time_ms;
}

// A new passphrase keyslot for a known volume key (checked against the
// segment's digest first), in the first free area that fits, as
// cryptsetup luksAddKey: the area is written first, then the header (seqid
// + 1, primary then secondary), so a crash leaves the old or the new header.
// Everything else in the JSON (tokens of any type, unknown fields) is kept.
Result<int> add_keyslot(Registry& reg, BackingStore& header, ConstBytes volume_key, ConstBytes passphrase,
                        const KeyslotOptions& opts);

// cryptsetup luksChangeKey: the keyslot old_passphrase opens (or
// opts.keyslot) gets new_passphrase under the same number. The new area goes
// into a free gap, then the header points the slot at it (priority kept),
// then the old area is wiped: a crash leaves the old or the new passphrase
// working. Returns the slot.
Result<int> change_keyslot(Registry& reg, BackingStore& header, ConstBytes old_passphrase,
                           ConstBytes new_passphrase, const KeyslotOptions& opts);

// Removes keyslot k as cryptsetup luksKillSlot: its area is wiped (zeros),
// then the header without it (also dropped from digests' and tokens'
// keyslot lists) is written in the same crash-safe order.
Result<void> remove_keyslot(Registry& reg, BackingStore& header, int k);

// Writes new JSON text for the header in store (seqid + 1, each copy its own
// salt, primary first). The JSON must pass parse_metadata.
Result<void> write_metadata(Registry& reg, BackingStore& header, const Metadata& current, std::string_view json);

// cryptsetup config --label / --subsystem: both are replaced (cryptsetup
// clears the one not given), at most 47 bytes kept as cryptsetup truncates,
// in one crash-safe header rewrite.
Result<void> set_labels(Registry& reg, BackingStore& header, std::string_view label, std::string_view subsystem);

// cryptsetup config --priority --key-slot k: 0 ignore, 1 normal (the
// member is dropped, as cryptsetup does), 2 prefer. Invalid "Keyslot k is
// not active." for a free slot.
Result<void> set_priority(Registry& reg, BackingStore& header, int k, int priority);

// cryptsetup token import / add: `token` (a JSON object with a "type"
// string and a "keyslots" array naming existing keyslots; luks2-keyring
// also a "key_description" string) becomes token `id` (-1: the lowest
// free one), member order kept. An id in use is refused ("Token N in use.")
// unless `replace`. One crash-safe header rewrite; returns the id.
Result<int> import_token(Registry& reg, BackingStore& header, std::string_view token, int id, bool replace);

// cryptsetup's --key-slot of token import/add: keyslot k joins the token's
// "keyslots" (a second header rewrite, as cryptsetup's).
Result<void> assign_token(Registry& reg, BackingStore& header, int id, int k);

// cryptsetup token remove: "Token N is not in use." for a free id.
Result<void> remove_token(Registry& reg, BackingStore& header, int id);

// cryptsetup luksHeaderBackup: both header copies and the keyslots area
// (hdr_and_areas_size bytes, rounded up to the page size) as the backup
// file's contents. The caller creates the file (cryptsetup: new, mode 0400).
Result<std::vector<uint8_t>> header_backup(Registry& reg, BackingStore& header);

// cryptsetup luksHeaderRestore: the backup must hold a valid LUKS2 header
// without requirements; when `device` already has one, the data offset and
// the header+keyslots size must match. Writes hdr_and_areas_size bytes.
Result<void> header_restore(Registry& reg, BackingStore& device, BackingStore& backup);

// `cryptsetup luksDump` of LUKS2 metadata, byte for byte.
std::string dump(const Metadata& md);
// `cryptsetup luksDump --dump-json-metadata`: json-c's pretty form.
std::string dump_json(const Metadata& md);

}  // namespace blkcrypt::luks::luks2
