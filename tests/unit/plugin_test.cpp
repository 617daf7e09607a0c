// Plugins: the two shipped ones (sm3 hash driver, offset64 IV template) used
// through the dm-crypt engine and checked against Crypto++, unloading while a
// transform is in use, and every refusal of a broken plugin.
#include "paths.hpp"
#include "reference.hpp"
#include "test_util.hpp"
#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/bio.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/dm/table.hpp>
#include <blkcrypt/internal/testvec.hpp>
#include <blkcrypt/plugin.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>
#include <blkcrypt/verity/tree.hpp>

#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <random>
#include <string>
#include <vector>

using namespace blkcrypt;
using Buf = std::vector<uint8_t>;

namespace {

using testutil::hex;

const std::string kPlugins = testutil::kPluginDir;
const std::string kBroken = testutil::kTestPluginDir;

// Writes pt through a crypt target with this table; returns the store.
Buf encrypt_image(Registry& reg, const std::string& args, const Buf& pt) {
    auto t = dm::parse_crypt_args(args);
    if (!t) FAIL(t.error().message);
    auto store = std::make_shared<dm::MemoryStore>(pt.size());
    auto tg = dm::CryptTarget::create(reg, *t, store);
    if (!tg) FAIL(tg.error().message);
    Buf copy = pt;
    dm::Bio bio;
    bio.dir = dm::BioDir::Write;
    // Three segments, so the IV template walks a scatter-gathered bio.
    const std::size_t a = 700, b = 2000;
    bio.vecs = {{copy.data(), a}, {copy.data() + a, b}, {copy.data() + a + b, copy.size() - a - b}};
    REQUIRE((*tg)->submit_sync(bio) == Status::Ok);
    return store->data();
}

Buf random_buf(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    Buf b(n);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    return b;
}

// Whether the vectors a broken_vec_* plugin adds are still known to reg.
bool plugin_vectors_exist(Registry& reg, const std::string& file) {
    const char* name = file == "broken_vec_no_key.so" ? "cmac(camellia)" : "rfc4309(ccm(camellia))";
    auto v = find_vectors(reg, name);
    return v && !v->empty();
}

bool still_mapped(const std::string& path) {
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (h) ::dlclose(h);
    return h != nullptr;
}

}  // namespace

TEST_CASE("sm3 plugin: a new hash driver with its own vectors", "[plugin]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    CHECK_FALSE(Shash::alloc(reg, "sm3").ok());
    auto info = load_plugin(reg, kPlugins + "/sm3.so");
    if (!info) FAIL(info.error().message);
    CHECK(info->name == "sm3");
    CHECK(info->drivers == std::vector<std::string>{"sm3-plugin"});
    bool listed = false;
    for (const auto& s : reg.list())
        if (s.info.driver == "sm3-plugin") {
            listed = true;
            CHECK(s.info.module == kPlugins + "/sm3.so");
            CHECK(s.selftest == SelftestState::Passed);
        }
    CHECK(listed);

    auto h = Shash::alloc(reg, "sm3");
    REQUIRE(h.ok());
    for (std::size_t n : {0u, 1u, 55u, 56u, 63u, 64u, 65u, 1000u, 4096u}) {
        const Buf m = random_buf(n, static_cast<unsigned>(n));
        Buf d(32);
        REQUIRE(h->digest(m, d) == Status::Ok);
        CHECK(d == ref::sm3(m));
    }

    SECTION("ESSIV over sm3 through the dm-crypt engine") {
        const Buf key = random_buf(32, 1), pt = random_buf(8 * 512, 2);
        const Buf img = encrypt_image(reg, "aes-cbc-essiv:sm3 " + hex(key) + " 7", pt);
        const Buf salt = ref::sm3(key);
        for (uint64_t s = 0; s < 8; ++s) {
            Buf sector_iv(16, 0);
            for (int i = 0; i < 8; ++i) sector_iv[i] = static_cast<uint8_t>((s + 7) >> (8 * i));
            const Buf iv = ref::aes("ecb", salt, {}, sector_iv, true);
            const Buf want = ref::aes("cbc", key, iv, Buf(pt.begin() + s * 512, pt.begin() + (s + 1) * 512), true);
            CHECK(Buf(img.begin() + s * 512, img.begin() + (s + 1) * 512) == want);
        }
    }
    SECTION("a dm-verity tree hashed with sm3") {
        dm::MemoryStore data(64 * 4096);
        data.data() = random_buf(64 * 4096, 3);
        verity::VerityParams p;
        p.hash_name = "sm3";
        p.data_blocks = 64;
        auto g = verity::plan_tree(reg, p);
        REQUIRE(g.ok());
        dm::MemoryStore hash(g->hash_device_size(p));
        auto r = verity::format_tree(reg, p, data, hash);
        REQUIRE(r.ok());
        CHECK(r->driver == "sm3-plugin");
    }
    SECTION("unload: lookups fail at once, a transform in use keeps the object loaded") {
        REQUIRE(unload_plugin(reg, "sm3").ok());
        CHECK_FALSE(Shash::alloc(reg, "sm3").ok());
        CHECK(still_mapped(kPlugins + "/sm3.so"));  // h still holds it
        Buf d(32);
        CHECK(h->digest(Buf{'a', 'b', 'c'}, d) == Status::Ok);
        CHECK(hex(d) == "66c7f0f462eeedd9d1f2d46bdc10e4e24167c4875cf2f7a2297da02b8f4ba8e0");
        h = Shash::alloc(reg, "sha256");  // drop the last user
        CHECK_FALSE(still_mapped(kPlugins + "/sm3.so"));
        CHECK(unload_plugin(reg, "sm3").status() == Status::NotFound);
        auto again = load_plugin(reg, kPlugins + "/sm3.so");  // and back
        if (!again) FAIL(again.error().message);
        CHECK(Shash::alloc(reg, "sm3").ok());
    }
}

