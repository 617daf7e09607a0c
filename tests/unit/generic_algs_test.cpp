// The generic provider (cipher_null, xchacha12/20, nhpoly1305), the adiantum
// template, and the IV templates' kernel vectors.
#include "test_util.hpp"

#include <blkcrypt/alg_name.hpp>
#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/internal/testvec.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>
#include <blkcrypt/skcipher.hpp>

#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace blkcrypt;

namespace {

using Buf = std::vector<uint8_t>;

using testutil::random_bytes;

// The self-test state of the driver a lookup of `name` returns.
SelftestState selftest_of(Registry& reg, const std::string& name) {
    auto a = reg.lookup_any(name);
    if (!a) return SelftestState::Failed;
    for (const auto& s : reg.list())
        if (s.info.driver == (*a)->info().driver) return s.selftest;
    return SelftestState::Failed;
}

}  // namespace

TEST_CASE("generic provider: every algorithm is registered and passes its vectors", "[generic]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    for (const char* n : {"cipher_null", "ecb(cipher_null)", "digest_null", "xchacha12", "xchacha20",
                          "nhpoly1305", "adiantum(xchacha12,aes)", "adiantum(xchacha20,aes)"}) {
        INFO(n);
        CHECK(selftest_of(reg, n) == SelftestState::Passed);
    }
}

TEST_CASE("every IV template carries kernel vectors: 512, 4096, large sectors, key count", "[generic][ivvec]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    const std::set<std::string> iv_templates = {"plain", "plain64", "plain64be", "null", "benbi",
                                                "lmk", "tcw", "eboiv", "elephant"};
    std::map<std::string, std::size_t> per_template;
    bool s4096 = false, large = false, keycount = false, essiv = false;
    for (const auto& name : builtin_vector_names()) {
        auto parsed = AlgName::parse(name);
        REQUIRE(parsed);
        if (!iv_templates.count(parsed->base())) continue;
        INFO(name);
        CHECK(selftest_of(reg, name) == SelftestState::Passed);
        for (const auto& v : vectors_for(name)) {
            ++per_template[parsed->base()];
            s4096 |= v.number("sector_size", 512) == 4096;
            large |= v.number("iv_large_sectors") != 0;
            keycount |= v.number("key_count", 1) > 1;
        }
        essiv |= name.find("essiv(") != std::string::npos;
    }
    for (const auto& t : iv_templates) {
        INFO(t);
        CHECK(per_template[t] >= 1);
    }
    CHECK(s4096);
    CHECK(large);
    CHECK(keycount);
    CHECK(essiv);
}

TEST_CASE("adiantum: a wide block, lengths, names and refused compositions", "[generic][adiantum]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    std::mt19937 rng(13);
    for (const char* name : {"adiantum(xchacha12,aes)", "adiantum(xchacha20,aes)"}) {
        INFO(name);
        auto tfm = Skcipher::alloc(reg, name);
        REQUIRE(tfm);
        CHECK(tfm->ivsize() == 32);
        CHECK(tfm->info().blocksize == 16);
        REQUIRE(tfm->setkey(random_bytes(rng, 32)) == Status::Ok);
        Buf iv = random_bytes(rng, 32);

        Buf short_in(15), short_out(15);
        CHECK(tfm->encrypt(short_in, short_out, iv) == Status::Invalid);

        for (std::size_t n : {16u, 17u, 64u, 80u, 496u, 512u, 4096u}) {
            INFO("length " << n);
            const Buf pt = random_bytes(rng, n);
            Buf ct(n), back(n), iv_c = iv;
            REQUIRE(tfm->encrypt(pt, ct, iv_c) == Status::Ok);
            CHECK(iv_c == iv);  // the tweak is left unchanged
            REQUIRE(tfm->decrypt(ct, back, iv_c) == Status::Ok);
            CHECK(back == pt);
            // One flipped bit anywhere changes every 16-byte piece of the output.
            for (std::size_t at : {std::size_t{0}, n / 2, n - 1}) {
                Buf pt2 = pt, ct2(n);
                pt2[at] ^= 1;
                REQUIRE(tfm->encrypt(pt2, ct2, iv_c) == Status::Ok);
                for (std::size_t off = 0; off + 16 <= n; off += 16)
                    CHECK(!std::equal(ct.begin() + off, ct.begin() + off + 16, ct2.begin() + off));
            }
            // So does a different tweak.
            Buf iv2 = iv, ct3(n);
            iv2[31] ^= 0x80;
            REQUIRE(tfm->encrypt(pt, ct3, iv2) == Status::Ok);
            CHECK(ct3 != ct);
        }
    }
    // The hash may be named; the instance keeps the kernel's two-part name.
    auto three = reg.lookup("adiantum(xchacha12,aes,nhpoly1305)", AlgType::Skcipher);
    REQUIRE(three);
    CHECK((*three)->info().name == "adiantum(xchacha12,aes)");
    // chacha20's 16-byte IV, a 64-bit block cipher, a hash that is not NHPoly1305.
    CHECK(!reg.lookup("adiantum(chacha20,aes)", AlgType::Skcipher));
    CHECK(!reg.lookup("adiantum(xchacha12,des3_ede)", AlgType::Skcipher));
    CHECK(!reg.lookup("adiantum(xchacha12,aes,sha256)", AlgType::Skcipher));
    CHECK(!reg.lookup("adiantum(xchacha12)", AlgType::Skcipher));
}

