// LUKS1 (cryptsetup lib/luks1): the 592-byte big-endian header with 8
// keyslots, its validation as cryptsetup's LUKS_read_phdr does it, unlocking
// a keyslot (PBKDF2 -> keyslot area decrypted with the header's cipher ->
// anti-forensic merge -> master-key digest check) and the text of
// `cryptsetup luksDump`.
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/bytes.hpp>
#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/status.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace blkcrypt {
class Registry;
}

namespace blkcrypt::luks::luks1 {

constexpr std::size_t kHeaderSize = 592;      // sizeof(struct luks_phdr)
constexpr unsigned kNumKeyslots = 8;
constexpr uint32_t kStripes = 4000;           // the only count cryptsetup accepts
constexpr uint32_t kKeyEnabled = 0x00AC71F3;
constexpr uint32_t kKeyDisabled = 0x0000DEAD;
constexpr std::size_t kDigestSize = 20;
constexpr std::size_t kSaltSize = 32;
constexpr std::size_t kMaxKeyBytes = 64;      // 512-bit keys: the largest LUKS1 volume key here
constexpr uint64_t kSector = 512;
constexpr uint32_t kAlignKeyslots = 4096;     // keyslot areas start on 4 KiB

struct Keyslot {
    uint32_t active = kKeyDisabled;  // kKeyEnabled, kKeyDisabled (anything else: invalid, never tried)
    uint32_t iterations = 0;
    std::array<uint8_t, kSaltSize> salt{};
    uint32_t key_material_offset = 0;  // 512-byte sectors
    uint32_t stripes = kStripes;

    bool enabled() const noexcept { return active == kKeyEnabled; }
};

struct Header {
    uint16_t version = 1;
    std::string cipher_name;  // "aes"
    std::string cipher_mode;  // "xts-plain64"
    std::string hash_spec;    // "sha256" (cryptsetup's name: ripemd160, whirlpool...)
    uint32_t payload_offset = 0;  // 512-byte sectors; 0 for a detached header without --offset
    uint32_t key_bytes = 0;
    std::array<uint8_t, kDigestSize> mk_digest{};
    std::array<uint8_t, kSaltSize> mk_digest_salt{};
    uint32_t mk_digest_iterations = 0;
    std::string uuid;
    std::array<Keyslot, kNumKeyslots> keyslots{};

    // "aes-xts-plain64": the dm-crypt cipher of the payload and keyslot areas.
    std::string cipher_spec() const { return cipher_name + "-" + cipher_mode; }
};

// Sectors one keyslot's split key occupies (cryptsetup's AF_split_sectors).
uint64_t af_sectors(uint64_t key_bytes, uint64_t stripes) noexcept;
// The end of the last keyslot area in sectors: what the header device must hold
// (cryptsetup's LUKS_device_sectors).
uint64_t device_sectors(const Header& h) noexcept;

// Decodes the first kHeaderSize bytes of raw and checks it as cryptsetup does
// (magic, version 1, key size 1..64 bytes, every keyslot with 4000 stripes,
// past the header, before the payload and not overlapping another). Strings
// end at their first NUL (the last byte of each field is forced to one, as
// cryptsetup does). Invalid with a message otherwise; "not a LUKS device"
// for a wrong magic or a short input.
Result<Header> parse_header(ConstBytes raw);
// The 592 bytes of h (strings NUL-padded; Invalid if one does not fit).
Result<std::array<uint8_t, kHeaderSize>> serialize_header(const Header& h);

// The registry hash for the header's hash spec ("ripemd160" -> "rmd160"),
// checked to have an HMAC of at least 20 bytes as cryptsetup requires.
Result<std::string> registry_hash(Registry& reg, std::string_view hash_spec);

// Reads and parses the header of store, also checking that store holds every
// keyslot area ("Device ... is too small") and that the hash is usable.
Result<Header> read_header(Registry& reg, BackingStore& store);

// The volume key in keyslot `slot` for passphrase: NoKey when it does not
// match the master-key digest (or the slot is not enabled).
Result<SecureBuffer> open_keyslot(Registry& reg, BackingStore& store, const Header& h, unsigned slot,
                                  ConstBytes passphrase);

struct Unlocked {
    unsigned keyslot = 0;
    SecureBuffer volume_key;
};
// Tries every enabled keyslot in order (only `slot` when it is 0..7):
// NoKey "No key available with this passphrase." when none opens.
Result<Unlocked> open_any(Registry& reg, BackingStore& store, const Header& h, ConstBytes passphrase,
                          int slot = -1);

// Whether vk is the volume key of h (PBKDF2 over the master-key digest salt).
Result<bool> check_volume_key(Registry& reg, const Header& h, ConstBytes vk);

// `cryptsetup luksDump` for LUKS1, byte for byte; device names the header
// device in the first line.
std::string dump(const Header& h, std::string_view device);
// The lines `luksDump --dump-volume-key` prints for LUKS1, in wiping memory
// (they hold the key).
SecureBuffer dump_volume_key(const Header& h, std::string_view device, ConstBytes vk);

}  // namespace blkcrypt::luks::luks1

