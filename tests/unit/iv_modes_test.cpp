// lmk, tcw, eboiv and elephant IV templates: refusals (sector size, key
// length, key count, partial sectors), sources left alone by the modes that
// transform data around the cipher, eboiv's first-key rule with several keys,
// and the asynchronous path. Kernel byte-exactness is iv_golden_test.cpp.
#include "test_util.hpp"
#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/request.hpp>
#include <blkcrypt/sg.hpp>
#include <blkcrypt/skcipher.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace blkcrypt;
using testutil::registry;

namespace {

using Buf = std::vector<uint8_t>;

Buf pattern(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    Buf b(n);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    return b;
}

Buf le64(uint64_t v) {
    Buf b(8);
    put_le64(b.data(), v);
    return b;
}

Skcipher make(const std::string& name, SectorParams p, const Buf& key) {
    auto t = Skcipher::alloc(registry(), name);
    INFO(name << ": " << (t ? "" : t.error().message));
    REQUIRE(t);
    REQUIRE(t->set_sector_params(p) == Status::Ok);
    REQUIRE(t->setkey(key) == Status::Ok);
    return std::move(*t);
}

Status run(const Skcipher& tfm, bool enc, const Buf& in, Buf& out, std::size_t len, uint64_t sector,
           bool split = false) {
    Buf iv = le64(sector);
    auto cut = [&](const Buf& b) {
        std::vector<SgEntry> v;
        auto* p = const_cast<uint8_t*>(b.data());
        if (split && b.size() > 300) {
            v = {SgEntry{p, 37}, SgEntry{p + 37, 263}, SgEntry{p + 300, b.size() - 300}};
        } else {
            v = {SgEntry{p, b.size()}};
        }
        return v;
    };
    auto s = cut(in), d = cut(out);
    return testutil::crypt_sg(tfm, enc, SgList(s.data(), s.size()), SgList(d.data(), d.size()), len,
                              Bytes(iv.data(), iv.size()));
}

struct ModeCase {
    const char* name;
    unsigned key_count;
    std::size_t key_len;
    std::size_t sector_size;
};

// A valid configuration of each mode (lmk v3: 64 keys + seed).
const ModeCase kModes[] = {
    {"lmk(cbc(aes))", 64, 65 * 16, 512},   {"lmk(cbc(aes))", 64, 64 * 32, 512},
    {"lmk(cbc(aes))", 1, 32, 512},         {"tcw(cbc(aes))", 1, 64, 512},
    {"eboiv(cbc(aes))", 1, 32, 4096},      {"eboiv(cbc(aes))", 4, 128, 512},
    {"elephant(cbc(aes))", 1, 64, 4096},   {"elephant(cbc(aes))", 1, 32, 512},
};

}  // namespace

TEST_CASE("lmk and tcw refuse sectors other than 512 bytes", "[iv]") {
    for (const char* name : {"lmk(cbc(aes))", "tcw(cbc(aes))"}) {
        auto t = Skcipher::alloc(registry(), name);
        REQUIRE(t);
        for (std::size_t ss : {1024u, 2048u, 4096u}) {
            SectorParams p;
            p.sector_size = ss;
            CHECK(t->set_sector_params(p) == Status::Invalid);
        }
        CHECK(t->set_sector_params(SectorParams{}) == Status::Ok);
    }
    // eboiv and elephant take any data unit size.
    for (const char* name : {"eboiv(cbc(aes))", "elephant(cbc(aes))"}) {
        auto t = Skcipher::alloc(registry(), name);
        REQUIRE(t);
        SectorParams p;
        p.sector_size = 4096;
        CHECK(t->set_sector_params(p) == Status::Ok);
    }
}

TEST_CASE("IV modes refuse a key count that is not a power of two", "[iv]") {
    for (const char* name : {"lmk(cbc(aes))", "tcw(cbc(aes))", "eboiv(cbc(aes))", "elephant(cbc(aes))"}) {
        auto t = Skcipher::alloc(registry(), name);
        REQUIRE(t);
        for (unsigned kc : {0u, 3u, 48u, 65u}) {
            SectorParams p;
            p.key_count = kc;
            INFO(name << " key_count " << kc);
            CHECK(t->set_sector_params(p) == Status::Invalid);
        }
    }
}