TEST_CASE("offset64 plugin: an IV template usable from a dm-crypt table", "[plugin]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    const Buf key = random_buf(64, 4), pt = random_buf(16 * 512, 5);
    auto table = dm::parse_crypt_args("aes-xts-offset64 " + hex(key) + " 0");
    REQUIRE(table.ok());  // parses; only the registry knows the IV mode
    auto missing = dm::CryptTarget::create(reg, *table, std::make_shared<dm::MemoryStore>(4096));
    REQUIRE_FALSE(missing.ok());
    CHECK_THAT(missing.error().message, Catch::Contains("offset64"));
    auto info = load_plugin(reg, kPlugins + "/offset64.so");
    if (!info) FAIL(info.error().message);
    CHECK(info->templates == std::vector<std::string>{"offset64"});
    for (const char* extra : {"", " 1 sector_size:4096", " 2 sector_size:4096 iv_large_sectors"}) {
        INFO(extra);
        const std::string opts = extra;
        const std::size_t ss = opts.empty() ? 512 : 4096;
        const bool large = opts.find("iv_large") != std::string::npos;
        const Buf img = encrypt_image(reg, "aes-xts-offset64 " + hex(key) + " 16" + opts, pt);
        for (std::size_t u = 0; u < pt.size() / ss; ++u) {
            const uint64_t cc = 16 + u * (ss / 512);
            const uint64_t byte_offset = large ? cc / (ss / 512) * ss : cc * 512;
            Buf tweak(16, 0);
            for (int i = 0; i < 8; ++i) tweak[i] = static_cast<uint8_t>(byte_offset >> (8 * i));
            const Buf want = ref::aes("xts", key, tweak, Buf(pt.begin() + u * ss, pt.begin() + (u + 1) * ss), true);
            CHECK(Buf(img.begin() + u * ss, img.begin() + (u + 1) * ss) == want);
        }
    }
    for (const auto& s : reg.list())
        if (s.info.name == "offset64(xts(aes))") CHECK(s.info.module == kPlugins + "/offset64.so");
    REQUIRE(unload_plugin(reg, "offset64").ok());
    CHECK(reg.describe("offset64(xts(aes))").status() == Status::NotFound);
}

