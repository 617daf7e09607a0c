#include "toy_algs.hpp"

#include <blkcrypt/cipher.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/skcipher.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

using namespace blkcrypt;

namespace {
// Passes everything except drivers whose name contains "broken".
SelftestOutcome fake_selftest(const Alg& a, bool) {
    if (a.info().driver.find("broken") != std::string::npos) return {SelftestState::Failed, "bad vector"};
    return {SelftestState::Passed, "ok"};
}

const AlgStatus* find_status(const std::vector<AlgStatus>& l, const std::string& driver) {
    for (const auto& s : l)
        if (s.info.driver == driver) return &s;
    return nullptr;
}
}  // namespace

TEST_CASE("highest priority wins, driver name reaches any driver", "[registry]") {
    Registry reg(fake_selftest);
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-low", 100, 1)));
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-high", 300, 2)));
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-mid", 200, 3)));
    auto best = reg.lookup("toy", AlgType::Cipher);
    REQUIRE(best);
    CHECK((*best)->info().driver == "toy-high");
    auto low = reg.lookup("toy-low", AlgType::Cipher);
    REQUIRE(low);
    CHECK((*low)->info().driver == "toy-low");
}

TEST_CASE("duplicate and clashing names are refused", "[registry]") {
    Registry reg(fake_selftest);
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-a", 100)));
    auto dup = reg.register_alg(std::make_shared<toy::XorAlg>("toy-a", 200));
    REQUIRE_FALSE(dup);
    CHECK(dup.error().message.find("already registered") != std::string::npos);
    // A driver name equal to an existing generic name of another algorithm.
    AlgInfo in = toy::xor_info("toy", 1);
    in.name = "other";
    struct Other final : CipherAlg {
        using CipherAlg::CipherAlg;
        std::unique_ptr<CipherTfm> create_tfm() const override { return std::make_unique<toy::XorTfm>(0); }
    };
    CHECK_FALSE(reg.register_alg(std::make_shared<Other>(in)));
}

TEST_CASE("an algorithm that fails its self-test is never returned", "[registry]") {
    Registry reg(fake_selftest);
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-ok", 100)));
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-broken", 900)));
    auto best = reg.lookup("toy", AlgType::Cipher);
    REQUIRE(best);
    CHECK((*best)->info().driver == "toy-ok");
    auto direct = reg.lookup("toy-broken", AlgType::Cipher);
    REQUIRE_FALSE(direct);
    CHECK(direct.error().message.find("self-test") != std::string::npos);
    CHECK(direct.status() == Status::SelftestFailed);  // not NotFound: the CLI exits 1 on it
    // Only a broken driver under a generic name: the same status.
    Registry only_broken(fake_selftest);
    REQUIRE(only_broken.register_alg(std::make_shared<toy::XorAlg>("toy-broken", 100)));
    auto lone = only_broken.lookup("toy", AlgType::Cipher);
    REQUIRE_FALSE(lone);
    CHECK(lone.status() == Status::SelftestFailed);
    CHECK(reg.lookup("absent", AlgType::Cipher).status() == Status::NotFound);
    auto list = reg.list();
    const AlgStatus* s = find_status(list, "toy-broken");
    REQUIRE(s);
    CHECK(s->selftest == SelftestState::Failed);
    CHECK(s->selftest_message == "bad vector");
}

TEST_CASE("an algorithm is self-tested on its first use, once", "[registry]") {
    std::atomic<int> calls{0};
    Registry reg([&](const Alg& a, bool full) {
        ++calls;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the lookups meet
        return fake_selftest(a, full);
    });
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-a", 100, 1)));
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("other-b", 100, 2)));
    CHECK(calls == 0);  // registering tests nothing
    auto listed = reg.list();
    const AlgStatus* s = find_status(listed, "toy-a");
    REQUIRE(s);
    CHECK(s->selftest == SelftestState::Pending);
    CHECK(std::string(to_string(s->selftest)) == "unknown");  // /proc/crypto's word
    std::vector<std::thread> ts;
    std::vector<const Alg*> got(8, nullptr);
    for (int i = 0; i < 8; ++i)
        ts.emplace_back([&, i] {
            auto r = reg.lookup("toy", AlgType::Cipher);
            if (r) got[i] = r->get();
        });
    for (auto& t : ts) t.join();
    CHECK(calls == 1);  // one test, however many lookups wanted it
    for (auto* p : got) CHECK(p == got[0]);
    CHECK(got[0] != nullptr);
    listed = reg.list();
    CHECK(find_status(listed, "toy-a")->selftest == SelftestState::Passed);
    CHECK(find_status(listed, "other-b")->selftest == SelftestState::Pending);  // never used
    REQUIRE(reg.lookup("toy-a", AlgType::Cipher));
    CHECK(calls == 1);  // a verdict is kept for the life of the registry
}

