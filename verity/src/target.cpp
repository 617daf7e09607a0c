#include <blkcrypt/verity/fec.hpp>
#include <blkcrypt/verity/target.hpp>

#include "hash_block_cache.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>

namespace blkcrypt::verity {

struct VerityTarget::Impl {
    VerityTable table;
    TreeGeometry g;
    std::shared_ptr<BlockHasher> hasher;
    std::shared_ptr<dm::BackingStore> data, hash;
    VerityTargetOptions opts;
    HashBlockCache cache;
    std::vector<uint8_t> zero_digest;           // with ignore_zero_blocks
    std::vector<std::atomic<uint64_t>> checked;  // with check_at_most_once

    std::mutex ctx_mu;
    std::vector<std::unique_ptr<HashContext>> idle;  // contexts not in use

    std::atomic<uint64_t> data_verified{0}, hash_verified{0}, zero_skipped{0}, corruptions{0}, fec_corrected{0};
    std::optional<FecGeometry> fec;

    bool same_digest(HashContext& ctx, ConstBytes block, const uint8_t* want) {
        uint8_t d[64];
        return ctx.hash_one(block, Bytes(d, g.digest_size)) == Status::Ok && std::memcmp(d, want, g.digest_size) == 0;
    }

    // Data blocks of message block m's group whose stored content fails its
    // hash (m itself first): the kernel's erasures. Not searched from inside
    // another correction (the kernel bounds that recursion too).
    std::vector<uint64_t> failing_in_group(HashContext& ctx, uint64_t m) {
        std::vector<uint64_t> bad{m};
        static thread_local int depth = 0;
        if (depth > 0) return bad;
        ++depth;
        const uint32_t bs = table.params.data_block_size;
        std::vector<uint8_t> block(bs);
        for (uint64_t i = 0; i < fec->rsn && bad.size() < fec->roots; ++i) {
            const uint64_t b = i * fec->rounds + fec->round_of(m);
            if (b >= fec->data_blocks) break;
            if (b == m || data->read(b * bs, block) != Status::Ok) continue;
            const uint8_t* want = table.root_hash.data();
            HashBlockCache::Block leaf;
            if (g.levels() > 0) {
                auto l = hash_block(ctx, 0, b >> g.bits);
                if (!l) continue;
                leaf = *l;
                want = leaf->data() + (b & (g.hashes_per_block - 1)) * g.slot_size;
            }
            if (!same_digest(ctx, block, want)) bad.push_back(b);
        }
        --depth;
        return bad;
    }

    // Rebuilds message block m from the FEC data into out when the result
    // matches `want`: without erasures first, then with them.
    bool fec_fix(HashContext& ctx, uint64_t m, const uint8_t* want, Bytes out) {
        if (!fec || m == UINT64_MAX) return false;
        std::vector<uint8_t> tmp(out.size());
        auto r = fec_correct_block(*fec, *data, *hash, *fec_dev, m, tmp);
        if (!(r.ok() && same_digest(ctx, tmp, want))) {
            const auto bad = failing_in_group(ctx, m);
            r = fec_correct_block(*fec, *data, *hash, *fec_dev, m, tmp, bad);
            if (!(r.ok() && same_digest(ctx, tmp, want))) return false;
        }
        std::copy(tmp.begin(), tmp.end(), out.begin());
        ++fec_corrected;
        return true;
    }
    std::shared_ptr<BackingStore> fec_dev;

    Impl(VerityTable t, TreeGeometry geo, std::shared_ptr<BlockHasher> h,
         std::shared_ptr<dm::BackingStore> d, std::shared_ptr<dm::BackingStore> hs, VerityTargetOptions o)
        : table(std::move(t)), g(std::move(geo)), hasher(std::move(h)), data(std::move(d)),
          hash(std::move(hs)), opts(std::move(o)), cache(opts.cache_blocks) {}

    // A hashing context for one read; give_back() makes it reusable.
    Result<std::unique_ptr<HashContext>> take_context() {
        {
            std::lock_guard lk(ctx_mu);
            if (!idle.empty()) {
                auto c = std::move(idle.back());
                idle.pop_back();
                return c;
            }
        }
        return hasher->new_context();
    }
    void give_back(std::unique_ptr<HashContext> c) {
        std::lock_guard lk(ctx_mu);
        idle.push_back(std::move(c));
    }

    // Returns true when the read may go on (the corruption is ignored).
    bool corrupt(const Corruption& c) {
        ++corruptions;
        if (opts.log) opts.log(c);
        return table.on_corruption == CorruptionMode::Ignore;
    }

