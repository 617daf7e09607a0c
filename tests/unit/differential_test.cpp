// Differential tests: every generic name served by more than one driver
// (the OpenSSL provider's drivers, the template compositions on Crypto++
// reached by driver name, the Crypto++ and OpenSSL hashes) must give the
// same bytes for the same random inputs under random scatter-gather layouts,
// in place and out of place; decryption must round-trip; hash states
// exported by one driver must import into the other and finish to the same
// digest.
//
// The default run is short (a few hundred cases, a few seconds) with a fixed
// seed. Set BLKCRYPT_DIFF_LONG=1 for a long run (about 25 times as many
// cases, a random seed). BLKCRYPT_DIFF_SEED=<n> fixes the seed of either run;
// a failure prints the seed and the case.
//
// Built without OpenSSL (-DBLKCRYPT_WITH_OPENSSL=OFF) the x86 drivers are
// still compared with the compositions; a name left with one driver has
// nothing to compare and is skipped, saying so.
#include "test_util.hpp"

#include <blkcrypt/aead.hpp>
#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>
#include <blkcrypt/skcipher.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace blkcrypt;

namespace {

using Buf = std::vector<uint8_t>;

bool long_run() {
    const char* e = std::getenv("BLKCRYPT_DIFF_LONG");
    return e && std::string(e) == "1";
}

// Cases per generic name.
std::size_t cases(std::size_t short_run) { return long_run() ? short_run * 25 : short_run; }

// One seed per run; each test case derives its generator from it.
uint64_t seed() {
    static const uint64_t s = [] {
        if (const char* e = std::getenv("BLKCRYPT_DIFF_SEED")) return uint64_t{std::strtoull(e, nullptr, 0)};
        return long_run() ? uint64_t{std::random_device{}()} : uint64_t{0x5eedd1ff};
    }();
    return s;
}

Registry& diff_registry() {
    static Registry* reg = [] {
        auto* r = new Registry;
        REQUIRE(register_defaults(*r));
        return r;
    }();
    return *reg;
}

using testutil::random_bytes;

std::size_t pick(std::mt19937_64& rng, std::size_t lo, std::size_t hi) {  // [lo, hi]
    return lo + rng() % (hi - lo + 1);
}

// Mostly short messages (sectors, packets), some up to 64 KiB.
std::size_t random_length(std::mt19937_64& rng) {
    switch (rng() % 4) {
    case 0: return pick(rng, 0, 64);
    case 1: return pick(rng, 0, 1100);
    case 2: return 512 * pick(rng, 1, 8) + (rng() % 2 ? pick(rng, 0, 31) : 0);
    default: return pick(rng, 0, 65536);
    }
}

std::string first_diff(const Buf& got, const Buf& want) {
    if (got.size() != want.size())
        return "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
    for (std::size_t i = 0; i < got.size(); ++i)
        if (got[i] != want[i]) return "first difference at byte " + std::to_string(i);
    return "";
}

// Memory for one side of a request: `size` bytes at a random misalignment,
// cut into random segments (sometimes empty ones), guarded on both sides.
struct Side {
    static constexpr uint8_t kGuard = 0xa5;
    static constexpr std::size_t kGuardLen = 32;
    Buf mem;
    std::size_t start, size;
    std::vector<SgEntry> sg;

    Side(std::mt19937_64& rng, const Buf& content, std::size_t sz) : start(kGuardLen + rng() % 16), size(sz) {
        mem.assign(start + size + kGuardLen, kGuard);
        Buf fill = random_bytes(rng, size);  // what a driver must overwrite
        std::copy(fill.begin(), fill.end(), mem.begin() + static_cast<std::ptrdiff_t>(start));
        std::copy(content.begin(), content.end(), mem.begin() + static_cast<std::ptrdiff_t>(start));
        cut(rng);
    }

    void cut(std::mt19937_64& rng) {
        const int style = static_cast<int>(rng() % 10);
        std::size_t pos = 0;
        while (pos < size) {
            std::size_t n;
            if (style < 4) n = size;                                          // one segment
            else if (style < 8) n = pick(rng, 1, std::max<std::size_t>(size / 2, 1));  // a few
            else n = pick(rng, 1, size > 4096 ? 4096 : 40);                  // many small
            n = std::min(n, size - pos);
            if (rng() % 16 == 0) sg.push_back({mem.data() + start + pos, 0});
            sg.push_back({mem.data() + start + pos, n});
            pos += n;
        }
        if (sg.empty()) sg.push_back({mem.data() + start, 0});
    }

