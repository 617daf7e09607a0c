// TrueCrypt/VeraCrypt pieces: the cascade(...) composition against its parts,
// TrueCrypt's keyfile pool against an independent CRC-32 (Python's zlib), and
// header decryption on a header built here from the registry's primitives
// (the real images are checked in tests/cli/tcrypt.sh against the kernel).
#include "test_util.hpp"

#include <blkcrypt/kdf.hpp>
#include <blkcrypt/shash.hpp>
#include <blkcrypt/skcipher.hpp>
#include <blkcrypt/tcrypt/tcrypt.hpp>

#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace blkcrypt;
using testutil::hex;
using testutil::registry;
using testutil::text;
using testutil::unhex;

namespace {

std::vector<uint8_t> crypt(const std::string& alg, const std::vector<uint8_t>& key, std::vector<uint8_t> data,
                           std::vector<uint8_t> iv, bool enc) {
    auto sk = Skcipher::alloc(registry(), alg);
    REQUIRE(sk.ok());
    REQUIRE(sk->setkey(key) == Status::Ok);
    const Status s = enc ? sk->encrypt(data, data, iv) : sk->decrypt(data, data, iv);
    REQUIRE(s == Status::Ok);
    return data;
}

// The usual CRC-32 through the registry's kernel-style crc32 (seed ~0, then
// inverted): an implementation independent of the tcrypt layer's.
uint32_t crc32(ConstBytes d) {
    auto c = Shash::alloc(registry(), "crc32");
    REQUIRE(c.ok());
    const uint8_t seed[4] = {0xff, 0xff, 0xff, 0xff};
    REQUIRE(c->setkey(ConstBytes(seed, 4)) == Status::Ok);
    uint8_t out[4];
    REQUIRE(c->digest(d, Bytes(out, 4)) == Status::Ok);
    return ~(uint32_t{out[0]} | uint32_t{out[1]} << 8 | uint32_t{out[2]} << 16 | uint32_t{out[3]} << 24);
}

void put_be(uint8_t* p, uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}

// A TrueCrypt 7 style header (version 5, sha512 1000 iterations, aes-xts)
// for `pw`, its key area `keys`, at offset 0 of a 1 MiB store.
std::shared_ptr<MemoryStore> make_volume(const std::string& pw, const std::vector<uint8_t>& keys, const char* magic) {
    auto store = std::make_shared<MemoryStore>(1u << 20);
    std::vector<uint8_t> hdr(512);
    std::mt19937 rng(7);
    for (std::size_t i = 0; i < 64; ++i) hdr[i] = static_cast<uint8_t>(rng());
    uint8_t* d = hdr.data() + 64;
    std::memcpy(d, magic, 4);
    put_be(d + 4, 5, 2);               // header version
    put_be(d + 6, 0x0700, 2);          // required program version 7.0
    put_be(d + 36, 512 * 1024, 8);     // volume size
    put_be(d + 44, 131072, 8);         // data offset
    put_be(d + 52, 512 * 1024, 8);     // encrypted area size
    put_be(d + 64, 512, 4);            // sector size
    std::memcpy(d + 192, keys.data(), 256);
    put_be(d + 8, crc32(ConstBytes(d + 192, 256)), 4);
    put_be(d + 188, crc32(ConstBytes(d, 188)), 4);
    std::vector<uint8_t> hkey(192);
    REQUIRE(pbkdf2(registry(), "sha512", text(pw), ConstBytes(hdr.data(), 64), 1000, hkey).ok());
    std::vector<uint8_t> enc(d, d + 448);
    enc = crypt("xts(aes)", std::vector<uint8_t>(hkey.begin(), hkey.begin() + 64), enc, std::vector<uint8_t>(16),
                true);
    std::memcpy(d, enc.data(), 448);
    REQUIRE(store->write(0, hdr) == Status::Ok);
    return store;
}

}  // namespace

TEST_CASE("cascade: the composition is its stages in order, same IV", "[tcrypt][cascade]") {
    std::mt19937 rng(1);
    auto rand = [&](std::size_t n) {
        std::vector<uint8_t> v(n);
        for (auto& b : v) b = static_cast<uint8_t>(rng());
        return v;
    };
    const auto k1 = rand(64), k2 = rand(64), k3 = rand(64), pt = rand(4096), iv = rand(16);
    std::vector<uint8_t> key = k1;
    key.insert(key.end(), k2.begin(), k2.end());
    auto parts = crypt("xts(twofish)", k2, crypt("xts(aes)", k1, pt, iv, true), iv, true);
    auto whole = crypt("cascade(xts(aes),xts(twofish))", key, pt, iv, true);
    CHECK(hex(whole) == hex(parts));
    CHECK(hex(crypt("cascade(xts(aes),xts(twofish))", key, whole, iv, false)) == hex(pt));

    std::vector<uint8_t> key3 = key;
    key3.insert(key3.end(), k3.begin(), k3.end());
    auto parts3 = crypt("xts(aes)", k3, crypt("xts(twofish)", k2, crypt("xts(serpent)", k1, pt, iv, true), iv, true),
                        iv, true);
    CHECK(hex(crypt("cascade(xts(serpent),xts(twofish),xts(aes))", key3, pt, iv, true)) == hex(parts3));
    // Under an IV generator, as the dm-crypt engine runs a TrueCrypt chain.
    CHECK(Skcipher::alloc(registry(), "plain64(cascade(xts(serpent),xts(twofish)))").ok());
}

