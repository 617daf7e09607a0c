// fs-verity Merkle tree, descriptor and file digest (see fsverity.hpp and
// docs/fsverity.md). Leaves are hashed a chunk at a time, possibly on several
// threads; each tree level keeps one partial block, written to the sink at its
// final root-first offset as soon as it is full.
#include <blkcrypt/verity/fsverity.hpp>

#include "parallel_hasher.hpp"

#include <blkcrypt/internal/mapped_file.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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
    struct Level {
        uint64_t offset = 0;  // byte offset of the level in the root-first tree
        uint64_t blocks = 0;  // how many blocks it will have
        uint64_t next = 0;    // index of the block being filled
        std::vector<uint8_t> buf;
        std::size_t fill = 0;
    };

    const FsverityHashAlg* alg;
    Shash shash;
    std::unique_ptr<ParallelHasher> leaves;
    FsverityParams params;
    uint64_t file_size;
    FsverityTreeSink sink;
    std::size_t bs, ds;
    std::vector<Level> levels;
    std::vector<uint8_t> partial;  // a leaf block split across update() calls
    std::size_t partial_len = 0;
    std::vector<uint8_t> digests;  // leaf digests of one chunk
    uint64_t fed = 0;
    std::vector<uint8_t> root;
    bool failed = false;

    Impl(const FsverityHashAlg* a, Shash h, std::unique_ptr<ParallelHasher> l, const FsverityParams& p,
         uint64_t size, FsverityTreeSink s)
        : alg(a), shash(std::move(h)), leaves(std::move(l)), params(p), file_size(size),
          sink(std::move(s)), bs(p.block_size), ds(a->digest_size), root(ds, 0) {
        const auto counts = level_blocks(size, p.block_size, ds);
        levels.resize(counts.size());
        uint64_t offset = 0;
        for (std::size_t i = counts.size(); i-- > 0;) {
            levels[i].offset = offset;
            levels[i].blocks = counts[i];
            offset += counts[i] * bs;
        }
    }

    std::size_t chunk_blocks() const { return std::max<std::size_t>(1, kChunk / bs); }

    Result<void> push(std::size_t li, const uint8_t* digest) {
        if (li == levels.size()) {  // the top: this is the root hash
            std::copy(digest, digest + ds, root.begin());
            return {};
        }
        Level& l = levels[li];
        if (l.buf.empty()) l.buf.assign(bs, 0);
        std::memcpy(&l.buf[l.fill], digest, ds);
        l.fill += ds;
        if (l.fill + ds > bs) return flush(li);
        return {};
    }

    // Hashes and emits the level's current block (zero-padded), then passes
    // its digest up.
    Result<void> flush(std::size_t li) {
        Level& l = levels[li];
        std::fill(l.buf.begin() + static_cast<std::ptrdiff_t>(l.fill), l.buf.end(), 0);
        uint8_t d[kFsverityMaxDigestSize];
        const Status s = leaves->own_context().hash_one(l.buf, {d, ds});
        if (s != Status::Ok) return make_error(s, std::string("fs-verity: hashing failed: ") + to_string(s));
        if (l.next >= l.blocks) return make_error(Status::Invalid, "fs-verity: tree level overflow");
        if (sink) {
            if (auto r = sink(l.offset + l.next * bs, l.buf); !r) return r;
        }
        ++l.next;
        l.fill = 0;
        return push(li + 1, d);
    }

    Result<void> hash_leaves(ConstBytes blocks) {
        const std::size_t n = blocks.size() / bs;
        digests.resize(n * ds);
        const Status s = leaves->hash(blocks, bs, digests);
        if (s != Status::Ok) return make_error(s, std::string("fs-verity: hashing failed: ") + to_string(s));
        for (std::size_t i = 0; i < n; ++i)
            if (auto r = push(0, &digests[i * ds]); !r) return r;
        return {};
    }

    Result<void> update(ConstBytes data) {
        if (data.size() > file_size - fed)
            return invalid("more data than the declared file size " + std::to_string(file_size));
        fed += data.size();
        if (partial_len > 0) {
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
        for (std::size_t i = 0; i < levels.size(); ++i)
            if (levels[i].fill > 0)
                if (auto r = flush(i); !r) return r.error();
        for (const Level& l : levels)
            if (l.next != l.blocks) return make_error(Status::Invalid, "fs-verity: incomplete tree level");

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
        for (const Level& l : levels) out.tree_size += l.blocks * bs;
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

Result<void> pread_exact(int fd, Bytes buf, uint64_t offset) {
    for (std::size_t got = 0; got < buf.size();) {
        const ssize_t n = ::pread(fd, buf.data() + got, buf.size() - got, static_cast<off_t>(offset + got));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return make_error(Status::IoError, std::string("fs-verity: read: ") + std::strerror(errno));
        if (n == 0) return make_error(Status::IoError, "fs-verity: the file shrank while being read");
        got += static_cast<std::size_t>(n);
    }
    return {};
}

}  // namespace

namespace {
// The digest, unless the file grew while it was read (then it would be wrong).
Result<FsverityDigest> finish_checked(FsverityBuilder& b, int fd, uint64_t size) {
    auto d = b.finish();
    if (!d) return d;
    uint8_t extra;
    if (::pread(fd, &extra, 1, static_cast<off_t>(size)) > 0)
        return make_error(Status::IoError, "fs-verity: the file grew while being read");
    struct stat st {};
    if (::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) < size)
        return make_error(Status::IoError, "fs-verity: the file shrank while being read");
    return d;
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
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);  // advice only; failure is harmless

    const auto chunk = static_cast<std::size_t>(std::min<uint64_t>(b->preferred_chunk(), size));
    // A mappable file is hashed in place, without copying it out of the page
    // cache; each hashed chunk is dropped from our resident memory again.
    // A file truncated meanwhile reads as zeros past its new end instead of
    // killing us (MappedFile); that is checked after every chunk.
    if (auto m = MappedFile::map(fd, size)) {
        const uint8_t* base = m->bytes().data();
        for (uint64_t off = 0; off < size; off += chunk) {
            const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(chunk, size - off));
            auto r = b->update({base + off, n});
            m->release(off, n);
            if (m->truncated()) return make_error(Status::IoError, "fs-verity: the file shrank while being read");
            if (!r) return r.error();
            if (p.progress && !p.progress(off + n, size)) return make_error(Status::Interrupted, "interrupted");
        }
        m.reset();
        return finish_checked(*b, fd, size);
    }
    // Otherwise two buffers: the next chunk is read on another thread while
    // this one is hashed, so I/O and hashing overlap.
    std::vector<uint8_t> bufs[2] = {std::vector<uint8_t>(chunk), std::vector<uint8_t>(chunk)};
    auto len_at = [&](uint64_t off) { return static_cast<std::size_t>(std::min<uint64_t>(chunk, size - off)); };
    if (auto r = pread_exact(fd, {bufs[0].data(), len_at(0)}, 0); !r) return r.error();
    for (uint64_t off = 0, cur = 0; off < size; cur ^= 1) {
        const std::size_t n = len_at(off);
        const uint64_t next = off + n;
        Bytes next_buf(bufs[cur ^ 1].data(), len_at(next));
        Result<void> read_result;
        std::thread reader;
        if (!next_buf.empty()) {
            try {
                reader = std::thread([&] { read_result = pread_exact(fd, next_buf, next); });
            } catch (const std::exception&) {
                read_result = pread_exact(fd, next_buf, next);  // no thread: read in turn
            }
        }
        auto hashed = b->update({bufs[cur].data(), n});
        if (reader.joinable()) reader.join();
        if (!hashed) return hashed.error();
        if (!read_result) return read_result.error();
        off = next;
        if (p.progress && !p.progress(off, size)) return make_error(Status::Interrupted, "interrupted");
    }
    return finish_checked(*b, fd, size);
}

}  // namespace blkcrypt::verity
