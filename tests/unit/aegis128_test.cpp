// aegis128: the portable driver (aegis128-generic) and the AES-NI one
// (aegis128-aesni) against each other on random lengths of assoc data and
// text and every tag length, through scatter-gather lists cut at random,
// in and out of place; a flipped byte anywhere is refused with the text
// wiped; and the real kernel's AF_ALG output (tests/aead/kernel) is
// reproduced by both. The testmgr vectors run in the self-test
// (crypto/vectors/aegis128.vec).
#include "paths.hpp"
#include "test_util.hpp"

#include <blkcrypt/aead.hpp>
#include <blkcrypt/registry.hpp>

#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace blkcrypt;
using testutil::cpu_has_aesni;
using testutil::random_bytes;
using Buf = std::vector<uint8_t>;

namespace {

std::optional<Aead> keyed(Registry& reg, const std::string& driver, const Buf& key, std::size_t authsize) {
    auto a = Aead::alloc(reg, driver);
    if (!a) return std::nullopt;
    REQUIRE(a->setkey(key) == Status::Ok);
    REQUIRE(a->setauthsize(authsize) == Status::Ok);
    return std::move(*a);
}

// mem cut into pieces of 0..max bytes (0: one piece).
std::vector<SgEntry> cut(Buf& mem, std::size_t max, std::mt19937& rng) {
    std::vector<SgEntry> sg;
    if (!max) return {{mem.data(), mem.size()}};
    for (std::size_t pos = 0; pos < mem.size();) {
        const std::size_t n = std::min<std::size_t>(rng() % (max + 1), mem.size() - pos);
        sg.push_back({mem.data() + pos, n});
        pos += n;
    }
    if (sg.empty()) sg.push_back({mem.data(), 0});
    return sg;
}

// One request, src = assoc || in; returns dst (assoc || out) and the status.
std::pair<Status, Buf> run(const Aead& a, bool enc, const Buf& assoc, const Buf& in, const Buf& iv0,
                           bool in_place, std::size_t max_piece, std::mt19937& rng) {
    const std::size_t as = a.authsize();
    const std::size_t outlen = assoc.size() + (enc ? in.size() + as : in.size() - as);
    Buf src = assoc;
    src.insert(src.end(), in.begin(), in.end());
    if (in_place) src.resize(std::max(src.size(), outlen));
    Buf dst(outlen, 0xee);
    auto ssg = cut(src, max_piece, rng);
    auto dsg = in_place ? ssg : cut(dst, max_piece, rng);
    Buf iv = iv0;
    AeadRequest req;
    req.src = ssg;
    req.dst = dsg;
    req.assoclen = assoc.size();
    req.cryptlen = in.size();
    req.iv = iv;
    const Status s = enc ? a.encrypt(req) : a.decrypt(req);
    Buf out = in_place ? src : dst;
    out.resize(outlen);
    return {s, out};
}

const char* const kDrivers[] = {"aegis128-generic", "aegis128-aesni"};


}  // namespace

TEST_CASE("aegis128: registered with AES-NI preferred", "[aead][aegis128]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    auto gen = Aead::alloc(reg, "aegis128-generic");
    REQUIRE(gen);
    CHECK(gen->ivsize() == 16);
    CHECK(gen->info().maxauthsize == 16);
    for (std::size_t n : {0u, 4u, 7u, 17u}) CHECK(gen->setauthsize(n) == Status::Invalid);
    for (std::size_t n = 8; n <= 16; ++n) CHECK(gen->setauthsize(n) == Status::Ok);
    CHECK(gen->setkey(Buf(32)) == Status::Invalid);
    auto best = Aead::alloc(reg, "aegis128");
    REQUIRE(best);
    // A driver that fails its self-test is not served: this is where a
    // broken aegis128-aesni shows up rather than being skipped below.
    if (cpu_has_aesni()) {
        REQUIRE(Aead::alloc(reg, "aegis128-aesni"));
        CHECK(best->info().driver == "aegis128-aesni");
    } else {
        WARN("no AES-NI on this CPU (or hidden): aegis128-aesni is not registered");
    }
}

