// hmac, cmac, xcbc and essiv templates: vectors through the public handles,
// export/import, key handling, create-time refusals, and essiv against an
// independent computation (python3-cryptography).
#include "test_util.hpp"
#include <blkcrypt/internal/builtin.hpp>
#include <blkcrypt/cipher.hpp>
#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>
#include <blkcrypt/skcipher.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace blkcrypt;

namespace {

using testutil::unhex;
using testutil::hex;
using testutil::text_copy;

using Buf = std::vector<uint8_t>;

Buf random_bytes(std::size_t n, std::mt19937& rng) {
    Buf v(n);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
    return v;
}

Buf iota_bytes(std::size_t n) {
    Buf v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i);
    return v;
}

// The default registry: OpenSSL's hmac(sha256) (priority 300) wins there
// over hmac(sha256-cryptopp) from the template.
Registry& defaults() { return testutil::registry(); }

// Crypto++ and the templates only, so every mac/essiv name below is built by
// the templates under test.
void fill_cryptopp(Registry& reg) {
    REQUIRE(register_cryptopp_provider(reg));
    REQUIRE(register_builtin_templates(reg));
}

Registry& cpp() {
    static Registry* reg = [] {
        auto* r = new Registry;
        fill_cryptopp(*r);
        return r;
    }();
    return *reg;
}

Shash keyed_shash(Registry& reg, std::string_view name, ConstBytes key) {
    auto h = Shash::alloc(reg, name);
    INFO(name << ": " << (h ? "" : h.error().message));
    REQUIRE(h);
    REQUIRE(h->setkey(key) == Status::Ok);
    return std::move(h.value());
}

Buf mac(const Shash& h, ConstBytes msg) {
    Buf out(h.digestsize());
    REQUIRE(h.digest(msg, out) == Status::Ok);
    return out;
}

std::string create_error(Registry& reg, std::string_view name) {
    auto r = reg.lookup_any(name);
    if (r) return "(created)";
    return r.error().message;
}

// ---- small algorithms of our own --------------------------------------------

// toy16: a 16-byte-block "cipher" taking 32-byte keys only:
// out = (in ^ k[0..16)) + k[16..32) bytewise.
class Toy16Tfm final : public CipherTfm {
public:
    Status setkey(ConstBytes key) override {
        if (key.size() != 32) return Status::Invalid;
        std::memcpy(k_, key.data(), 32);
        return Status::Ok;
    }
    void encrypt(const uint8_t* in, uint8_t* out, std::size_t n) const override {
        for (std::size_t i = 0; i < n * 16; ++i) out[i] = static_cast<uint8_t>((in[i] ^ k_[i % 16]) + k_[16 + i % 16]);
    }
    void decrypt(const uint8_t* in, uint8_t* out, std::size_t n) const override {
        for (std::size_t i = 0; i < n * 16; ++i) out[i] = static_cast<uint8_t>((in[i] - k_[16 + i % 16]) ^ k_[i % 16]);
    }

private:
    uint8_t k_[32] = {};
};

AlgInfo toy_info(std::string name, std::string driver, AlgType type, std::size_t bs) {
    AlgInfo in;
    in.name = std::move(name);
    in.driver = std::move(driver);
    in.module = "test";
    in.priority = 100;
    in.type = type;
    in.blocksize = bs;
    in.needs_key = type != AlgType::Shash;
    return in;
}

class Toy16Alg final : public CipherAlg {
public:
    Toy16Alg(std::string name = "toy16", std::size_t bs = 16)
        : CipherAlg([&] {
              auto in = toy_info(name, name + "-test", AlgType::Cipher, bs);
              in.min_keysize = in.max_keysize = 32;
              return in;
          }()) {}
    std::unique_ptr<CipherTfm> create_tfm() const override { return std::make_unique<Toy16Tfm>(); }
};

// toycbc: cbc over toy16, written out flat so essiv can be tested without
// the cbc template. Registered under a mode-like generic name ("toymode(toy16)")
// so essiv finds its block cipher; `ivsize` can be made wrong on purpose.
class ToyCbcTfm final : public SkcipherTfm {
public:
    Status setkey(ConstBytes key) override { return c_.setkey(key); }
    Status encrypt(SkcipherRequest& r) const override { return crypt(r, true); }
    Status decrypt(SkcipherRequest& r) const override { return crypt(r, false); }