    Buf content() const {
        return Buf(mem.begin() + static_cast<std::ptrdiff_t>(start),
                   mem.begin() + static_cast<std::ptrdiff_t>(start + size));
    }
    bool guards_intact() const {
        for (std::size_t i = 0; i < mem.size(); ++i)
            if ((i < start || i >= start + size) && mem[i] != kGuard) return false;
        return true;
    }
};

std::string describe(const std::vector<SgEntry>& sg) {
    std::string s = std::to_string(sg.size()) + " segment(s):";
    for (std::size_t i = 0; i < sg.size() && i < 12; ++i) s += " " + std::to_string(sg[i].len);
    if (sg.size() > 12) s += " ...";
    return s;
}

// ---- skcipher -------------------------------------------------------------------
struct SkResult {
    Status status;
    Buf out, iv;
};

// One request through the handle under a random layout.
SkResult sk_run(std::mt19937_64& rng, const Skcipher& t, bool enc, const Buf& in, const Buf& iv0) {
    const bool in_place = rng() % 2;
    Side src(rng, in, in.size());
    Side dst_mem(rng, Buf(), in.size());
    Side& dst = in_place ? src : dst_mem;
    const Buf before = dst.content();
    SkResult r;
    r.iv = iv0;
    SkcipherRequest req;
    req.src = src.sg;
    req.dst = dst.sg;
    req.len = in.size();
    req.iv = r.iv;
    CryptoWait w;
    req.complete = w.callback();
    r.status = w.wait(enc ? t.encrypt(req) : t.decrypt(req));
    INFO((in_place ? "in place, " : "out of place, ") << "src " << describe(src.sg) << ", dst "
                                                      << describe(dst.sg));
    REQUIRE(src.guards_intact());
    REQUIRE(dst.guards_intact());
    r.out = dst.content();
    // A refused request writes nothing.
    if (r.status != Status::Ok) REQUIRE(first_diff(r.out, before) == "");
    return r;
}

struct SkSpec {
    const char* name;
    std::vector<std::size_t> keylens;
    std::size_t min_len;   // shorter is Invalid
    std::size_t multiple;  // lengths not a multiple are Invalid
    std::size_t n_cases;
};

// Key and length rules every driver of the name supports (xts-aes-openssl
// has no 48-byte keys, so xts is tested with 32 and 64).
const SkSpec kSkSpecs[] = {
    {"xts(aes)", {32, 64}, 16, 1, 120},
    {"cbc(aes)", {16, 24, 32}, 0, 16, 60},
    {"ctr(aes)", {16, 24, 32}, 0, 1, 100},
    {"ecb(aes)", {16, 24, 32}, 0, 16, 40},
};

Buf random_key(std::mt19937_64& rng, std::size_t n, bool xts) {
    Buf k = random_bytes(rng, n);
    if (xts) k[n / 2] ^= 0x80;  // never equal halves, which OpenSSL refuses
    return k;
}

// ctr: counters whose low 32 bits (or whole block) are about to wrap, to
// cross OpenSSL's 32-bit counter fast path.
Buf random_iv(std::mt19937_64& rng, std::size_t n, bool ctr) {
    Buf iv = random_bytes(rng, n);
    if (ctr && n == 16) {
        switch (rng() % 4) {
        case 0:
            for (std::size_t i = 12; i < 16; ++i) iv[i] = 0xff;
            iv[15] = static_cast<uint8_t>(0xff - rng() % 8);
            break;
        case 1:
            std::fill(iv.begin(), iv.end(), 0xff);
            iv[15] = static_cast<uint8_t>(0xff - rng() % 8);
            break;
        default: break;
        }
    }
    return iv;
}

// ---- aead -----------------------------------------------------------------------
struct AeadResult {
    Status status;
    Buf out;  // the whole dst area
};

AeadResult aead_run(std::mt19937_64& rng, const Aead& t, bool enc, const Buf& assoc, const Buf& text,
                    const Buf& iv0) {
    const std::size_t as = t.authsize();
    const std::size_t outlen = assoc.size() + (enc ? text.size() + as : text.size() - as);
    const bool in_place = rng() % 2;
    Buf in = assoc;
    in.insert(in.end(), text.begin(), text.end());
    // In place, the one buffer must hold the longer of input and output.
    Side src(rng, in, in_place ? std::max(in.size(), outlen) : in.size());
    Side dst_mem(rng, Buf(), outlen);
    Side& dst = in_place ? src : dst_mem;
    const Buf before = dst.content();
    Buf iv = iv0;
    AeadRequest req;
    req.src = src.sg;
    req.dst = dst.sg;
    req.assoclen = assoc.size();
    req.cryptlen = text.size();
    req.iv = iv;
    CryptoWait w;
    req.complete = w.callback();
    AeadResult r;
    r.status = w.wait(enc ? t.encrypt(req) : t.decrypt(req));
    INFO((in_place ? "in place, " : "out of place, ") << "src " << describe(src.sg) << ", dst "
                                                      << describe(dst.sg));
    REQUIRE(src.guards_intact());
    REQUIRE(dst.guards_intact());
    r.out = dst.content();
    if (r.status != Status::Ok && r.status != Status::BadMsg) REQUIRE(first_diff(r.out, before) == "");
    r.out.resize(outlen);
    return r;
}

// ---- hashes ---------------------------------------------------------------------
Buf hash_digest(const Shash& h, const Buf& msg) {
    Buf out(h.digestsize());
    REQUIRE(h.digest(msg, out) == Status::Ok);
    return out;
}

// Random update pieces, export after `at` bytes; the exported state.
Buf hash_export_at(std::mt19937_64& rng, const Shash& h, const Buf& msg, std::size_t at) {
    auto d = h.new_desc();
    REQUIRE(d);
    d->init();
    for (std::size_t pos = 0; pos < at;) {
        const std::size_t n = std::min<std::size_t>(pick(rng, 0, 300), at - pos);
        d->update(ConstBytes(msg).subspan(pos, n));
        pos += n;
    }
    Buf st(h.statesize());
    REQUIRE(d->export_state(st) == Status::Ok);
    return st;
}

Buf hash_finish_from(const Shash& h, const Buf& state, const Buf& msg, std::size_t at) {
    auto d = h.new_desc();
    REQUIRE(d);
    REQUIRE(d->import_state(state) == Status::Ok);
    Buf out(h.digestsize());
    REQUIRE(d->finup(ConstBytes(msg).subspan(at), out) == Status::Ok);
    return out;
}

struct HashSpec {
    const char* name;
    bool keyed;
    std::size_t n_cases;
};

const HashSpec kHashSpecs[] = {
    {"sha1", false, 40},
    {"sha256", false, 60},
    {"sha512", false, 40},
    {"hmac(sha256)", true, 60},
};

// The compositions on Crypto++ (and on OpenSSL's sha256, when built) by
// driver name, instantiated before the drivers of each generic name are collected.
std::vector<const char*> compositions() {
    std::vector<const char*> c = {"xts(aes-cryptopp)", "cbc(aes-cryptopp)", "ctr(aes-cryptopp)",
                                  "ecb(aes-cryptopp)", "gcm(aes-cryptopp)", "hmac(sha256-cryptopp)"};
    if (testutil::kWithOpenssl) c.push_back("hmac(sha256-openssl)");
    return c;
}

// Driver names per generic name, for every name with more than one.
std::map<std::string, std::vector<std::string>> multi_driver_names() {
    Registry& reg = diff_registry();
    for (const char* c : compositions()) {
        auto a = reg.lookup_any(c);
        INFO(c << ": " << (a ? "" : a.error().message));
        REQUIRE(a);
    }
    std::map<std::string, std::vector<std::string>> by_name;
    for (const auto& s : reg.list()) {
        if (s.selftest == SelftestState::Failed) continue;
        by_name[s.info.name].push_back(s.info.driver);
    }
    std::erase_if(by_name, [](const auto& kv) { return kv.second.size() < 2; });
    return by_name;
}

// The composition (or Crypto++ driver) that every other driver is compared with.
std::string reference_of(const std::vector<std::string>& drivers) {
    for (const auto& d : drivers)
        if (d.find("cryptopp") != std::string::npos && d.find("openssl") == std::string::npos) return d;
    return drivers.front();
}

// Whether name has drivers to compare. With OpenSSL every tested name has;
// without it a name the OpenSSL provider doubled may be left with one.
bool compared(const std::map<std::string, std::vector<std::string>>& groups, const std::string& name) {
    if (groups.count(name)) return true;
    if (testutil::kWithOpenssl) FAIL_CHECK(name << " has a single driver");
    else WARN("skipped " << name << ": one driver without OpenSSL, nothing to compare");
    return false;
}

// Every driver of one generic name, allocated, and which one is the reference.
template <class H>
struct DriverGroup {
    std::vector<std::string> names;
    std::vector<H> tfms;
    std::size_t ref_i = 0;
    const std::string& ref_name() const { return names[ref_i]; }
};

template <class H>
DriverGroup<H> alloc_group(const std::map<std::string, std::vector<std::string>>& groups,
                           const std::string& name) {
    auto g = groups.find(name);
    REQUIRE(g != groups.end());
    DriverGroup<H> out{g->second, {}, 0};
    const std::string ref = reference_of(g->second);
    for (const auto& d : g->second) {
        auto t = H::alloc(diff_registry(), d);
        REQUIRE(t);
        if (d == ref) out.ref_i = out.tfms.size();
        out.tfms.push_back(std::move(t).value());
    }
    return out;
}

}  // namespace

