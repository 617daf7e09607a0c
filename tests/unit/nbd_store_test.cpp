// open_store on NBD URIs (crypto/src/nbd_store.cpp) against a real nbdkit:
// transfers from many threads at odd offsets, a server that takes only whole
// blocks, discard reading as zeros, read-only exports, and what is refused.
// Without nbdkit (or a build without libnbd) the cases say so and pass.
#include "test_util.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/dm/table.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace blkcrypt;

namespace {

bool have_nbdkit() { return std::system("command -v nbdkit >/dev/null 2>&1") == 0; }

// nbdkit -f on a Unix socket in a fresh directory, killed with the object.
// With logged, nbdkit's log filter (outermost) records each request as it
// starts and as it returns, which tells how many were in flight at once.
class Nbdkit {
public:
    explicit Nbdkit(std::vector<std::string> args, bool logged = false) {
        char dir[] = "/tmp/blkcrypt-nbdstore-XXXXXX";
        REQUIRE(::mkdtemp(dir) != nullptr);
        dir_ = dir;
        sock_ = dir_ + "/s.sock";
        std::vector<std::string> argv{"nbdkit", "-f", "-U", sock_};
        if (logged) argv.push_back("--filter=log");
        argv.insert(argv.end(), args.begin(), args.end());
        if (logged) argv.push_back("logfile=" + dir_ + "/log");
        pid_ = ::fork();
        REQUIRE(pid_ >= 0);
        if (pid_ == 0) {
            std::vector<char*> a;
            for (auto& s : argv) a.push_back(s.data());
            a.push_back(nullptr);
            ::execvp("nbdkit", a.data());
            ::_exit(127);
        }
        for (int i = 0; i < 300; ++i) {
            struct stat st {};
            if (::stat(sock_.c_str(), &st) == 0) return;
            ::usleep(20000);
        }
        FAIL("nbdkit did not start");
    }
    ~Nbdkit() {
        ::kill(pid_, SIGTERM);
        ::waitpid(pid_, nullptr, 0);
        std::system(("rm -rf '" + dir_ + "'").c_str());
    }
    std::string uri() const { return "nbd+unix:///?socket=" + sock_; }
    // The most reads the server had in flight at once since the last call
    // (with none in flight then), from its log.
    int max_reads_in_flight() {
        std::ifstream log(dir_ + "/log");
        int now = 0, most = 0, line_no = 0;
        for (std::string line; std::getline(log, line); ++line_no) {
            if (line_no < seen_) continue;
            if (line.find(" ...Read id=") != std::string::npos) --now;
            else if (line.find(" Read id=") != std::string::npos) most = std::max(most, ++now);
        }
        seen_ = line_no;
        return most;
    }

private:
    std::string dir_, sock_;
    pid_t pid_ = -1;
    int seen_ = 0;
};

bool client_built() {
    auto s = open_store("nbd+unix:///?socket=/nonexistent/none", false);
    return s.ok() || s.error().message.find("built without") == std::string::npos;
}

}  // namespace

TEST_CASE("is_nbd_uri: libnbd's schemes, not file names", "[nbd-client]") {
    CHECK(is_nbd_uri("nbd://host/export"));
    CHECK(is_nbd_uri("nbds://host:10810/"));
    CHECK(is_nbd_uri("nbd+unix:///?socket=/tmp/s"));
    CHECK(is_nbd_uri("nbds+unix:///e?socket=/tmp/s"));
    CHECK(is_nbd_uri("nbd+vsock://2/"));
    CHECK_FALSE(is_nbd_uri("nbd.img"));
    CHECK_FALSE(is_nbd_uri("./nbd://x"));
    CHECK_FALSE(is_nbd_uri("NBD://host/"));
    CHECK_FALSE(is_nbd_uri("http://host/x"));
}