    static void cbc(const Toy16Tfm& c, Buf& data, uint8_t* iv, bool enc) {
        for (std::size_t i = 0; i < data.size(); i += 16) {
            uint8_t* b = data.data() + i;
            if (enc) {
                for (int j = 0; j < 16; ++j) b[j] ^= iv[j];
                c.encrypt(b, b, 1);
                std::memcpy(iv, b, 16);
            } else {
                uint8_t ct[16];
                std::memcpy(ct, b, 16);
                c.decrypt(b, b, 1);
                for (int j = 0; j < 16; ++j) b[j] ^= iv[j];
                std::memcpy(iv, ct, 16);
            }
        }
    }

private:
    Status crypt(SkcipherRequest& r, bool enc) const {
        if (r.len % 16) return Status::Invalid;
        Buf data(r.len);
        sg_gather(r.src, 0, data);
        cbc(c_, data, r.iv.data(), enc);
        sg_scatter(r.dst, 0, data);
        return Status::Ok;
    }
    Toy16Tfm c_;
};

class ToyCbcAlg final : public SkcipherAlg {
public:
    // mode: "toymode" registers as "toymode(toy16)", driver "toymode(toy16-test)".
    ToyCbcAlg(const std::string& mode, std::size_t ivsize)
        : SkcipherAlg([&] {
              auto in = toy_info(mode + "(toy16)", mode + "(toy16-test)", AlgType::Skcipher, 16);
              in.ivsize = ivsize;
              in.chunksize = 16;
              in.min_keysize = in.max_keysize = 32;
              return in;
          }()) {}
    std::unique_ptr<SkcipherTfm> create_tfm() const override { return std::make_unique<ToyCbcTfm>(); }
};

// An existing shash under another name with other sizes: to give hmac a hash
// without export (statesize 0) or one whose digest outgrows its block.
class RenamedShash final : public ShashAlg {
public:
    RenamedShash(AlgInfo info, std::shared_ptr<const Alg> real)
        : ShashAlg(std::move(info)), real_(std::move(real)) {}
    std::unique_ptr<ShashTfm> create_tfm() const override {
        return create_shash_tfm(*real_);
    }

private:
    std::shared_ptr<const Alg> real_;
};

// Runs python3 on `script` with `input` on stdin; returns its stdout lines.
std::vector<std::string> run_python(const std::string& script, const std::string& input) {
    char dir[] = "/tmp/blkcrypt-mac-XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    const std::string py = std::string(dir) + "/t.py", in = std::string(dir) + "/in.txt";
    std::ofstream(py) << script;
    std::ofstream(in) << input;
    std::vector<std::string> lines;
    FILE* p = popen(("python3 " + py + " < " + in).c_str(), "r");
    REQUIRE(p != nullptr);
    std::string cur;
    for (int c; (c = fgetc(p)) != EOF;) {
        if (c == '\n') {
            lines.push_back(cur);
            cur.clear();
        } else {
            cur += static_cast<char>(c);
        }
    }
    int rc = pclose(p);
    std::remove(py.c_str());
    std::remove(in.c_str());
    rmdir(dir);
    INFO("python3 with the 'cryptography' package is needed for this cross-check");
    REQUIRE(rc == 0);
    return lines;
}

// ESSIV as the kernel defines it: IV' = AES-ECB_{sha256(key)}(iv), then the mode.
const char* kEssivPy = R"(import sys, hashlib
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
for line in sys.stdin:
    mode, k, iv, d = line.split()
    k, iv, d = bytes.fromhex(k), bytes.fromhex(iv), bytes.fromhex(d)
    e = Cipher(algorithms.AES(hashlib.sha256(k).digest()), modes.ECB()).encryptor()
    iv2 = e.update(iv) + e.finalize()
    m = modes.CBC(iv2) if mode == 'cbc' else modes.XTS(iv2)
    c = Cipher(algorithms.AES(k), m).encryptor()
    print((c.update(d) + c.finalize()).hex())
)";

// dm-crypt's plain64 IV: the sector number, little-endian, zero-padded.
Buf sector_iv(uint64_t sector) {
    Buf iv(16, 0);
    for (int i = 0; i < 8; ++i) iv[i] = static_cast<uint8_t>(sector >> (8 * i));
    return iv;
}

