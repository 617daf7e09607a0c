// The filesystem superblock probe (luks/fs_probe.hpp) over the start of an
// untrusted plaintext image: it must never read past the input, and a block
// size it reports is one a filesystem of that type can have.
#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/luks/fs_probe.hpp>

#include <cstdlib>
#include <cstring>

using namespace blkcrypt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    auto fs = luks::fs_block_size(ConstBytes(data, size));
    if (fs && (fs->block_size < 512 || fs->block_size > 65536 || (fs->block_size & (fs->block_size - 1)) ||
               fs->type.empty()))
        std::abort();
    // The store path reads at most kFsProbeBytes and agrees with the bytes.
    MemoryStore store(size);
    if (size) std::memcpy(store.data().data(), data, size);
    auto again = luks::probe_fs_block_size(store);
    if (!again) std::abort();
    const bool same = size <= luks::kFsProbeBytes
                          ? (again->has_value() == fs.has_value() &&
                             (!fs || ((*again)->type == fs->type && (*again)->block_size == fs->block_size)))
                          : true;
    if (!same) std::abort();
    return 0;
}
