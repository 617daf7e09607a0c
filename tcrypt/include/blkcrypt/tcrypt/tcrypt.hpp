// TrueCrypt and VeraCrypt volumes (cryptsetup's TCRYPT): the 512-byte header
// (64-byte salt, then 448 bytes encrypted with a key derived by PBKDF2 from
// the passphrase and keyfile pool) is decrypted by trying every KDF and cipher
// chain cryptsetup tries, and becomes a Volume holding the dm-crypt table of
// the data area, the same target abstraction LUKS opens to.
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/bytes.hpp>
#include <blkcrypt/dm/dm_table.hpp>
#include <blkcrypt/dm/table.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/status.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace blkcrypt::tcrypt {

// Header locations (bytes; negative: from the end of the device).
constexpr int64_t kHiddenOffset = 65536;
constexpr int64_t kHiddenOffsetOld = -1536;  // TrueCrypt < 6: the hidden header near the end
constexpr int64_t kBackupOffset = -131072;
constexpr int64_t kHiddenBackupOffset = -65536;
constexpr int64_t kSystemOffset = 31744;  // sector 62 of the boot drive
constexpr std::size_t kHeaderSize = 512;
constexpr std::size_t kSaltSize = 64;
constexpr std::size_t kPoolSize = 64;        // TrueCrypt passphrase and keyfile pool
constexpr std::size_t kVeraPoolSize = 128;   // VeraCrypt, for passphrases over 64 bytes
constexpr std::size_t kKeyfileMax = 1048576; // bytes of a keyfile that count
// The highest PIM at which a search without -h tries Argon2id. VeraCrypt
// bounds a PIM only by 2147468 (MAX_PIM_VALUE, for PBKDF2's 15000 + 1000 x PIM),
// and its Argon2id memory reaches its 1 GiB cap at PIM 31, after which each
// PIM adds one pass: PIM 1234 is 1216 passes over 1 GiB, tens of minutes for
// one wrong passphrase. Up to PIM 31 a try is at most 13 passes; above, only
// an -h that names Argon2id tries it.
constexpr uint32_t kArgon2SearchMaxPim = 31;

struct OpenOptions {
    bool hidden = false;     // --tcrypt-hidden
    bool backup = false;     // --tcrypt-backup
    bool system = false;     // --tcrypt-system (header at sector 62 of the disk)
    bool veracrypt = true;   // VeraCrypt KDFs and "VERA" magic (--disable-veracrypt clears)
    uint32_t pim = 0;        // --veracrypt-pim (0: the default iterations)
    std::string hash;        // -h: only KDFs whose hash contains this
    std::string cipher;      // -c: only chains whose name contains this
    // Keyfile contents in order (at most kKeyfileMax bytes of each count).
    std::vector<SecureBuffer> keyfiles;
    // Called before each KDF is run, so a caller can say what the search is
    // doing (a PIM makes one try take minutes): its hash ("argon2id"), its
    // iterations (Argon2id: passes) and its memory (KiB; 0 for PBKDF2).
    std::function<void(std::string_view hash, uint32_t iterations, uint32_t memory_kib)> on_kdf;
    // Called instead when the search leaves Argon2id out (its PIM is above
    // kArgon2SearchMaxPim and no -h was given), with what one try would cost.
    std::function<void(std::string_view hash, uint32_t iterations, uint32_t memory_kib)> on_kdf_skipped;
};

struct Header {
    bool veracrypt = false;  // "VERA" magic
    uint16_t version = 0, version_tc = 0;
    uint32_t flags = 0, sector_size = 512;
    uint64_t hidden_volume_size = 0, volume_size = 0, mk_offset = 0, mk_size = 0;
    std::string kdf_hash;    // cryptsetup's name: "sha512", "ripemd160", "whirlpool"
    uint32_t iterations = 0;
    std::string cipher;      // chain: "aes", "serpent-twofish-aes"
    std::string mode;        // "xts-plain64", "lrw-benbi", "cbc-tcw"
    std::size_t key_size = 0; // bytes of the chain's volume key
    SecureBuffer keys;       // the header's 256-byte key area
};