TEST_CASE("diff: generic names reach the OpenSSL drivers, driver names the compositions", "[diff]") {
    Registry& reg = diff_registry();
    // The driver of each generic name: OpenSSL's, or without it Crypto++'s
    // (or the composition over it).
    struct Expect {
        const char *name, *openssl, *otherwise;
    };
    const Expect generic_to_driver[] = {
        {"xts(aes)", "xts-aes-openssl", "xts(aes-cryptopp)"}, {"cbc(aes)", "cbc-aes-openssl", "cbc(aes-cryptopp)"},
        {"ctr(aes)", "ctr-aes-openssl", "ctr(aes-cryptopp)"}, {"ecb(aes)", "ecb-aes-openssl", "ecb(aes-cryptopp)"},
        {"gcm(aes)", "gcm-aes-openssl", "gcm(aes-cryptopp)"}, {"sha1", "sha1-openssl", "sha1-cryptopp"},
        {"sha256", "sha256-openssl", "sha256-cryptopp"},      {"sha512", "sha512-openssl", "sha512-cryptopp"},
        {"hmac(sha256)", "hmac-sha256-openssl", "hmac(sha256-cryptopp)"},
    };
    bool any_openssl = false;
    for (const auto& s : reg.list()) any_openssl = any_openssl || s.info.module == "openssl";
    CHECK(any_openssl == testutil::kWithOpenssl);
    (void)multi_driver_names();  // instantiate the compositions first
    // The x86 drivers (priority 400; xts-aes-vaes-avx2 350) win where the CPU
    // has their instructions, the zmm xts-aes-vaes over the ymm one (so with
    // BLKCRYPT_X86_DISABLE=avx512 on a CPU with both, the ymm one wins).
    const bool sha_ni = reg.lookup_any("sha256-ni").ok();
    const bool vaes = testutil::cpu_has_vaes_avx512();
    const bool vaes_avx2 = testutil::cpu_has_vaes_avx2();
    CHECK(reg.lookup_any("xts-aes-vaes").ok() == vaes);  // registered exactly when the CPU allows it
    CHECK(reg.lookup_any("xts-aes-vaes-avx2").ok() == vaes_avx2);
    for (const auto& e : generic_to_driver) {
        const std::string name = e.name;
        INFO(name);
        const char* driver_ = testutil::openssl_or(e.openssl, e.otherwise);
        std::string driver = driver_;
        if (sha_ni && name == "sha256") driver = "sha256-ni";
        if (name == "xts(aes)") driver = vaes ? "xts-aes-vaes" : vaes_avx2 ? "xts-aes-vaes-avx2" : driver_;
        // Without OpenSSL, hmac(sha256) is the instance over Crypto++ made
        // above (multi_driver_names), found before a new one over sha256-ni.
        const bool x86 = driver == "sha256-ni" || driver == "xts-aes-vaes" || driver == "xts-aes-vaes-avx2";
        const bool composition = driver.find('(') != std::string::npos;
        auto a = reg.lookup_any(name);
        REQUIRE(a);
        CHECK((*a)->info().driver == driver);
        CHECK((*a)->info().module == (x86                        ? "x86"
                                      : testutil::kWithOpenssl ? "openssl"
                                      : composition            ? "blkcrypt"
                                                               : "cryptopp"));
        const int prio = driver == "xts-aes-vaes-avx2" ? 350 : x86 ? 400 : testutil::kWithOpenssl ? 300 : 100;
        CHECK((*a)->info().priority == prio);
        auto b = reg.lookup_any(driver);
        REQUIRE(b);
        CHECK(b->get() == a->get());
    }
    for (const char* c : compositions()) {
        INFO(c);
        auto a = reg.lookup_any(c);
        REQUIRE(a);
        CHECK((*a)->info().driver == c);
        CHECK((*a)->info().module == "blkcrypt");
        // Built on Crypto++ (100) they rank below the OpenSSL drivers; on an
        // OpenSSL hash they tie with them, and the provider's driver,
        // registered first, still wins the generic lookup (checked above).
        CHECK((*a)->info().priority == (std::string(c).find("openssl") == std::string::npos ? 100 : 300));
    }
    for (const char* h : {"sha1-cryptopp", "sha256-cryptopp", "sha512-cryptopp"}) {
        auto a = reg.lookup_any(h);
        REQUIRE(a);
        CHECK((*a)->info().driver == h);
    }
    // The same sizes whichever driver serves a name.
    for (const auto& [name, drivers] : multi_driver_names()) {
        auto ref = reg.lookup_any(reference_of(drivers));
        REQUIRE(ref);
        for (const auto& d : drivers) {
            INFO(name << ": " << d << " vs " << (*ref)->info().driver);
            auto a = reg.lookup_any(d);
            REQUIRE(a);
            const AlgInfo &x = (*a)->info(), &y = (*ref)->info();
            CHECK(x.type == y.type);
            CHECK(x.blocksize == y.blocksize);
            CHECK(x.ivsize == y.ivsize);
            CHECK(x.digestsize == y.digestsize);
            CHECK(x.statesize == y.statesize);
            CHECK(x.maxauthsize == y.maxauthsize);
            CHECK(x.chunksize == y.chunksize);
            CHECK(x.needs_key == y.needs_key);
        }
    }
}

