// Worker pools and inputs that change or run out under us: thread creation that
// fails, a shared cryptd pool, table lines in either form, and files that
// shrink or grow while they are read.
//
// pthread_create is interposed for the whole test binary (the executable's
// definition comes first in symbol lookup, so libstdc++ and libblkcrypt
// call it): g_threads_left >= 0 lets that many more threads start, then
// every creation fails with EAGAIN, as near RLIMIT_NPROC. It is -1 (no
// limit) outside the scopes below.
#include "test_util.hpp"
#include "toy_algs.hpp"
#include "verity_util.hpp"

#include "../../dmcrypt/src/workers.hpp"
#include "../../templates/cryptd_queue.hpp"
#include "../../verity/src/task_pool.hpp"

#include <blkcrypt/ahash.hpp>
#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/bio.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/dm/table.hpp>
#include <blkcrypt/internal/mapped_file.hpp>
#include <blkcrypt/shash.hpp>
#include <blkcrypt/skcipher.hpp>
#include <blkcrypt/verity/fsverity.hpp>
#include <blkcrypt/verity/table.hpp>
#include <blkcrypt/verity/tree.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <cerrno>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <future>
#include <pthread.h>
#include <string>
#include <unistd.h>

// ASan and TSan intercept pthread_create themselves (their bookkeeping of
// threads must see every one): no interposer there, the limit tests skip.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BLKCRYPT_NO_INTERPOSER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define BLKCRYPT_NO_INTERPOSER 1
#endif
#endif

namespace {
std::atomic<long> g_threads_left{-1};
#ifdef BLKCRYPT_NO_INTERPOSER
constexpr bool kInterposed = false;
#else
constexpr bool kInterposed = true;
using CreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
#endif
}  // namespace

#ifndef BLKCRYPT_NO_INTERPOSER
// noexcept: as glibc declares it for C++.
extern "C" int pthread_create(pthread_t* t, const pthread_attr_t* attr, void* (*fn)(void*), void* arg) noexcept {
    static const CreateFn real = reinterpret_cast<CreateFn>(dlsym(RTLD_NEXT, "pthread_create"));
    for (long left = g_threads_left.load(); left >= 0;) {
        if (left == 0) return EAGAIN;
        if (g_threads_left.compare_exchange_weak(left, left - 1)) break;
    }
    return real(t, attr, fn, arg);
}
#endif

// In a test that needs the thread limit.
#define REQUIRE_INTERPOSER()                                                   \
    do {                                                                       \
        if (!kInterposed) {                                                    \
            WARN("sanitizer build: pthread_create is not interposed; skipped"); \
            return;                                                            \
        }                                                                      \
    } while (0)

namespace blkcrypt {
std::shared_ptr<Template> make_cryptd_template();
}

using namespace blkcrypt;

namespace {

// Lets `n` more threads start while in scope.
struct ThreadLimit {
    explicit ThreadLimit(long n) { g_threads_left = n; }
    ~ThreadLimit() { g_threads_left = -1; }
};

std::size_t thread_count() {
    std::size_t n = 0;
    if (DIR* d = ::opendir("/proc/self/task")) {
        while (const dirent* e = ::readdir(d))
            if (e->d_name[0] != '.') ++n;
        ::closedir(d);
    }
    return n;
}

SelftestOutcome pass_all(const Alg&, bool) { return {SelftestState::Passed, "ok"}; }

// A temporary file of `size` bytes (a repeating pattern), removed at the end.
struct TempFile {
    std::string path;
    explicit TempFile(std::size_t size) {
        char name[] = "/tmp/blkcrypt-inputs-XXXXXX";
        const int fd = ::mkstemp(name);
        REQUIRE(fd >= 0);
        path = name;
        std::vector<uint8_t> buf(size);
        for (std::size_t i = 0; i < size; ++i) buf[i] = static_cast<uint8_t>(i * 7 + 1);
        REQUIRE(::write(fd, buf.data(), buf.size()) == static_cast<ssize_t>(buf.size()));
        ::close(fd);
    }
    ~TempFile() { ::unlink(path.c_str()); }
    void resize(off_t n) const { REQUIRE(::truncate(path.c_str(), n) == 0); }
};

}  // namespace

TEST_CASE("the pthread_create interposer works", "[threads]") {
    REQUIRE_INTERPOSER();
    ThreadLimit none(0);
    bool threw = false;
    try {
        std::thread t([] {});
        t.join();
    } catch (const std::system_error& e) {
        threw = e.code() == std::errc::resource_unavailable_try_again;
    }
    CHECK(threw);
}

