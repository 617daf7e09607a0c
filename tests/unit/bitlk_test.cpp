// BitLocker (bitlk/): the recovery password rules, the SHA-256 stretch
// (vectors from Python's hashlib over the same struct), the key unwrap chain
// on a synthetic clear-key volume, the segments bitlkOpen maps (the To Go
// fixture's table as the kernel reported it) and refused metadata.
#include "test_util.hpp"

#include <blkcrypt/aead.hpp>
#include <blkcrypt/bitlk/bitlk.hpp>

#include <catch2/catch.hpp>

#include <cstring>
#include <string>

using namespace blkcrypt;
using testutil::hex;
using testutil::registry;
using testutil::unhex;

namespace {

ConstBytes text(const std::string& s) { return ConstBytes(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

std::array<uint8_t, 16> salt_0_15() {
    std::array<uint8_t, 16> s{};
    for (int i = 0; i < 16; ++i) s[i] = static_cast<uint8_t>(i);
    return s;
}

// A key datum (12-byte header, key) wrapped with AES-CCM under `kek`.
bitlk::WrappedKey wrap(ConstBytes kek, ConstBytes key, uint8_t nonce_byte) {
    std::vector<uint8_t> datum(12 + key.size());
    datum[0] = static_cast<uint8_t>(datum.size());
    datum[2] = 1;
    std::memcpy(datum.data() + 12, key.data(), key.size());
    bitlk::WrappedKey w;
    w.nonce.fill(nonce_byte);
    auto ccm = Aead::alloc(registry(), "ccm(aes)");
    REQUIRE(ccm);
    REQUIRE(ccm->setkey(kek) == Status::Ok);
    REQUIRE(ccm->setauthsize(16) == Status::Ok);
    std::array<uint8_t, 16> iv{};
    iv[0] = 2;
    std::memcpy(iv.data() + 1, w.nonce.data(), 12);
    std::vector<uint8_t> out(datum.size() + 16);
    REQUIRE(ccm->encrypt({}, datum, out, iv) == Status::Ok);
    w.data.assign(out.begin(), out.begin() + static_cast<long>(datum.size()));
    std::memcpy(w.tag.data(), out.data() + datum.size(), 16);
    return w;
}

}  // namespace

TEST_CASE("recovery passwords: 8 groups of 6 digits, multiples of 11", "[bitlk]") {
    auto k = bitlk::recovery_key(text("235818-357951-253979-013365-241120-245575-342914-591910"));
    REQUIRE(k);
    CHECK(hex(*k) == "be531d7f315abf04a0553557c67932d2");
    CHECK(bitlk::recovery_key(text("235818-357951-253979-013365-241120-245575-342914-591910\n")));
    CHECK_FALSE(bitlk::recovery_key(text("235819-357951-253979-013365-241120-245575-342914-591910")));  // not /11
    CHECK_FALSE(bitlk::recovery_key(text("235818+357951-253979-013365-241120-245575-342914-591910")));
    CHECK_FALSE(bitlk::recovery_key(text("235818-357951-253979-013365-241120-245575-342914-59191")));
    CHECK_FALSE(bitlk::recovery_key(text("720896-357951-253979-013365-241120-245575-342914-591910")));  // > 16 bits
    CHECK_FALSE(bitlk::recovery_key(text("anaconda")));
}

TEST_CASE("BitLocker's SHA-256 stretch", "[bitlk]") {
    auto a = bitlk::stretch_passphrase(registry(), text("anaconda"), false, salt_0_15(), 3);
    REQUIRE(a);
    CHECK(hex(*a) == "10532b735713b06fd9a295e7a02789bb43a96c6cad6ee176ab63a04ca6f9353d");
    // Non-ASCII: the UTF-16LE string itself, unpadded (as Windows).
    auto u = bitlk::stretch_passphrase(registry(), text("p\xc3\xa4sSw\xc3\xb6rd\xe2\x82\xac"), false, salt_0_15(), 2);
    REQUIRE(u);
    auto u2 = bitlk::stretch_passphrase(registry(), text("p\xc3\xa4sswörd\xe2\x82\xac"), false, salt_0_15(), 2);
    REQUIRE(u2);
    CHECK(hex(*u2) == "dcc2aecaa31503dd95b1ec2532a376d5133d567bfb2147e4809e3f94f0eb312f");
    CHECK(hex(*u) != hex(*u2));
    auto r = bitlk::stretch_passphrase(registry(), unhex("be531d7f315abf04a0553557c67932d2"), true, salt_0_15(), 2);
    REQUIRE(r);
    CHECK(hex(*r) == "f715f29a289763dc60c979159d26ef52e9b359656355ee9779abf8a298255513");
    CHECK_FALSE(bitlk::stretch_passphrase(registry(), text("\xff"), false, salt_0_15(), 1));
}

TEST_CASE("clear key -> VMK -> FVEK, and a wrong key", "[bitlk]") {
    bitlk::Metadata md;
    md.cipher = "aes";
    md.cipher_mode = "xts-plain64";
    md.key_bits = 256;
    const auto clear = unhex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
    const auto vmk = unhex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff00000000000000000000000011111111");
    const auto fvek = unhex("5cb728dfc542ec641590dc4705079c108799fe3efa1090c94c9b7558fc0a5ed3");
    bitlk::Vmk v;
    v.protection = bitlk::kClearKey;
    v.clear_key = SecureBuffer(ConstBytes(clear));
    v.keys.push_back(wrap(clear, vmk, 1));
    md.vmks.push_back(v);
    md.fvek = wrap(vmk, fvek, 2);
    auto u = bitlk::unlock_clear_key(registry(), md);
    REQUIRE(u);
    CHECK(hex(u->key) == hex(fvek));
    // The same volume with a passphrase protector: a wrong one is NoKey.
    md.vmks[0].protection = bitlk::kPassphrase;
    auto w = bitlk::unlock(registry(), md, text("wrong"));
    REQUIRE_FALSE(w);
    CHECK(w.status() == Status::NoKey);
    CHECK(w.error().message == "No key available with this passphrase.");
    // A tampered FVEK tag is damaged metadata, not a wrong key.
    md.vmks[0].protection = bitlk::kClearKey;
    md.fvek.tag[0] ^= 1;
    auto t = bitlk::unlock_clear_key(registry(), md);
    REQUIRE_FALSE(t);
    CHECK(t.status() == Status::Corrupt);
}

TEST_CASE("bitlkOpen's segments: the To Go fixture's kernel table", "[bitlk]") {
    bitlk::Metadata md;
    md.curr_state = md.next_state = 4;
    md.metadata_offset = {34603008, 46254080, 57905152};
    md.volume_header_offset = 92342272;
    md.volume_header_size = 5258240;
    auto s = bitlk::segments(md, 204800);
    REQUIRE(s);
    std::string got;
    for (const auto& g : *s)
        got += std::to_string(g.start) + " " + std::to_string(g.length) + (g.zero ? " zero" : " crypt " + std::to_string(g.source)) + "\n";
    CHECK(got ==
          "0 10270 crypt 180356\n"
          "10270 57314 crypt 10270\n"
          "67584 128 zero\n"
          "67712 22628 crypt 67712\n"
          "90340 128 zero\n"
          "90468 22628 crypt 90468\n"
          "113096 128 zero\n"
          "113224 67132 crypt 113224\n"
          "180356 10270 zero\n"
          "190626 14174 crypt 190626\n");
    md.curr_state = 1;
    CHECK(bitlk::segments(md, 204800).status() == Status::Unsupported);
    md.curr_state = 4;
    CHECK_FALSE(bitlk::segments(md, 190000));  // the header area past the end
    md.metadata_offset[1] = md.metadata_offset[0] + 512;
    CHECK_FALSE(bitlk::segments(md, 204800));  // overlapping areas
}

TEST_CASE("BitLocker metadata refused with cryptsetup's words", "[bitlk]") {
    std::vector<uint8_t> boot(512);
    bitlk::Metadata md;
    CHECK(bitlk::parse_boot_sector(boot, md).error().message == "Invalid or unknown boot signature for BITLK device.");
    boot[0] = 0xeb, boot[1] = 0x52, boot[2] = 0x90;
    CHECK(bitlk::parse_boot_sector(boot, md).error().message == "BITLK version 1 is currently not supported.");
    boot[1] = 0x58;
    CHECK(bitlk::parse_boot_sector(boot, md).error().message == "Invalid or unknown signature for BITLK device.");
    std::memcpy(boot.data() + 3, "-FVE-FS-", 8);
    boot[11] = 0x00, boot[12] = 0x04;  // 1024
    CHECK(bitlk::parse_boot_sector(boot, md).error().message == "Unsupported sector size 1024.");
    boot[12] = 0x02;
    boot[160 + 16] = 0x10;
    auto off = bitlk::parse_boot_sector(boot, md);
    REQUIRE(off);
    CHECK((*off)[0] == 0x10);

    std::vector<uint8_t> fve(112 + 8);
    std::memcpy(fve.data(), "-FVE-FS-", 8);
    fve[10] = 2;
    fve[100] = 0x09, fve[101] = 0x80;
    CHECK(bitlk::parse_fve_block(fve, md).error().message == "Unknown or unsupported encryption type.");
    fve[100] = 0x04;
    fve[64] = 56;  // metadata size: the header and one empty entry
    CHECK(bitlk::parse_fve_block(fve, md).error().message == "BITLK metadata has no FVEK entry.");
    fve[64] = 200;  // more than the block holds
    CHECK(bitlk::parse_fve_block(fve, md).error().message == "Truncated BITLK metadata.");
    fve[64] = 56;
    fve[112] = 4;  // an entry shorter than its header
    CHECK_FALSE(bitlk::parse_fve_block(fve, md));
}