TEST_CASE("nbd store: threads write and read odd ranges of a 4 KiB-block export, then a discard reads as zeros",
          "[nbd-client]") {
    if (!have_nbdkit() || !client_built()) {
        WARN("nbdkit absent or no NBD client in this build: skipped");
        return;
    }
    // The server fails what is not whole 4 KiB blocks of at most 64 KiB.
    constexpr uint64_t kSize = 8 << 20;
    Nbdkit srv({"--filter=blocksize-policy", "memory", std::to_string(kSize), "blocksize-minimum=4096",
                "blocksize-maximum=65536", "blocksize-error-policy=error"});
    auto s = open_store(srv.uri(), true);
    REQUIRE(s.ok());
    BackingStore& st = **s;
    CHECK(st.size() == kSize);
    CHECK(st.name() == srv.uri());
    std::vector<uint8_t> model(kSize, 0);
    // Each thread owns one region and writes random pieces into it at odd offsets.
    constexpr int kThreads = 8;
    std::vector<std::thread> ts;
    std::vector<int> bad(kThreads, 0);
    for (int t = 0; t < kThreads; ++t) {
        ts.emplace_back([&, t] {
            std::mt19937_64 rng(static_cast<uint64_t>(t) + 1);
            const uint64_t base = kSize / kThreads * static_cast<uint64_t>(t), span = kSize / kThreads;
            for (int i = 0; i < 40; ++i) {
                const uint64_t len = 1 + rng() % 200000;
                const uint64_t off = base + rng() % (span - len);
                std::vector<uint8_t> buf(len);
                for (auto& b : buf) b = static_cast<uint8_t>(rng());
                if (st.write(off, buf) != Status::Ok) ++bad[t];
                std::copy(buf.begin(), buf.end(), model.begin() + static_cast<std::ptrdiff_t>(off));
                std::vector<uint8_t> back(len);
                if (st.read(off, back) != Status::Ok || back != buf) ++bad[t];
            }
        });
    }
    for (auto& th : ts) th.join();
    for (int t = 0; t < kThreads; ++t) CHECK(bad[t] == 0);
    REQUIRE(st.flush() == Status::Ok);
    std::vector<uint8_t> all(kSize);
    REQUIRE(st.read(0, all) == Status::Ok);  // one read of 8 MiB: 128 requests of 64 KiB
    CHECK(std::equal(all.begin(), all.end(), model.begin()));  // not printed: 8 MiB
    REQUIRE(st.discard(4096 * 3, 4096 * 5) == Status::Ok);
    std::fill(model.begin() + 4096 * 3, model.begin() + 4096 * 8, 0);
    REQUIRE(st.read(0, all) == Status::Ok);
    CHECK(std::equal(all.begin(), all.end(), model.begin()));  // not printed: 8 MiB
    // Past the end: an error, nothing sent.
    std::vector<uint8_t> one(1);
    CHECK(st.read(kSize, one) == Status::IoError);
    CHECK(st.write(kSize - 1, std::vector<uint8_t>(2)) == Status::IoError);
}

TEST_CASE("nbd store: a read-only export refuses a writable open, and no server names the URI", "[nbd-client]") {
    if (!have_nbdkit() || !client_built()) {
        WARN("nbdkit absent or no NBD client in this build: skipped");
        return;
    }
    Nbdkit srv({"-r", "memory", "1M"});
    auto w = open_store(srv.uri(), true);
    REQUIRE_FALSE(w.ok());
    CHECK(w.error().message.find("read-only") != std::string::npos);
    auto r = open_store(srv.uri(), false);
    REQUIRE(r.ok());
    CHECK((*r)->size() == 1 << 20);
    CHECK((*r)->write(0, std::vector<uint8_t>(512)) == Status::IoError);
    auto none = open_store("nbd+unix:///?socket=/nonexistent/none.sock", false);
    REQUIRE_FALSE(none.ok());
    CHECK(none.error().message.find("/nonexistent/none.sock") != std::string::npos);
}

TEST_CASE("nbd store: transfers from several threads are in flight at once on one connection", "[nbd-client]") {
    if (!have_nbdkit() || !client_built()) {
        WARN("nbdkit absent or no NBD client in this build: skipped");
        return;
    }
    // One connection (no multi-conn) and 0.4 s per read: eight threads'
    // reads are all at the server at once when they share it, one at a
    // time when each waits for the connection to be free (the store
    // before they shared). The server's log counts them.
    Nbdkit srv({"--filter=multi-conn", "--filter=delay", "memory", "1M", "multi-conn-mode=disable", "delay-read=400ms"},
               true);
    auto s = open_store(srv.uri(), false);
    REQUIRE(s.ok());
    BackingStore& st = **s;
    constexpr int kThreads = 8;
    std::vector<int> bad(kThreads, 0);
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t)
        ts.emplace_back([&, t] {
            std::vector<uint8_t> buf(4096);
            if (st.read(uint64_t{4096} * static_cast<uint64_t>(t), buf) != Status::Ok) ++bad[t];
        });
    for (auto& th : ts) th.join();
    for (int t = 0; t < kThreads; ++t) CHECK(bad[t] == 0);
    CHECK(srv.max_reads_in_flight() > 1);
}