namespace blkcrypt::luks::luks1 {

// cryptsetup's LUKS1 minimums for keyslot and master-key digest iterations.
constexpr uint32_t kMinIterations = 1000;
// cryptsetup spends this share of --iter-time on the master-key digest
// (LUKS_MKD_ITERATIONS_MS against the keyslot's time).
constexpr uint32_t kDigestMs = 125;

// PBKDF2 iterations of hmac(hash) producing key_bytes that take time_ms here,
// measured as cryptsetup's pbkdf2 benchmark does (doubling runs until one takes
// over half a second, then scaled); at least kMinIterations.
Result<uint32_t> benchmark_pbkdf2(Registry& reg, std::string_view hash_spec, std::size_t key_bytes,
                                  uint32_t time_ms);

struct FormatParams {
    std::string cipher = "aes-xts-plain64";  // cryptsetup's LUKS1 defaults
    uint32_t key_bytes = 64;
    std::string hash = "sha256";
    uint32_t iter_time_ms = 2000;
    uint32_t force_iterations = 0;  // keyslot iterations without a benchmark (digest: 1000, as cryptsetup)
    unsigned keyslot = 0;
    uint32_t offset = 0;       // --offset: the payload sector (0: from the alignment)
    uint32_t alignment = 2048; // --align-payload in sectors (cryptsetup's 1 MiB default)
    bool detached = false;     // the header device holds no data: payload at --offset (or --align-payload)
    std::string uuid;          // empty: a random version 4 UUID
};

// A header for params and volume key vk (keyslots all disabled; cryptsetup's
// LUKS_generate_phdr layout: areas from sector 8, each rounded to 4 KiB). The
// digest takes kDigestMs/iter_time_ms of keyslot_iterations (at least 1000;
// exactly 1000 with force_iterations, as cryptsetup).
Result<Header> make_header(Registry& reg, const FormatParams& params, ConstBytes vk, uint32_t keyslot_iterations);

// Writes the 592-byte header at offset 0 and flushes.
Result<void> write_header(BackingStore& store, const Header& h);

// Fills keyslot `slot` of h for passphrase (its own salt, the split volume key
// encrypted into its area, which is written first), then writes the header.
Result<void> add_keyslot(Registry& reg, BackingStore& store, Header& h, unsigned slot, ConstBytes vk,
                         ConstBytes passphrase, uint32_t iterations);

// Disables keyslot `slot` as cryptsetup's LUKS_del_key does: its area is
// overwritten with random bytes (and flushed) first, then the header written
// with the slot disabled, its salt and iterations zeroed. A crash between the
// two leaves a slot whose material is gone; every other keyslot still opens.
Result<void> remove_keyslot(BackingStore& store, Header& h, unsigned slot);

// luksChangeKey: the volume key under a new passphrase in the free keyslot
// new_slot, then old_slot removed, so that a crash at any write leaves the
// old or the new passphrase working. (cryptsetup rewrites the same slot in
// place when none is free; that cannot be crash-safe, so it is refused.)
Result<void> change_keyslot(Registry& reg, BackingStore& store, Header& h, unsigned old_slot, unsigned new_slot,
                            ConstBytes vk, ConstBytes new_passphrase, uint32_t iterations);

// luksHeaderBackup: the header and every keyslot area (device_sectors(),
// rounded up to 4 KiB), the bytes between the header and a first keyslot at
// 4 KiB zeroed: the file cryptsetup writes, byte for byte.
Result<std::vector<uint8_t>> header_backup(Registry& reg, BackingStore& store);

// luksHeaderRestore: checks the backup (a valid header whose keyslot areas it
// holds) and, when store already has a LUKS1 header, that the payload offset
// and key size agree; then writes the header and keyslot areas at 0.
Result<void> header_restore(Registry& reg, BackingStore& store, ConstBytes backup);

// luksFormat: wipes the header and keyslot areas as cryptsetup does (zeros up
// to the payload, random bytes over every keyslot area), writes a header for
// params with vk and puts passphrase into params.keyslot. The store must hold
// device_sectors() of the new header.
Result<Header> format(Registry& reg, BackingStore& store, const FormatParams& params, ConstBytes vk,
                      ConstBytes passphrase);

// A random version 4 UUID, lower-case, as libuuid prints it.
Result<std::string> random_uuid();

}  // namespace blkcrypt::luks::luks1
