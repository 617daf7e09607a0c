// sha256-ni (SHA extensions, multi-buffer finup_mb) against Crypto++'s SHA-256 on
// every length around the block and padding edges, from random prefixes, and
// its exported state against the other sha256 drivers'.
#include "reference.hpp"
#include "test_util.hpp"

#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>

#include <catch2/catch.hpp>

#include <random>
#include <vector>

using namespace blkcrypt;
using Buf = std::vector<uint8_t>;

namespace {
Buf ref_sha256(const Buf& a, const Buf& b) {
    Buf all(a);
    all.insert(all.end(), b.begin(), b.end());
    return ref::sha256(all);
}
Buf random_buf(std::mt19937& rng, std::size_t n) {
    Buf b(n);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    return b;
}
}  // namespace

TEST_CASE("sha256-ni: digests, finup_mb and state exchange", "[shash][sha256ni]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    auto ni = Shash::alloc(reg, "sha256-ni");
    if (!ni) {
        WARN("no SHA-NI on this CPU: sha256-ni is not registered");
        return;
    }
    CHECK(Shash::alloc(reg, "sha256")->info().driver == "sha256-ni");
    std::mt19937 rng(11);
    for (std::size_t n = 0; n <= 260; ++n) {
        const Buf m = random_buf(rng, n);
        Buf d(32);
        REQUIRE(ni->digest(m, d) == Status::Ok);
        REQUIRE(d == ref_sha256({}, m));
    }
    auto desc = ni->new_desc();
    REQUIRE(desc.ok());
    CHECK((desc->mb_width() == 2 || desc->mb_width() == 16));  // 16 with AVX-512 (sha256_x16_test)
    // Prefix lengths on both sides of block boundaries, message lengths
    // crossing the padding edges, odd and even counts.
    for (std::size_t plen : {0u, 1u, 32u, 55u, 56u, 63u, 64u, 100u, 128u}) {
        for (std::size_t len : {0u, 1u, 7u, 8u, 31u, 32u, 55u, 56u, 63u, 64u, 65u, 119u, 120u, 200u, 4096u}) {
            for (std::size_t count : {1u, 2u, 3u, 6u}) {
                INFO("prefix " << plen << " len " << len << " count " << count);
                const Buf prefix = random_buf(rng, plen);
                std::vector<Buf> msgs, outs(count, Buf(32));
                for (std::size_t i = 0; i < count; ++i) msgs.push_back(random_buf(rng, len));
                std::vector<ConstBytes> in(msgs.begin(), msgs.end());
                std::vector<Bytes> out(outs.begin(), outs.end());
                desc->init();
                desc->update(prefix);
                REQUIRE(desc->finup_mb(in, out) == Status::Ok);
                for (std::size_t i = 0; i < count; ++i) REQUIRE(outs[i] == ref_sha256(prefix, msgs[i]));
                Buf after(32);
                REQUIRE(desc->final(after) == Status::Ok);  // the prefix state survived
                REQUIRE(after == ref_sha256(prefix, {}));
            }
        }
    }
    // The exported state moves between sha256-ni and the other drivers.
    std::vector<const char*> others = {"sha256-cryptopp"};
    if (testutil::kWithOpenssl) others.push_back("sha256-openssl");
    for (const char* other : others) {
        auto o = Shash::alloc(reg, other);
        REQUIRE(o.ok());
        auto od = o->new_desc();
        const Buf a = random_buf(rng, 77), b = random_buf(rng, 150);
        Buf st(104), d1(32), d2(32);
        desc->init();
        desc->update(a);
        REQUIRE(desc->export_state(st) == Status::Ok);
        REQUIRE(od->import_state(st) == Status::Ok);
        REQUIRE(od->finup(b, d1) == Status::Ok);
        REQUIRE(d1 == ref_sha256(a, b));
        od->init();
        od->update(b);
        REQUIRE(od->export_state(st) == Status::Ok);
        REQUIRE(desc->import_state(st) == Status::Ok);
        REQUIRE(desc->finup(a, d2) == Status::Ok);
        REQUIRE(d2 == ref_sha256(b, a));
    }
}
