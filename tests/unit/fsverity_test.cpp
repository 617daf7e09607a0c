// fs-verity digests: fsverity-utils' own test vectors (test_compute_digest.c),
// then every case of tests/verity/fsverity-golden/manifest.tsv (made by the
// real `fsverity digest`): digest, tree size, sha256 of the Merkle tree and of
// the descriptor. Also threads, piece sizes, the fd reader and bad parameters.
#include "paths.hpp"
#include "test_util.hpp"
#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>
#include <blkcrypt/verity/fsverity.hpp>

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace blkcrypt;
using namespace blkcrypt::verity;

namespace {

using testutil::hex;
using testutil::registry;

using Buf = std::vector<uint8_t>;

// The file contents of test_compute_digest.c and make-golden.sh.
Buf pattern(std::size_t n) {
    Buf b(n);
    for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i % 11 + i % 439 + i % 1103);
    return b;
}

Buf unhex(const std::string& s) { return s == "-" ? Buf{} : testutil::unhex(s); }

std::string sha256_hex(ConstBytes data) {
    auto h = Shash::alloc(registry(), "sha256");
    REQUIRE(h);
    Buf out(32);
    REQUIRE(h->digest(data, out) == Status::Ok);
    return hex(out);
}

struct Output {
    FsverityDigest d;
    Buf tree;
};

// Feeds `data` in pieces of `piece` bytes (0: all at once), collecting the tree.
Output compute(const FsverityParams& p, ConstBytes data, std::size_t piece = 0) {
    auto size = fsverity_tree_size(p, data.size());
    REQUIRE(size);
    Output o;
    o.tree.assign(*size, 0xAA);  // a block the sink never writes shows up
    Buf seen(*size / p.block_size, 0);
    auto sink = [&](uint64_t off, ConstBytes block) -> Result<void> {
        REQUIRE(block.size() == p.block_size);
        REQUIRE(off % p.block_size == 0);
        REQUIRE(off + block.size() <= o.tree.size());
        REQUIRE(seen[off / p.block_size]++ == 0);
        std::copy(block.begin(), block.end(), o.tree.begin() + static_cast<std::ptrdiff_t>(off));
        return {};
    };
    auto b = FsverityBuilder::create(registry(), p, data.size(), sink);
    REQUIRE(b);
    if (piece == 0) piece = std::max<std::size_t>(data.size(), 1);
    for (std::size_t i = 0; i < data.size(); i += piece) {
        auto r = b->update(data.subspan(i, std::min(piece, data.size() - i)));
        REQUIRE(r);
    }
    auto d = b->finish();
    if (!d) FAIL(d.error().message);
    o.d = std::move(d).value();
    CHECK(o.d.tree_size == *size);
    return o;
}

struct Golden {
    std::string name, hash, salt, digest, tree_sha, desc_sha;
    std::size_t size = 0;
    uint32_t block_size = 0;
    uint64_t tree_size = 0;
};

std::vector<Golden> read_manifest() {
    std::ifstream f(std::string(testutil::kSourceDir) + "/tests/verity/fsverity-golden/manifest.tsv");
    std::vector<Golden> out;
    std::string line;
    while (std::getline(f, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::vector<std::string> c;
        std::stringstream ss(line);
        for (std::string field; std::getline(ss, field, '\t');) c.push_back(field);
        REQUIRE(c.size() == 10);
        out.push_back({c[0], c[2], c[4], c[5], c[7], c[8], std::stoul(c[1]),
                       static_cast<uint32_t>(std::stoul(c[3])), std::stoull(c[6])});
    }
    return out;
}

}  // namespace

