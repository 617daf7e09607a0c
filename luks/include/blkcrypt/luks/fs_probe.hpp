// The filesystem superblock at the start of a plaintext image and its block
// size, found the way libblkid finds them for cryptsetup's check before
// encryption (src/utils_blockdev.c tools_superblock_block_size, called by
// reencrypt --encrypt): a filesystem whose block size is below the
// encryption sector size cannot be mounted from the encrypted device.
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/status.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace blkcrypt::luks {

struct FsBlockSize {
    std::string type;     // libblkid's TYPE: "ext2", "ext3", "ext4", "ext4dev", "jbd", "xfs", "btrfs"
    uint32_t block_size;  // libblkid's BLOCK_SIZE (XFS: its sector size; btrfs: its sector size)
};

// How many bytes from the start the probe looks at (btrfs: 64 KiB + 4 KiB).
inline constexpr std::size_t kFsProbeBytes = 0x11000;

// The superblock in `head` (the first bytes of the image; shorter is fine),
// or nullopt when none of the types above is there, whole and consistent.
std::optional<FsBlockSize> fs_block_size(ConstBytes head);

// The same over the first kFsProbeBytes of `image`; an I/O error as a value.
Result<std::optional<FsBlockSize>> probe_fs_block_size(BackingStore& image);

}  // namespace blkcrypt::luks
