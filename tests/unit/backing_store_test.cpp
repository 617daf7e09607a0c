// open_file_store (<blkcrypt/backing_store.hpp>): what it refuses, and that
// refusing a FIFO does not wait for a writer (the open is non-blocking).
#include <blkcrypt/backing_store.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

TEST_CASE("open_file_store refuses a FIFO and a directory at once", "[backing_store]") {
    char dir[] = "/tmp/blkcrypt-store-XXXXXX";
    REQUIRE(::mkdtemp(dir) != nullptr);
    const std::string fifo = std::string(dir) + "/fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const auto t0 = std::chrono::steady_clock::now();
    for (bool writable : {false, true}) {
        auto s = blkcrypt::open_file_store(fifo, writable);
        REQUIRE_FALSE(s);
        CHECK(s.status() == blkcrypt::Status::Invalid);
    }
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    auto d = blkcrypt::open_file_store(dir, false);
    REQUIRE_FALSE(d);
    CHECK(d.status() == blkcrypt::Status::Invalid);
    // A regular file opens, and reads block as usual (O_NONBLOCK cleared).
    const std::string file = std::string(dir) + "/f";
    {
        FILE* f = std::fopen(file.c_str(), "wb");
        REQUIRE(f);
        std::fputs("abcd", f);
        std::fclose(f);
    }
    auto r = blkcrypt::open_file_store(file, false);
    REQUIRE(r);
    CHECK((*r)->size() == 4);
    ::unlink(file.c_str());
    ::unlink(fifo.c_str());
    ::rmdir(dir);
}