TEST_CASE("TaskPool runs with the threads it could start", "[threads]") {
    REQUIRE_INTERPOSER();
    {
        ThreadLimit two(2);
        verity::TaskPool pool(8);
        CHECK(pool.threads() == 8);  // asked for; started by the first job of several parts
        std::atomic<int> sum{0};
        CHECK(pool.run(100, [&](std::size_t part, unsigned worker) {
                  CHECK(worker < 2);
                  sum += static_cast<int>(part);
                  return Status::Ok;
              }) == Status::Ok);
        CHECK(sum == 4950);
        CHECK(pool.threads() == 2);
    }
    // None at all: the job runs on the caller, as worker 0.
    ThreadLimit none(0);
    verity::TaskPool pool(4);
    const auto caller = std::this_thread::get_id();
    int sum = 0;
    CHECK(pool.run(10, [&](std::size_t part, unsigned worker) {
              CHECK(worker == 0);
              CHECK(std::this_thread::get_id() == caller);
              sum += static_cast<int>(part);
              return part == 7 ? Status::IoError : Status::Ok;
          }) == Status::IoError);
    CHECK(sum == 45);
    CHECK(pool.threads() == 0);
}

TEST_CASE("TaskPool starts no thread for jobs of one part", "[threads]") {
    // A 4 KiB file is one part: hashing it must not pay for thread start-up.
    verity::TaskPool pool(4);
    const auto caller = std::this_thread::get_id();
    for (int i = 0; i < 3; ++i)
        CHECK(pool.run(1, [&](std::size_t part, unsigned worker) {
                  CHECK(part == 0);
                  CHECK(worker == 0);
                  CHECK(std::this_thread::get_id() == caller);
                  return Status::Ok;
              }) == Status::Ok);
    CHECK(pool.threads() == 4);  // not started: still what was asked for
    std::atomic<bool> elsewhere{false};
    CHECK(pool.run(8, [&](std::size_t, unsigned) {
              if (std::this_thread::get_id() != caller) elsewhere = true;
              return Status::Ok;
          }) == Status::Ok);
    CHECK(elsewhere);  // a job of several parts starts the workers
    CHECK(pool.threads() == 4);
}

TEST_CASE("dm WorkerPool runs with the threads it could start", "[threads]") {
    REQUIRE_INTERPOSER();
    ThreadLimit one(1);
    std::atomic<int> ran{0};
    std::promise<void> done;
    dm::WorkerPool pool(4, 2, [&](std::size_t slot) {
        ++ran;
        pool.release(slot);
        pool.retire();
        if (ran == 3) done.set_value();
    });
    CHECK(pool.threads() == 1);
    for (int i = 0; i < 3; ++i) pool.schedule(pool.acquire());
    done.get_future().wait();
    pool.drain();
    CHECK(ran == 3);
}

TEST_CASE("a crypt target without threads fails with a Result, with one it works", "[threads]") {
    REQUIRE_INTERPOSER();
    Registry& reg = testutil::registry();
    auto table = dm::parse_crypt_args("aes-xts-plain64 " + std::string(64, '1') + " 0");
    REQUIRE(table.ok());
    dm::CryptTargetOptions opts;
    opts.threads = 4;
    {
        ThreadLimit none(0);
        auto t = dm::CryptTarget::create(reg, *table, std::make_shared<dm::MemoryStore>(1 << 20), 0, opts);
        REQUIRE_FALSE(t.ok());
        CHECK(t.error().status == Status::NoMem);
    }
    // The same ciphertext from one worker as from four.
    std::vector<uint8_t> want, got;
    for (long limit : {-1L, 1L}) {
        auto store = std::make_shared<dm::MemoryStore>(1 << 16);
        ThreadLimit l(limit);
        auto t = dm::CryptTarget::create(reg, *table, store, 0, opts);
        REQUIRE(t.ok());
        std::vector<uint8_t> plain(1 << 16, 0x5a);
        std::promise<Status> done;
        dm::Bio bio;
        bio.sector = 0;
        bio.dir = dm::BioDir::Write;
        bio.vecs = {SgEntry{plain.data(), plain.size()}};
        bio.on_complete = [&](Status s) { done.set_value(s); };
        REQUIRE((*t)->submit(bio) == Status::InProgress);
        CHECK(done.get_future().get() == Status::Ok);
        (*t)->drain();
        (limit < 0 ? want : got) = store->data();
    }
    CHECK(got == want);
}