TEST_CASE("aegis128: the generic and AES-NI drivers agree and refuse tampering", "[aead][aegis128][diff]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    std::mt19937 rng(24);
    // Lengths near the block edges first, then random ones up to 5 KiB.
    std::vector<std::pair<std::size_t, std::size_t>> lens = {{0, 0}, {0, 1}, {1, 0}, {15, 17}, {16, 16},
                                                              {17, 15}, {31, 33}, {32, 4096}, {20, 512}};
    for (int i = 0; i < 60; ++i) lens.emplace_back(rng() % 5121, rng() % 5121);
    for (auto [alen, plen] : lens) {
        const std::size_t authsize = 8 + rng() % 9;
        INFO("assoc " << alen << " text " << plen << " tag " << authsize);
        const Buf key = random_bytes(rng, 16), iv = random_bytes(rng, 16);
        const Buf assoc = random_bytes(rng, alen), pt = random_bytes(rng, plen);
        auto gen = keyed(reg, kDrivers[0], key, authsize);
        REQUIRE(gen);
        auto [s, ref] = run(*gen, true, assoc, pt, iv, false, 0, rng);
        REQUIRE(s == Status::Ok);
        REQUIRE(ref.size() == alen + plen + authsize);
        REQUIRE(Buf(ref.begin(), ref.begin() + alen) == assoc);  // assoc copied to dst
        const Buf ct(ref.begin() + alen, ref.end());
        for (const char* d : kDrivers) {
            auto a = keyed(reg, d, key, authsize);
            if (!a) continue;  // no AES-NI
            INFO(d);
            for (auto [in_place, piece] : {std::pair<bool, std::size_t>{false, 0}, {true, 0}, {false, 7},
                                           {true, 23}, {false, 1 + rng() % 64}}) {
                INFO("in place " << in_place << " pieces " << piece);
                auto [se, e] = run(*a, true, assoc, pt, iv, in_place, piece, rng);
                REQUIRE(se == Status::Ok);
                REQUIRE(e == ref);
                auto [sd, p] = run(*a, false, assoc, ct, iv, in_place, piece, rng);
                REQUIRE(sd == Status::Ok);
                REQUIRE(Buf(p.begin() + alen, p.end()) == pt);
            }
            // One flipped bit in the assoc data, the ciphertext or the tag.
            Buf bad_assoc = assoc, bad_ct = ct;
            const std::size_t at = rng() % (alen + ct.size());
            (at < alen ? bad_assoc[at] : bad_ct[at - alen]) ^= static_cast<uint8_t>(1u << (rng() % 8));
            auto [sb, p] = run(*a, false, bad_assoc, bad_ct, iv, false, 0, rng);
            CHECK(sb == Status::BadMsg);
            CHECK(Buf(p.begin() + alen, p.end()) == Buf(plen, 0));  // the text wiped
            // A wrong IV is refused as well.
            Buf iv2 = iv;
            iv2[rng() % 16] ^= 0x80;
            CHECK(run(*a, false, assoc, ct, iv2, false, 0, rng).first == Status::BadMsg);
        }
    }
}

// tests/aead/kernel/aegis128-af_alg.txt: blocks of key/iv/assoc/ptext/ctext.
TEST_CASE("aegis128: both drivers reproduce the kernel's AF_ALG output", "[aead][aegis128][kernel]") {
    std::ifstream f(std::string(testutil::kSourceDir) + "/tests/aead/kernel/aegis128-af_alg.txt");
    REQUIRE(f);
    std::vector<std::map<std::string, Buf>> cases(1);
    for (std::string line; std::getline(f, line);) {
        if (line.empty() || line[0] == '#') {
            if (!cases.back().empty() && line.empty()) cases.emplace_back();
            continue;
        }
        std::istringstream ls(line);
        std::string k, eq, v;
        ls >> k >> eq >> v;
        Buf b;
        for (std::size_t i = 0; i + 1 < v.size(); i += 2) b.push_back(static_cast<uint8_t>(std::stoul(v.substr(i, 2), nullptr, 16)));
        cases.back()[k] = b;
    }
    if (cases.back().empty()) cases.pop_back();
    REQUIRE(cases.size() >= 8);
    Registry reg;
    REQUIRE(register_defaults(reg));
    std::mt19937 rng(6);
    for (auto& c : cases) {
        const std::size_t authsize = c["ctext"].size() - c["ptext"].size();
        INFO("assoc " << c["assoc"].size() << " text " << c["ptext"].size() << " tag " << authsize);
        for (const char* d : kDrivers) {
            auto a = keyed(reg, d, c["key"], authsize);
            if (!a) continue;
            INFO(d);
            for (auto [in_place, piece] : {std::pair<bool, std::size_t>{false, 0}, {true, 0}, {false, 13}}) {
                INFO("in place " << in_place << " pieces " << piece);
                auto [s, out] = run(*a, true, c["assoc"], c["ptext"], c["iv"], in_place, piece, rng);
                REQUIRE(s == Status::Ok);
                CHECK(Buf(out.begin() + c["assoc"].size(), out.end()) == c["ctext"]);
                auto [sd, p] = run(*a, false, c["assoc"], c["ctext"], c["iv"], in_place, piece, rng);
                REQUIRE(sd == Status::Ok);
                CHECK(Buf(p.begin() + c["assoc"].size(), p.end()) == c["ptext"]);
            }
        }
    }
}