const char* const kMacNames[] = {"hmac(md5)",    "hmac(sha1)",     "hmac(sha224)",   "hmac(sha256)",
                                 "hmac(sha384)", "hmac(sha512)",   "hmac(sha3-256)", "hmac(rmd160)",
                                 "cmac(aes)",    "cmac(des3_ede)", "xcbc(aes)"};

}  // namespace

// ---- vectors and self-tests -------------------------------------------------

TEST_CASE("mac and essiv instances pass their full self-tests", "[mac]") {
    std::vector<std::string> names(std::begin(kMacNames), std::end(kMacNames));
    names.push_back("essiv(cbc(aes),sha256)");
    // Over Crypto++ parts only, and over the defaults (OpenSSL's sha2 and
    // cbc(aes) as spawns, whose hashes may not export).
    Registry* regs[] = {&cpp(), &defaults()};
    for (Registry* r : regs) {
        for (const auto& n : names) {
            Registry& reg = *r;
            INFO((r == regs[0] ? "Crypto++ registry: " : "default registry: ") << n);
            auto a = reg.lookup_any(n);  // builds the instance (and runs the quick pass)
            INFO((a ? "" : a.error().message));
            REQUIRE(a);
            auto st = reg.run_selftests(std::vector<std::string>{n});
            REQUIRE(st.size() >= 1);
            for (const auto& s : st) {
                INFO(s.info.driver << ": " << s.selftest_message);
                CHECK(s.selftest == SelftestState::Passed);
            }
        }
    }
}

TEST_CASE("the template's hmac(sha256) agrees with OpenSSL's in the default registry", "[mac]") {
    Registry& reg = defaults();
    auto ossl = keyed_shash(reg, "hmac(sha256)", text_copy("key"));
    auto ours = keyed_shash(reg, "hmac(sha256-cryptopp)", text_copy("key"));
    CHECK(ours.info().name == "hmac(sha256)");
    CHECK(ours.info().driver == "hmac(sha256-cryptopp)");
    std::mt19937 rng(3);
    for (std::size_t len : {0u, 63u, 64u, 65u, 4096u}) {
        Buf m = random_bytes(len, rng);
        CHECK(mac(ours, m) == mac(ossl, m));
    }
}

TEST_CASE("instance names, sizes and flags", "[mac]") {
    Registry& reg = cpp();
    auto h = Shash::alloc(reg, "hmac(sha256)");
    REQUIRE(h);
    CHECK(h->info().name == "hmac(sha256)");
    CHECK(h->info().driver == "hmac(sha256-cryptopp)");
    CHECK(h->info().needs_key);
    CHECK(h->digestsize() == 32);
    CHECK(h->blocksize() == 64);
    auto sha = Shash::alloc(reg, "sha256");
    REQUIRE(sha);
    CHECK(h->statesize() == sha->statesize());

    auto c = Shash::alloc(reg, "cmac(des3_ede)");
    REQUIRE(c);
    CHECK(c->info().driver == "cmac(des3_ede-cryptopp)");
    CHECK(c->digestsize() == 8);
    CHECK(c->statesize() == 17);
    auto x = Shash::alloc(reg, "xcbc(aes)");
    REQUIRE(x);
    CHECK(x->digestsize() == 16);
    CHECK(x->statesize() == 33);

    auto e = Skcipher::alloc(reg, "essiv(cbc(aes),sha256)");
    REQUIRE(e);
    CHECK(e->info().name == "essiv(cbc(aes),sha256)");
    CHECK(e->info().driver == "essiv(cbc(aes-cryptopp),sha256-cryptopp)");
    CHECK(e->ivsize() == 16);
    CHECK(e->blocksize() == 16);
    CHECK(e->info().needs_key);
}

