// The filesystem superblock probe (luks/fs_probe.hpp) on the first bytes of
// filesystems made by mkfs.ext2/3/4, mkfs.xfs and mkfs.btrfs (the seeds of
// tests/fuzz/corpus/fs_probe): TYPE and BLOCK_SIZE as `blkid -p` printed
// them for the whole images; damaged or cut short, no superblock.
#include "paths.hpp"
#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/luks/fs_probe.hpp>

#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using namespace blkcrypt;

namespace {

std::vector<uint8_t> seed(const std::string& name) {
    std::ifstream f(std::string(testutil::kSourceDir) + "/tests/fuzz/corpus/fs_probe/" + name, std::ios::binary);
    REQUIRE(f);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("fs probe: ext2/3/4 XFS and btrfs as blkid reports them", "[luks][luks2]") {
    struct Case {
        const char* file;
        const char* type;
        uint32_t block_size;
        std::size_t magic_at;  // a byte of the magic, to damage
    };
    const Case cases[] = {
        {"ext2-1k", "ext2", 1024, 1080},  {"ext3-2k", "ext3", 2048, 1080}, {"ext4-1k", "ext4", 1024, 1080},
        {"ext4-4k", "ext4", 4096, 1080},  {"xfs-4096-sect512", "xfs", 512, 0}, {"btrfs-4k", "btrfs", 4096, 0x10040},
    };
    for (const Case& c : cases) {
        INFO(c.file);
        std::vector<uint8_t> b = seed(c.file);
        auto fs = luks::fs_block_size(b);
        REQUIRE(fs);
        CHECK(fs->type == c.type);
        CHECK(fs->block_size == c.block_size);
        // The same through a store, with zeros after the seed (a whole image).
        MemoryStore s(luks::kFsProbeBytes * 2);
        std::copy(b.begin(), b.end(), s.data().begin());
        auto viastore = luks::probe_fs_block_size(s);
        REQUIRE(viastore.ok());
        REQUIRE(viastore->has_value());
        CHECK((*viastore)->block_size == c.block_size);
        // Cut before the superblock ends, or the magic damaged: nothing.
        CHECK_FALSE(luks::fs_block_size(ConstBytes(b).first(c.magic_at + 8)));
        b[c.magic_at] ^= 0x20;
        CHECK_FALSE(luks::fs_block_size(b));
    }
    // An empty or short input is no filesystem, not an error.
    MemoryStore tiny(3);
    auto none = luks::probe_fs_block_size(tiny);
    REQUIRE(none.ok());
    CHECK_FALSE(none->has_value());
}