TEST_CASE("fsverity: test_compute_digest.c vectors", "[fsverity]") {
    struct Vec {
        const char* hash;
        uint32_t bs;
        const char* salt;
        std::size_t size;
        const char* digest;
    };
    const Vec vecs[] = {
        {"sha256", 4096, "", 1000000, "48df0c462329cd879661bd05b39aa81b05cc16afd27a7196a559da83531d39d9"},
        {"sha256", 4096, "", 100000, "f2096a36c5cdca4fa33ee8852833150bb324992e5417a9d571f1bffff73b9efc"},
        {"sha256", 4096, "", 4096, "6ac39979016e3ddf3d39fff6cb984f7c118acdf1852919f5c100c4b142c1818e"},
        {"sha256", 4096, "", 1, "b803429503d95915829b29fdbc8bbad142f3abfd11b1cadf5526582e685c0551"},
        {"sha256", 4096, "", 0, "3d248ca542a24fc62d1c43b916eae5016878e2533c88238480b26128a1f1af95"},
        {"sha256", 4096, "abcd", 1000000, "917900b0d299454aa304d5debc6f39e4af7b5abe33bdbc568d5d8f1e5c4d8652"},
        {"sha256", 4096, "0123456789:;<=>?@ABCDEFGHIJKLMNO", 1000000,
         "bc2d70324c048c220a2cb190832140863eb268e680427939e5d467bea5ec5ad9"},
        {"sha256", 1024, "", 1000000, "e9df927c14fcb961d5f51c666d8ae4c14fe4ff98a374c733e898d00c9e74a8e3"},
        {"sha256", 512, "", 1000000, "0393ee3dfd4a28966e2af4e07cfa5b032c30da5bb8e8ef63b9a55bf963262334"},
        {"sha256", 65536, "", 1000000, "f3b6418f26d4d0e74728193bae76f15cb4bb2ce9777448d76bd8138b69ec61c2"},
        {"sha512", 4096, "abcd", 1000000,
         "8425c6d0c94f84ed904c12936845fbb7af9953753789712dcc3be142db3d4b6b"
         "47a399ad52aa609256ce29a960bf4bb0e595ec386ca58c06519d546dc5b197bb"},
    };
    const Buf data = pattern(1000000);
    for (const Vec& v : vecs) {
        FsverityParams p;
        p.hash = v.hash;
        p.block_size = v.bs;
        p.salt.assign(v.salt, v.salt + std::strlen(v.salt));
        INFO(v.hash << " bs " << v.bs << " size " << v.size << " salt '" << v.salt << "'");
        CHECK(hex(compute(p, ConstBytes(data).first(v.size)).d.digest) == v.digest);
    }
}

TEST_CASE("fsverity: golden manifest from the real fsverity digest", "[fsverity]") {
    const auto cases = read_manifest();
    REQUIRE(cases.size() >= 20);
    std::size_t max = 0;
    for (const auto& g : cases) max = std::max(max, g.size);
    const Buf data = pattern(max);
    for (const auto& g : cases) {
        FsverityParams p;
        p.hash = g.hash;
        p.block_size = g.block_size;
        p.salt = unhex(g.salt);
        // Odd piece sizes exercise the partial-block buffering.
        for (std::size_t piece : {std::size_t{0}, std::size_t{1000}, std::size_t{g.block_size} + 7}) {
            INFO(g.name << " piece " << piece);
            const Output o = compute(p, ConstBytes(data).first(g.size), piece);
            CHECK(hex(o.d.digest) == g.digest);
            CHECK(o.d.tree_size == g.tree_size);
            CHECK(sha256_hex(o.tree) == g.tree_sha);
            CHECK(sha256_hex(o.d.descriptor) == g.desc_sha);
        }
    }
}

TEST_CASE("fsverity: one thread and many give the same tree", "[fsverity]") {
    const Buf data = pattern(3 * 1024 * 1024 + 12345);
    for (uint32_t bs : {1024u, 4096u}) {
        FsverityParams p;
        p.block_size = bs;
        p.salt = {1, 2, 3};
        p.threads = 1;
        const Output one = compute(p, data, 1 << 20);
        for (unsigned t : {2u, 3u, 8u, 0u}) {
            p.threads = t;
            const Output many = compute(p, data, 1 << 20);
            CHECK(many.d.digest == one.d.digest);
            CHECK(many.tree == one.tree);
        }
    }
}