TEST_CASE("broken plugins are refused with a reason and leave nothing behind", "[plugin]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    const std::size_t before = reg.list().size();
    const std::pair<const char*, const char*> cases[] = {
        {"broken_no_entry.so", "no entry point 'blkcrypt_plugin_entry'"},
        {"broken_bad_abi.so", "built for plugin ABI 42, this blkcrypt has ABI 1"},
        {"broken_dup_driver.so", "driver name 'sha256-cryptopp' is already registered"},
        {"broken_bad_selftest.so", "self-test of 'firstbytes-broken' failed"},
        {"broken_init_fails.so", "needs hardware that is not here"},
        {"broken_vec_no_key.so", "broken_vec_no_key.cpp:2: malformed vector: no key, but 'cmac(camellia-"},
        {"broken_vec_short_iv.so", "broken_vec_short_iv.cpp:2: malformed vector: IV of 1 bytes, ivsize is 8"},
    };
    for (const auto& [file, why] : cases) {
        INFO(file);
        auto r = load_plugin(reg, kBroken + "/" + file);
        REQUIRE_FALSE(r.ok());
        CHECK_THAT(r.error().message, Catch::Contains(why));
        CHECK_THAT(r.error().message, Catch::Contains(file));
        CHECK(reg.list().size() == before);
        CHECK(loaded_plugins(reg).empty());
    }
    CHECK_THAT(load_plugin(reg, kBroken + "/nonexistent.so").error().message, Catch::Contains("refused"));
    // The process goes on: a good plugin still loads, once.
    REQUIRE(load_plugin(reg, kPlugins + "/sm3.so").ok());
    CHECK_THAT(load_plugin(reg, kPlugins + "/sm3.so").error().message, Catch::Contains("already loaded"));
    auto errors = load_plugin_dirs(reg, kBroken + ":" + kPlugins);
    CHECK(errors.size() == 8);  // seven broken + sm3 again
    CHECK(loaded_plugins(reg).size() == 2);  // sm3, offset64
}

TEST_CASE("a plugin refused for malformed vectors leaves no instance and no vector behind", "[plugin]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    const std::size_t before = reg.list().size();
    for (const char* file : {"broken_vec_short_iv.so", "broken_vec_no_key.so"}) {
        INFO(file);
        REQUIRE_FALSE(load_plugin(reg, kBroken + "/" + file).ok());
        // The instances its self-tests built (rfc4309(ccm(camellia-...)), ccm(...)) are gone.
        CHECK(reg.list().size() == before);
        CHECK_FALSE(plugin_vectors_exist(reg, file));
    }
    // Built again from scratch, with no vectors: usable, not "already registered".
    auto aead = reg.describe("rfc4309(ccm(camellia))");
    if (!aead) FAIL(aead.error().message);
    CHECK(aead->driver == "rfc4309(ccm(camellia-cryptopp))");
    auto mac = Shash::alloc(reg, "cmac(camellia)");
    if (!mac) FAIL(mac.error().message);
    // A second refusal still reports the malformed vector, not a name clash.
    Registry reg2;
    REQUIRE(register_defaults(reg2));
    auto r = load_plugin(reg2, kBroken + "/broken_vec_short_iv.so");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("malformed vector"));
}

TEST_CASE("plugin vectors belong to the registry that loaded the plugin", "[plugin]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    REQUIRE(load_plugin(reg, kPlugins + "/sm3.so").ok());
    auto has = [](Registry& r) { auto v = find_vectors(r, "sm3"); return v && !v->empty(); };
    CHECK(has(reg));
    CHECK(vectors_for("sm3").empty());  // not compiled in
    {
        // Another registry sees none of them until it loads the plugin itself,
        // and its unload leaves the first registry's vectors alone.
        Registry other;
        REQUIRE(register_defaults(other));
        CHECK_FALSE(has(other));
        REQUIRE(load_plugin(other, kPlugins + "/sm3.so").ok());
        CHECK(has(other));
        REQUIRE(unload_plugin(other, "sm3").ok());
        CHECK_FALSE(has(other));
        CHECK(has(reg));
    }
    REQUIRE(unload_plugin(reg, "sm3").ok());
    CHECK_FALSE(has(reg));
    REQUIRE(load_plugin(reg, kPlugins + "/sm3.so").ok());  // and back, with its vectors
    CHECK(has(reg));
}
