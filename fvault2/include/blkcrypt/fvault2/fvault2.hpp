// FileVault 2 volumes (Core Storage, cryptsetup's FVAULT2): the physical
// volume header, the disk label and the encrypted metadata read as
// cryptsetup 2.6's lib/fvault2 reads them, the passphrase -> PBKDF2-SHA256 ->
// AES key unwrap (kw(aes)) chain to the volume key, and the one aes-xts-plain64
// segment `cryptsetup open --type fvault2` maps.
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

namespace blkcrypt::fvault2 {

constexpr std::size_t kVolumeHeaderSize = 512;
constexpr std::size_t kBlockSize = 8192;          // a metadata block
constexpr uint64_t kMaxOffset = 1024ull << 20;    // cryptsetup reads metadata only below 1 GiB
constexpr std::size_t kWrappedKeySize = 24;       // a 16-byte key wrapped (RFC 3394)
constexpr std::size_t kVolumeKeySize = 32;        // aes-xts-plain64, 2 x 128 bits

// The physical volume header (first 512 bytes).
struct VolumeHeader {
    uint32_t block_size = 0;
    uint64_t disklabel_block = 0;
    std::string pv_uuid;          // as uuid_unparse prints it
    SecureBuffer metadata_key;    // the header's key data + the PV UUID: xts(aes) key of the metadata
};

// Metadata blocks of each type found while parsing the encrypted metadata.
enum Found : unsigned { kFoundKeys = 1, kFoundVolume = 2, kFoundOffset = 4, kFoundAll = 7 };

struct Metadata {
    std::string pv_uuid, family_uuid;
    std::array<uint8_t, 16> family_uuid_bin{};
    uint32_t block_size = 0;
    uint64_t lv_offset = 0, lv_size = 0;  // bytes
    uint32_t pbkdf2_iterations = 0;
    std::array<uint8_t, 16> pbkdf2_salt{};
    std::array<uint8_t, kWrappedKeySize> wrapped_kek{}, wrapped_vk{};
    std::string cipher = "aes", cipher_mode = "xts-plain64";
    unsigned found = 0;  // Found bits

    std::string cipher_spec() const { return cipher + "-" + cipher_mode; }
};

// CRC-32C as Core Storage stores it: 4 bytes value, 4 bytes seed (must be
// 0xffffffff), over the rest of `block`; no final inversion.
bool checksum_ok(Registry& reg, ConstBytes block);

// The physical volume header: checksum, version 1, "CS" magic, 16-byte key.
Result<VolumeHeader> parse_volume_header(Registry& reg, ConstBytes header);

// One decrypted metadata block (kBlockSize bytes, checksum already checked)
// into md: type 0x0019 (the wrapped keys and PBKDF2 parameters from the
// plist), 0x001a (logical volume size, family UUID) or 0x0305 (logical volume
// offset); other types are ignored. Sets the block's Found bit.
Result<void> parse_metadata_block(ConstBytes block, Metadata& md);

// The property `key` of type `type` as cryptsetup's regular expression
// "<key>KEY</key><TYPE[^>]*>([^<]+)</TYPE>" finds it (leftmost match);
// nullopt when none matches.
std::optional<std::string> plist_value(std::string_view xml, std::string_view key, std::string_view type);

// Everything from the device: the volume header, the disk label and its
// volume groups descriptor, the encrypted metadata blocks (up to the first
// all-zero block). Errors name what is wrong.
Result<Metadata> read_metadata(Registry& reg, BackingStore& dev);

// `cryptsetup fvault2Dump DEVICE` output, byte for byte.
std::string dump(const Metadata& md, std::string_view device);

// `cryptsetup fvault2Dump --dump-volume-key` output for the unlocked key, in
// wiping memory.
SecureBuffer dump_volume_key(const Metadata& md, std::string_view device, ConstBytes key);

// The 32-byte volume key: PBKDF2-SHA256 of the passphrase unwraps the KEK,
// the KEK unwraps the first key half, SHA-256(half || family UUID) gives the
// second. NoKey "No key available with this passphrase." when it does not fit.
Result<SecureBuffer> unlock(Registry& reg, const Metadata& md, ConstBytes passphrase);

// The table cryptsetup's activation loads over a device of dev_size bytes,
// which the line names `device`: one crypt line, aes-xts-plain64 with `key`,
// IV offset 0, data from the logical volume offset, lv_size / 512 sectors.
// Refuses, as the activation does, a logical volume that is not whole sectors
// or does not fit in the device. An empty key gives the same table without
// one (what is checked before the passphrase is asked).
Result<dm::DmTable> dm_table(const Metadata& md, ConstBytes key, uint64_t dev_size, const std::string& device);

}  // namespace blkcrypt::fvault2
