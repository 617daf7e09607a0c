// Formatting a standalone dm-integrity device in userspace: what
// `integritysetup format` and the kernel write together (the zeroed
// superblock area, the kernel's superblock and clean journal), and then,
// instead of cryptsetup's pass that writes zeros through the whole mapping
// to make every tag valid, the tags of all-zero blocks computed directly and
// written to the tag areas. The data stays a hole where it already is one.
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/bytes.hpp>
#include <blkcrypt/integrity/geometry.hpp>
#include <blkcrypt/integrity/superblock.hpp>
#include <blkcrypt/integrity/tag_hash.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/status.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace blkcrypt::integrity {

// The tags of all-zero blocks, as TagHash computes them, but fast where the
// hash allows: crc32c and the kernel's crc32 are affine in the sector
// number that precedes the zeros, so a tag is a constant XOR eight table
// lookups (derived from, and checked against, TagHash itself). Other hashes
// digest a buffer of zeros.
class ZeroTags {
public:
    // `hash` must outlive the ZeroTags.
    static Result<ZeroTags> create(const TagHash& hash);
    // Tags of `blocks.size() / tag_size` consecutive zero blocks from
    // logical `sector` (512-byte units). Thread-safe.
    Status fill(uint64_t sector, Bytes tags) const;
    bool linear() const noexcept { return linear_; }

private:
    explicit ZeroTags(const TagHash& hash) : hash_(&hash) {}
    const TagHash* hash_;
    bool linear_ = false;
    uint64_t base_ = 0;                                  // tag of sector 0 (little-endian bytes)
    std::vector<std::array<uint64_t, 256>> table_;       // per byte of the sector number
};

struct FormatOptions {
    // Geometry and flags, as the table's arguments (params.internal_hash is
    // forced on: a standalone device always has one; a tag_size of 0 is the
    // digest size). params.salt is used only when random_salt is false.
    FormatParams params;
    bool random_salt = true;          // the kernel draws it; tests give one
    std::string internal_hash = "crc32c";  // kernel form: crc32c, hmac(sha256)
    ConstBytes key;                   // --integrity-key-file, for keyed hashes
    // journal_mac: (--journal-integrity), kernel form, and its key; empty: none.
    std::string journal_mac;
    ConstBytes journal_mac_key;
    // journal_crypt: (--journal-crypt), kernel form, and its key; empty: the
    // journal is written in the clear.
    std::string journal_crypt;
    ConstBytes journal_crypt_key;
    // false (--no-wipe): tags and data are left as the device holds them,
    // so reading a block never written fails, as with cryptsetup.
    bool compute_tags = true;
    uint32_t buffer_sectors = kDefaultBufferSectors;  // buffer_sectors: (a metadata device's tag area)
    unsigned threads = 0;             // 0: one per core
    // Data bytes covered so far, of the provided size; false stops (Interrupted).
    std::function<bool(uint64_t done, uint64_t total)> progress;
};

struct Formatted {
    Superblock superblock;
    Geometry geometry;
    bool linear_tags = false;  // the tags came from ZeroTags' fast path
};

// Formats `image` (the metadata device when `data` is given: superblock,
// journal and tags there, data on `data`). With compute_tags the data area
// is made to read as zeros (left alone where it is a hole, a hole punched
// or zeros written elsewhere) and every tag set to the tag of a zero block.
// The superblock is written last, after a flush, so an interrupted format
// leaves no superblock (the area is zeroed first). Invalid for parameters
// the kernel refuses or devices too small. A journal MAC gives each journal
// section its MAC and, with fix_hmac, the superblock its sb_mac, as the
// kernel writes them; journal encryption is not written here.
Result<Formatted> format(Registry& reg, BackingStore& image, BackingStore* data, const FormatOptions& o);

}  // namespace blkcrypt::integrity