TEST_CASE("cascade: refuses what it cannot compose", "[tcrypt][cascade]") {
    CHECK_FALSE(Skcipher::alloc(registry(), "cascade(xts(aes))").ok());
    CHECK_FALSE(Skcipher::alloc(registry(), "cascade(xts(aes),xts(aes),xts(aes),xts(aes))").ok());
    CHECK_FALSE(Skcipher::alloc(registry(), "cascade(xts(aes),cbc(des3_ede))").ok());  // 16- vs 8-byte IV
    auto sk = Skcipher::alloc(registry(), "cascade(xts(aes),xts(serpent))");
    REQUIRE(sk.ok());
    CHECK(sk->setkey(std::vector<uint8_t>(65)) != Status::Ok);  // not two equal shares
    CHECK(sk->setkey(std::vector<uint8_t>(128)) == Status::Ok);
}

TEST_CASE("tcrypt: keyfile pool mixing matches a zlib CRC-32 recomputation", "[tcrypt]") {
    std::vector<uint8_t> kf(100);
    for (std::size_t i = 0; i < kf.size(); ++i) kf[i] = static_cast<uint8_t>(i);
    std::vector<uint8_t> pool(64);
    tcrypt::mix_keyfile(pool, kf);
    // Python: reg_i = ~zlib.crc32(kf[:i+1]); pool[j++ % 64] += each byte of reg_i, big-endian.
    CHECK(hex(pool) ==
          "751b80c27d0a49376c5390e2fcf065b4a179aeeea211d2b8f9947c0b5fbfa9255cafc37c2434e500b95c77bd2fa0bf53534fc782ffaa29a157981bf46bea7598");
}

TEST_CASE("tcrypt: a TrueCrypt header opens to its table, wrong secrets are NoKey", "[tcrypt]") {
    std::vector<uint8_t> keys(256);
    for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = static_cast<uint8_t>(i * 7 + 1);
    auto store = make_volume("secret", keys, "TRUE");
    tcrypt::OpenOptions o;
    o.veracrypt = false;
    auto v = tcrypt::open(registry(), *store, text("secret"), o);
    REQUIRE(v.ok());
    CHECK_FALSE(v->hdr.veracrypt);
    CHECK(v->hdr.version == 5);
    CHECK(v->hdr.kdf_hash == "sha512");
    CHECK(v->hdr.cipher == "aes");
    CHECK(v->hdr.mode == "xts-plain64");
    CHECK(v->table.cipher == "aes-xts-plain64");
    CHECK(v->table.offset == 256);
    CHECK(v->table.iv_offset == 256);
    CHECK(v->length_sectors == 1024);
    // aes-xts: key 32 bytes at 0, tweak key 32 bytes at 32 of the key area.
    CHECK(hex(v->table.key) == hex(ConstBytes(keys.data(), 64)));
    const SecureBuffer d = tcrypt::dump_volume_key(*v, "img");
    CHECK(std::string(reinterpret_cast<const char*>(d.data()), d.size()) ==
          "TCRYPT header information for img\nCipher chain:  \taes\nCipher mode:   \txts-plain64\n"
          "Payload offset:\t256\nMK bits:       \t512\nMK dump:\t"
          "01 08 0f 16 1d 24 2b 32 39 40 47 4e 55 5c 63 6a \n\t\t"
          "71 78 7f 86 8d 94 9b a2 a9 b0 b7 be c5 cc d3 da \n\t\t"
          "e1 e8 ef f6 fd 04 0b 12 19 20 27 2e 35 3c 43 4a \n\t\t"
          "51 58 5f 66 6d 74 7b 82 89 90 97 9e a5 ac b3 ba \n");

    CHECK(tcrypt::open(registry(), *store, text("Secret"), o).status() == Status::NoKey);
    o.cipher = "serpent";  // -c limits the chains tried
    CHECK(tcrypt::open(registry(), *store, text("secret"), o).status() == Status::NoKey);
    o.cipher.clear();
    o.hash = "whirlpool";  // -h limits the KDFs tried
    CHECK(tcrypt::open(registry(), *store, text("secret"), o).status() == Status::NoKey);
    o.hash.clear();
    CHECK(tcrypt::open(registry(), *store, text(std::string(65, 'a')), o).status() == Status::Invalid);

    // A VeraCrypt magic needs VeraCrypt mode.
    auto vera = make_volume("secret", keys, "VERA");
    CHECK(tcrypt::open(registry(), *vera, text("secret"), o).status() == Status::NoKey);
    o.hash = "sha512";
    o.veracrypt = true;
    auto vv = tcrypt::open(registry(), *vera, text("secret"), o);
    REQUIRE(vv.ok());
    CHECK(vv->hdr.veracrypt);

    // Too short for a header: an error, no read past the end.
    MemoryStore tiny(100);
    CHECK_FALSE(tcrypt::open(registry(), tiny, text("secret"), o).ok());
    // A flipped key-area byte fails the key CRC.
    uint8_t b = 0;
    REQUIRE(store->read(300, Bytes(&b, 1)) == Status::Ok);
    b ^= 1;
    REQUIRE(store->write(300, ConstBytes(&b, 1)) == Status::Ok);
    o.veracrypt = false;
    CHECK(tcrypt::open(registry(), *store, text("secret"), o).status() == Status::NoKey);
}