TEST_CASE("nbd store: a crypt target keeps its bios' reads in flight while its one worker waits for none",
          "[nbd-client]") {
    if (!have_nbdkit() || !client_built()) {
        WARN("nbdkit absent or no NBD client in this build: skipped");
        return;
    }
    // 0.4 s per read, one connection, one crypt worker, eight bios: their
    // reads are at the server together when the store runs them on its own
    // (start_read), one at a time when the worker reads each bio before the
    // next (the store before). The server's log counts them.
    constexpr uint64_t kSize = 1 << 20;
    Nbdkit srv({"--filter=multi-conn", "--filter=delay", "memory", std::to_string(kSize), "multi-conn-mode=disable",
                "delay-read=400ms"},
               true);
    auto s = open_store(srv.uri(), true);
    REQUIRE(s.ok());
    std::mt19937_64 rng(26);
    std::vector<uint8_t> image(kSize);
    for (auto& b : image) b = static_cast<uint8_t>(rng());
    REQUIRE((*s)->write(0, image) == Status::Ok);
    auto table = dm::parse_crypt_args("aes-xts-plain64 " + std::string(128, '7') + " 0");
    REQUIRE(table.ok());
    dm::CryptTargetOptions o;
    o.threads = 1;
    o.queue_depth = 8;
    auto remote = dm::CryptTarget::create(testutil::registry(), *table, *s, 0, o);
    auto local_store = std::make_shared<MemoryStore>(kSize);
    local_store->data() = image;
    auto local = dm::CryptTarget::create(testutil::registry(), *table, local_store, 0, o);
    REQUIRE(remote.ok());
    REQUIRE(local.ok());
    // Eight bios of 64 KiB, the last in two pieces (two reads of one bio).
    constexpr std::size_t kBio = 64 << 10;
    std::vector<uint8_t> got(8 * kBio), want(8 * kBio);
    std::vector<dm::Bio> bios(8);
    std::atomic<int> over{0}, bad{0};
    for (std::size_t i = 0; i < bios.size(); ++i) {
        dm::Bio& b = bios[i];
        b.sector = i * kBio / 512;
        b.dir = dm::BioDir::Read;
        uint8_t* at = got.data() + i * kBio;
        if (i == 7)
            b.vecs = {{at, 4096}, {at + 4096, kBio - 4096}};
        else
            b.vecs = {{at, kBio}};
        b.on_complete = [&](Status st) {
            if (st != Status::Ok) ++bad;
            ++over;
        };
    }
    for (dm::Bio& b : bios) REQUIRE((*remote)->submit(b) == Status::InProgress);
    (*remote)->drain();
    CHECK(over.load() == 8);
    CHECK(bad.load() == 0);
    CHECK(srv.max_reads_in_flight() > 1);
    // The plaintext is what the same target gives on the same bytes in memory.
    dm::Bio all;
    all.dir = dm::BioDir::Read;
    all.vecs = {{want.data(), want.size()}};
    all.on_complete = [](Status) {};
    REQUIRE((*local)->submit_sync(all) == Status::Ok);
    CHECK(got == want);
    // Left to choose, a target on an NBD store takes the store's read_depth
    // (32) bios at once, not 4 per worker: one worker's 32 reads are at the
    // server together, more than 4 of them.
    dm::CryptTargetOptions deflt;
    deflt.threads = 1;
    auto deep = dm::CryptTarget::create(testutil::registry(), *table, *s, 0, deflt);
    REQUIRE(deep.ok());
    std::vector<dm::Bio> many(32);
    std::vector<uint8_t> sink(many.size() * 4096);
    over = 0;
    for (std::size_t i = 0; i < many.size(); ++i) {
        many[i].sector = i * 8;
        many[i].vecs = {{sink.data() + i * 4096, 4096}};
        many[i].on_complete = [&](Status st) {
            if (st != Status::Ok) ++bad;
            ++over;
        };
    }
    CHECK((*s)->read_depth() == 32);
    for (dm::Bio& b : many) REQUIRE((*deep)->submit(b) == Status::InProgress);
    (*deep)->drain();
    CHECK(srv.max_reads_in_flight() > 4);
    CHECK(over.load() == 32);
    CHECK(bad.load() == 0);
    CHECK(std::equal(sink.begin(), sink.end(), want.begin()));

    // EIO from the server: the bio fails, once, with an I/O error.
    Nbdkit eio({"--filter=error", "memory", std::to_string(kSize), "error-pread-rate=100%"});
    auto es = open_store(eio.uri(), false);
    REQUIRE(es.ok());
    auto failing = dm::CryptTarget::create(testutil::registry(), *table, *es, 0, o);
    REQUIRE(failing.ok());
    over = 0;
    bad = 0;
    REQUIRE((*failing)->submit(bios[7]) == Status::InProgress);
    (*failing)->drain();
    CHECK(over.load() == 1);
    CHECK(bad.load() == 1);
}
