// BioRing: bios retired in submission order with bounded depth, the same
// bytes as one synchronous bio, and a stop that waits for what is in flight.
#include "test_util.hpp"
#include <blkcrypt/dm/bio_ring.hpp>
#include <blkcrypt/dm/block_device.hpp>
#include <blkcrypt/dm/crypt_target.hpp>

#include <catch2/catch.hpp>

#include <memory>
#include <random>
#include <vector>

using namespace blkcrypt;
using namespace blkcrypt::dm;

namespace {

constexpr std::size_t kChunk = 4096;
constexpr std::size_t kChunks = 24;

CryptTable xts_table() {
    auto t = parse_crypt_args("aes-xts-plain64 " + std::string(128, '7') + " 0");
    REQUIRE(t);
    return std::move(t).value();
}

std::unique_ptr<CryptTarget> make(std::shared_ptr<BackingStore> store, bool async) {
    CryptTargetOptions o;
    o.threads = 2;
    o.queue_depth = 8;
    o.force_async = async;
    auto t = CryptTarget::create(testutil::registry(), xts_table(), std::move(store), 0, o);
    REQUIRE(t);
    return std::move(t).value();
}

std::vector<uint8_t> pattern(std::size_t n) {
    std::vector<uint8_t> v(n);
    std::mt19937 rng(7);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
    return v;
}

}  // namespace

TEST_CASE("BioRing retires in order, bounded, with the bytes of one bio", "[bioring]") {
    const bool async = GENERATE(false, true);
    const std::size_t depth = GENERATE(1, 3, 8);
    INFO("async " << async << " depth " << depth);
    const auto plain = pattern(kChunk * kChunks);

    // Reference: the whole image written as one synchronous bio.
    auto ref_store = std::make_shared<MemoryStore>(plain.size());
    {
        auto t = make(ref_store, false);
        auto copy = plain;
        Bio b;
        b.dir = BioDir::Write;
        b.vecs = {SgEntry{copy.data(), copy.size()}};
        REQUIRE(t->submit_sync(b) == Status::Ok);
    }

    auto store = std::make_shared<MemoryStore>(plain.size());
    auto t = make(store, async);
    std::vector<uint64_t> order;
    std::size_t max_inflight = 0;
    BioRing* rp = nullptr;
    BioRing ring(*t, depth, kChunk, [&](const RetiredBio& r) {
        CHECK(r.status == Status::Ok);
        CHECK(r.dir == BioDir::Write);
        CHECK(r.data.size() == kChunk);
        CHECK(rp->in_flight() < depth);  // the retired one no longer counts
        order.push_back(r.sector);
        return Status::Ok;
    });
    rp = &ring;
    for (std::size_t i = 0; i < kChunks; ++i) {
        REQUIRE(ring.reserve() == Status::Ok);
        Bytes buf = ring.next_buffer();
        REQUIRE(buf.size() == kChunk);
        std::copy_n(plain.begin() + static_cast<long>(i * kChunk), kChunk, buf.begin());
        REQUIRE(ring.submit(i * kChunk / 512, BioDir::Write, buf) == Status::Ok);
        max_inflight = std::max(max_inflight, ring.in_flight());
    }
    CHECK(max_inflight == std::min(depth, kChunks));
    REQUIRE(ring.finish() == Status::Ok);
    CHECK(ring.in_flight() == 0);
    REQUIRE(order.size() == kChunks);
    for (std::size_t i = 0; i < kChunks; ++i) CHECK(order[i] == i * kChunk / 512);

    std::vector<uint8_t> got(plain.size()), want(plain.size());
    REQUIRE(store->read(0, got) == Status::Ok);
    REQUIRE(ref_store->read(0, want) == Status::Ok);
    CHECK(got == want);
}

