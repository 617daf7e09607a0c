// fs-verity Merkle tree, descriptor and file digest (see fsverity.hpp and
// docs/fsverity.md). Leaves are hashed a chunk at a time, possibly on several
// threads; the tree is dm-verity's MerkleBuilder with fs-verity's layout, each
// finished block written to the sink at its final root-first offset.
#include <blkcrypt/verity/fsverity.hpp>

#include "block_stream.hpp"
#include "merkle_builder.hpp"
#include "parallel_hasher.hpp"

#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <exception>
#include <optional>
#include <thread>

namespace blkcrypt::verity {
namespace {

constexpr FsverityHashAlg kAlgs[] = {
    {"sha256", 1, 32, 64},
    {"sha512", 2, 64, 128},
};
constexpr uint32_t kMaxBlockSize = 1u << 30;  // fsverity digest refuses 2^31
constexpr std::size_t kChunk = 4u << 20;      // leaf bytes hashed per round
constexpr unsigned kMaxThreads = 64;

Error invalid(std::string msg) { return make_error(Status::Invalid, "fs-verity: " + std::move(msg)); }

void put_le(uint8_t* p, uint64_t v, int n) {
    for (int i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Blocks per level, leaves' parents first; empty for files of 0 or 1 block.
std::vector<uint64_t> level_blocks(uint64_t file_size, uint32_t bs, std::size_t ds) {
    const uint64_t hpb = bs / ds;
    std::vector<uint64_t> levels;
    for (uint64_t n = file_size / bs + (file_size % bs != 0); n > 1;) {
        n = n / hpb + (n % hpb != 0);
        levels.push_back(n);
    }
    return levels;
}

}  // namespace

const FsverityHashAlg* fsverity_find_hash(std::string_view name) noexcept {
    for (const auto& a : kAlgs)
        if (a.name == name) return &a;
    return nullptr;
}

Result<void> fsverity_check_params(const FsverityParams& p) {
    const FsverityHashAlg* alg = fsverity_find_hash(p.hash);
    if (!alg) return invalid("unknown hash algorithm '" + p.hash + "' (sha256 or sha512)");
    const std::string bs = std::to_string(p.block_size);
    if (!std::has_single_bit(p.block_size) || p.block_size > kMaxBlockSize)
        return invalid("block size " + bs + " is not a power of two up to 2^30");
    if (p.block_size < 2 * alg->digest_size)
        return invalid("block size " + bs + " is too small for " + p.hash + " (minimum " +
                       std::to_string(2 * alg->digest_size) + ")");
    if (p.salt.size() > kFsverityMaxSaltSize)
        return invalid("salt is " + std::to_string(p.salt.size()) + " bytes; at most 32 allowed");
    return {};
}

Result<uint64_t> fsverity_tree_size(const FsverityParams& p, uint64_t file_size) {
    if (auto r = fsverity_check_params(p); !r) return r.error();
    uint64_t blocks = 0;
    for (uint64_t n : level_blocks(file_size, p.block_size, fsverity_find_hash(p.hash)->digest_size))
        blocks += n;
    return blocks * p.block_size;
}

std::vector<uint8_t> fsverity_formatted_digest(const FsverityDigest& d) {
    std::vector<uint8_t> out(12 + d.digest.size());
    std::memcpy(out.data(), "FSVerity", 8);
    put_le(&out[8], d.alg ? d.alg->number : 0, 2);
    put_le(&out[10], d.digest.size(), 2);
    std::copy(d.digest.begin(), d.digest.end(), out.begin() + 12);
    return out;
}

struct FsverityBuilder::Impl {
    const FsverityHashAlg* alg;
    Shash shash;
    std::unique_ptr<ParallelHasher> leaves;
    FsverityParams params;
    uint64_t file_size;
    FsverityTreeSink sink;
    std::size_t bs, ds;
    std::vector<uint64_t> level_offset;  // byte offset of each level in the root-first tree
    uint64_t tree_size = 0;
    MerkleBuilder tree;
    std::vector<uint8_t> partial;  // a leaf block split across update() calls
    std::size_t partial_len = 0;
    std::vector<uint8_t> digests;  // leaf digests of one chunk
    uint64_t fed = 0;
    bool failed = false;

    Impl(const FsverityHashAlg* a, Shash h, std::unique_ptr<ParallelHasher> l, const FsverityParams& p,
         uint64_t size, FsverityTreeSink s)
        : alg(a), shash(std::move(h)), leaves(std::move(l)), params(p), file_size(size),
          sink(std::move(s)), bs(p.block_size), ds(a->digest_size),
          tree(layout(size), leaves->own_context(), [this](std::size_t level, uint64_t index, ConstBytes block) {
              return sink ? sink(level_offset[level] + index * bs, block) : Result<void>{};
          }) {}

    // fs-verity packs the digests and stores the levels root-first. Called
    // while `tree` is initialised: it fills the members declared before it.
    MerkleLayout layout(uint64_t size) {
        MerkleLayout m{bs, ds, ds, bs / ds, level_blocks(size, static_cast<uint32_t>(bs), ds)};
        level_offset.resize(m.level_blocks.size());
        for (std::size_t i = m.level_blocks.size(); i-- > 0;) {
            level_offset[i] = tree_size;
            tree_size += m.level_blocks[i] * bs;
        }
        return m;
    }

    std::size_t chunk_blocks() const { return std::max<std::size_t>(1, kChunk / bs); }

    Result<void> hash_leaves(ConstBytes blocks) {
        const std::size_t n = blocks.size() / bs;
        digests.resize(n * ds);
        const Status s = leaves->hash(blocks, bs, digests);
        if (s != Status::Ok) return make_error(s, std::string("fs-verity: hashing failed: ") + to_string(s));
        return tree.add_leaf_digests(digests);
    }

    Result<void> update(ConstBytes data) {
        if (data.size() > file_size - fed)
            return invalid("more data than the declared file size " + std::to_string(file_size));
        fed += data.size();
        if (partial_len > 0 && !data.empty()) {  // an empty span may be null: no memcpy
            const std::size_t take = std::min(bs - partial_len, data.size());
            std::memcpy(&partial[partial_len], data.data(), take);
            partial_len += take;
            data = data.subspan(take);
            if (partial_len < bs) return {};
            partial_len = 0;
            if (auto r = hash_leaves(partial); !r) return r;
        }
        const std::size_t step = chunk_blocks() * bs;
        while (data.size() >= bs) {
            const std::size_t take = std::min(step, data.size() / bs * bs);
            if (auto r = hash_leaves(data.first(take)); !r) return r;
            data = data.subspan(take);
        }
        if (!data.empty()) {
            if (partial.empty()) partial.resize(bs);
            std::memcpy(partial.data(), data.data(), data.size());
            partial_len = data.size();
        }
        return {};
    }

    Result<FsverityDigest> finish() {
        if (fed != file_size)
            return invalid("got " + std::to_string(fed) + " bytes of a " + std::to_string(file_size) +
                           "-byte file");
        if (partial_len > 0) {
            std::fill(partial.begin() + static_cast<std::ptrdiff_t>(partial_len), partial.end(), 0);
            partial_len = 0;
            if (auto r = hash_leaves(partial); !r) return r.error();
        }
        auto top = tree.finish();
        if (!top) return top.error();
        std::vector<uint8_t> root = std::move(*top);
        root.resize(ds);  // an empty file: all zero

        FsverityDigest out;
        out.alg = alg;
        out.root_hash = root;
        uint8_t* d = out.descriptor.data();
        d[0] = 1;  // version
        d[1] = alg->number;
        d[2] = static_cast<uint8_t>(std::countr_zero(static_cast<uint32_t>(bs)));
        d[3] = static_cast<uint8_t>(params.salt.size());
        put_le(d + 8, file_size, 8);
        std::copy(root.begin(), root.end(), d + 16);
        std::copy(params.salt.begin(), params.salt.end(), d + 80);
        out.digest.resize(ds);
        const Status s = shash.digest(out.descriptor, out.digest);
        if (s != Status::Ok) return make_error(s, std::string("fs-verity: hashing failed: ") + to_string(s));
        out.tree_size = tree_size;
        return out;
    }
};

FsverityBuilder::FsverityBuilder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FsverityBuilder::FsverityBuilder(FsverityBuilder&&) noexcept = default;
FsverityBuilder& FsverityBuilder::operator=(FsverityBuilder&&) noexcept = default;
FsverityBuilder::~FsverityBuilder() = default;

Result<FsverityBuilder> FsverityBuilder::create(Registry& reg, const FsverityParams& p,
                                                uint64_t file_size, FsverityTreeSink sink) {
    if (auto r = fsverity_check_params(p); !r) return r.error();
    const FsverityHashAlg* alg = fsverity_find_hash(p.hash);
    auto h = Shash::alloc(reg, alg->name);
    if (!h) return h.error();
    // The salt is zero-padded to the hash's input block, so the salted
    // state is a whole number of compressed blocks.
    std::vector<uint8_t> padded(p.salt);
    if (!padded.empty())
        padded.resize((padded.size() + alg->input_block_size - 1) / alg->input_block_size *
                      alg->input_block_size);
    unsigned threads = p.threads ? p.threads : std::max(1u, std::thread::hardware_concurrency());
    threads = std::min(threads, kMaxThreads);
    auto hasher = BlockHasher::create(reg, alg->name, padded, SaltPlacement::Before, HashMode::Sync);
    if (!hasher) return hasher.error();
    auto leaves = ParallelHasher::create(*hasher, threads);
    if (!leaves) return leaves.error();
    return FsverityBuilder(std::make_unique<Impl>(alg, std::move(h).value(), std::move(leaves).value(),
                                                  p, file_size, std::move(sink)));
}

Result<void> FsverityBuilder::update(ConstBytes data) {
    if (impl_->failed) return make_error(Status::Invalid, "fs-verity: builder used after a failure");
    auto r = impl_->update(data);
    impl_->failed = !r;
    return r;
}

Result<FsverityDigest> FsverityBuilder::finish() {
    if (impl_->failed) return make_error(Status::Invalid, "fs-verity: builder used after a failure");
    impl_->failed = true;  // single use
    return impl_->finish();
}

std::size_t FsverityBuilder::preferred_chunk() const noexcept { return impl_->chunk_blocks() * impl_->bs; }

Result<FsverityDigest> fsverity_compute(Registry& reg, const FsverityParams& p, uint64_t file_size,
                                        const FsverityReadFn& read, FsverityTreeSink sink) {
    auto b = FsverityBuilder::create(reg, p, file_size, std::move(sink));
    if (!b) return b.error();
    std::vector<uint8_t> buf(static_cast<std::size_t>(std::min<uint64_t>(b->preferred_chunk(), file_size)));
    for (uint64_t done = 0; done < file_size;) {
        const auto n = static_cast<std::size_t>(std::min<uint64_t>(buf.size(), file_size - done));
        if (auto r = read({buf.data(), n}); !r) return r.error();
        if (auto r = b->update({buf.data(), n}); !r) return r.error();
        done += n;
    }
    return b->finish();
}

namespace {

// What a store that changed size means here, in this API's words.
Error size_changed(int fd, uint64_t size) {
    struct stat st {};
    if (::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) > size)
        return make_error(Status::IoError, "fs-verity: the file grew while being read");
    return make_error(Status::IoError, "fs-verity: the file shrank while being read");
}

}  // namespace

Result<FsverityDigest> fsverity_compute_fd(Registry& reg, const FsverityParams& p, int fd,
                                           FsverityTreeSink sink) {
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        return make_error(Status::IoError, std::string("fs-verity: fstat: ") + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) return make_error(Status::IoError, "fs-verity: is a directory");
    if (!S_ISREG(st.st_mode)) return make_error(Status::Invalid, "fs-verity: not a regular file");
    const auto size = static_cast<uint64_t>(st.st_size);
    auto b = FsverityBuilder::create(reg, p, size, std::move(sink));
    if (!b) return b.error();
    // The same reader as dm-verity's (readahead, in-place hashing of the
    // mapping, a file truncated meanwhile reads zeros and is reported); the
    // leaf digests go straight into the builder's tree.
    const int own = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0) return make_error(Status::IoError, std::string("fs-verity: dup: ") + std::strerror(errno));
    auto store = dm::adopt_file_store(own, size, "");
    FsverityBuilder::Impl& impl = *b->impl_;
    auto r = hash_blocks(*impl.leaves, *store, 0, p.block_size, size, p.progress,
                         [&](uint64_t, uint64_t, ConstBytes digests) { return impl.tree.add_leaf_digests(digests); });
    if (!r) return store->changed() ? size_changed(fd, size) : r.error();
    impl.fed = size;
    return b->finish();
}

}  // namespace blkcrypt::verity