TEST_CASE("a pending best choice that fails its first-use test gives way", "[registry]") {
    Registry reg(fake_selftest);
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-ok", 100)));
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-broken", 900)));
    auto listed = reg.list();
    CHECK(find_status(listed, "toy-broken")->selftest == SelftestState::Pending);
    auto best = reg.lookup("toy", AlgType::Cipher);
    REQUIRE(best);
    CHECK((*best)->info().driver == "toy-ok");
    listed = reg.list();
    CHECK(find_status(listed, "toy-broken")->selftest == SelftestState::Failed);
    auto direct = reg.lookup("toy-broken", AlgType::Cipher);
    REQUIRE_FALSE(direct);
    CHECK(direct.status() == Status::SelftestFailed);
}

TEST_CASE("a broken better algorithm does not supersede existing instances", "[registry]") {
    Registry reg(fake_selftest);
    REQUIRE(reg.register_template(std::make_shared<toy::WrapTemplate>()));
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-a", 100, 1)));
    auto old_alg = reg.lookup("wrap(toy)", AlgType::Skcipher);
    REQUIRE(old_alg);
    // Whether wrap(toy-a) is superseded depends on the newcomer's outcome:
    // registering it over an instance tests it at once.
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-broken", 200, 2)));
    const auto listed = reg.list();
    CHECK(find_status(listed, "toy-broken")->selftest == SelftestState::Failed);
    CHECK_FALSE(find_status(listed, "wrap(toy-a)")->superseded);
    auto now = reg.lookup("wrap(toy)", AlgType::Skcipher);
    REQUIRE(now);
    CHECK(now->get() == old_alg->get());
}

TEST_CASE("templates instantiate on demand with derived names", "[registry]") {
    Registry reg(fake_selftest);
    auto wrap = std::make_shared<toy::WrapTemplate>();
    REQUIRE(reg.register_template(wrap));
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-a", 100, 5)));
    auto inst = reg.lookup("wrap(toy)", AlgType::Skcipher);
    REQUIRE(inst);
    CHECK((*inst)->info().name == "wrap(toy)");
    CHECK((*inst)->info().driver == "wrap(toy-a)");
    CHECK((*inst)->info().priority == 100);
    // Second lookup reuses the instance; nested templates work.
    REQUIRE(reg.lookup("wrap(toy)", AlgType::Skcipher));
    CHECK(wrap->calls == 1);
    auto nested = reg.lookup("wrap(wrap(toy))", AlgType::Skcipher);
    REQUIRE_FALSE(nested);  // wrap wants a cipher, wrap(toy) is an skcipher
    CHECK(nested.error().message.find("not a cipher") != std::string::npos);
    // Unknown template / algorithm / malformed names.
    CHECK(reg.lookup("nosuch(toy)", AlgType::Skcipher).error().message.find("unknown template") != std::string::npos);
    CHECK(reg.lookup("wrap(nosuch)", AlgType::Skcipher).error().message.find("unknown algorithm") != std::string::npos);
    CHECK(reg.lookup("wrap(toy", AlgType::Skcipher).status() == Status::Invalid);
    CHECK(reg.lookup("wrap(toy,toy)", AlgType::Skcipher).error().message.find("takes 1 argument") != std::string::npos);
}