    // Hash block `index` of tree level `level`, verified up to the root.
    Result<HashBlockCache::Block> hash_block(HashContext& ctx, unsigned level, uint64_t index) {
        const uint64_t key = uint64_t{level} << 58 | index;
        if (auto b = cache.find(key)) return b;
        const uint32_t hbs = table.params.hash_block_size;
        const uint64_t block_no = g.level_start[level] + index;
        auto buf = std::make_shared<std::vector<uint8_t>>(hbs);
        if (hash->read(block_no * hbs, *buf) != Status::Ok)
            return make_error(Status::IoError, "cannot read hash block " + std::to_string(block_no));
        uint8_t digest[64];
        if (Status s = ctx.hash_one(*buf, Bytes(digest, g.digest_size)); s != Status::Ok)
            return make_error(s, "hashing failed");
        const uint8_t* want = table.root_hash.data();
        HashBlockCache::Block parent;
        if (level + 1 < g.levels()) {
            auto p = hash_block(ctx, level + 1, index >> g.bits);
            if (!p) return p;
            parent = *p;
            want = parent->data() + (index & (g.hashes_per_block - 1)) * g.slot_size;
        }
        if (std::memcmp(digest, want, g.digest_size) != 0 &&
            !fec_fix(ctx, fec ? fec_message_block_of_hash(*fec, block_no) : UINT64_MAX, want, *buf)) {
            const auto kind = level + 1 < g.levels() ? Corruption::HashBlock : Corruption::RootHash;
            if (!corrupt({kind, block_no, level}))
                return make_error(Status::Corrupt, "hash block " + std::to_string(block_no) + " is corrupted");
            return HashBlockCache::Block(buf);  // ignored: used, never cached as verified
        }
        ++hash_verified;
        cache.insert(key, buf);
        return HashBlockCache::Block(buf);
    }

    Status read(uint64_t offset, Bytes out) {
        const uint32_t dbs = table.params.data_block_size;
        if (offset % dbs || out.size() % dbs) return Status::Invalid;
        if (offset > size() || out.size() > size() - offset) return Status::IoError;
        if (data->read(offset, out) != Status::Ok) return Status::IoError;
        auto ctx = take_context();
        if (!ctx) return ctx.status();
        const Status s = verify_blocks(**ctx, offset / dbs, out);
        give_back(std::move(*ctx));
        return s;
    }

    uint64_t size() const noexcept {
        return table.length ? table.length * 512 : table.params.data_blocks * table.params.data_block_size;
    }

    bool already_checked(uint64_t block) const {
        return table.check_at_most_once && (checked[block / 64].load() >> (block % 64) & 1);
    }