TEST_CASE("diff: every multi-driver name is covered by a differential test", "[diff]") {
    // gcm(aes) has its own case below; aegis128 its own file (aegis128_test.cpp, also tagged [diff]).
    std::set<std::string> covered = {"gcm(aes)", "aegis128"};
    for (const auto& s : kSkSpecs) covered.insert(s.name);
    for (const auto& s : kHashSpecs) covered.insert(s.name);
    for (const auto& [name, drivers] : multi_driver_names()) {
        INFO(name << " has " << drivers.size() << " drivers");
        CHECK(covered.count(name) == 1);
    }
}

TEST_CASE("diff: skciphers agree with the compositions", "[diff]") {
    const uint64_t sd = seed();
    std::mt19937_64 rng(sd ^ 0x5c);
    const auto groups = multi_driver_names();
    for (const SkSpec& spec : kSkSpecs) {
        if (!compared(groups, spec.name)) continue;
        auto group = alloc_group<Skcipher>(groups, spec.name);
        auto& ts = group.tfms;
        const std::size_t ref_i = group.ref_i;
        const std::string& ref_name = group.ref_name();
        const bool xts = std::string(spec.name).starts_with("xts");
        const bool ctr = std::string(spec.name).starts_with("ctr");
        const std::size_t ivsize = ts[ref_i].ivsize();
        const std::size_t n = cases(spec.n_cases);
        for (std::size_t c = 0; c < n; ++c) {
            const Buf key = random_key(rng, spec.keylens[rng() % spec.keylens.size()], xts);
            std::size_t len = random_length(rng);
            const bool want_valid = rng() % 8 != 0;  // now and then a length to refuse
            if (want_valid) {
                if (len < spec.min_len) len = spec.min_len + rng() % 16;
                len -= len % spec.multiple;
            } else if (spec.multiple > 1) {
                len = len - len % spec.multiple + pick(rng, 1, spec.multiple - 1);
            } else if (spec.min_len) {
                len = rng() % spec.min_len;
            }
            const bool valid = len >= spec.min_len && len % spec.multiple == 0;
            const Buf pt = random_bytes(rng, len);
            const Buf iv = random_iv(rng, ivsize, ctr);
            INFO("seed " << sd << ", " << spec.name << " case " << c << ": key " << key.size()
                         << " bytes, length " << len);
            for (auto& t : ts) REQUIRE(t.setkey(key) == Status::Ok);
            // Every run, the reference's included, under its own random layout.
            const SkResult ref_enc = sk_run(rng, ts[ref_i], true, pt, iv);
            REQUIRE(ref_enc.status == (valid ? Status::Ok : Status::Invalid));
            for (std::size_t i = 0; i < ts.size(); ++i) {
                INFO(group.names[i] << " vs " << ref_name);
                const SkResult e = sk_run(rng, ts[i], true, pt, iv);
                REQUIRE(e.status == ref_enc.status);
                if (!valid) continue;
                REQUIRE(first_diff(e.out, ref_enc.out) == "");
                REQUIRE(first_diff(e.iv, ref_enc.iv) == "");
                const SkResult d = sk_run(rng, ts[i], false, ref_enc.out, iv);
                REQUIRE(d.status == Status::Ok);
                REQUIRE(first_diff(d.out, pt) == "");
                // Decryption leaves the same IV: ctr's next counter, cbc's last
                // ciphertext block, xts's unchanged tweak.
                REQUIRE(first_diff(d.iv, ref_enc.iv) == "");
                if (!ctr && !xts && ivsize) {
                    // cbc: the output IV is the last ciphertext block both ways.
                    const Buf last = len ? Buf(ref_enc.out.end() - 16, ref_enc.out.end()) : iv;
                    REQUIRE(first_diff(d.iv, last) == "");
                }
            }
        }
    }
}

