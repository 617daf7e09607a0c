// verity_verify: dm-verity in memory. Format a hash tree over a 64-block data
// image (as `veritysetup format`), verify it against the root hash (as
// `veritysetup verify`), corrupt one byte and see the block named, then read
// through the dm-verity read path (VerityTarget), which checks every block.
#include <blkcrypt/registry.hpp>
#include <blkcrypt/verity/table.hpp>
#include <blkcrypt/verity/target.hpp>
#include <blkcrypt/verity/tree.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

using namespace blkcrypt;
using namespace blkcrypt::verity;

int main() {
    Registry reg;
    if (auto r = register_defaults(reg); !r) {
        std::fprintf(stderr, "%s\n", r.error().message.c_str());
        return 1;
    }

    VerityParams p;  // sha256, format 1, 4 KiB blocks, superblock at offset 0
    p.data_blocks = 64;
    p.salt = {0xde, 0xad, 0xbe, 0xef};
    auto data = std::make_shared<dm::MemoryStore>(p.data_blocks * p.data_block_size);
    for (std::size_t i = 0; i < data->data().size(); ++i) data->data()[i] = uint8_t(i * 31 / 4096);

    // The geometry says how big the hash device must be.
    auto geo = plan_tree(reg, p);
    if (!geo) return 1;
    auto hash = std::make_shared<dm::MemoryStore>(geo->hash_device_size(p));
    auto fmt = format_tree(reg, p, *data, *hash);
    if (!fmt) {
        std::fprintf(stderr, "format: %s\n", fmt.error().message.c_str());
        return 1;
    }
    std::printf("root hash ");
    for (uint8_t b : fmt->root_hash) std::printf("%02x", b);
    std::printf(" (%s, %zu levels)\n", fmt->driver.c_str(), fmt->geometry.levels());

    auto good = verify_tree(reg, fmt->params, fmt->root_hash, *data, *hash);
    if (!good || !good->ok()) return 1;
    std::printf("verify: ok\n");

    // Flip one bit in data block 10: verify names that block.
    const uint64_t bad_block = 10;
    data->data()[bad_block * p.data_block_size + 123] ^= 0x01;
    auto bad = verify_tree(reg, fmt->params, fmt->root_hash, *data, *hash);
    if (!bad || bad->ok()) return 1;
    const Corruption& c = bad->corruptions.front();
    std::printf("verify after tamper: %zu corruption(s), first: %s block %llu\n",
                bad->corruptions.size(), c.kind == Corruption::DataBlock ? "data" : "hash",
                static_cast<unsigned long long>(c.block));
    if (c.kind != Corruption::DataBlock || c.block != bad_block) return 1;

    // The read path, from the table cryptsetup would load.
    VerityTable table = make_verity_table(fmt->params, fmt->geometry, fmt->root_hash, "data", "hash");
    auto target = VerityTarget::create(reg, table, data, hash);
    if (!target) {
        std::fprintf(stderr, "target: %s\n", target.error().message.c_str());
        return 1;
    }
    std::vector<uint8_t> block((*target)->block_size());
    Status s3 = (*target)->read(3 * block.size(), block);  // an intact block
    const bool same = s3 == Status::Ok &&
                      std::equal(block.begin(), block.end(), data->data().begin() + 3 * block.size());
    Status s10 = (*target)->read(bad_block * block.size(), block);  // the tampered one
    std::printf("read block 3: %s%s; read block %llu: %s; status %c\n", to_string(s3),
                same ? " (matches)" : "", static_cast<unsigned long long>(bad_block),
                to_string(s10), (*target)->status_char());
    return same && s10 == Status::Corrupt ? 0 : 1;
}