TEST_CASE("fsverity: empty and one-block files", "[fsverity]") {
    FsverityParams p;
    const Output empty = compute(p, {});
    CHECK(empty.d.root_hash == Buf(32, 0));
    CHECK(empty.tree.empty());
    CHECK(empty.d.descriptor[0] == 1);
    CHECK(empty.d.descriptor[1] == 1);
    CHECK(empty.d.descriptor[2] == 12);

    // One block: the root is the salted hash of the zero-padded block, no tree.
    p.salt = {0xab};
    Buf block = pattern(100);
    const Output one = compute(p, block);
    CHECK(one.tree.empty());
    Buf msg(64, 0);
    msg[0] = 0xab;
    block.resize(4096, 0);
    msg.insert(msg.end(), block.begin(), block.end());
    CHECK(hex(one.d.root_hash) == sha256_hex(msg));
    CHECK(one.d.descriptor[3] == 1);
    CHECK(one.d.descriptor[80] == 0xab);
}

TEST_CASE("fsverity: formatted digest for built-in signatures", "[fsverity]") {
    FsverityParams p;
    p.hash = "sha512";
    const Output o = compute(p, pattern(10));
    const Buf f = fsverity_formatted_digest(o.d);
    REQUIRE(f.size() == 12 + 64);
    CHECK(std::string(f.begin(), f.begin() + 8) == "FSVerity");
    CHECK(f[8] == 2);
    CHECK(f[9] == 0);
    CHECK(f[10] == 64);
    CHECK(f[11] == 0);
    CHECK(Buf(f.begin() + 12, f.end()) == o.d.digest);
}

TEST_CASE("fsverity: parameter checks", "[fsverity]") {
    auto bad = [](FsverityParams p) {
        auto r = fsverity_check_params(p);
        REQUIRE_FALSE(r);
        CHECK(r.status() == Status::Invalid);
        CHECK(FsverityBuilder::create(registry(), p, 10).status() == Status::Invalid);
        return r.error().message;
    };
    FsverityParams p;
    CHECK(fsverity_check_params(p));
    p.hash = "md5";
    CHECK_THAT(bad(p), Catch::Contains("md5"));
    p = {};
    for (uint32_t bs : {0u, 1u, 1000u, 4097u, 1u << 31}) {
        p.block_size = bs;
        CHECK_THAT(bad(p), Catch::Contains("block size"));
    }
    p.block_size = 32;  // below 2 * digest size
    CHECK_THAT(bad(p), Catch::Contains("too small"));
    p.hash = "sha512";
    p.block_size = 64;
    CHECK_THAT(bad(p), Catch::Contains("too small"));
    p.block_size = 128;
    CHECK(fsverity_check_params(p));
    p = {};
    p.salt.assign(33, 0);
    CHECK_THAT(bad(p), Catch::Contains("salt"));
    p.salt.assign(32, 0);
    CHECK(fsverity_check_params(p));
}

TEST_CASE("fsverity: wrong amount of data and read errors", "[fsverity]") {
    FsverityParams p;
    auto b = FsverityBuilder::create(registry(), p, 10);
    REQUIRE(b);
    const Buf data = pattern(11);
    CHECK(b->update(ConstBytes(data).first(5)));
    CHECK(b->update(data).status() == Status::Invalid);  // 16 > 10

    auto c = FsverityBuilder::create(registry(), p, 10);
    REQUIRE(c);
    REQUIRE(c->update(ConstBytes(data).first(9)));
    CHECK(c->finish().status() == Status::Invalid);

    auto failing = [](Bytes) -> Result<void> { return make_error(Status::IoError, "boom"); };
    auto r = fsverity_compute(registry(), p, 100, failing);
    REQUIRE_FALSE(r);
    CHECK(r.error().message == "boom");

    // A failing sink stops the computation.
    auto sink = [](uint64_t, ConstBytes) -> Result<void> { return make_error(Status::IoError, "disk full"); };
    const Buf big = pattern(3 * 4096);
    auto read = [&, off = std::size_t{0}](Bytes buf) mutable -> Result<void> {
        std::copy_n(big.begin() + static_cast<std::ptrdiff_t>(off), buf.size(), buf.begin());
        off += buf.size();
        return {};
    };
    auto s = fsverity_compute(registry(), p, big.size(), read, sink);
    REQUIRE_FALSE(s);
    CHECK(s.error().message == "disk full");
}

