// BitLocker volumes (cryptsetup's BITLK): the FVE metadata parsed as
// cryptsetup 2.6 reads it, unlocking a VMK protector into the FVEK, and the
// plaintext view `cryptsetup bitlkOpen` maps (its dm table as segments).
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/bytes.hpp>
#include <blkcrypt/dm/dm_table.hpp>
#include <blkcrypt/dm/table.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/status.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace blkcrypt::bitlk {

constexpr std::size_t kBootSectorSize = 512;
constexpr uint64_t kFveAreaSize = 64 * 1024;  // each of the three metadata areas
constexpr uint64_t kFveHeadersSize = 112;      // block header (64) + metadata header (48)

// The VMK protector types (the entry's protection field).
enum Protection : uint16_t {
    kClearKey = 0x0000,
    kTpm = 0x0100,
    kStartupKey = 0x0200,
    kTpmPin = 0x0500,
    kRecoveryPassphrase = 0x0800,
    kSmartCard = 0x1000,
    kPassphrase = 0x2000,
};

// "VMK protected with passphrase", as cryptsetup bitlkDump names it.
std::string protection_name(uint16_t protection);

// An AES-CCM wrapped key: nonce, tag and ciphertext as stored.
struct WrappedKey {
    std::array<uint8_t, 12> nonce{};
    std::array<uint8_t, 16> tag{};
    std::vector<uint8_t> data;  // ciphertext of a key datum (its 12-byte header + key)
};

struct Vmk {
    std::string guid, name;  // name: the optional string datum ("ExternalKey")
    uint16_t protection = 0;
    std::array<uint8_t, 16> salt{};  // stretch key salt (zeros without one)
    std::vector<WrappedKey> keys;    // the encrypted VMK copies (normally one)
    SecureBuffer clear_key;          // a clear-key protector's key, in the clear on disk
};

struct Metadata {
    bool togo = false;          // BitLocker To Go (FAT boot sector "MSWIN4.1")
    uint32_t sector_size = 512;
    uint16_t version = 2;
    uint16_t curr_state = 0, next_state = 0;  // 4 = fully encrypted
    std::string guid;
    uint64_t volume_size = 0;
    int64_t creation_time = 0;  // Unix seconds
    std::optional<std::string> description;
    uint16_t encryption = 0;    // 0x8000..0x8005
    std::string cipher, cipher_mode;  // "aes", "xts-plain64"
    unsigned key_bits = 0;      // of the dm-crypt key (XTS and elephant: both halves)
    std::vector<Vmk> vmks;
    WrappedKey fvek;
    std::array<uint64_t, 3> metadata_offset{};  // bytes
    uint64_t volume_header_offset = 0, volume_header_size = 0;  // bytes
    unsigned copy = 0;       // which of the three FVE blocks this was read from
    bool damaged_first = false;  // the first block failed its CRC32 or did not parse

    // Encryption paused (state 5): only the bytes below volume_size are
    // converted; cryptsetup refuses these, blkcrypt reads the rest as stored.
    bool partial() const { return curr_state == 5; }

    std::string cipher_spec() const { return cipher + "-" + cipher_mode; }
};

// The FVE block offsets from the boot sector (its first 512 bytes); also the
// To Go flag and sector size into md. cryptsetup's errors and wording.
Result<std::array<uint64_t, 3>> parse_boot_sector(ConstBytes boot, Metadata& md);

// The first FVE metadata block (`block` starts at its signature and holds at
// least its whole metadata) into md.
Result<void> parse_fve_block(ConstBytes block, Metadata& md);

// The FVE block's validation record (right after the block: size, version 2,
// CRC32 of the block): true when the CRC32 matches, false when it does not,
// nullopt when there is no such record (cryptsetup checks none).
std::optional<bool> check_fve_crc(Registry& reg, ConstBytes block);

// Both from the device: the boot sector, then the first FVE block whose
// CRC32 matches (or that has no validation record), else the first that
// parses. cryptsetup reads only the first; damaged_first says when the
// first was passed over.
Result<Metadata> read_metadata(Registry& reg, BackingStore& dev);

// `cryptsetup bitlkDump DEVICE` output, byte for byte (Created in local time,
// as ctime prints it).
std::string dump(const Metadata& md, std::string_view device);

// `cryptsetup bitlkDump --dump-volume-key` output for the unlocked key.
SecureBuffer dump_volume_key(const Metadata& md, std::string_view device, ConstBytes key);

// A 48-digit recovery password (8 groups of 6 digits, '-' between, each a
// multiple of 11 below 11 * 65536; one trailing '\n' allowed) as its 16-byte
// key; nullopt when the text is not one.
std::optional<SecureBuffer> recovery_key(ConstBytes text);

// BitLocker's stretch: SHA-256 of the UTF-16LE passphrase (recovery: of its
// 16-byte key) hashed again, then 2^20 rounds over (last, initial, salt, count).
Result<SecureBuffer> stretch_passphrase(Registry& reg, ConstBytes passphrase, bool recovery,
                                        const std::array<uint8_t, 16>& salt, uint64_t rounds = 1u << 20);

// The key datum inside a WrappedKey, unwrapped with the 256-bit `key`:
// BadMsg when the tag does not match.
Result<SecureBuffer> unwrap(Registry& reg, const WrappedKey& wrapped, ConstBytes key);

// The startup key a .BEK file holds for `vmk` (its GUID must match):
// NoKey for another VMK's file, Invalid for a damaged one or one whose
// volume-GUID entry (Windows 11) names another volume than `volume_guid`.
Result<SecureBuffer> startup_key(ConstBytes bek, const Vmk& vmk, std::string_view volume_guid);

struct Unlocked {
    SecureBuffer key;  // the dm-crypt key (cryptsetup's volume key)
    std::size_t vmk = 0;  // index into md.vmks of the protector that opened it
};

// Tries every VMK as cryptsetup does with `secret`: a passphrase, a recovery
// password or the contents of a .BEK startup key file. NoKey "No key
// available with this passphrase." when none opens.
Result<Unlocked> unlock(Registry& reg, const Metadata& md, ConstBytes secret);

// A clear-key protector (suspended protection) needs no secret: its key is
// on disk. NoKey when the volume has none. cryptsetup 2.6 refuses these.
Result<Unlocked> unlock_clear_key(Registry& reg, const Metadata& md);

// The table `cryptsetup bitlkOpen` loads over a device of `device_sectors`
// (512 bytes), which its lines name `device`: the three FVE areas and the
// volume header area as zero lines, the boot region [0, header size) a crypt
// line over the relocated header, crypt lines in place elsewhere (IV sector
// = device sector, iv_large_sectors for 4K sectors). Refuses what bitlkOpen
// refuses (a state other than fully encrypted), except paused encryption:
// the stored sectors from the encrypted size on are linear lines. An empty
// key gives the same lines without one (the checks before a secret is asked).
Result<dm::DmTable> dm_table(const Metadata& md, ConstBytes key, uint64_t device_sectors, const std::string& device);

}  // namespace blkcrypt::bitlk
