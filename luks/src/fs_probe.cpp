// See <blkcrypt/luks/fs_probe.hpp>. The superblock fields and the checks
// that tell a real superblock from stray bytes follow libblkid's probes
// (util-linux libblkid/src/superblocks/ext.c, xfs.c, btrfs.c).
#include <blkcrypt/luks/fs_probe.hpp>

#include <blkcrypt/internal/bytes_util.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

namespace blkcrypt::luks {

namespace {

bool pow2_in(uint32_t v, uint32_t lo, uint32_t hi) { return v >= lo && v <= hi && (v & (v - 1)) == 0; }

uint32_t log2_of(uint32_t v) {
    uint32_t n = 0;
    while (v > 1) v >>= 1, ++n;
    return n;
}

// ext2/3/4 and an external ext3 journal: the superblock at 1 KiB.
std::optional<FsBlockSize> ext(ConstBytes b) {
    constexpr std::size_t sb = 1024;
    if (b.size() < sb + 1024) return std::nullopt;
    const uint8_t* p = b.data() + sb;
    if (get_le16(p + 56) != 0xEF53) return std::nullopt;
    const uint32_t log = get_le32(p + 24);
    if (log > 6) return std::nullopt;  // above 64 KiB: no ext filesystem
    const uint32_t compat = get_le32(p + 92), incompat = get_le32(p + 96), ro = get_le32(p + 100);
    const uint32_t flags = get_le32(p + 0x160);
    constexpr uint32_t kHasJournal = 0x4, kJournalDev = 0x8, kTestFs = 0x4;
    constexpr uint32_t kRoSupp = 0x1 | 0x2 | 0x4;            // sparse_super, large_file, btree_dir
    constexpr uint32_t kExt2Incompat = 0x2 | 0x10;           // filetype, meta_bg
    constexpr uint32_t kExt3Incompat = 0x2 | 0x4 | 0x10;     // filetype, recover, meta_bg
    std::string type;
    if (incompat & kJournalDev) type = "jbd";
    else if (!(compat & kHasJournal) && !(ro & ~kRoSupp) && !(incompat & ~kExt2Incompat)) type = "ext2";
    else if ((compat & kHasJournal) && !(ro & ~kRoSupp) && !(incompat & ~kExt3Incompat)) type = "ext3";
    else type = (flags & kTestFs) ? "ext4dev" : "ext4";
    return FsBlockSize{type, 1024u << log};
}

// XFS: the superblock at 0, big-endian; libblkid reports its sector size.
std::optional<FsBlockSize> xfs(ConstBytes b) {
    if (b.size() < 512) return std::nullopt;
    const uint8_t* p = b.data();
    if (std::memcmp(p, "XFSB", 4) != 0) return std::nullopt;
    const uint32_t block = get_be32(p + 4), agblocks = get_be32(p + 84), agcount = get_be32(p + 88);
    const uint32_t sect = get_be16(p + 102), inode = get_be16(p + 104);
    if (!pow2_in(block, 512, 65536) || !pow2_in(sect, 512, 32768) || sect > block) return std::nullopt;
    if (p[120] != log2_of(block) || p[121] != log2_of(sect)) return std::nullopt;
    if (!pow2_in(inode, 256, 2048) || agcount == 0 || agblocks == 0) return std::nullopt;
    return FsBlockSize{"xfs", sect};
}

// btrfs: the primary superblock at 64 KiB; libblkid reports its sector size.
std::optional<FsBlockSize> btrfs(ConstBytes b) {
    constexpr std::size_t sb = 0x10000;
    if (b.size() < sb + 0x1000) return std::nullopt;
    const uint8_t* p = b.data() + sb;
    if (std::memcmp(p + 64, "_BHRfS_M", 8) != 0) return std::nullopt;
    if (get_le64(p + 48) != sb) return std::nullopt;  // the copy says where it lives
    const uint32_t sect = get_le32(p + 0x90), node = get_le32(p + 0x94);
    if (!pow2_in(sect, 4096, 65536) || !pow2_in(node, sect, 65536)) return std::nullopt;
    return FsBlockSize{"btrfs", sect};
}

}  // namespace

std::optional<FsBlockSize> fs_block_size(ConstBytes head) {
    if (auto f = xfs(head)) return f;
    if (auto f = ext(head)) return f;
    return btrfs(head);
}

Result<std::optional<FsBlockSize>> probe_fs_block_size(BackingStore& image) {
    std::vector<uint8_t> head(static_cast<std::size_t>(std::min<uint64_t>(image.size(), kFsProbeBytes)));
    if (Status s = image.read(0, head); s != Status::Ok)
        return make_error(s, (image.name().empty() ? std::string("the input") : image.name()) +
                                 ": cannot read its first bytes for a filesystem superblock");
    return fs_block_size(head);
}

}  // namespace blkcrypt::luks
