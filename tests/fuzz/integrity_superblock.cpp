// The dm-integrity superblock decoder, then the kernel's geometry behind it:
// the input is a superblock area (its first 64 bytes the fields) followed by
// 16 bytes chosen as device sizes, so that open_geometry meets hostile
// superblocks on devices of every size. Decoding must refuse or round-trip;
// the geometry must refuse or place every tag and data sector inside the
// devices it was given.
#include <blkcrypt/integrity/geometry.hpp>
#include <blkcrypt/integrity/superblock.hpp>

#include <cstdlib>
#include <cstring>

using namespace blkcrypt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size < integrity::kSuperblockBytes) {
        if (integrity::decode_superblock(ConstBytes(data, size))) std::abort();  // short: refused
        return 0;
    }
    auto sb = integrity::decode_superblock(ConstBytes(data, integrity::kSuperblockBytes));
    if (!sb) return 0;
    // A decoded superblock encodes back to the same 64 bytes but its padding
    // (bytes 30-31 and 40-47, which the kernel writes as zeros), and the
    // dump text is built for any of them.
    const auto area = integrity::encode_superblock(*sb);
    uint8_t want[integrity::kSuperblockBytes];
    std::memcpy(want, data, sizeof want);
    std::memset(want + 30, 0, 2);
    std::memset(want + 40, 0, 8);
    if (area.size() != integrity::kSuperblockSectors * integrity::kSectorSize ||
        std::memcmp(area.data(), want, sizeof want) != 0)
        std::abort();
    if (integrity::dump_text(*sb, "IMAGE").find("Info for integrity device IMAGE.\n") != 0) std::abort();

    // Device sizes from the input's tail (a 32 MiB device without one):
    // a's low bit picks vast (up to 2^52 sectors) or small (up to 2^24);
    // b holds the start offset and, with bit 8, the metadata device's size.
    integrity::Devices dev;
    dev.data_sectors = 65536;
    if (size >= integrity::kSuperblockBytes + 16) {
        uint64_t a = 0, b = 0;
        std::memcpy(&a, data + size - 16, 8);
        std::memcpy(&b, data + size - 8, 8);
        dev.data_sectors = a >> (a & 1 ? 12 : 40);
        dev.start = b & 0xff;
        if (b & 0x100) dev.meta_sectors = b >> 16;
    }
    auto g = integrity::open_geometry(*sb, dev);
    if (!g) return 0;
    if (g->provided_data_sectors == 0) std::abort();
    const uint64_t last = (g->provided_data_sectors - 1) & ~uint64_t(sb->sectors_per_block() - 1);
    const uint64_t meta_bytes = (dev.meta_sectors ? *dev.meta_sectors : dev.data_sectors) * integrity::kSectorSize;
    if (g->data_offset(last) + integrity::kSectorSize > dev.data_sectors * integrity::kSectorSize) std::abort();
    if (g->tag_offset(last) + g->tag_size > meta_bytes) std::abort();
    if (g->tag_offset(0) < (dev.start + g->initial_sectors) * integrity::kSectorSize) std::abort();
    return 0;
}