TEST_CASE("verity and fs-verity hash on the caller when no thread starts", "[threads]") {
    REQUIRE_INTERPOSER();
    Registry& reg = testutil::registry();
    TempFile f(64 << 10);
    verity::FsverityParams p;
    p.threads = 4;
    const int fd = ::open(f.path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    std::string want;
    {
        auto d = verity::fsverity_compute_fd(reg, p, fd);
        REQUIRE(d.ok());
        want = testutil::hex(d->digest);
    }
    for (long limit : {0L, 1L}) {
        ThreadLimit l(limit);
        auto d = verity::fsverity_compute_fd(reg, p, fd);
        REQUIRE(d.ok());
        CHECK(testutil::hex(d->digest) == want);
    }
    ::close(fd);

    dm::MemoryStore data(256 << 10), hash(64 << 10);
    for (std::size_t i = 0; i < data.data().size(); ++i) data.data()[i] = static_cast<uint8_t>(i * 13);
    verity::VerityParams vp;
    vp.data_blocks = 64;
    verity::TreeOptions o;
    o.threads = 4;
    auto want_tree = verity::format_tree(reg, vp, data, hash, o);
    REQUIRE(want_tree.ok());
    for (long limit : {0L, 1L}) {
        ThreadLimit l(limit);
        dm::MemoryStore h2(64 << 10);
        auto r = verity::format_tree(reg, vp, data, h2, o);
        REQUIRE(r.ok());
        CHECK(r->root_hash == want_tree->root_hash);
        auto v = verity::verify_tree(reg, vp, r->root_hash, data, h2, o);
        REQUIRE(v.ok());
        CHECK(v->ok());
    }
}

TEST_CASE("verity: one pool of threads per run, whatever the number of tree levels", "[threads][merkle]") {
    REQUIRE_INTERPOSER();
    Registry& reg = testutil::registry();
    verity::VerityParams vp;
    vp.data_block_size = vp.hash_block_size = 512;  // 16 digests a block: 3 levels
    vp.data_blocks = 300;
    auto g = verity::plan_tree(reg, vp);
    REQUIRE(g.ok());
    REQUIRE(g->levels() == 3);
    dm::MemoryStore data(300 * 512), hash(static_cast<std::size_t>(g->hash_device_size(vp)));
    for (std::size_t i = 0; i < data.data().size(); ++i) data.data()[i] = static_cast<uint8_t>(i * 7);
    verity::TreeOptions o;
    o.threads = 2;
    constexpr long kMany = 1000;
    auto started = [&] { return kMany - g_threads_left.load(); };
    ThreadLimit l(kMany);
    auto r = verity::format_tree(reg, vp, data, hash, o);
    REQUIRE(r.ok());
    CHECK(started() == 2);
    auto v = verity::verify_tree(reg, vp, r->root_hash, data, hash, o);
    REQUIRE(v.ok());
    CHECK(v->ok());
    CHECK(started() == 4);  // the data and three levels on the same two threads
}

TEST_CASE("cryptd: a queue without threads refuses jobs, with one it runs them", "[threads][cryptd]") {
    REQUIRE_INTERPOSER();
    {
        ThreadLimit none(0);
        CryptdQueue q(4, 10);
        CryptdQueue::Job job;
        job.run = [](const CryptdQueue::Job&) { FAIL("ran without a thread"); };
        CHECK(q.enqueue(job, false) == Status::NoMem);
        CHECK(q.threads() == 0);
    }
    ThreadLimit one(1);
    CryptdQueue q(4, 10);
    std::promise<void> ran;
    CryptdQueue::Job job;
    job.run = [](const CryptdQueue::Job& j) { static_cast<std::promise<void>*>(j.req)->set_value(); };
    job.req = &ran;
    CHECK(q.enqueue(job, false) == Status::InProgress);
    ran.get_future().wait();
    CHECK(q.threads() == 1);
}

TEST_CASE("cryptd instances share one worker pool per registry", "[threads][cryptd]") {
    Registry reg(pass_all);
    REQUIRE(reg.register_template(make_cryptd_template()));
    const std::size_t pool = std::max(2u, std::thread::hardware_concurrency());
    const std::size_t before = thread_count();
    std::vector<Skcipher> tfms;
    // Many instances (distinct inner drivers) and many handles of each.
    for (int i = 0; i < 40; ++i) {
        const std::string drv = "toy-" + std::to_string(i);
        REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>(drv, 100 + i, 9)));
        for (int k = 0; k < 25; ++k) {
            auto t = Skcipher::alloc(reg, "cryptd(" + drv + ")");
            REQUIRE(t.ok());
            tfms.push_back(std::move(*t));
        }
    }
    CHECK(tfms.size() == 1000);
    const uint8_t key[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    std::vector<uint8_t> in(64, 3), out(64);
    for (auto& t : tfms) {
        REQUIRE(t.setkey(key) == Status::Ok);
        SgEntry src{in.data(), in.size()}, dst{out.data(), out.size()};
        SkcipherRequest req;
        req.src = SgList(&src, 1);
        req.dst = SgList(&dst, 1);
        req.len = in.size();
        std::promise<Status> done;
        req.complete = [&](Status s) {
            if (s != Status::InProgress) done.set_value(s);
        };
        const Status s = t.encrypt(req);
        if (s == Status::InProgress || s == Status::Busy) CHECK(done.get_future().get() == Status::Ok);
        else CHECK(s == Status::Ok);
    }
    CHECK(thread_count() <= before + pool);
    // cryptd over cryptd is refused, so nesting cannot multiply pools either.
    CHECK_FALSE(Skcipher::alloc(reg, "cryptd(cryptd(toy-0))").ok());
}