TEST_CASE("diff: wrong key sizes are refused by every driver", "[diff]") {
    const auto groups = multi_driver_names();
    for (const SkSpec& spec : kSkSpecs) {
        if (!compared(groups, spec.name)) continue;
        for (const auto& d : groups.at(spec.name)) {
            auto t = Skcipher::alloc(diff_registry(), d);
            REQUIRE(t);
            for (std::size_t n : {0, 1, 15, 17, 31, 33, 63, 65, 128}) {
                INFO(d << " key " << n);
                CHECK(t->setkey(Buf(n, 1)) == Status::Invalid);
            }
        }
    }
    // OpenSSL refuses equal xts halves; the composition accepts them (as the
    // kernel outside FIPS mode).
    Buf k(32, 0x42);
    auto c = Skcipher::alloc(diff_registry(), "xts(aes-cryptopp)");
    REQUIRE(c);
    CHECK(c->setkey(k) == Status::Ok);
    if (testutil::kWithOpenssl) {
        auto o = Skcipher::alloc(diff_registry(), "xts-aes-openssl");
        REQUIRE(o);
        CHECK(o->setkey(k) == Status::Invalid);
        // No AES-192-XTS in OpenSSL.
        CHECK(o->setkey(Buf(48, 7)) == Status::Invalid);
    }
    // The VAES drivers follow the composition: equal halves and 48-byte keys.
    for (const char* name : {"xts-aes-vaes", "xts-aes-vaes-avx2"}) {
        INFO(name);
        if (auto v = Skcipher::alloc(diff_registry(), name)) {
            CHECK(v->setkey(k) == Status::Ok);
            CHECK(v->setkey(Buf(48, 7)) == Status::Ok);
            CHECK(c->setkey(Buf(48, 7)) == Status::Ok);
        }
    }
}

