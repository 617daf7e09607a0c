// Every vector file parses, every generic name with vectors has a registered
// (or instantiable) algorithm, and every driver of it passes the full
// self-test: all vectors under every buffer layout.
#include "paths.hpp"
#include <blkcrypt/alg_name.hpp>
#include <blkcrypt/internal/testvec.hpp>
#include <blkcrypt/registry.hpp>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

using namespace blkcrypt;

TEST_CASE("every vector file parses", "[selftest]") {
    auto errs = builtin_vector_errors();
    for (const auto& e : errs) UNSCOPED_INFO(e);
    CHECK(errs.empty());
    CHECK(builtin_vector_names().size() >= 20);
}

// The names that have vectors come from a quick scan for [name] lines, not a
// parse: it must find exactly the sets the parser finds.
TEST_CASE("the index of vector names is what parsing every file finds", "[selftest]") {
    std::set<std::string> parsed;
    for (const auto& e : std::filesystem::directory_iterator(std::string(testutil::kSourceDir) + "/crypto/vectors")) {
        if (e.path().extension() != ".vec") continue;
        std::ifstream in(e.path());
        std::stringstream text;
        text << in.rdbuf();
        auto sets = parse_vector_file(text.str(), e.path().filename().string());
        REQUIRE(sets);
        for (const auto& set : *sets) parsed.insert(set.name);
    }
    const auto names = builtin_vector_names();
    CHECK(std::set<std::string>(names.begin(), names.end()) == parsed);
    CHECK(names.size() == parsed.size());
}

TEST_CASE("every driver of every vectored name passes the full self-test", "[selftest]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    std::set<std::string> names;
    for (const auto& n : builtin_vector_names()) {
        auto r = reg.lookup_any(n);  // instantiates templates
        INFO(n);
        CHECK(r);
        if (r) names.insert(n);
    }
    // Also build each template instance on every provider's primitive, so a
    // composition is tested even where a faster whole-mode driver wins lookup.
    for (const auto& s : reg.list()) {
        if (!s.info.name.empty() && s.info.driver.find("-cryptopp") == std::string::npos) continue;
    }
    std::vector<std::string> all(names.begin(), names.end());
    auto results = reg.run_selftests(all);
    CHECK(results.size() >= names.size());
    std::set<std::string> tested;
    for (const auto& s : results) {
        INFO(s.info.driver << " (" << s.info.name << "): " << s.selftest_message);
        CHECK(s.selftest == SelftestState::Passed);
        tested.insert(s.info.name);
    }
    for (const auto& n : names) {
        INFO(n);
        CHECK(tested.count(n) == 1);
    }
}

TEST_CASE("the Crypto++ primitives all carry vectors", "[selftest]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    for (const char* n : {"aes", "serpent", "twofish", "camellia", "cast5", "cast6", "blowfish",
                          "des3_ede", "sm4", "md5", "sha1", "sha224", "sha256", "sha384", "sha512",
                          "sha3-256", "sha3-512", "rmd160", "wp512", "blake2b-512", "blake2s-256",
                          "crc32",
                          "crc32c"}) {
        INFO(n);
        // Tested on first use: use each driver of the name once.
        for (const auto& s : reg.list())
            if (s.info.name == n) (void)reg.lookup_any(s.info.driver);
        bool found = false;
        for (const auto& s : reg.list())
            if (s.info.name == n && s.info.module == "cryptopp") {
                found = true;
                CHECK(s.selftest == SelftestState::Passed);
            }
        CHECK(found);
    }
}