TEST_CASE("published vectors through the Shash handle", "[mac]") {
    Registry& reg = cpp();
    // RFC 4231 test case 2
    auto h = keyed_shash(reg, "hmac(sha256)", text_copy("Jefe"));
    CHECK(hex(mac(h, text_copy("what do ya want for nothing?"))) ==
          "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    // RFC 2202 HMAC-SHA-1 test case 5, full digest
    auto s1 = keyed_shash(reg, "hmac(sha1)", Buf(20, 0x0c));
    CHECK(hex(mac(s1, text_copy("Test With Truncation"))) == "4c1a03424b55e07fe7f27be1d58bb9324a9a5a04");

    const Buf m = unhex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
                        "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710");
    // RFC 4493 examples 1 and 4
    auto c = keyed_shash(reg, "cmac(aes)", unhex("2b7e151628aed2a6abf7158809cf4f3c"));
    CHECK(hex(mac(c, {})) == "bb1d6929e95937287fa37d129b756746");
    CHECK(hex(mac(c, m)) == "51f0bebf7e3b9d92fc49741779363cfe");
    // SP 800-38B three-key TDEA, 20-byte message (a partial last block)
    auto d = keyed_shash(reg, "cmac(des3_ede)", unhex("8aa83bf8cbda10620bc1bf19fbb6cd58bc313d4a371ca8b5"));
    CHECK(hex(mac(d, ConstBytes(m).first(20))) == "743ddbe0ce2dc2ed");
    // RFC 3566 test case 6 (34 bytes)
    auto x = keyed_shash(reg, "xcbc(aes)", iota_bytes(16));
    CHECK(hex(mac(x, iota_bytes(34))) == "becbb3bccdb518a30677d5481fb6b4d8");
}

TEST_CASE("essiv(cbc(aes),sha256) kernel vector through the Skcipher handle", "[mac]") {
    Registry& reg = cpp();
    auto e = Skcipher::alloc(reg, "essiv(cbc(aes),sha256)");
    REQUIRE(e);
    REQUIRE(e->setkey(unhex("c286696d887c9aa0611bbb3e2025a45a")) == Status::Ok);
    const Buf pt = iota_bytes(32);
    const Buf want = unhex("c8599afe79e67b20067d550a5ec7b5a70b9c80d215a1b86dc6ab7b65d9fd88eb");
    Buf iv = unhex("562e17996d093d280000000000000000"), ct(32), back(32);
    REQUIRE(e->encrypt(pt, ct, iv) == Status::Ok);
    CHECK(hex(ct) == hex(want));
    // The caller's IV now holds cbc's chaining output: the last ciphertext block.
    CHECK(hex(iv) == hex(ConstBytes(want).last(16)));
    iv = unhex("562e17996d093d280000000000000000");
    REQUIRE(e->decrypt(ct, back, iv) == Status::Ok);
    CHECK(back == pt);

    // A length cbc cannot take: Invalid, no output, the IV untouched.
    Buf odd(20, 0x11), out(20, 0xee), iv2 = sector_iv(7);
    CHECK(e->encrypt(odd, out, iv2) == Status::Invalid);
    CHECK(out == Buf(20, 0xee));
    CHECK(iv2 == sector_iv(7));
}

// ---- hmac keys ---------------------------------------------------------------

