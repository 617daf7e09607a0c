// Typed spawns and the mode-over-one-cipher builder: spawns record themselves
// (so superseding reaches every built-in mode), the derived sizes are the
// kernel's, and essiv takes its cipher from the mode's spawn.
#include "toy_algs.hpp"

#include <blkcrypt/ahash.hpp>
#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/internal/builtin.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/skcipher.hpp>

#include <catch2/catch.hpp>

#include <string>

using namespace blkcrypt;

namespace {
SelftestOutcome pass_all(const Alg&, bool) { return {SelftestState::Passed, "ok"}; }
}  // namespace

TEST_CASE("every built-in cipher mode is superseded when a better cipher registers", "[spawn]") {
    Registry reg(pass_all);
    REQUIRE(register_builtin_templates(reg));
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-a", 100, 1)));
    // toy has 8-byte blocks: the modes that take one.
    for (const std::string m : {"ecb", "cbc", "pcbc", "ctr", "cmac"}) {
        INFO(m);
        auto a = reg.lookup_any(m + "(toy)");
        REQUIRE(a);
        CHECK((*a)->info().driver == m + "(toy-a)");
        REQUIRE(detail::spawns_of(**a).size() == 1);
        CHECK(detail::spawns_of(**a).front()->info().driver == "toy-a");
    }
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-b", 200, 2)));
    for (const std::string m : {"ecb", "cbc", "pcbc", "ctr", "cmac"}) {
        INFO(m);
        auto b = reg.lookup_any(m + "(toy)");
        REQUIRE(b);
        CHECK((*b)->info().driver == m + "(toy-b)");
    }
}

TEST_CASE("the mode builder derives the kernel's names, priority and sizes", "[spawn]") {
    Registry& reg = [] () -> Registry& {
        static Registry r;
        REQUIRE(register_defaults(r));
        return r;
    }();
    auto aes = reg.describe("aes-cryptopp");
    REQUIRE(aes);
    struct Want {
        const char* driver;
        AlgType type;
        std::size_t blocksize, chunksize, ivsize, min_key, max_key, digest;
    };
    for (const Want& w : {Want{"ecb(aes-cryptopp)", AlgType::Skcipher, 16, 16, 0, 16, 32, 0},
                          Want{"cbc(aes-cryptopp)", AlgType::Skcipher, 16, 16, 16, 16, 32, 0},
                          Want{"pcbc(aes-cryptopp)", AlgType::Skcipher, 16, 16, 16, 16, 32, 0},
                          Want{"ctr(aes-cryptopp)", AlgType::Skcipher, 1, 16, 16, 16, 32, 0},
                          Want{"lrw(aes-cryptopp)", AlgType::Skcipher, 16, 16, 16, 32, 48, 0},
                          Want{"xts(aes-cryptopp)", AlgType::Skcipher, 16, 16, 16, 32, 64, 0},
                          Want{"cmac(aes-cryptopp)", AlgType::Shash, 16, 1, 0, 16, 32, 16},
                          Want{"xcbc(aes-cryptopp)", AlgType::Shash, 16, 1, 0, 16, 32, 16}}) {
        INFO(w.driver);
        auto i = reg.describe(w.driver);
        REQUIRE(i);
        const std::string d = w.driver;
        CHECK(i->name == d.substr(0, d.find('(')) + "(aes)");
        CHECK(i->priority == aes->priority);
        CHECK(i->module == "blkcrypt");
        CHECK(i->type == w.type);
        CHECK(i->needs_key);
        CHECK(i->blocksize == w.blocksize);
        CHECK(i->chunksize == w.chunksize);
        CHECK(i->ivsize == w.ivsize);
        CHECK(i->min_keysize == w.min_key);
        CHECK(i->max_keysize == w.max_key);
        CHECK(i->digestsize == w.digest);
    }
}

namespace {
// aes-cryptopp under another driver name with a higher priority: what a
// generic lookup of "aes" now finds.
class OtherAes final : public CipherAlg {
public:
    explicit OtherAes(std::shared_ptr<const Alg> real)
        : CipherAlg([&] {
              AlgInfo in = real->info();
              in.driver = "aes-other";
              in.module = "test";
              in.priority = 5000;
              return in;
          }()),
          real_(std::move(real)) {}
    std::unique_ptr<CipherTfm> create_tfm() const override { return create_cipher_tfm(*real_); }

private:
    std::shared_ptr<const Alg> real_;
};
}  // namespace

TEST_CASE("essiv takes its cipher from the mode's spawn, not from the mode's name", "[spawn]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    auto real = reg.lookup("aes-cryptopp", AlgType::Cipher);
    REQUIRE(real);
    REQUIRE(reg.register_alg(std::make_shared<OtherAes>(*real)));
    auto e = reg.lookup_any("essiv(cbc(aes-cryptopp),sha256)");
    INFO((e ? "" : e.error().message));
    REQUIRE(e);
    bool has_cryptopp = false, has_other = false;
    for (const auto& s : detail::spawns_of(**e)) {
        has_cryptopp |= s->info().driver == "aes-cryptopp";
        has_other |= s->info().driver == "aes-other";
    }
    CHECK(has_cryptopp);  // cbc(aes-cryptopp) was built on it
    CHECK_FALSE(has_other);  // the best "aes", which re-parsing the name would take
}

TEST_CASE("cryptd records its inner algorithm as its spawn", "[spawn]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    auto c = reg.lookup_any("cryptd(sha256)");
    REQUIRE(c);
    REQUIRE(detail::spawns_of(**c).size() == 1);
    CHECK(detail::spawns_of(**c).front()->info().name == "sha256");
    // What the handle computes comes from that record, not from the name.
    auto h = Ahash::alloc(reg, "cryptd(sha256)");
    REQUIRE(h);
    CHECK(h->info().name == "cryptd(sha256)");
    CHECK(h->computes() == "sha256");
    auto plain = Ahash::alloc(reg, "hmac(sha256)");
    REQUIRE(plain);
    CHECK(plain->computes() == "hmac(sha256)");
}

TEST_CASE("adiantum records its stream cipher, block cipher and hash as spawns", "[spawn][adiantum]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    for (const std::string name : {"adiantum(xchacha12,aes)", "adiantum(xchacha20,aes,nhpoly1305)"}) {
        INFO(name);
        auto a = reg.lookup_any(name);
        REQUIRE(a);
        const auto& spawns = detail::spawns_of(**a);
        REQUIRE(spawns.size() == 3);  // without them a better aes would not supersede it
        CHECK(spawns[0]->info().name.rfind("xchacha", 0) == 0);
        CHECK(spawns[1]->info().name == "aes");
        CHECK(spawns[2]->info().name == "nhpoly1305");
    }
}
