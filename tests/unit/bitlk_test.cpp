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
using testutil::text;
using testutil::unhex;

namespace {

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
    md.cipher = "aes", md.cipher_mode = "xts-plain64";  // the table names a cipher the engine knows
    md.metadata_offset = {34603008, 46254080, 57905152};
    md.volume_header_offset = 92342272;
    md.volume_header_size = 5258240;
    auto s = bitlk::dm_table(md, {}, 204800, "d");
    INFO((s ? std::string() : s.error().message));
    REQUIRE(s);
    std::string got;
    for (const auto& l : *s)
        got += std::to_string(l.start) + " " + std::to_string(l.length) +
               (l.crypt ? " crypt " + std::to_string(l.crypt->offset) : " " + l.target) + "\n";
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
    CHECK(bitlk::dm_table(md, {}, 204800, "d").status() == Status::Unsupported);
    md.curr_state = 4;
    CHECK_FALSE(bitlk::dm_table(md, {}, 190000, "d"));  // the header area past the end
    md.metadata_offset[1] = md.metadata_offset[0] + 512;
    CHECK_FALSE(bitlk::dm_table(md, {}, 204800, "d"));  // overlapping areas
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

namespace {

// zlib's CRC32, bitwise: the test's own, to write validation records with.
uint32_t zlib_crc32(ConstBytes b) {
    uint32_t c = ~0u;
    for (uint8_t x : b) {
        c ^= x;
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1) ? 0xEDB88320u : 0);
    }
    return ~c;
}

void put16(std::vector<uint8_t>& b, std::size_t at, uint16_t v) { b[at] = uint8_t(v), b[at + 1] = uint8_t(v >> 8); }
void put64(std::vector<uint8_t>& b, std::size_t at, uint64_t v) {
    for (int i = 0; i < 8; ++i) b[at + i] = uint8_t(v >> (8 * i));
}

// A minimal FVE block (an empty FVEK entry) of volume size `size`, with its
// validation record: 160 bytes (fve_size 10), then size 8, version 2, CRC32.
std::vector<uint8_t> fve_block(uint64_t size, const std::array<uint64_t, 3>& offsets) {
    std::vector<uint8_t> b(168);
    std::memcpy(b.data(), "-FVE-FS-", 8);
    put16(b, 8, 10);
    put16(b, 10, 2);
    put16(b, 12, 4);
    put16(b, 14, 4);
    put64(b, 16, size);
    for (int i = 0; i < 3; ++i) put64(b, 32 + 8 * i, offsets[i]);
    put16(b, 64, 48 + 36);
    put16(b, 100, 0x8004);
    put16(b, 112, 36);  // the FVEK entry: type 3, value 5 (AES-CCM), version 1
    put16(b, 114, 3);
    put16(b, 116, 5);
    put16(b, 118, 1);
    put16(b, 160, 8);
    put16(b, 162, 2);
    const uint32_t crc = zlib_crc32(ConstBytes(b.data(), 160));
    for (int i = 0; i < 4; ++i) b[164 + i] = uint8_t(crc >> (8 * i));
    return b;
}

}  // namespace

TEST_CASE("FVE block validation: zlib's CRC32 of the block", "[bitlk]") {
    std::vector<uint8_t> b(120);
    std::memcpy(b.data(), "-FVE-FS-", 8);
    b[8] = 7;  // 112 bytes
    b[112] = 8, b[114] = 2;
    const uint32_t want = 0x5fd26120;  // Python: zlib.crc32 of those 112 bytes
    for (int i = 0; i < 4; ++i) b[116 + i] = uint8_t(want >> (8 * i));
    CHECK(bitlk::check_fve_crc(registry(), b) == std::optional<bool>(true));
    b[20] ^= 1;
    CHECK(bitlk::check_fve_crc(registry(), b) == std::optional<bool>(false));
    b[114] = 1;  // not a version 2 record: nothing to check
    CHECK_FALSE(bitlk::check_fve_crc(registry(), b).has_value());
    CHECK_FALSE(bitlk::check_fve_crc(registry(), ConstBytes(b.data(), 116)).has_value());
}

