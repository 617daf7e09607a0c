// The default registry comes up complete: every provider's drivers and every
// template source, and a registration failure is reported, not dropped.
#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/internal/builtin.hpp>
#include <blkcrypt/internal/geniv.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/skcipher.hpp>

#include <catch2/catch.hpp>

#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace blkcrypt;

namespace {

std::set<std::string> drivers_of(const Registry& reg) {
    std::set<std::string> out;
    for (const auto& s : reg.list()) out.insert(s.info.driver);
    return out;
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream in(s);
    for (std::string item; std::getline(in, item, '|');)
        if (!item.empty()) out.push_back(item);
    return out;
}

}  // namespace

TEST_CASE("the default registry has every provider's drivers and every template", "[defaults]") {
    Registry reg(nullptr);  // no self-tests: this is about what is registered
    REQUIRE(register_defaults(reg));

    // Each provider alone, in a registry of its own: all of its drivers are
    // in the default registry.
    std::size_t expected = 0;
    using Step = Result<void> (*)(Registry&);
    const std::vector<Step> providers = {register_cryptopp_provider, register_cryptopp_chacha_poly,
#if BLKCRYPT_WITH_OPENSSL
                                         register_openssl_provider,
#endif
                                         register_generic_provider};
    for (Step provider : providers) {
        Registry alone(nullptr);
        REQUIRE(provider(alone));
        const auto mine = drivers_of(alone);
        REQUIRE_FALSE(mine.empty());
        const auto all = drivers_of(reg);
        for (const auto& d : mine) {
            INFO(d);
            CHECK(all.count(d) == 1);
        }
        expected += mine.size();
    }
    CHECK(reg.list().size() >= expected);  // plus the CPU-detected x86 drivers

    std::set<std::string> registered;
    for (const auto& n : reg.template_names()) registered.insert(n);
    std::set<std::string> listed;
    for (const auto& t : builtin_template_list()) {
        INFO(t.name << " from " << t.file);
        CHECK(registered.count(t.name) == 1);  // the factory makes the template it is named after
        listed.insert(t.name);
    }
    CHECK(registered == listed);
    for (const char* n : {"ecb", "cbc", "xts", "essiv", "cryptd", "gcm", "plain64", "elephant", "adiantum"}) {
        INFO(n);
        CHECK(registered.count(n) == 1);
    }
}

TEST_CASE("every template source defines a registered factory", "[defaults]") {
    // Sources with helpers only; any other file under templates/ must define
    // make_NAME_template() (which the generated list then registers).
    const std::set<std::string> helpers = {"templates/cbcmac_state.cpp", "templates/cryptd_queue.cpp",
                                           "templates/esp_wrap.cpp", "templates/register.cpp",
                                           "templates/iv/geniv.cpp"};
    std::set<std::string> with_factory;
    for (const auto& t : builtin_template_list()) with_factory.insert(t.file);
    const auto files = split(BLKCRYPT_TEMPLATE_FILES);
    REQUIRE(files.size() >= 25);
    for (const auto& f : files) {
        INFO(f);
        CHECK((helpers.count(f) == 1) != (with_factory.count(f) == 1));
    }
}

TEST_CASE("a registration clash is reported, not dropped", "[defaults]") {
    Registry reg(nullptr);
    REQUIRE(register_defaults(reg));
    auto again = register_defaults(reg);
    REQUIRE_FALSE(again);
    CHECK(again.error().message.find("already registered") != std::string::npos);
    Registry templates_only(nullptr);
    REQUIRE(register_builtin_templates(templates_only));
    CHECK_FALSE(register_builtin_templates(templates_only));
}

namespace {

// An skcipher with a 16-byte block and IV that fails (NoMem) on requests
// shorter than a sector: eboiv's IV derivation, but not the data itself.
class ShortFailTfm final : public SkcipherTfm {
public:
    Status setkey(ConstBytes) override { return Status::Ok; }
    Status encrypt(SkcipherRequest& r) const override { return r.len < 512 ? Status::NoMem : Status::Ok; }
    Status decrypt(SkcipherRequest& r) const override { return r.len < 512 ? Status::NoMem : Status::Ok; }
};

class ShortFailAlg final : public SkcipherAlg {
public:
    ShortFailAlg() : SkcipherAlg(info()) {}
    std::unique_ptr<SkcipherTfm> create_tfm() const override { return std::make_unique<ShortFailTfm>(); }

private:
    static AlgInfo info() {
        AlgInfo in;
        in.name = "shortfail";
        in.driver = "shortfail-test";
        in.module = "test";
        in.type = AlgType::Skcipher;
        in.needs_key = true;
        in.blocksize = in.ivsize = 16;
        in.min_keysize = in.max_keysize = 16;
        return in;
    }
};

}  // namespace

TEST_CASE("eboiv passes on the inner cipher's failure (GenivTfm::pre returns it)", "[defaults][iv]") {
    Registry reg(nullptr);
    REQUIRE(register_builtin_templates(reg));
    REQUIRE(reg.register_alg(std::make_shared<ShortFailAlg>()));
    for (const char* name : {"eboiv(shortfail)"}) {
        INFO(name);
        auto t = Skcipher::alloc(reg, name);
        REQUIRE(t);
        REQUIRE(t->setkey(std::vector<uint8_t>(16)) == Status::Ok);
        std::vector<uint8_t> buf(512), iv(8);
        CHECK(t->encrypt(buf, buf, iv) == Status::NoMem);
        CHECK(t->decrypt(buf, buf, iv) == Status::NoMem);
    }
}
