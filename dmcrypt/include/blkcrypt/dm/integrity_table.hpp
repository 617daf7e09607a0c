// The arguments of an `integrity` table line, as dm_integrity_ctr
// (drivers/md/dm-integrity.c) takes them:
//   integrity <dev> <offset> <tag_size> <mode> [<#opts> <opts>...]
// mode J (journal), D (direct), B (bitmap) or R (recovery); options
// journal_sectors:, interleave_sectors:, buffer_sectors:, journal_watermark:,
// commit_time:, meta_device:, block_size:, sectors_per_bit:,
// bitmap_flush_interval:, internal_hash:ALG[:HEXKEY], allow_discards,
// fix_padding, fix_hmac, legacy_recalculate, recalculate, reset_recalculate,
// journal_crypt:ALG[:HEXKEY], journal_mac:ALG[:HEXKEY].
#pragma once

#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/status.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace blkcrypt::dm {

struct IntegrityTable {
    std::string device;
    uint64_t offset = 0;     // sectors: where the superblock is
    uint32_t tag_size = 0;   // 0: the internal hash's digest size
    char mode = 'J';
    std::optional<uint32_t> journal_sectors, interleave_sectors, buffer_sectors, journal_watermark, commit_time;
    std::optional<uint32_t> block_size, bitmap_flush_interval;
    std::optional<uint64_t> sectors_per_bit;
    std::string meta_device;     // empty: none
    std::string internal_hash;   // kernel name; empty: tags from the target above
    SecureBuffer internal_hash_key;
    // journal_crypt:/journal_mac: algorithms (kernel names) and their keys.
    std::string journal_crypt, journal_mac;
    SecureBuffer journal_crypt_key, journal_mac_key;
    bool allow_discards = false, fix_padding = false, fix_hmac = false, legacy_recalculate = false;
    bool recalculate = false, reset_recalculate = false;

    // The arguments after "integrity", options in the order the kernel's
    // status prints them (`dmsetup table`); keys as zeros unless show_key.
    std::string args(bool show_key) const;
};

// Parses the words after "integrity". Errors use the kernel's wording
// ("Invalid mode (expecting J, B, D, R)", "Invalid argument") and never
// contain key material.
Result<IntegrityTable> parse_integrity_args(std::string_view args);

}  // namespace blkcrypt::dm