struct Volume {
    Header hdr;
    dm::CryptTable table;         // cipher, key, iv_offset, offset (512-byte sectors)
    uint64_t length_sectors = 0;  // 0 = to the end of the device
    // Sectors of the table's offset that only place a partition inside a
    // whole-disk image (map_system_partition): not part of what cryptsetup
    // reports as the payload offset of the partition.
    uint64_t partition_in_disk = 0;
};

// One partition of a disk, in 512-byte sectors.
struct Partition {
    uint64_t start = 0;
    uint64_t sectors = 0;  // 0: to the end of the data device
};

// Partition `number` of the disk's partition table, numbered as Linux does:
// GPT entries from 1 (a protective MBR's disk), else MBR primary slots 1-4
// and logical partitions from 5 in the extended chain's order. NotFound for
// an empty or absent slot, Invalid for no table or a broken one (CRC-32s,
// the extended chain). The extent is not checked against the disk's size:
// the table may come from a copy of the disk's first sectors.
Result<Partition> find_partition(BackingStore& disk, unsigned number);

// Whether sector 0 of the device carries an MBR (0x55AA; a GPT disk's
// protective MBR too): a whole disk rather than a system partition image,
// whose first sector is encrypted.
bool has_partition_table(BackingStore& dev);

// Turns a volume opened with `system` into the mapping of one system
// partition, as cryptsetup maps /dev/sdaN with --tcrypt-system: the data
// from the partition's first sector, to its end, IVs counted from its start
// on the disk. `in_disk`: the data device is the whole disk (the table's
// offset moves to the partition) rather than an image of the partition.
// Invalid when the partition is not inside the encrypted area's device.
Status map_system_partition(Volume& vol, Partition part, bool in_disk);

// The Volume a decrypted header describes: `dec` is the 448 bytes after the
// salt as chain `cipher` ("serpent-twofish") in `mode` ("xts-plain64")
// decrypted them. Checks the magic and both CRC-32s (Invalid), then derives
// the data and IV offsets and the dm-crypt table as cryptsetup does. open()
// calls it for each candidate; the fuzz harness calls it directly.
Result<Volume> from_decrypted(ConstBytes dec, std::string_view cipher, std::string_view mode, uint64_t device_size,
                              const OpenOptions& opts);

// The keyfile pool after mixing `keyfile` into it (TrueCrypt's CRC-32 based
// pool: each byte advances a CRC-32 whose four bytes, big-endian, are added
// to the pool in turn, wrapping at pool.size()).
void mix_keyfile(Bytes pool, ConstBytes keyfile);

// Decrypted with the first KDF and cipher chain that gives a header with the
// right magic and CRC-32s. NoKey "No device header detected with this
// passphrase." when none does; Invalid for a passphrase over the limit;
// IoError for a device too short to hold the header.
Result<Volume> open(Registry& reg, BackingStore& dev, ConstBytes passphrase, const OpenOptions& opts);

// The volume key as cryptsetup's --dump-volume-key prints it (each cipher's
// key in chain order, each as its mode takes it).
SecureBuffer volume_key(const Volume& vol);

// What `cryptsetup tcryptDump` prints.
std::string dump(const Volume& vol, std::string_view device_path);
// What `cryptsetup tcryptDump --dump-volume-key` prints instead (its own
// shorter header lines, then "MK dump:" and the key in hex), kept in wiping
// memory.
SecureBuffer dump_volume_key(const Volume& vol, std::string_view device_path);

// The table `cryptsetup tcryptOpen` loads: one crypt line over the volume's
// data area in `data`, which the line names `device`. Unsupported when
// blkcrypt cannot decrypt the data although the header opened (the legacy
// inner-CBC chains blowfish_le-aes and serpent-blowfish_le-aes); Invalid
// "... is too small for the TCRYPT volume" when `data` does not hold the area.
Result<dm::DmTable> dm_table(const Volume& vol, BackingStore& data, const std::string& device);

}  // namespace blkcrypt::tcrypt