TEST_CASE("the backup FVE blocks when the first is damaged", "[bitlk]") {
    const std::array<uint64_t, 3> offs{0x10000, 0x30000, 0x50000};
    auto dev = std::make_shared<MemoryStore>(0x80000);
    auto& d = dev->data();
    d[0] = 0xeb, d[1] = 0x58, d[2] = 0x90;
    std::memcpy(d.data() + 3, "-FVE-FS-", 8);
    for (int i = 0; i < 3; ++i)
        for (int k = 0; k < 8; ++k) d[160 + 16 + 8 * i + k] = uint8_t(offs[i] >> (8 * k));
    auto place = [&](int i, const std::vector<uint8_t>& b) { std::memcpy(d.data() + offs[i], b.data(), b.size()); };
    for (int i = 0; i < 3; ++i) place(i, fve_block(0x80000, offs));
    auto md = bitlk::read_metadata(registry(), *dev);
    REQUIRE(md);
    CHECK(md->copy == 0);
    CHECK_FALSE(md->damaged_first);
    // One byte of the first block changed: its CRC32 fails, the second copy is read.
    d[offs[0] + 16] ^= 1;
    md = bitlk::read_metadata(registry(), *dev);
    REQUIRE(md);
    CHECK(md->copy == 1);
    CHECK(md->damaged_first);
    CHECK(md->volume_size == 0x80000);
    // The first not even a block: the second still.
    d[offs[0]] = 0;
    md = bitlk::read_metadata(registry(), *dev);
    REQUIRE(md);
    CHECK(md->copy == 1);
    // Every copy fails its CRC32: the first that parses, as cryptsetup reads it.
    d[offs[0]] = '-';
    d[offs[1] + 16] ^= 1;
    d[offs[2] + 16] ^= 1;
    md = bitlk::read_metadata(registry(), *dev);
    REQUIRE(md);
    CHECK(md->copy == 0);
    CHECK_FALSE(md->damaged_first);
    CHECK(md->volume_size == 0x80001);
    // None parses: the first block's error, in cryptsetup's words.
    for (uint64_t o : offs) d[o] = 0;
    md = bitlk::read_metadata(registry(), *dev);
    REQUIRE_FALSE(md);
    CHECK(md.error().message == "Invalid or unknown signature for BITLK device.");
}

TEST_CASE("paused encryption: stored sectors past the encrypted size are plain", "[bitlk]") {
    bitlk::Metadata md;
    md.curr_state = 5, md.next_state = 4;
    md.cipher = "aes", md.cipher_mode = "xts-plain64";
    md.metadata_offset = {1048576, 2097152, 3145728};
    md.volume_header_offset = 1114112;
    md.volume_header_size = 8192;
    auto show = [](const dm::DmTable& t) {
        std::string o;
        for (const auto& l : t)
            o += std::to_string(l.start) + " " + std::to_string(l.length) +
                 (l.target == "zero" ? std::string(" zero")
                  : l.crypt          ? " crypt " + std::to_string(l.crypt->offset)
                                     : " plain " + std::to_string(l.offset)) +
                 "\n";
        return o;
    };
    md.volume_size = 1048576;  // the relocated boot sectors are past it: plain
    auto s = bitlk::dm_table(md, {}, 8192, "d");
    REQUIRE(s);
    CHECK(show(*s) ==
          "0 16 plain 2176\n"
          "16 2032 crypt 16\n"
          "2048 128 zero\n"
          "2176 16 zero\n"
          "2192 1904 plain 2192\n"
          "4096 128 zero\n"
          "4224 1920 plain 4224\n"
          "6144 128 zero\n"
          "6272 1920 plain 6272\n");
    md.volume_size = 1572864;
    s = bitlk::dm_table(md, {}, 8192, "d");
    REQUIRE(s);
    CHECK(show(*s) ==
          "0 16 crypt 2176\n"
          "16 2032 crypt 16\n"
          "2048 128 zero\n"
          "2176 16 zero\n"
          "2192 880 crypt 2192\n"
          "3072 1024 plain 3072\n"
          "4096 128 zero\n"
          "4224 1920 plain 4224\n"
          "6144 128 zero\n"
          "6272 1920 plain 6272\n");
    md.volume_size = 1000;  // not whole sectors
    CHECK_FALSE(bitlk::dm_table(md, {}, 8192, "d"));
    md.volume_size = 1048576;
    md.curr_state = 2;  // converting right now: refused as cryptsetup refuses it
    CHECK(bitlk::dm_table(md, {}, 8192, "d").status() == Status::Unsupported);
}
