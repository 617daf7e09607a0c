// The tags dm-integrity computes itself (internal_hash:, standalone
// integritysetup): integrity_sector_checksum in drivers/md/dm-integrity.c.
// tag = digest(salt if fix_hmac ‖ le64(sector) ‖ block), cut to the tag
// size, or zero-padded when the digest is shorter. sector is in 512-byte
// units of the device the target provides.
#pragma once

#include <blkcrypt/bytes.hpp>
#include <blkcrypt/integrity/superblock.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>
#include <blkcrypt/status.hpp>

#include <cstdint>
#include <optional>
#include <string_view>

namespace blkcrypt::integrity {

// The integritysetup name (-I): "crc32c", "crc32", "sha1", "sha256",
// "hmac-sha256"... as the kernel's crypto API name ("hmac(sha256)").
// Names already in that form are returned as they are.
std::string kernel_hash_name(std::string_view integritysetup_name);

class TagHash {
public:
    // alg in the kernel's form (internal_hash:crc32c, hmac(sha256)); key
    // only for keyed hashes (required by them, refused by the others).
    // The salt is mixed in when sb has fix_hmac. NotFound for an unknown
    // algorithm; Invalid for a key mismatch.
    static Result<TagHash> create(Registry& reg, std::string_view alg, ConstBytes key, const Superblock& sb);

    uint32_t tag_size() const noexcept { return tag_size_; }
    uint32_t block_size() const noexcept { return block_size_; }
    std::size_t digest_size() const noexcept { return shash_.digestsize(); }
    std::string_view alg_name() const noexcept { return shash_.info().name; }

    // The tags of consecutive blocks starting at logical `sector`:
    // blocks.size() a multiple of block_size(), tags (blocks / block_size)
    // * tag_size() bytes. Thread-safe.
    Status compute(uint64_t sector, ConstBytes blocks, Bytes tags) const;

private:
    TagHash(Shash shash, uint32_t tag_size, uint32_t block_size, std::optional<std::array<uint8_t, kSaltSize>> salt);
    Shash shash_;
    uint32_t tag_size_ = 0, block_size_ = 0;
    std::optional<std::array<uint8_t, kSaltSize>> salt_;
};

}  // namespace blkcrypt::integrity
