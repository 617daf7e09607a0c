// The one Merkle builder and the one block reader of the verity engines.
#include "reference.hpp"
#include "test_util.hpp"

#include "../../verity/src/block_stream.hpp"
#include "../../verity/src/merkle_builder.hpp"
#include "../../verity/src/parallel_hasher.hpp"
#include "../../verity/src/task_pool.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/verity/fsverity.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <fcntl.h>
#include <sys/mman.h>
#include <thread>
#include <tuple>
#include <unistd.h>

using namespace blkcrypt;
using namespace blkcrypt::verity;

namespace {

std::vector<uint8_t> sha256(ConstBytes b) { return ref::sha256(b); }

std::vector<uint8_t> cat(std::initializer_list<std::vector<uint8_t>> parts, std::size_t size) {
    std::vector<uint8_t> out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    out.resize(size, 0);
    return out;
}

std::unique_ptr<HashContext> sha256_context() {
    auto h = BlockHasher::create(testutil::registry(), "sha256", {}, SaltPlacement::Before);
    REQUIRE(h.ok());
    auto c = (*h)->new_context();
    REQUIRE(c.ok());
    return std::move(*c);
}

std::unique_ptr<ParallelHasher> sha256_pool(unsigned threads) {
    auto h = BlockHasher::create(testutil::registry(), "sha256", {}, SaltPlacement::Before);
    REQUIRE(h.ok());
    auto pool = ParallelHasher::create(*h, threads);
    REQUIRE(pool.ok());
    return std::move(*pool);
}

struct Block {
    std::size_t level;
    uint64_t index;
    std::vector<uint8_t> bytes;
};

std::vector<std::vector<uint8_t>> leaves(int n) {
    std::vector<std::vector<uint8_t>> out;
    for (int i = 0; i < n; ++i) out.push_back(sha256(std::vector<uint8_t>(1, static_cast<uint8_t>(i))));
    return out;
}

}  // namespace