TEST_CASE("tcw refuses a key no longer than its IV seed and whitening", "[iv]") {
    auto t = Skcipher::alloc(registry(), "tcw(cbc(aes))");
    REQUIRE(t);
    REQUIRE(t->set_sector_params(SectorParams{}) == Status::Ok);
    for (std::size_t n : {0u, 16u, 31u, 32u, 33u}) {  // 32 = iv_size 16 + whitening 16
        INFO("key bytes " << n);
        CHECK(t->setkey(pattern(n, 1)) == Status::Invalid);
    }
    CHECK(t->setkey(pattern(48, 1)) == Status::Ok);  // AES-128 + 32
    CHECK(t->setkey(pattern(64, 1)) == Status::Ok);  // AES-256 + 32
    // A key the request path never saw must not be usable.
    CHECK(t->setkey(pattern(40, 1)) == Status::Invalid);
    Buf in(512), out(512);
    CHECK(run(*t, true, in, out, 512, 0) == Status::NoKey);
}

TEST_CASE("lmk refuses a key that splits into neither 64 nor 65 equal parts", "[iv]") {
    auto t = Skcipher::alloc(registry(), "lmk(cbc(aes))");
    REQUIRE(t);
    SectorParams p;
    p.key_count = 64;
    REQUIRE(t->set_sector_params(p) == Status::Ok);
    CHECK(t->setkey(pattern(64 * 16, 2)) == Status::Ok);   // v2
    CHECK(t->setkey(pattern(65 * 16, 2)) == Status::Ok);   // v3
    CHECK(t->setkey(pattern(65 * 32, 2)) == Status::Ok);   // v3, AES-256
    CHECK(t->setkey(pattern(65 * 16 + 1, 2)) == Status::Invalid);
    CHECK(t->setkey(pattern(64 * 16 + 1, 2)) == Status::Invalid);
    CHECK(t->setkey(pattern(65 * 17, 2)) == Status::Invalid);  // 17-byte AES keys
    CHECK(t->setkey(pattern(64 * 16 - 1, 2)) == Status::Invalid);
    CHECK(t->setkey(pattern(65 * 8, 2)) == Status::Invalid);   // 8-byte seed part
}

TEST_CASE("elephant refuses keys with more than 32 sector-key bytes and bad inner shapes", "[iv]") {
    auto t = Skcipher::alloc(registry(), "elephant(cbc(aes))");
    REQUIRE(t);
    REQUIRE(t->set_sector_params(SectorParams{}) == Status::Ok);
    CHECK(t->setkey(pattern(32, 3)) == Status::Ok);
    CHECK(t->setkey(pattern(48, 3)) == Status::Ok);
    CHECK(t->setkey(pattern(64, 3)) == Status::Ok);
    CHECK(t->setkey(pattern(40, 3)) == Status::Invalid);   // 20-byte halves
    CHECK(t->setkey(pattern(128, 3)) == Status::Invalid);  // 64-byte sector key
    CHECK(t->setkey(pattern(0, 3)) == Status::Invalid);

    // Block size must equal IV size (eboiv's rule); a bare cipher has no IV.
    for (const char* bad : {"elephant(ecb(aes))", "elephant(aes)", "eboiv(ecb(aes))", "eboiv(ctr(aes))",
                            "lmk(ecb(aes))", "tcw(ecb(aes))"}) {
        INFO(bad);
        auto r = Skcipher::alloc(registry(), bad);
        CHECK_FALSE(r);
        if (!r) CHECK(!r.error().message.empty());
    }
}

TEST_CASE("a request that is not whole sectors is refused with dst untouched", "[iv]") {
    for (const auto& m : kModes) {
        SectorParams p;
        p.sector_size = m.sector_size;
        p.key_count = m.key_count;
        auto t = make(m.name, p, pattern(m.key_len, 4));
        for (std::size_t len : {m.sector_size + 16, m.sector_size / 2, m.sector_size * 2 - 1}) {
            INFO(m.name << " len " << len);
            Buf in = pattern(len, 5), out(len, 0xcc);
            const Buf orig_in = in;
            CHECK(run(t, true, in, out, len, 8) == Status::Invalid);
            CHECK(out == Buf(len, 0xcc));
            CHECK(run(t, false, in, out, len, 8) == Status::Invalid);
            CHECK(out == Buf(len, 0xcc));
            CHECK(in == orig_in);
        }
    }
}

