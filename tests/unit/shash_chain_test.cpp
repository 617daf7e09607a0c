// ShashDesc::chain (BitLocker's stretch loop): every sha256 driver, with its
// fast path or without, equals the loop written out round by round with
// one-shot digests of another driver.
#include "test_util.hpp"

#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>

#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

using namespace blkcrypt;

namespace {

// The straightforward stretch: hash msg, put the digest at its head, count.
std::vector<uint8_t> reference_chain(const Shash& h, std::vector<uint8_t> msg, uint64_t rounds) {
    const std::size_t d = h.digestsize(), c = msg.size() - 8;
    std::vector<uint8_t> out(d);
    for (uint64_t i = 0; i < rounds; ++i) {
        for (int b = 0; b < 8; ++b) msg[c + b] = static_cast<uint8_t>(i >> (8 * b));
        REQUIRE(h.digest(msg, out) == Status::Ok);
        std::copy(out.begin(), out.end(), msg.begin());
    }
    for (int b = 0; b < 8; ++b) msg[c + b] = static_cast<uint8_t>(rounds >> (8 * b));
    return msg;
}

}  // namespace

TEST_CASE("ShashDesc::chain equals the round-by-round loop on every sha256 driver", "[shash][bitlk]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    auto ref = Shash::alloc(reg, "sha256-cryptopp");
    REQUIRE(ref.ok());
    std::vector<std::string> drivers;
    for (const AlgStatus& a : reg.list())
        if (a.info.name == "sha256" && a.info.type == AlgType::Shash) drivers.push_back(a.info.driver);
    REQUIRE(!drivers.empty());
    std::mt19937 rng(16);
    for (const std::string& driver : drivers) {
        INFO(driver);
        auto h = Shash::alloc(reg, driver);
        REQUIRE(h.ok());
        auto desc = h->new_desc();
        REQUIRE(desc.ok());
        // 88: BitLocker's (last, initial, salt, count); 72 and 119: the ends of
        // the two-block fast path; 40 and 150: one block and three, round by round.
        for (std::size_t len : {88u, 72u, 119u, 40u, 150u}) {
            for (uint64_t rounds : {0u, 1u, 2u, 3u, 1000u}) {
                INFO("len " << len << ", rounds " << rounds);
                std::vector<uint8_t> msg(len);
                for (auto& b : msg) b = static_cast<uint8_t>(rng());
                const std::vector<uint8_t> want = reference_chain(*ref, msg, rounds);
                desc->init();
                desc->update(msg);  // a state the chain must not depend on
                REQUIRE(desc->chain(msg, rounds) == Status::Ok);
                CHECK(msg == want);
            }
        }
        std::vector<uint8_t> shorter(39);  // no room for the digest and the counter
        CHECK(desc->chain(shorter, 1) == Status::Invalid);
    }
}

TEST_CASE("ShashDesc::chain on a keyed hash and a longer digest", "[shash]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    for (const char* name : {"hmac(sha256)", "sha512"}) {
        INFO(name);
        auto h = Shash::alloc(reg, name);
        REQUIRE(h.ok());
        if (h->info().needs_key) REQUIRE(h->setkey(std::vector<uint8_t>(20, 7)) == Status::Ok);
        auto desc = h->new_desc();
        REQUIRE(desc.ok());
        std::vector<uint8_t> msg(h->digestsize() + 40, 0x5a);
        const std::vector<uint8_t> want = reference_chain(*h, msg, 5);
        REQUIRE(desc->chain(msg, 5) == Status::Ok);
        CHECK(msg == want);
    }
}