TEST_CASE("types: a cipher serves as an skcipher, not as a hash", "[registry]") {
    Registry reg(fake_selftest);
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-a", 100, 7)));
    REQUIRE(reg.lookup("toy", AlgType::Skcipher));
    auto h = reg.lookup("toy", AlgType::Shash);
    REQUIRE_FALSE(h);
    CHECK(h.error().message.find("is a cipher, not a shash") != std::string::npos);

    auto sk = Skcipher::alloc(reg, "toy");
    REQUIRE(sk);
    const uint8_t key[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    std::vector<uint8_t> in(24), out(24), back(24);
    for (int i = 0; i < 24; ++i) in[i] = static_cast<uint8_t>(i * 7);
    CHECK(sk->encrypt(in, out, {}) == Status::NoKey);
    REQUIRE(sk->setkey(key) == Status::Ok);
    REQUIRE(sk->encrypt(in, out, {}) == Status::Ok);
    for (int i = 0; i < 24; ++i) CHECK(out[i] == static_cast<uint8_t>((in[i] ^ key[i % 8]) + 7));
    REQUIRE(sk->decrypt(out, back, {}) == Status::Ok);
    CHECK(back == in);
    std::vector<uint8_t> odd(20);
    CHECK(sk->encrypt(odd, odd, {}) == Status::Invalid);  // not whole blocks
}

TEST_CASE("concurrent first lookups instantiate once", "[registry]") {
    Registry reg(fake_selftest);
    auto wrap = std::make_shared<toy::WrapTemplate>();
    wrap->delay_ms = 50;
    REQUIRE(reg.register_template(wrap));
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-a", 100)));
    std::vector<std::thread> ts;
    std::vector<const Alg*> got(8, nullptr);
    for (int i = 0; i < 8; ++i)
        ts.emplace_back([&, i] {
            auto r = reg.lookup("wrap(toy)", AlgType::Skcipher);
            if (r) got[i] = r->get();
        });
    for (auto& t : ts) t.join();
    CHECK(wrap->calls == 1);
    for (auto* p : got) CHECK(p == got[0]);
    CHECK(got[0] != nullptr);
}

TEST_CASE("a better inner algorithm supersedes existing instances", "[registry]") {
    Registry reg(fake_selftest);
    REQUIRE(reg.register_template(std::make_shared<toy::WrapTemplate>()));
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-a", 100, 1)));
    auto old_alg = reg.lookup("wrap(toy)", AlgType::Skcipher);
    REQUIRE(old_alg);
    auto old_tfm = Skcipher::alloc(reg, "wrap(toy)");
    REQUIRE(old_tfm);
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-b", 200, 2)));
    auto now = reg.lookup("wrap(toy)", AlgType::Skcipher);
    REQUIRE(now);
    CHECK((*now)->info().driver == "wrap(toy-b)");
    // The old instance still serves its users and its driver name.
    auto by_driver = reg.lookup("wrap(toy-a)", AlgType::Skcipher);
    REQUIRE(by_driver);
    CHECK(by_driver->get() == old_alg->get());
    const auto list = reg.list();  // find_status points into it
    const AlgStatus* s = find_status(list, "wrap(toy-a)");
    REQUIRE(s);
    CHECK(s->superseded);
    CHECK(s->refcnt == 2);  // registered + one live transform
}

TEST_CASE("template arrays register all or nothing, unregister removes instances", "[registry]") {
    Registry reg(fake_selftest);
    auto a = std::make_shared<toy::WrapTemplate>();
    auto b = std::make_shared<toy::WrapTemplate>();  // same name: clash
    std::vector<std::shared_ptr<Template>> both = {a, b};
    CHECK_FALSE(reg.register_templates(both));
    CHECK(reg.template_names().empty());
    std::vector<std::shared_ptr<Template>> one = {a};
    REQUIRE(reg.register_templates(one));
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-a", 100)));
    REQUIRE(reg.lookup("wrap(toy)", AlgType::Skcipher));
    reg.unregister_templates(one);
    CHECK(find_status(reg.list(), "wrap(toy-a)") == nullptr);
    CHECK_FALSE(reg.lookup("wrap(toy)", AlgType::Skcipher));
    REQUIRE(reg.unregister_alg("toy-a"));
    CHECK_FALSE(reg.lookup("toy", AlgType::Cipher));
}

TEST_CASE("a failed whole-mode driver does not hide the template composition", "[registry]") {
    Registry reg(fake_selftest);
    REQUIRE(reg.register_template(std::make_shared<toy::WrapTemplate>()));
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-a", 100)));
    // A "wrap(toy)" driver registered directly, at a high priority, that fails.
    struct Broken final : SkcipherAlg {
        using SkcipherAlg::SkcipherAlg;
        std::unique_ptr<SkcipherTfm> create_tfm() const override { return nullptr; }
    };
    AlgInfo in = toy::xor_info("wrap-toy-broken", 900);
    in.name = "wrap(toy)";
    in.type = AlgType::Skcipher;
    REQUIRE(reg.register_alg(std::make_shared<Broken>(in)));
    auto r = reg.lookup("wrap(toy)", AlgType::Skcipher);
    REQUIRE(r);
    CHECK((*r)->info().driver == "wrap(toy-a)");
    CHECK_FALSE(reg.lookup("wrap-toy-broken", AlgType::Skcipher));
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#include <blkcrypt/secure_buffer.hpp>

#include <cstring>
#include <fstream>
#include <sstream>

namespace {

// The smaps entry of the mapping that holds addr: its "Locked:" size in kB and
// its VmFlags line.
std::pair<long, std::string> smaps_of(const void* addr) {
    std::ifstream in("/proc/self/smaps");
    std::string line;
    const auto a = reinterpret_cast<uintptr_t>(addr);
    bool inside = false;
    long locked = -1;
    std::string flags;
    while (std::getline(in, line)) {
        uintptr_t lo = 0, hi = 0;
        char dash = 0;
        std::istringstream head(line);
        if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
            if (inside) break;
            inside = a >= lo && a < hi;
            continue;
        }
        if (!inside) continue;
        if (line.rfind("Locked:", 0) == 0) locked = std::stol(line.substr(7));
        if (line.rfind("VmFlags:", 0) == 0) flags = line;
    }
    return {locked, flags};
}

}  // namespace

TEST_CASE("SecureBuffer memory is locked and left out of core dumps", "[registry][secure]") {
    for (std::size_t n : {std::size_t{16}, std::size_t{64}, std::size_t{4096}, std::size_t{10000}}) {
        blkcrypt::SecureBuffer b(n);
        INFO("size " << n);
        for (std::size_t i = 0; i < n; ++i) REQUIRE(b[i] == 0);  // new bytes are zero
        const auto [locked, flags] = smaps_of(b.data());
        REQUIRE(flags.find(" dd") != std::string::npos);  // MADV_DONTDUMP
        REQUIRE(locked > 0);
        b[0] = 0x5a;
    }
    // A block handed out again comes back zeroed.
    blkcrypt::SecureBuffer a(48);
    std::memset(a.data(), 0xff, a.size());
    a.clear();
    blkcrypt::SecureBuffer c(48);
    for (std::size_t i = 0; i < c.size(); ++i) REQUIRE(c[i] == 0);
}
#endif