TEST_CASE("IV modes leave the source alone out of place, and round-trip", "[iv]") {
    for (const auto& m : kModes) {
        SectorParams p;
        p.sector_size = m.sector_size;
        p.key_count = m.key_count;
        auto t = make(m.name, p, pattern(m.key_len, 6));
        const std::size_t n = m.sector_size * 4;
        for (bool split : {false, true}) {
            INFO(m.name << " key_count " << m.key_count << " split " << split);
            const Buf pt = pattern(n, 7);
            // Write (lmk reads the plaintext for its IV, elephant diffuses a copy).
            Buf src = pt, ct(n, 0);
            REQUIRE(run(t, true, src, ct, n, 16, split) == Status::Ok);
            CHECK(src == pt);
            CHECK(ct != pt);
            // Read (tcw unwhitens the input, lmk patches the output).
            Buf csrc = ct, back(n, 0);
            REQUIRE(run(t, false, csrc, back, n, 16, split) == Status::Ok);
            CHECK(csrc == ct);
            CHECK(back == pt);
            // In place gives the same bytes.
            Buf inplace = pt;
            REQUIRE(run(t, true, inplace, inplace, n, 16, split) == Status::Ok);
            CHECK(inplace == ct);
            REQUIRE(run(t, false, inplace, inplace, n, 16, split) == Status::Ok);
            CHECK(inplace == pt);
            // The position matters.
            Buf other(n);
            REQUIRE(run(t, true, pt, other, n, 24, split) == Status::Ok);
            CHECK(other != ct);
        }
    }
}

TEST_CASE("eboiv takes the IV from the first key whatever key the sector uses", "[iv]") {
    // crypt_iv_eboiv_gen encrypts with any_tfm(cc), i.e. tfm 0.
    const Buf key = pattern(64, 8);  // two AES-128 keys
    SectorParams p;
    p.key_count = 2;
    p.sector_size = 512;
    auto t = make("eboiv(cbc(aes))", p, key);
    auto cbc0 = Skcipher::alloc(registry(), "cbc(aes)");
    auto cbc1 = Skcipher::alloc(registry(), "cbc(aes)");
    auto ecb0 = Skcipher::alloc(registry(), "ecb(aes)");
    REQUIRE((cbc0 && cbc1 && ecb0));
    const Buf k0(key.begin(), key.begin() + 32), k1(key.begin() + 32, key.end());
    REQUIRE(cbc0->setkey(k0) == Status::Ok);
    REQUIRE(cbc1->setkey(k1) == Status::Ok);
    REQUIRE(ecb0->setkey(k0) == Status::Ok);

    const Buf pt = pattern(1024, 9);
    Buf ct(1024);
    REQUIRE(run(t, true, pt, ct, 1024, 5) == Status::Ok);  // sectors 5 (key 1) and 6 (key 0)
    for (uint64_t k = 0; k < 2; ++k) {
        const uint64_t sector = 5 + k;
        Buf off(16, 0), iv(16), none;
        auto b = le64(sector * 512);
        std::copy(b.begin(), b.end(), off.begin());
        REQUIRE(ecb0->encrypt(off, iv, none) == Status::Ok);
        const Skcipher& bulk = (sector & 1) ? *cbc1 : *cbc0;
        Buf in(pt.begin() + 512 * k, pt.begin() + 512 * (k + 1)), want(512);
        REQUIRE(bulk.encrypt(in, want, iv) == Status::Ok);
        CHECK(Buf(ct.begin() + 512 * k, ct.begin() + 512 * (k + 1)) == want);
    }
}