    // Verifies the data blocks in buf (starting at block `first`), in batches
    // so the hasher can interleave or queue them.
    Status verify_blocks(HashContext& ctx, uint64_t first, Bytes buf) {
        constexpr std::size_t kBatch = 16;
        const uint32_t dbs = table.params.data_block_size;
        const std::size_t n = buf.size() / dbs;
        for (std::size_t b = 0; b < n; b += kBatch) {
            const std::size_t m = std::min(kBatch, n - b);
            ConstBytes in[kBatch];
            Bytes out[kBatch], dst[kBatch];
            const uint8_t* want[kBatch];
            uint64_t blk[kBatch];
            uint8_t digests[kBatch][64];
            std::size_t k = 0;
            HashBlockCache::Block leaf_keep[kBatch];
            for (std::size_t i = 0; i < m; ++i) {
                const uint64_t block = first + b + i;
                if (already_checked(block)) continue;
                const uint8_t* expected = table.root_hash.data();
                if (g.levels() > 0) {
                    auto leaf = hash_block(ctx, 0, block >> g.bits);
                    if (!leaf) return leaf.status();
                    leaf_keep[k] = *leaf;
                    expected = leaf_keep[k]->data() + (block & (g.hashes_per_block - 1)) * g.slot_size;
                }
                Bytes data = buf.subspan((b + i) * dbs, dbs);
                if (!zero_digest.empty() && std::memcmp(expected, zero_digest.data(), g.digest_size) == 0) {
                    std::fill(data.begin(), data.end(), 0);
                    ++zero_skipped;
                    continue;
                }
                in[k] = data;
                dst[k] = data;
                out[k] = Bytes(digests[k], g.digest_size);
                want[k] = expected;
                blk[k] = block;
                ++k;
            }
            if (k == 0) continue;
            if (Status s = ctx.hash(in, out, k); s != Status::Ok) return s;
            for (std::size_t i = 0; i < k; ++i) {
                if (std::memcmp(digests[i], want[i], g.digest_size) != 0 && !fec_fix(ctx, blk[i], want[i], dst[i])) {
                    if (!corrupt({Corruption::DataBlock, blk[i], 0})) return Status::Corrupt;
                    continue;
                }
                ++data_verified;
                if (table.check_at_most_once) checked[blk[i] / 64].fetch_or(uint64_t{1} << (blk[i] % 64));
            }
        }
        return Status::Ok;
    }
};

Result<std::unique_ptr<VerityTarget>> VerityTarget::create(Registry& reg, const VerityTable& table,
                                                           std::shared_ptr<dm::BackingStore> data,
                                                           std::shared_ptr<dm::BackingStore> hash,
                                                           VerityTargetOptions opts) {
    const VerityParams& p = table.params;
    const auto place = p.hash_type == 1 ? SaltPlacement::Before : SaltPlacement::After;
    auto hasher = BlockHasher::create(reg, p.hash_name, p.salt, place, opts.mode);
    if (!hasher) return hasher.error();
    VerityParams geo_params = p;
    geo_params.superblock = false;
    geo_params.hash_offset = table.hash_start_block * p.hash_block_size;
    auto g = compute_geometry(geo_params, static_cast<uint32_t>((*hasher)->digest_size()));
    if (!g) return g.error();
    if (g->digest_size > 64) return make_error(Status::Invalid, "digests over 64 bytes are not supported");
    if (table.root_hash.size() != g->digest_size)
        return make_error(Status::Invalid, "the root digest has " + std::to_string(table.root_hash.size()) +
                                               " bytes; " + p.hash_name + " gives " +
                                               std::to_string(g->digest_size));
    if (data->size() < p.data_blocks * p.data_block_size)
        return make_error(Status::Invalid, "the data device is smaller than " +
                                               std::to_string(p.data_blocks) + " blocks");
    if (hash->size() < g->hash_device_size(geo_params))
        return make_error(Status::Invalid, "the hash device is too small for the tree (" +
                                               std::to_string(g->hash_device_size(geo_params)) + " bytes)");
    auto impl = std::make_unique<Impl>(table, std::move(*g), std::move(*hasher), std::move(data),
                                       std::move(hash), std::move(opts));
    if (table.ignore_zero_blocks) {
        auto ctx = impl->hasher->new_context();
        if (!ctx) return ctx.error();
        const std::vector<uint8_t> zeros(p.data_block_size);
        impl->zero_digest.resize(impl->g.digest_size);
        if (Status s = (*ctx)->hash_one(zeros, impl->zero_digest); s != Status::Ok)
            return make_error(s, "hashing the zero block failed");
    }
    if (!table.fec.device.empty()) {
        if (!impl->opts.fec_device)
            return make_error(Status::Invalid, "the table uses FEC: the FEC device must be given");
        auto f = fec_geometry(geo_params, impl->g, table.fec.roots, table.fec.blocks,
                              table.fec.start * p.data_block_size);
        if (!f) return f.error();
        if (impl->opts.fec_device->size() < f->offset + f->parity_bytes())
            return make_error(Status::Invalid, "the FEC device is too small: the parity needs " +
                                                   std::to_string(f->offset + f->parity_bytes()) + " bytes");
        impl->fec = *f;
        impl->fec_dev = impl->opts.fec_device;
    }
    if (table.check_at_most_once)
        impl->checked = std::vector<std::atomic<uint64_t>>((p.data_blocks + 63) / 64);
    return std::unique_ptr<VerityTarget>(new VerityTarget(std::move(impl)));
}

VerityTarget::VerityTarget(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VerityTarget::~VerityTarget() = default;

uint64_t VerityTarget::size() const noexcept { return impl_->size(); }
uint32_t VerityTarget::block_size() const noexcept { return impl_->table.params.data_block_size; }
Status VerityTarget::read(uint64_t offset, Bytes out) { return impl_->read(offset, out); }
char VerityTarget::status_char() const noexcept { return impl_->corruptions.load() ? 'C' : 'V'; }
const std::string& VerityTarget::driver() const noexcept { return impl_->hasher->driver(); }

TargetStats VerityTarget::stats() const noexcept {
    return {impl_->data_verified.load(), impl_->hash_verified.load(), impl_->zero_skipped.load(),
            impl_->corruptions.load(), impl_->fec_corrected.load()};
}

}  // namespace blkcrypt::verity