TEST_CASE("MerkleBuilder: a pending block per level, each finished block to the sink", "[merkle]") {
    auto ctx = sha256_context();
    const auto d = leaves(5);
    std::vector<Block> got;
    auto sink = [&](std::size_t level, uint64_t index, ConstBytes b) -> Result<void> {
        got.push_back({level, index, {b.begin(), b.end()}});
        return {};
    };

    SECTION("packed digests (fs-verity): two per 64-byte block, the last zero-padded") {
        MerkleBuilder tree({64, 32, 32, 2, {3, 2, 1}}, *ctx, sink);
        for (const auto& x : d) REQUIRE(tree.add_leaf_digests(x).ok());
        auto root = tree.finish();
        REQUIRE(root.ok());
        const auto b00 = cat({d[0], d[1]}, 64), b01 = cat({d[2], d[3]}, 64), b02 = cat({d[4]}, 64);
        const auto b10 = cat({sha256(b00), sha256(b01)}, 64), b11 = cat({sha256(b02)}, 64);
        const auto b20 = cat({sha256(b10), sha256(b11)}, 64);
        REQUIRE(got.size() == 6);
        // Each block as soon as it is full; the short ones at finish().
        CHECK(std::tie(got[0].level, got[0].index) == std::tuple(0u, 0u));
        CHECK(got[0].bytes == b00);
        CHECK(std::tie(got[1].level, got[1].index) == std::tuple(0u, 1u));
        CHECK(got[1].bytes == b01);
        CHECK(std::tie(got[2].level, got[2].index) == std::tuple(1u, 0u));
        CHECK(got[2].bytes == b10);
        CHECK(got[3].bytes == b02);
        CHECK(std::tie(got[4].level, got[4].index) == std::tuple(1u, 1u));
        CHECK(got[4].bytes == b11);
        CHECK(std::tie(got[5].level, got[5].index) == std::tuple(2u, 0u));
        CHECK(got[5].bytes == b20);
        CHECK(*root == sha256(b20));
    }
    SECTION("padded slots (dm-verity format 1): each digest in a 64-byte slot") {
        MerkleBuilder tree({128, 32, 64, 2, {1}}, *ctx, sink);
        REQUIRE(tree.add_leaf_digests(cat({d[0], d[1]}, 64)).ok());  // several at once
        auto root = tree.finish();
        REQUIRE(root.ok());
        const auto block = cat({d[0], std::vector<uint8_t>(32, 0), d[1]}, 128);
        REQUIRE(got.size() == 1);
        CHECK(got[0].bytes == block);
        CHECK(*root == sha256(block));
    }
    SECTION("no levels: the single leaf is the root; no leaf, no root") {
        MerkleBuilder one({64, 32, 32, 2, {}}, *ctx, sink);
        REQUIRE(one.add_leaf_digests(d[3]).ok());
        auto r1 = one.finish();
        REQUIRE(r1.ok());
        CHECK(*r1 == d[3]);
        MerkleBuilder none({64, 32, 32, 2, {}}, *ctx, sink);
        auto r0 = none.finish();
        REQUIRE(r0.ok());
        CHECK(r0->empty());
        CHECK(got.empty());
    }
    SECTION("more or fewer blocks than the layout planned are errors") {
        MerkleBuilder over({64, 32, 32, 2, {1}}, *ctx, sink);
        for (int i = 0; i < 3; ++i) REQUIRE(over.add_leaf_digests(d[static_cast<std::size_t>(i)]).ok());
        CHECK_FALSE(over.finish().ok());
        MerkleBuilder under({64, 32, 32, 2, {2}}, *ctx, sink);
        REQUIRE(under.add_leaf_digests(d[0]).ok());
        CHECK_FALSE(under.finish().ok());
    }
    SECTION("a failing sink stops the build") {
        MerkleBuilder tree({64, 32, 32, 2, {1}}, *ctx,
                           [](std::size_t, uint64_t, ConstBytes) -> Result<void> {
                               return make_error(Status::IoError, "full");
                           });
        REQUIRE(tree.add_leaf_digests(d[0]).ok());
        CHECK_FALSE(tree.add_leaf_digests(d[1]).ok());
    }
}

TEST_CASE("hash_blocks: a short last block is zero-padded", "[merkle]") {
    auto h = BlockHasher::create(testutil::registry(), "sha256", {}, SaltPlacement::Before);
    REQUIRE(h.ok());
    auto pool = ParallelHasher::create(*h, 2);
    REQUIRE(pool.ok());
    dm::MemoryStore store(5000);
    for (std::size_t i = 0; i < store.data().size(); ++i) store.data()[i] = static_cast<uint8_t>(i * 13);
    std::vector<uint8_t> digests;
    uint64_t last_done = 0;
    auto r = hash_blocks(**pool, store, 100, 1024, 2600, [&](uint64_t done, uint64_t total) {
        CHECK(total == 2600);
        last_done = done;
        return true;
    }, [&](uint64_t first, uint64_t n, ConstBytes dg) -> Result<void> {
        CHECK(first * 32 == digests.size());
        CHECK(dg.size() == n * 32);
        digests.insert(digests.end(), dg.begin(), dg.end());
        return {};
    });
    REQUIRE(r.ok());
    CHECK(last_done == 2600);
    const uint8_t* at = store.data().data() + 100;
    std::vector<uint8_t> tail(at + 2048, at + 2600);
    tail.resize(1024, 0);
    CHECK(digests == cat({sha256({at, 1024}), sha256({at + 1024, 1024}), sha256(tail)}, 96));
}

// Memory is hashed where it lies, as a mapped file is, not copied chunk by
// chunk on the reading thread (which the in-memory benchmark then measured).
TEST_CASE("MemoryStore: mapped() is its memory, so the reader hashes it in place", "[merkle]") {
    dm::MemoryStore store(3 * 4096 + 100);
    const ConstBytes m = store.mapped();
    CHECK(m.data() == store.data().data());
    CHECK(m.size() == store.data().size());
}

