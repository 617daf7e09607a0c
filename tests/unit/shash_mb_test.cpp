// ShashDesc::finup_mb: N messages finished from one shared state equal N
// separate computations, and the shared state survives the call.
#include "test_util.hpp"

#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>

#include <catch2/catch.hpp>

#include <random>
#include <vector>

using namespace blkcrypt;

TEST_CASE("finup_mb equals one finup per message from the same state", "[shash]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    std::mt19937 rng(7);
    // Without OpenSSL: the generic sha256 (sha256-ni where the CPU has it) and sha512-cryptopp.
    using testutil::openssl_or;
    for (const char* name : {openssl_or("sha256-openssl", "sha256"), "sha256-cryptopp",
                             openssl_or("sha512-openssl", "sha512-cryptopp"), "sha1-cryptopp", "md5",
                             "hmac(sha256)", "crc32c"}) {
        INFO(name);
        auto h = Shash::alloc(reg, name);
        REQUIRE(h.ok());
        if (h->info().needs_key) REQUIRE(h->setkey(std::vector<uint8_t>(h->info().min_keysize ? h->info().min_keysize : 20, 3)) == Status::Ok);
        auto desc = h->new_desc();
        REQUIRE(desc.ok());
        for (std::size_t len : {0u, 1u, 64u, 4096u}) {
            std::vector<uint8_t> prefix(37, 0xab);
            std::vector<std::vector<uint8_t>> msgs(5, std::vector<uint8_t>(len));
            for (auto& m : msgs)
                for (auto& b : m) b = static_cast<uint8_t>(rng());
            std::vector<std::vector<uint8_t>> got(5, std::vector<uint8_t>(h->digestsize()));
            std::vector<ConstBytes> in(msgs.begin(), msgs.end());
            std::vector<Bytes> out(got.begin(), got.end());
            desc->init();
            desc->update(prefix);
            REQUIRE(desc->finup_mb(in, out) == Status::Ok);
            for (std::size_t i = 0; i < msgs.size(); ++i) {
                std::vector<uint8_t> whole(prefix);
                whole.insert(whole.end(), msgs[i].begin(), msgs[i].end());
                std::vector<uint8_t> want(h->digestsize());
                REQUIRE(h->digest(whole, want) == Status::Ok);
                CHECK(got[i] == want);
            }
            // The shared state is still prefix-only: finishing it gives H(prefix).
            std::vector<uint8_t> after(h->digestsize()), want(h->digestsize());
            REQUIRE(desc->final(after) == Status::Ok);
            REQUIRE(h->digest(prefix, want) == Status::Ok);
            CHECK(after == want);
        }
        std::vector<uint8_t> a(10), b(11), d1(64), d2(64);
        std::vector<ConstBytes> uneven = {a, b};
        std::vector<Bytes> outs = {d1, d2};
        CHECK(desc->finup_mb(uneven, outs) == Status::Invalid);
        CHECK(desc->finup_mb(std::vector<ConstBytes>{a}, outs) == Status::Invalid);
        CHECK(desc->mb_width() >= 1);
    }
}
