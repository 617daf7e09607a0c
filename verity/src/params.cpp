#include <blkcrypt/verity/params.hpp>

#include <bit>

namespace blkcrypt::verity {

namespace {

bool block_size_ok(uint32_t s) { return s >= 512 && s <= 512 * 1024 && std::has_single_bit(s); }

Error invalid(std::string msg) { return make_error(Status::Invalid, std::move(msg)); }

}  // namespace

Result<void> check_params(const VerityParams& p) {
    if (p.hash_type > 1)
        return invalid("hash format " + std::to_string(p.hash_type) + " is not 0 or 1");
    if (!block_size_ok(p.data_block_size))
        return invalid("data block size " + std::to_string(p.data_block_size) +
                       " is not a power of two between 512 and 524288");
    if (!block_size_ok(p.hash_block_size))
        return invalid("hash block size " + std::to_string(p.hash_block_size) +
                       " is not a power of two between 512 and 524288");
    if (p.salt.size() > 256)
        return invalid("salt of " + std::to_string(p.salt.size()) + " bytes (at most 256)");
    if (p.hash_offset % 512)
        return invalid("hash offset " + std::to_string(p.hash_offset) +
                       " is not a multiple of 512");
    if (p.data_blocks == 0) return invalid("no data blocks to protect");
    if (p.data_blocks > (UINT64_MAX / p.data_block_size))
        return invalid("data block count overflows");
    return {};
}

uint64_t TreeGeometry::total_hash_blocks() const noexcept {
    uint64_t n = 0;
    for (uint64_t b : level_blocks) n += b;
    return n;
}

uint64_t TreeGeometry::hash_device_size(const VerityParams& p) const noexcept {
    return (hash_start_block + total_hash_blocks()) * p.hash_block_size;
}

Result<TreeGeometry> compute_geometry(const VerityParams& p, uint32_t digest_size) {
    if (auto ok = check_params(p); !ok) return ok.error();
    if (digest_size == 0 || digest_size > p.hash_block_size / 2)
        return invalid("a " + std::to_string(digest_size) + "-byte digest does not fit twice in a " +
                       std::to_string(p.hash_block_size) + "-byte hash block");
    // As the kernel's verity_ctr: no block number or byte size of the hash
    // device may wrap (a wrapped size would pass for a small device).
    if (p.hash_offset > UINT64_MAX - 512 - p.hash_block_size) return invalid("hash offset overflows");
    TreeGeometry g;
    g.digest_size = digest_size;
    g.slot_size = p.hash_type == 1 ? std::bit_ceil(digest_size) : digest_size;
    g.hashes_per_block = std::bit_floor(p.hash_block_size / digest_size);
    g.bits = static_cast<uint32_t>(std::countr_zero(g.hashes_per_block));
    g.hash_start_block = p.superblock
                             ? (p.hash_offset + 512 + p.hash_block_size - 1) / p.hash_block_size
                             : p.hash_offset / p.hash_block_size;

    // veritysetup: the smallest level count L with (data_blocks-1) >> (L*bits) == 0.
    unsigned levels = 0;
    while (levels * g.bits < 64 && ((p.data_blocks - 1) >> (levels * g.bits)) != 0) ++levels;
    if (levels > 63) return invalid("hash tree too deep");
    for (unsigned i = 0; i < levels; ++i) {
        const unsigned shift = (i + 1) * g.bits;
        const uint64_t n = shift >= 64 ? 1 : ((p.data_blocks - 1) >> shift) + 1;
        g.level_blocks.push_back(n);
    }
    // Stored top level first, leaves last.
    g.level_start.resize(levels);
    uint64_t next = g.hash_start_block;
    for (unsigned i = levels; i-- > 0;) {
        g.level_start[i] = next;
        if (g.level_blocks[i] > UINT64_MAX - next) return invalid("hash device offset overflows");
        next += g.level_blocks[i];
    }
    if (next > UINT64_MAX / p.hash_block_size) return invalid("hash device size overflows");
    return g;
}

}  // namespace blkcrypt::verity