// A file store without direct reads (a file system that refuses O_DIRECT).
class NoDirectStore final : public dm::BackingStore {
public:
    explicit NoDirectStore(dm::BackingStore& s) : s_(s) {}
    Status read(uint64_t offset, Bytes out) override { return s_.read(offset, out); }
    Status write(uint64_t offset, ConstBytes in) override { return s_.write(offset, in); }
    uint64_t size() const override { return s_.size(); }
    void hint_sequential() noexcept override { s_.hint_sequential(); }
    ConstBytes mapped() override { return s_.mapped(); }
    bool changed() noexcept override { return s_.changed(); }
    void release_mapped(uint64_t offset, uint64_t len) noexcept override { s_.release_mapped(offset, len); }

private:
    dm::BackingStore& s_;
};

// Without direct reads, the reader asks for the file ahead of the hashing
// position, so an uncached file is read while earlier chunks are hashed (the
// kernel alone would read ahead little of a mapping). With them, the page
// cache is not filled at all (direct_read_test.cpp).
TEST_CASE("hash_blocks: a mapped file is read ahead of the hashing", "[merkle]") {
    constexpr std::size_t kSize = 48u << 20;
    char name[] = "/var/tmp/blkcrypt-merkle-XXXXXX";
    const int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    std::vector<uint8_t> buf(kSize, 0x5a);
    REQUIRE(::write(fd, buf.data(), buf.size()) == static_cast<ssize_t>(buf.size()));
    REQUIRE(::fsync(fd) == 0);
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    void* view = ::mmap(nullptr, kSize, PROT_READ, MAP_SHARED, fd, 0);
    REQUIRE(view != MAP_FAILED);
    const long page = ::sysconf(_SC_PAGESIZE);
    // Pages of [off, off+len) in the page cache.
    auto resident = [&](std::size_t off, std::size_t len) {
        std::vector<unsigned char> v(len / static_cast<std::size_t>(page));
        REQUIRE(::mincore(static_cast<uint8_t*>(view) + off, len, v.data()) == 0);
        std::size_t n = 0;
        for (unsigned char c : v) n += c & 1;
        return n * 100 / v.size();
    };
    const bool evicted = resident(0, kSize) < 10;
    if (evicted) {
        auto store = dm::open_file_store(name, false);
        REQUIRE(store.ok());
        auto pool = sha256_pool(1);
        std::size_t ahead = 0;
        bool first = true;
        NoDirectStore no_direct(**store);
        auto r = hash_blocks(*pool, no_direct, 0, 4096, kSize, [&](uint64_t, uint64_t) {
            // After the first 4 MiB: 16..32 MiB is on its way in.
            for (int i = 0; first && i < 200 && (ahead = resident(16u << 20, 16u << 20)) < 90; ++i)
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            first = false;
            return true;
        }, [](uint64_t, uint64_t, ConstBytes) -> Result<void> { return {}; });
        REQUIRE(r.ok());
        CHECK(ahead >= 90);
    }
    ::munmap(view, kSize);
    ::close(fd);
    ::unlink(name);
    if (!evicted) WARN("the page cache kept the file: readahead not observable here");
}

TEST_CASE("fs-verity through the shared reader: a file that grows is an error", "[merkle][mapped]") {
    char name[] = "/var/tmp/blkcrypt-merkle-XXXXXX";
    const int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    std::vector<uint8_t> buf(12u << 20, 0x33);
    REQUIRE(::write(fd, buf.data(), buf.size()) == static_cast<ssize_t>(buf.size()));
    FsverityParams p;
    p.threads = 1;
    bool grown = false;
    // The first full tree block comes after the first chunk's leaves.
    auto d = fsverity_compute_fd(testutil::registry(), p, fd, [&](uint64_t, ConstBytes) -> Result<void> {
        if (!grown) grown = ::ftruncate(fd, static_cast<off_t>(buf.size() + 4096)) == 0;
        return {};
    });
    ::close(fd);
    ::unlink(name);
    REQUIRE(grown);
    REQUIRE_FALSE(d.ok());
    CHECK_THAT(d.error().message, Catch::Contains("grew"));
}