TEST_CASE("nhpoly1305: any split of the message gives the same digest", "[generic][nhpoly1305]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    auto h = Shash::alloc(reg, "nhpoly1305");
    REQUIRE(h);
    CHECK(h->digestsize() == 16);
    std::mt19937 rng(1305);
    CHECK(h->setkey(random_bytes(rng, 1087)) != Status::Ok);
    REQUIRE(h->setkey(random_bytes(rng, 1088)) == Status::Ok);
    for (std::size_t n : {0u, 15u, 16u, 1008u, 1024u, 1040u, 3000u, 4096u}) {
        INFO("length " << n);
        const Buf m = random_bytes(rng, n);
        Buf one(16), pieces(16), bytes(16);
        REQUIRE(h->digest(m, one) == Status::Ok);
        auto d = h->new_desc();
        REQUIRE(d);
        // Pieces of 7, 1017 and 1 bytes: none aligned to a unit or an NH message.
        d->init();
        std::size_t off = 0;
        for (std::size_t step : {7u, 1017u, 1u}) {
            const std::size_t k = std::min(step, n - off);
            d->update(ConstBytes(m.data() + off, k));
            off += k;
        }
        d->update(ConstBytes(m.data() + off, n - off));
        REQUIRE(d->final(pieces) == Status::Ok);
        CHECK(pieces == one);
        // Byte by byte, with an export/import in the middle.
        d->init();
        for (std::size_t i = 0; i < n; ++i) {
            d->update(ConstBytes(m.data() + i, 1));
            if (i == n / 2) {
                Buf st(d->statesize());
                REQUIRE(d->export_state(st) == Status::Ok);
                d->init();
                REQUIRE(d->import_state(st) == Status::Ok);
            }
        }
        REQUIRE(d->final(bytes) == Status::Ok);
        CHECK(bytes == one);
    }
    // A different key gives a different digest of the same message.
    const Buf m = random_bytes(rng, 100);
    Buf a(16), b(16);
    REQUIRE(h->digest(m, a) == Status::Ok);
    REQUIRE(h->setkey(random_bytes(rng, 1088)) == Status::Ok);
    REQUIRE(h->digest(m, b) == Status::Ok);
    CHECK(a != b);
}

TEST_CASE("cipher_null: copies, in place and out of place, only an empty key", "[generic][null]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    auto tfm = Skcipher::alloc(reg, "ecb(cipher_null)");
    REQUIRE(tfm);
    CHECK(tfm->info().driver == "ecb-cipher_null");
    CHECK(tfm->ivsize() == 0);
    CHECK(tfm->setkey(Buf(16, 1)) != Status::Ok);
    REQUIRE(tfm->setkey({}) == Status::Ok);
    std::mt19937 rng(0);
    for (std::size_t n : {1u, 3u, 512u}) {
        const Buf pt = random_bytes(rng, n);
        Buf out(n, 0xee), inplace = pt;
        CHECK(tfm->encrypt(pt, out, {}) == Status::Ok);
        CHECK(out == pt);
        CHECK(tfm->decrypt(inplace, inplace, {}) == Status::Ok);
        CHECK(inplace == pt);
    }
    auto d = Shash::alloc(reg, "digest_null");
    REQUIRE(d);
    CHECK(d->digestsize() == 0);
}