TEST_CASE("hmac: keys longer than the block are hashed, a block-sized one is not", "[mac]") {
    Registry& reg = cpp();
    const Buf msg = text_copy("blkcrypt");
    // Expected values: python3 -c 'import hmac; print(hmac.new(bytes(range(N)), b"blkcrypt", H).hexdigest())'
    struct Case {
        const char* alg;
        std::size_t keylen;
        const char* want;
    } cases[] = {
        {"hmac(sha256)", 64, "e519e8fc3570d68caa3121599c3714125750735d86d4c7ffeb4a6ed1e42052ee"},
        {"hmac(sha256)", 65, "72ba314a0417d4014c9df4429748ebf8adbebd1abbd013664780e17a27462382"},
        {"hmac(sha256)", 200, "ba5a008fd71ef0a7146a4828b20053b54ac528eed9fb44501cb7ae746ecef464"},
        {"hmac(sha3-256)", 136, "b6718f8cb89a52ef85f837a3bd2ed33f15a7c2e852cebdfebea078e6b6712b9f"},
        {"hmac(sha3-256)", 137, "099194ec1b249f9e92fde54279d11602d7fdfd4cc686858e0aee459c9c54ccc3"},
    };
    for (const auto& c : cases) {
        INFO(c.alg << " with a " << c.keylen << "-byte key");
        auto h = keyed_shash(reg, c.alg, iota_bytes(c.keylen));
        CHECK(hex(mac(h, msg)) == c.want);
    }
    // RFC 2104: a long key K acts as H(K).
    auto sha = Shash::alloc(reg, "sha256");
    REQUIRE(sha);
    const Buf longkey = iota_bytes(200);
    Buf hk(32);
    REQUIRE(sha->digest(longkey, hk) == Status::Ok);
    CHECK(mac(keyed_shash(reg, "hmac(sha256)", longkey), msg) == mac(keyed_shash(reg, "hmac(sha256)", hk), msg));
    // Re-keying replaces the key completely.
    auto h = keyed_shash(reg, "hmac(sha256)", longkey);
    REQUIRE(h.setkey(text_copy("Jefe")) == Status::Ok);
    CHECK(hex(mac(h, text_copy("what do ya want for nothing?"))) ==
          "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    // The empty key is a valid HMAC key.
    auto e = keyed_shash(reg, "hmac(sha256)", {});
    CHECK(hex(mac(e, {})) == "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

TEST_CASE("hmac over a hash without export keeps the padded keys", "[mac]") {
    Registry reg;
    fill_cryptopp(reg);
    auto real = reg.lookup("sha256", AlgType::Shash);
    REQUIRE(real);
    AlgInfo in = (*real)->info();
    in.name = "nsha256";
    in.driver = "nsha256-test";
    in.statesize = 0;
    REQUIRE(reg.register_alg(std::make_shared<RenamedShash>(in, *real)));
    auto n = keyed_shash(reg, "hmac(nsha256)", text_copy("Jefe"));
    CHECK(n.statesize() == 0);
    auto s = keyed_shash(reg, "hmac(sha256)", text_copy("Jefe"));
    std::mt19937 rng(7);
    for (std::size_t len : {0u, 1u, 55u, 64u, 65u, 1000u}) {
        Buf m = random_bytes(len, rng);
        CHECK(mac(n, m) == mac(s, m));
    }
    auto d = n.new_desc();
    REQUIRE(d);
    Buf st(64);
    CHECK(d->export_state(st) == Status::Unsupported);
}

// ---- export / import -----------------------------------------------------------

TEST_CASE("export/import mid-message equals the one-shot MAC", "[mac]") {
    Registry& reg = cpp();
    std::mt19937 rng(1234);
    const Buf msg = random_bytes(300, rng);
    for (const char* name : kMacNames) {
        INFO(name);
        const Buf key = random_bytes(std::string_view(name).find("des3") != std::string_view::npos ? 24 : 16, rng);
        auto h = keyed_shash(reg, name, key);
        auto h2 = keyed_shash(reg, name, key);  // another transform with the same key
        const Buf want = mac(h, msg);
        REQUIRE(h.statesize() > 0);
        for (std::size_t split : {0u, 1u, 7u, 8u, 9u, 15u, 16u, 17u, 31u, 32u, 33u, 64u, 65u, 128u, 129u, 299u, 300u}) {
            INFO("split at " << split);
            auto a = h.new_desc();
            REQUIRE(a);
            a->init();
            // In two pieces, so a partly filled buffer is exported too.
            a->update(ConstBytes(msg).first(split / 3));
            a->update(ConstBytes(msg).subspan(split / 3, split - split / 3));
            Buf state(h.statesize());
            REQUIRE(a->export_state(state) == Status::Ok);
            for (Shash* t : {&h, &h2}) {
                auto b = t->new_desc();
                REQUIRE(b);
                REQUIRE(b->import_state(state) == Status::Ok);
                Buf got(h.digestsize());
                REQUIRE(b->finup(ConstBytes(msg).subspan(split), got) == Status::Ok);
                CHECK(hex(got) == hex(want));
            }
            // The exporting desc is unaffected by the export.
            Buf got(h.digestsize());
            REQUIRE(a->finup(ConstBytes(msg).subspan(split), got) == Status::Ok);
            CHECK(hex(got) == hex(want));
        }
        // Wrong size is refused by the handle.
        auto b = h.new_desc();
        REQUIRE(b);
        CHECK(b->import_state(Buf(h.statesize() + 1)) == Status::Invalid);
    }
}

TEST_CASE("cmac/xcbc reject malformed exported states", "[mac]") {
    Registry& reg = cpp();
    for (const char* name : {"cmac(aes)", "xcbc(aes)"}) {
        INFO(name);
        auto h = keyed_shash(reg, name, iota_bytes(16));
        auto d = h.new_desc();
        REQUIRE(d);
        Buf st(33, 0);
        CHECK(d->import_state(st) == Status::Ok);  // the initial state
        st[32] = 17;                                // more buffered bytes than a block
        CHECK(d->import_state(st) == Status::Invalid);
        st[32] = 0;
        st[3] = 1;  // a running block but nothing buffered: never produced
        CHECK(d->import_state(st) == Status::Invalid);
        st[32] = 16;
        CHECK(d->import_state(st) == Status::Ok);
    }
}

// ---- keys: NoKey and bad sizes ---------------------------------------------------

TEST_CASE("keyed MACs and essiv refuse to run before setkey", "[mac]") {
    Registry& reg = cpp();
    for (const char* name : kMacNames) {
        INFO(name);
        auto h = Shash::alloc(reg, name);
        REQUIRE(h);
        Buf out(h->digestsize());
        CHECK(h->digest(text_copy("x"), out) == Status::NoKey);
        auto d = h->new_desc();
        REQUIRE_FALSE(d);
        CHECK(d.status() == Status::NoKey);
    }
    auto e = Skcipher::alloc(reg, "essiv(cbc(aes),sha256)");
    REQUIRE(e);
    Buf data(32), iv(16);
    CHECK(e->encrypt(data, data, iv) == Status::NoKey);
}

TEST_CASE("wrong key sizes are Invalid and leave the transform unkeyed", "[mac]") {
    Registry& reg = cpp();
    struct Case {
        const char* name;
        std::size_t bad, good;
    } cases[] = {{"cmac(aes)", 15, 16}, {"cmac(des3_ede)", 23, 24}, {"xcbc(aes)", 17, 24}};
    for (const auto& c : cases) {
        INFO(c.name);
        auto h = Shash::alloc(reg, c.name);
        REQUIRE(h);
        CHECK(h->setkey(Buf(c.bad, 1)) == Status::Invalid);
        Buf out(h->digestsize());
        CHECK(h->digest({}, out) == Status::NoKey);
        CHECK(h->setkey(Buf(c.good, 1)) == Status::Ok);
        CHECK(h->digest({}, out) == Status::Ok);
        // A failed re-key does not leave a half-keyed transform usable.
        CHECK(h->setkey(Buf(c.bad, 1)) == Status::Invalid);
        CHECK(h->digest({}, out) == Status::NoKey);
    }
    auto e = Skcipher::alloc(reg, "essiv(cbc(aes),sha256)");
    REQUIRE(e);
    CHECK(e->setkey(Buf(20, 1)) == Status::Invalid);
    Buf data(16), iv(16);
    CHECK(e->encrypt(data, data, iv) == Status::NoKey);
}

// ---- essiv against independent computations ----------------------------------------

TEST_CASE("essiv with a mode of our own matches a by-hand computation", "[mac]") {
    Registry reg;
    fill_cryptopp(reg);
    REQUIRE(reg.register_alg(std::make_shared<Toy16Alg>()));
    REQUIRE(reg.register_alg(std::make_shared<ToyCbcAlg>("toymode", 16)));
    auto e = Skcipher::alloc(reg, "essiv(toymode(toy16),sha256)");
    INFO((e ? "" : e.error().message));
    REQUIRE(e);
    std::mt19937 rng(99);
    const Buf key = random_bytes(32, rng), pt = random_bytes(16 * 37, rng);
    REQUIRE(e->setkey(key) == Status::Ok);

    // By hand: salt = sha256(key); IV' = toy16_salt(IV); toycbc_key with IV'.
    auto sha = Shash::alloc(reg, "sha256");
    REQUIRE(sha);
    Buf salt(32);
    REQUIRE(sha->digest(key, salt) == Status::Ok);
    Toy16Tfm ec, c;
    REQUIRE(ec.setkey(salt) == Status::Ok);
    REQUIRE(c.setkey(key) == Status::Ok);
    const Buf iv0 = sector_iv(0x0123456789abcdefULL);
    Buf ivp(16), want = pt;
    ec.encrypt(iv0.data(), ivp.data(), 1);
    ToyCbcTfm::cbc(c, want, ivp.data(), true);

    Buf iv = iv0, ct(pt.size());
    REQUIRE(e->encrypt(pt, ct, iv) == Status::Ok);
    CHECK(ct == want);
    CHECK(iv == ivp);  // the mode's output IV, passed back
    iv = iv0;
    Buf back(pt.size());
    REQUIRE(e->decrypt(ct, back, iv) == Status::Ok);
    CHECK(back == pt);
    // In place, through several segments.
    Buf buf = pt;
    SgEntry segs[3] = {{buf.data(), 5}, {buf.data() + 5, 100}, {buf.data() + 105, buf.size() - 105}};
    SkcipherRequest req;
    req.src = segs;
    req.dst = segs;
    req.len = buf.size();
    iv = iv0;
    req.iv = iv;
    REQUIRE(e->encrypt(req) == Status::Ok);
    CHECK(buf == want);
    // The mode's refusal comes through untouched.
    iv = iv0;
    Buf odd(17, 3), out(17, 0xee);
    CHECK(e->encrypt(odd, out, iv) == Status::Invalid);
    CHECK(out == Buf(17, 0xee));
    CHECK(iv == iv0);
}

TEST_CASE("essiv(cbc(aes),sha256) and essiv(xts(aes),sha256) match python3-cryptography", "[mac]") {
    Registry& reg = cpp();
    std::mt19937 rng(2024);
    struct Job {
        std::string mode;
        Buf key, iv, data, got;
    };
    std::vector<Job> jobs;
    auto add = [&](const std::string& alg, const std::string& mode, std::size_t keylen) {
        auto e = Skcipher::alloc(reg, alg);
        INFO(alg << ": " << (e ? "" : e.error().message));
        REQUIRE(e);
        for (std::size_t sectors : {1u, 3u, 8u}) {
            Job j{mode, random_bytes(keylen, rng), {}, {}, {}};
            REQUIRE(e->setkey(j.key) == Status::Ok);
            const uint64_t first = (uint64_t(rng()) << 32) | rng();
            // dm-crypt style: each 512-byte sector with its own IV...
            for (std::size_t s = 0; s < sectors; ++s) {
                Job k{mode, j.key, sector_iv(first + s), random_bytes(512, rng), Buf(512)};
                Buf iv = k.iv;
                REQUIRE(e->encrypt(k.data, k.got, iv) == Status::Ok);
                jobs.push_back(std::move(k));
            }
            // ...and the whole run as one request with one IV.
            Job w{mode, j.key, sector_iv(first), random_bytes(512 * sectors, rng), Buf(512 * sectors)};
            Buf iv = w.iv;
            REQUIRE(e->encrypt(w.data, w.got, iv) == Status::Ok);
            Buf back(w.data.size());
            iv = w.iv;
            REQUIRE(e->decrypt(w.got, back, iv) == Status::Ok);
            CHECK(back == w.data);
            jobs.push_back(std::move(w));
        }
    };
    for (std::size_t keylen : {16u, 24u, 32u}) add("essiv(cbc(aes),sha256)", "cbc", keylen);
    for (std::size_t keylen : {32u, 64u}) add("essiv(xts(aes),sha256)", "xts", keylen);

    std::string input;
    for (const auto& j : jobs) input += j.mode + " " + hex(j.key) + " " + hex(j.iv) + " " + hex(j.data) + "\n";
    auto lines = run_python(kEssivPy, input);
    REQUIRE(lines.size() == jobs.size());
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        INFO(jobs[i].mode << " job " << i << ", key " << jobs[i].key.size() << " bytes, "
                          << jobs[i].data.size() << " bytes of data");
        CHECK(hex(jobs[i].got) == lines[i]);
    }
}

// ---- create-time refusals ------------------------------------------------------------

TEST_CASE("templates refuse bad combinations with clear messages", "[mac]") {
    Registry reg;
    fill_cryptopp(reg);
    REQUIRE(reg.register_alg(std::make_shared<Toy16Alg>()));
    REQUIRE(reg.register_alg(std::make_shared<Toy16Alg>("toy32", 32)));
    REQUIRE(reg.register_alg(std::make_shared<ToyCbcAlg>("halfiv", 8)));
    auto real = reg.lookup("sha512", AlgType::Shash);
    REQUIRE(real);
    AlgInfo big = (*real)->info();
    big.name = "bighash";
    big.driver = "bighash-test";
    big.blocksize = 32;  // a 64-byte digest in a 32-byte block
    REQUIRE(reg.register_alg(std::make_shared<RenamedShash>(big, *real)));

    using Catch::Matchers::Contains;
    using Catch::Matchers::Equals;
    CHECK_THAT(create_error(reg, "essiv(cbc(aes),sha512)"),
               Equals("essiv: sha512's 64-byte digest is not a valid key for aes"));
    CHECK_THAT(create_error(reg, "essiv(cbc(aes),crc32c)"),
               Contains("crc32c's 4-byte digest is not a valid key for aes"));
    CHECK_THAT(create_error(reg, "essiv(cbc(aes),hmac(sha256))"), Equals("essiv: 'hmac(sha256)' is keyed"));
    CHECK_THAT(create_error(reg, "essiv(halfiv(toy16),sha256)"),
               Equals("essiv: 'halfiv(toy16)' takes a 8-byte IV but toy16's block is 16 bytes; "
                      "essiv needs them equal"));
    CHECK_THAT(create_error(reg, "essiv(aes,sha256)"), Contains("bare block cipher"));
    CHECK_THAT(create_error(reg, "essiv(cryptd(cbc(aes)),sha256)"), Contains("is asynchronous"));
    CHECK_THAT(create_error(reg, "essiv(cbc(aes))"), Contains("takes 2 arguments"));
    CHECK_THAT(create_error(reg, "essiv(cbc(aes),nosuchhash)"), Contains("essiv: "));

    CHECK_THAT(create_error(reg, "hmac(hmac(sha256))"), Equals("hmac: 'hmac(sha256)' is keyed"));
    CHECK_THAT(create_error(reg, "hmac(bighash)"), Contains("longer than its block"));
    CHECK_THAT(create_error(reg, "hmac(sha256,sha1)"), Contains("takes 1 argument"));
    CHECK_THAT(create_error(reg, "hmac(nosuchhash)"), Contains("hmac: "));

    CHECK_THAT(create_error(reg, "cmac(toy32)"), Contains("cmac needs 8 or 16"));
    CHECK_THAT(create_error(reg, "xcbc(des3_ede)"), Contains("xcbc needs 16"));
    CHECK_THAT(create_error(reg, "xcbc(toy16)"), Contains("does not take a 16-byte key"));
    CHECK(create_error(reg, "cmac(toy16)") == "(created)");
    CHECK(create_error(reg, "essiv(xts(aes),sha256)") == "(created)");
}

// ---- concurrency -------------------------------------------------------------------

TEST_CASE("one keyed transform serves many threads", "[mac]") {
    Registry& reg = cpp();
    std::mt19937 rng(5);
    const Buf key = random_bytes(32, rng);
    auto h = keyed_shash(reg, "hmac(sha512)", key);
    auto c = keyed_shash(reg, "cmac(aes)", key);
    auto x = keyed_shash(reg, "xcbc(aes)", key);
    auto e = Skcipher::alloc(reg, "essiv(cbc(aes),sha256)");
    REQUIRE(e);
    REQUIRE(e->setkey(key) == Status::Ok);
    constexpr int kThreads = 4, kMsgs = 64;
    std::vector<Buf> msgs, want;
    for (int i = 0; i < kMsgs; ++i) {
        msgs.push_back(random_bytes(16 * (1 + i % 9), rng));
        Buf w = mac(h, msgs[i]), wc = mac(c, msgs[i]), wx = mac(x, msgs[i]), ct(msgs[i].size());
        Buf iv = sector_iv(i);
        REQUIRE(e->encrypt(msgs[i], ct, iv) == Status::Ok);
        w.insert(w.end(), wc.begin(), wc.end());
        w.insert(w.end(), wx.begin(), wx.end());
        w.insert(w.end(), ct.begin(), ct.end());
        want.push_back(w);
    }
    std::atomic<int> bad{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t)
        ts.emplace_back([&] {
            for (int round = 0; round < 20; ++round)
                for (int i = 0; i < kMsgs; ++i) {
                    Buf w(h.digestsize()), wc(16), wx(16), ct(msgs[i].size()), iv = sector_iv(i);
                    bool ok = h.digest(msgs[i], w) == Status::Ok && c.digest(msgs[i], wc) == Status::Ok &&
                              x.digest(msgs[i], wx) == Status::Ok && e->encrypt(msgs[i], ct, iv) == Status::Ok;
                    w.insert(w.end(), wc.begin(), wc.end());
                    w.insert(w.end(), wx.begin(), wx.end());
                    w.insert(w.end(), ct.begin(), ct.end());
                    if (!ok || w != want[i]) ++bad;
                }
        });
    for (auto& t : ts) t.join();
    CHECK(bad == 0);
}