TEST_CASE("diff: gcm(aes) agrees with the composition", "[diff]") {
    const uint64_t sd = seed();
    std::mt19937_64 rng(sd ^ 0x9cb);
    const auto groups = multi_driver_names();
    if (!compared(groups, "gcm(aes)")) return;
    auto group = alloc_group<Aead>(groups, "gcm(aes)");
    auto& ts = group.tfms;
    const std::size_t ref_i = group.ref_i;
    const std::string& ref_name = group.ref_name();
    static const std::size_t kAuth[] = {4, 8, 12, 13, 14, 15, 16};
    const std::size_t n = cases(120);
    for (std::size_t c = 0; c < n; ++c) {
        const Buf key = random_bytes(rng, 16 + 8 * (rng() % 3));
        const Buf iv = random_bytes(rng, 12);
        const Buf assoc = random_bytes(rng, pick(rng, 0, 64));
        const Buf pt = random_bytes(rng, random_length(rng));
        const std::size_t as = kAuth[rng() % 7];
        INFO("seed " << sd << ", gcm case " << c << ": key " << key.size() << ", assoc "
                     << assoc.size() << ", text " << pt.size() << ", tag " << as);
        for (auto& t : ts) {
            REQUIRE(t.setkey(key) == Status::Ok);
            REQUIRE(t.setauthsize(as) == Status::Ok);
        }
        const AeadResult ref = aead_run(rng, ts[ref_i], true, assoc, pt, iv);
        REQUIRE(ref.status == Status::Ok);
        const Buf ct(ref.out.begin() + static_cast<std::ptrdiff_t>(assoc.size()), ref.out.end());
        Buf want_pt = assoc;
        want_pt.insert(want_pt.end(), pt.begin(), pt.end());
        for (std::size_t i = 0; i < ts.size(); ++i) {
            INFO(group.names[i] << " vs " << ref_name);
            const AeadResult e = aead_run(rng, ts[i], true, assoc, pt, iv);
            REQUIRE(e.status == Status::Ok);
            REQUIRE(first_diff(e.out, ref.out) == "");
            const AeadResult d = aead_run(rng, ts[i], false, assoc, ct, iv);
            REQUIRE(d.status == Status::Ok);
            REQUIRE(first_diff(d.out, want_pt) == "");
            // A flipped bit anywhere in ciphertext or tag: BadMsg, and none
            // of the plaintext in dst.
            Buf bad = ct;
            bad[rng() % bad.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
            const AeadResult f = aead_run(rng, ts[i], false, assoc, bad, iv);
            REQUIRE(f.status == Status::BadMsg);
            if (pt.size() >= 8) {
                const Buf text(f.out.begin() + static_cast<std::ptrdiff_t>(assoc.size()), f.out.end());
                REQUIRE(text != pt);
                REQUIRE(std::search(text.begin(), text.end(), pt.begin(), pt.begin() + 8) == text.end());
            }
        }
    }
}

TEST_CASE("diff: hash drivers agree and their states are interchangeable", "[diff]") {
    const uint64_t sd = seed();
    std::mt19937_64 rng(sd ^ 0x4a5);
    const auto groups = multi_driver_names();
    for (const HashSpec& spec : kHashSpecs) {
        if (!compared(groups, spec.name)) continue;
        auto group = alloc_group<Shash>(groups, spec.name);
        auto& hs = group.tfms;
        const std::size_t ref_i = group.ref_i;
        const std::string& ref_name = group.ref_name();
        REQUIRE(hs[ref_i].statesize() > 0);
        const std::size_t n = cases(spec.n_cases);
        for (std::size_t c = 0; c < n; ++c) {
            const Buf msg = random_bytes(rng, random_length(rng));
            const std::size_t at = rng() % 4 == 0 ? msg.size() : pick(rng, 0, msg.size());
            const Buf key = random_bytes(rng, pick(rng, 0, 200));  // some longer than a block
            INFO("seed " << sd << ", " << spec.name << " case " << c << ": message " << msg.size()
                         << ", export at " << at << (spec.keyed ? ", key " + std::to_string(key.size()) : ""));
            if (spec.keyed)
                for (auto& h : hs) REQUIRE(h.setkey(key) == Status::Ok);
            const Buf want = hash_digest(hs[ref_i], msg);
            const Buf ref_state = hash_export_at(rng, hs[ref_i], msg, at);
            for (std::size_t i = 0; i < hs.size(); ++i) {
                INFO(group.names[i] << " vs " << ref_name);
                REQUIRE(first_diff(hash_digest(hs[i], msg), want) == "");
                // The same state, byte for byte (the kernel's struct).
                const Buf st = hash_export_at(rng, hs[i], msg, at);
                REQUIRE(first_diff(st, ref_state) == "");
                // Export here, finish there, both ways.
                REQUIRE(first_diff(hash_finish_from(hs[i], ref_state, msg, at), want) == "");
                REQUIRE(first_diff(hash_finish_from(hs[ref_i], st, msg, at), want) == "");
            }
        }
    }
}

TEST_CASE("diff: hash imports refuse the same malformed states", "[diff]") {
    const auto groups = multi_driver_names();
    for (const HashSpec& spec : kHashSpecs) {
        if (!compared(groups, spec.name)) continue;
        for (const auto& d : groups.at(spec.name)) {
            auto h = Shash::alloc(diff_registry(), d);
            REQUIRE(h);
            if (spec.keyed) REQUIRE(h->setkey(Buf(3, 1)) == Status::Ok);
            auto desc = h->new_desc();
            REQUIRE(desc);
            Buf st(h->statesize(), 0);
            // A byte count whose length in bits overflows the padding's field:
            // the top bits of sha1's count (offset 24), sha256's (32) or
            // sha512's count[1] (72).
            const std::size_t hi = h->statesize() == 96 ? 24 : h->statesize() == 104 ? 32 : 72;
            st[hi + 7] = 0xe0;
            INFO(d);
            CHECK(desc->import_state(st) == Status::Invalid);
        }
    }
}

TEST_CASE("diff: one keyed OpenSSL transform serves many threads", "[diff]") {
    // Each thread's requests use their own IVs on the shared transforms, so
    // pooled contexts (and cbc's remembered chaining values) are reused
    // across threads and requests in every order. Without OpenSSL: the VAES
    // drivers only, where the CPU has them.
    Registry& reg = diff_registry();
    std::mt19937_64 rng(seed() ^ 0x7d);
    const int kThreads = 4, kPer = long_run() ? 2000 : 100;
    struct Pair {
        const char *ours, *ref;
        std::size_t keylen;
    };
    const Pair pairs[] = {{"xts-aes-openssl", "xts(aes-cryptopp)", 64},
                          {"cbc-aes-openssl", "cbc(aes-cryptopp)", 32},
                          {"ctr-aes-openssl", "ctr(aes-cryptopp)", 16},
                          {"xts-aes-vaes", "xts(aes-cryptopp)", 64},  // where the CPU has VAES
                          {"xts-aes-vaes-avx2", "xts(aes-cryptopp)", 64}};
    std::vector<Skcipher> ours, refs;
    for (const auto& p : pairs) {
        if (std::string(p.ours).starts_with("xts-aes-vaes") && !reg.lookup_any(p.ours)) continue;
        if (std::string(p.ours).ends_with("-openssl") && !testutil::kWithOpenssl) continue;
        auto a = Skcipher::alloc(reg, p.ours);
        auto b = Skcipher::alloc(reg, p.ref);
        REQUIRE((a && b));
        const Buf key = random_key(rng, p.keylen, p.keylen == 64);
        REQUIRE(a->setkey(key) == Status::Ok);
        REQUIRE(b->setkey(key) == Status::Ok);
        ours.push_back(std::move(a).value());
        refs.push_back(std::move(b).value());
    }
    // gcm: OpenSSL's against the composition, or the composition against itself.
    auto gc = Aead::alloc(reg, testutil::openssl_or("gcm-aes-openssl", "gcm(aes-cryptopp)"));
    auto gr = Aead::alloc(reg, "gcm(aes-cryptopp)");
    REQUIRE((gc && gr));
    const Buf gkey = random_bytes(rng, 32);
    REQUIRE(gc->setkey(gkey) == Status::Ok);
    REQUIRE(gr->setkey(gkey) == Status::Ok);
    // Expected outputs computed serially by the compositions.
    struct Job {
        Buf pt, iv;
        std::vector<Buf> ct, iv_out;
        Buf gcm_ct;
    };
    std::vector<Job> jobs(static_cast<std::size_t>(kThreads * kPer));
    for (auto& j : jobs) {
        j.pt = random_bytes(rng, 16 * (1 + rng() % 128));
        j.iv = random_bytes(rng, 16);
        for (auto& r : refs) {
            Buf out(j.pt.size()), iv = j.iv;
            REQUIRE(r.encrypt(j.pt, out, iv) == Status::Ok);
            j.ct.push_back(out);
            j.iv_out.push_back(iv);
        }
        j.gcm_ct.resize(j.pt.size() + 16);
        Buf iv = j.iv;
        REQUIRE(gr->encrypt({}, j.pt, j.gcm_ct, Bytes(iv).first(12)) == Status::Ok);
    }
    std::vector<int> bad(kThreads, 0);
    std::vector<std::thread> th;
    for (int t = 0; t < kThreads; ++t)
        th.emplace_back([&, t] {
            for (int i = 0; i < kPer; ++i) {
                const Job& j = jobs[static_cast<std::size_t>(t * kPer + i)];
                for (std::size_t k = 0; k < ours.size(); ++k) {
                    Buf iv = j.iv, out(j.pt.size()), back(j.pt.size());
                    if (ours[k].encrypt(j.pt, out, iv) != Status::Ok || out != j.ct[k] || iv != j.iv_out[k]) ++bad[t];
                    iv = j.iv;
                    if (ours[k].decrypt(out, back, iv) != Status::Ok || back != j.pt || iv != j.iv_out[k]) ++bad[t];
                }
                Buf iv = j.iv, gout(j.pt.size() + 16), back(j.pt.size());
                if (gc->encrypt({}, j.pt, gout, Bytes(iv).first(12)) != Status::Ok || gout != j.gcm_ct) ++bad[t];
                if (gc->decrypt({}, gout, back, Bytes(iv).first(12)) != Status::Ok || back != j.pt) ++bad[t];
            }
        });
    for (auto& t : th) t.join();
    for (int t = 0; t < kThreads; ++t) CHECK(bad[t] == 0);
}