TEST_CASE("IV modes give the same bytes over an asynchronous inner cipher", "[iv]") {
    for (const auto& m : kModes) {
        std::string name = m.name;
        auto open = name.find('(');
        std::string async_name =
            name.substr(0, open) + "(cryptd(" + name.substr(open + 1, name.size() - open - 2) + "))";
        auto a = Skcipher::alloc(registry(), async_name);
        INFO(async_name << ": " << (a ? "" : a.error().message));
        REQUIRE(a);
        REQUIRE(a->is_async());
        SectorParams p;
        p.sector_size = m.sector_size;
        p.key_count = m.key_count;
        const Buf key = pattern(m.key_len, 10);
        REQUIRE(a->set_sector_params(p) == Status::Ok);
        REQUIRE(a->setkey(key) == Status::Ok);
        auto s = make(m.name, p, key);
        const std::size_t n = m.sector_size * 8;
        const Buf pt = pattern(n, 11);
        Buf want(n), got(n), back(n);
        REQUIRE(run(s, true, pt, want, n, 40) == Status::Ok);
        REQUIRE(run(*a, true, pt, got, n, 40, true) == Status::Ok);
        CHECK(got == want);
        REQUIRE(run(*a, false, got, back, n, 40, true) == Status::Ok);
        CHECK(back == pt);
    }
}

TEST_CASE("lmk on one transform from many threads equals one thread", "[iv]") {
    // Threads share the transform's pool of MD5 states.
    const Buf key = pattern(65 * 16, 3);
    auto t = make("lmk(cbc(aes))", SectorParams{512, false, 64}, key);
    constexpr std::size_t kLen = 512 * 16;
    constexpr int kThreads = 4, kRounds = 20;
    std::vector<Buf> in(kThreads), want(kThreads);
    for (int i = 0; i < kThreads; ++i) {
        in[i] = pattern(kLen, 100 + i);
        want[i].resize(kLen);
        REQUIRE(run(t, true, in[i], want[i], kLen, 1000 * i) == Status::Ok);
    }
    std::atomic<int> bad{0};
    std::vector<std::thread> th;
    for (int i = 0; i < kThreads; ++i)
        th.emplace_back([&, i] {
            for (int r = 0; r < kRounds; ++r) {
                Buf out(kLen), back(kLen);
                if (run(t, true, in[i], out, kLen, 1000 * i) != Status::Ok || out != want[i]) ++bad;
                if (run(t, false, out, back, kLen, 1000 * i) != Status::Ok || back != in[i]) ++bad;
            }
        });
    for (auto& x : th) x.join();
    CHECK(bad == 0);
}

TEST_CASE("IV modes walk requests of many small segments unit by unit", "[iv]") {
    // Segments of 1..67 bytes: units start and end inside segments, some
    // units span more than the 8 entries kept on the stack.
    std::vector<ModeCase> modes(std::begin(kModes), std::end(kModes));
    // An asynchronous inner transform: all units in flight at once.
    modes.push_back({"plain64(cryptd(cbc(aes)))", 1, 32, 512});
    modes.push_back({"elephant(cryptd(cbc(aes)))", 1, 64, 4096});
    for (const ModeCase& m : modes) {
        INFO(m.name);
        auto t = make(m.name, SectorParams{m.sector_size, false, m.key_count}, pattern(m.key_len, 9));
        const std::size_t len = m.sector_size * 6;
        const Buf in = pattern(len, 5);
        Buf flat(len);
        REQUIRE(run(t, true, in, flat, len, 77) == Status::Ok);
        Buf out(len);
        std::vector<SgEntry> s, d;
        for (std::size_t off = 0, k = 0; off < len; ++k) {
            const std::size_t n = std::min<std::size_t>(1 + (k * 29) % 67, len - off);
            s.push_back(SgEntry{const_cast<uint8_t*>(in.data()) + off, n});
            d.push_back(SgEntry{out.data() + off, n});
            if (k % 5 == 0) d.push_back(SgEntry{out.data() + off + n, 0});  // empty entries are skipped
            off += n;
        }
        Buf iv = le64(77);
        REQUIRE(testutil::crypt_sg(t, true, SgList(s.data(), s.size()), SgList(d.data(), d.size()), len,
                                   Bytes(iv.data(), iv.size())) == Status::Ok);
        CHECK(out == flat);
    }
}