TEST_CASE("BioRing over a block device writes and reads at the bio's sector, retired in order", "[bioring]") {
    const std::size_t depth = GENERATE(1, 3, 8);
    INFO("depth " << depth);
    const auto plain = pattern(kChunk * kChunks);
    auto store = std::make_shared<MemoryStore>(plain.size() + kChunk);
    auto dev = make_store_device(store, {.threads = 2});
    REQUIRE(dev);
    std::vector<uint64_t> order;
    {
        // Written one chunk past the start: the sector places it.
        BioRing ring(**dev, depth, kChunk, [&](const RetiredBio& r) {
            CHECK(r.status == Status::Ok);
            order.push_back(r.sector);
            return Status::Ok;
        });
        for (std::size_t i = 0; i < kChunks; ++i) {
            REQUIRE(ring.reserve() == Status::Ok);
            Bytes buf = ring.next_buffer();
            std::copy_n(plain.begin() + static_cast<long>(i * kChunk), kChunk, buf.begin());
            REQUIRE(ring.submit((i + 1) * kChunk / 512, BioDir::Write, buf) == Status::Ok);
        }
        REQUIRE(ring.finish() == Status::Ok);
    }
    std::vector<uint8_t> got(plain.size());
    REQUIRE(store->read(kChunk, got) == Status::Ok);
    CHECK(got == plain);

    std::vector<uint8_t> back;
    BioRing ring(**dev, depth, kChunk, [&](const RetiredBio& r) {
        CHECK(r.status == Status::Ok);
        CHECK(r.dir == BioDir::Read);
        order.push_back(r.sector);
        back.insert(back.end(), r.data.begin(), r.data.end());
        return Status::Ok;
    });
    for (std::size_t i = 0; i < kChunks; ++i) {
        REQUIRE(ring.reserve() == Status::Ok);
        REQUIRE(ring.submit((i + 1) * kChunk / 512, BioDir::Read, ring.next_buffer()) == Status::Ok);
    }
    REQUIRE(ring.finish() == Status::Ok);
    CHECK(back == plain);
    REQUIRE(order.size() == 2 * kChunks);
    for (std::size_t i = 0; i < order.size(); ++i) CHECK(order[i] == (i % kChunks + 1) * kChunk / 512);
}

TEST_CASE("BioRing stops on a retire error and on a refused bio", "[bioring]") {
    auto store = std::make_shared<MemoryStore>(kChunk * kChunks);
    auto t = make(store, true);
    std::vector<uint8_t> mem(kChunk * kChunks);

    SECTION("the callback's status stops the ring; the rest is waited for, not retired") {
        std::size_t retired = 0;
        BioRing ring(*t, 4, 0, [&](const RetiredBio&) {
            return ++retired == 2 ? Status::IoError : Status::Ok;
        });
        Status st = Status::Ok;
        std::size_t i = 0;
        for (; i < kChunks && st == Status::Ok; ++i)
            st = ring.submit(i * kChunk / 512, BioDir::Read, Bytes(mem).subspan(i * kChunk, kChunk));
        CHECK(st == Status::IoError);
        CHECK(ring.in_flight() == 0);
        CHECK(retired == 2);
        CHECK(i == 6);  // four in flight, then the 5th and 6th submits retired one each
        CHECK(ring.finish() == Status::Ok);
        CHECK(retired == 2);
    }
    SECTION("a bio the target refuses (past the end) is returned and nothing is retired") {
        std::size_t retired = 0;
        BioRing ring(*t, 4, kChunk, [&](const RetiredBio&) { ++retired; return Status::Ok; });
        REQUIRE(ring.submit(0, BioDir::Read, ring.next_buffer()) == Status::Ok);
        CHECK(ring.submit(kChunks * kChunk / 512, BioDir::Read, ring.next_buffer()) == Status::Invalid);
        CHECK(ring.in_flight() == 0);
        CHECK(retired == 0);
    }
    SECTION("an exception from the callback leaves the ring to wait in its destructor") {
        struct Boom {};
        try {
            BioRing ring(*t, 4, kChunk, [&](const RetiredBio&) -> Status { throw Boom{}; });
            for (std::size_t i = 0; i < kChunks; ++i)
                (void)ring.submit(i * kChunk / 512, BioDir::Read, ring.next_buffer());
            FAIL("no exception");
        } catch (const Boom&) {
        }
        t->drain();  // nothing left: the ring's destructor waited
    }
}