// Chunk c is hashed while the digests of chunk c-1 are handed on: they still
// arrive in order, each chunk's once, and a sink's error or a stop asked by
// the progress callback ends the run with nothing handed on after it.
TEST_CASE("hash_blocks: chunks hashed while the previous ones are handed on", "[merkle]") {
    constexpr std::size_t kBs = 4096, kSize = (18u << 20) + 1000;  // 5 chunks, a short tail
    char name[] = "/var/tmp/blkcrypt-merkle-XXXXXX";
    const int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    std::vector<uint8_t> buf(kSize);
    for (std::size_t i = 0; i < kSize; ++i) buf[i] = static_cast<uint8_t>(i * 31 + (i >> 12));
    REQUIRE(::write(fd, buf.data(), buf.size()) == static_cast<ssize_t>(buf.size()));
    ::close(fd);
    auto store = dm::open_file_store(name, false);
    REQUIRE(store.ok());
    auto pool = sha256_pool(3);
    const auto none = [](uint64_t, uint64_t) { return true; };

    SECTION("every block's digest, in order") {
        std::vector<uint8_t> got;
        auto r = hash_blocks(*pool, **store, 0, kBs, kSize, none,
                             [&](uint64_t first, uint64_t n, ConstBytes dg) -> Result<void> {
            CHECK(first * 32 == got.size());
            CHECK(dg.size() == n * 32);
            got.insert(got.end(), dg.begin(), dg.end());
            return {};
        });
        REQUIRE(r.ok());
        std::vector<uint8_t> want;
        for (std::size_t off = 0; off < kSize; off += kBs) {
            std::vector<uint8_t> block(buf.begin() + static_cast<std::ptrdiff_t>(off),
                                       buf.begin() + static_cast<std::ptrdiff_t>(std::min(kSize, off + kBs)));
            block.resize(kBs, 0);
            const auto d = sha256(block);
            want.insert(want.end(), d.begin(), d.end());
        }
        CHECK(got == want);
    }
    SECTION("a sink's error ends the run") {
        int calls = 0;
        auto r = hash_blocks(*pool, **store, 0, kBs, kSize, none, [&](uint64_t, uint64_t, ConstBytes) -> Result<void> {
            if (++calls == 2) return make_error(Status::IoError, "sink full");
            return {};
        });
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().message == "sink full");
        CHECK(calls == 2);
    }
    SECTION("a stop from the progress callback ends the run") {
        int calls = 0;
        auto r = hash_blocks(*pool, **store, 0, kBs, kSize, [](uint64_t done, uint64_t) { return done < (8u << 20); },
                             [&](uint64_t, uint64_t, ConstBytes) -> Result<void> {
                                 ++calls;
                                 return {};
                             });
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().status == Status::Interrupted);
        CHECK(calls == 2);
    }
    ::unlink(name);
}

// A second job started before the first is waited for runs while the first
// is still running (the workers do not wait for the caller between chunks);
// wait() reports the jobs in the order they were started.
TEST_CASE("TaskPool: a queued job runs before the one ahead of it is waited for", "[merkle]") {
    TaskPool pool(2);
    REQUIRE(pool.threads() == 2);
    std::atomic<bool> second_ran{false};
    std::atomic<bool> overlapped{false};
    pool.start(2, [&](std::size_t part, unsigned) {
        if (part == 1) {  // holds the first job open until the second has run (5 s at most)
            for (int i = 0; i < 500 && !second_ran; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
            overlapped = second_ran.load();
        }
        return Status::IoError;
    });
    pool.start(3, [&](std::size_t, unsigned) {
        second_ran = true;
        return Status::Ok;
    });
    CHECK(pool.wait() == Status::IoError);  // the first job's
    CHECK(pool.wait() == Status::Ok);       // the second's
    CHECK(overlapped);
    CHECK(pool.wait() == Status::Ok);  // nothing left
}