TEST_CASE("fsverity: reading a file descriptor", "[fsverity]") {
    char path[] = "/tmp/fsverity_test.XXXXXX";
    const int fd = ::mkstemp(path);
    REQUIRE(fd >= 0);
    const Buf data = pattern(1000000);
    REQUIRE(::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()));
    FsverityParams p;
    auto d = fsverity_compute_fd(registry(), p, fd);
    ::close(fd);
    ::unlink(path);
    REQUIRE(d);
    CHECK(hex(d->digest) == "48df0c462329cd879661bd05b39aa81b05cc16afd27a7196a559da83531d39d9");

    // Several read chunks (4 MiB each), the last one short, and a tree.
    const Buf big = pattern(9 * 1024 * 1024 + 4097);
    char path2[] = "/tmp/fsverity_test.XXXXXX";
    const int fd2 = ::mkstemp(path2);
    REQUIRE(fd2 >= 0);
    REQUIRE(::write(fd2, big.data(), big.size()) == static_cast<ssize_t>(big.size()));
    p.salt = {9, 9};
    const Output want = compute(p, big, 100000);
    Buf tree(want.tree.size());
    auto sink = [&](uint64_t off, ConstBytes block) -> Result<void> {
        std::copy(block.begin(), block.end(), tree.begin() + static_cast<std::ptrdiff_t>(off));
        return {};
    };
    auto d2 = fsverity_compute_fd(registry(), p, fd2, sink);
    ::close(fd2);
    ::unlink(path2);
    REQUIRE(d2);
    CHECK(d2->digest == want.d.digest);
    CHECK(tree == want.tree);

    const int dir = ::open("/tmp", O_RDONLY | O_DIRECTORY);
    REQUIRE(dir >= 0);
    CHECK(fsverity_compute_fd(registry(), p, dir).status() == Status::IoError);
    ::close(dir);
}

TEST_CASE("fsverity: progress of fsverity_compute_fd, and stopping it", "[fsverity]") {
    char path[] = "/tmp/fsverity_test.XXXXXX";
    const int fd = ::mkstemp(path);
    REQUIRE(fd >= 0);
    const Buf big = pattern(9 * 1024 * 1024 + 4097);
    REQUIRE(::write(fd, big.data(), big.size()) == static_cast<ssize_t>(big.size()));
    FsverityParams p;
    std::vector<uint64_t> seen;
    p.progress = [&](uint64_t done, uint64_t total) {
        CHECK(total == big.size());
        seen.push_back(done);
        return true;
    };
    auto d = fsverity_compute_fd(registry(), p, fd);
    REQUIRE(d);
    CHECK(d->digest == compute(FsverityParams{}, big, 100000).d.digest);
    REQUIRE(seen.size() >= 2);  // several chunks
    CHECK(std::is_sorted(seen.begin(), seen.end()));
    CHECK(seen.back() == big.size());

    // Returning false stops the run with an error (how a signal interrupts it).
    int calls = 0;
    p.progress = [&](uint64_t, uint64_t) { return ++calls < 2; };
    auto stopped = fsverity_compute_fd(registry(), p, fd);
    ::close(fd);
    ::unlink(path);
    REQUIRE_FALSE(stopped);
    CHECK(stopped.error().message == "interrupted");
    CHECK(stopped.status() == Status::Interrupted);  // not an I/O error
    CHECK(calls == 2);
}