TEST_CASE("verity tables: full dmsetup line or arguments, each with its real error", "[verity][table]") {
    const std::string args = "1 d h 4096 4096 2 1 sha256 " + std::string(64, 'a') + " -";
    CHECK(verity::parse_verity_table(args).ok());
    CHECK(verity::parse_verity_table("0 16 verity " + args).ok());
    struct Bad {
        std::string text, error;
    } bad[] = {
        {"0 16 verity 1 d h 4096 4096 2 1 sha256 zz -", "root digest"},
        {"0 16 verity 1 d h 4096 4096 2 1 sha256 aa zz", "salt"},
        {"0 16 verity 1 d h 4096 x 2 1 sha256 aa -", "hash device block size 'x'"},
        {"0 16 verity 1 d h y 4096 2 1 sha256 aa -", "data device block size 'y'"},
        {"0 99 verity " + args, "covers 99 sectors"},
        {"1 d h 4096 4096 2 1 sha256 zz -", "root digest"},
        {"1 d h 4096 4096 2 1 sha256 aa - 1 frobnicate", "frobnicate"},
    };
    for (const auto& b : bad) {
        INFO(b.text);
        auto t = verity::parse_verity_table(b.text);
        REQUIRE_FALSE(t.ok());
        CHECK_THAT(t.error().message, Catch::Contains(b.error));
    }
}

TEST_CASE("MappedFile: a truncated file reads zeros and is flagged, not SIGBUS", "[mapped]") {
    TempFile f(64 << 10);
    const int fd = ::open(f.path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    auto m = MappedFile::map(fd, 64 << 10);
    REQUIRE(m);
    CHECK(m->bytes()[40000] == static_cast<uint8_t>(40000 * 7 + 1));
    CHECK_FALSE(m->truncated());
    f.resize(4096);
    m->release(0, 64 << 10);  // drop our pages, so the next read faults
    CHECK(m->bytes()[100] == static_cast<uint8_t>(100 * 7 + 1));
    CHECK_FALSE(m->truncated());
    CHECK(m->bytes()[40000] == 0);  // past the new end: would be SIGBUS
    CHECK(m->truncated());
    m.reset();
    ::close(fd);
}

TEST_CASE("file stores report a size change, hashing a shrinking file fails cleanly", "[mapped]") {
    Registry& reg = testutil::registry();
    constexpr std::size_t kSize = 12 << 20;  // three 4 MiB chunks
    TempFile f(kSize);
    auto store = dm::open_file_store(f.path, false);
    REQUIRE(store.ok());
    CHECK_FALSE((*store)->changed());
    verity::VerityParams p;
    p.data_blocks = kSize / 4096;
    dm::MemoryStore hash(1 << 20);
    verity::TreeOptions o;
    o.threads = 1;
    SECTION("shrinks") {
        o.progress = [&](uint64_t done, uint64_t) {
            if (done == (4 << 20)) f.resize(4096);  // after the first chunk
            return true;
        };
        auto r = verity::format_tree(reg, p, **store, hash, o);
        REQUIRE_FALSE(r.ok());
        CHECK_THAT(r.error().message, Catch::Contains(f.path + ": changed size while being read"));
    }
    SECTION("grows") {
        o.progress = [&](uint64_t done, uint64_t) {
            if (done == (4 << 20)) f.resize(kSize + 4096);
            return true;
        };
        auto r = verity::format_tree(reg, p, **store, hash, o);
        REQUIRE_FALSE(r.ok());
        CHECK_THAT(r.error().message, Catch::Contains("changed size"));
        CHECK((*store)->changed());
    }
}

TEST_CASE("fs-verity: a file truncated between chunks is an error, not SIGBUS", "[mapped]") {
    Registry& reg = testutil::registry();
    constexpr std::size_t kSize = 16 << 20;  // several 4 MiB chunks
    TempFile f(kSize);
    const int fd = ::open(f.path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    verity::FsverityParams p;
    p.threads = 1;
    bool cut = false;
    // The sink sees the first full tree block after the first chunk's leaves.
    auto d = verity::fsverity_compute_fd(reg, p, fd, [&](uint64_t, ConstBytes) -> Result<void> {
        if (!cut) f.resize(4096), cut = true;
        return {};
    });
    ::close(fd);
    REQUIRE(cut);
    REQUIRE_FALSE(d.ok());
    CHECK_THAT(d.error().message, Catch::Contains("shrank"));
}
