// FileVault 2 (fvault2/) and the kw(aes) template it needs: RFC 3394 unwrap
// and its refusals, the plist lookup as cryptsetup's regular expression
// matches, and a synthetic Core Storage volume built here (checksummed
// headers, XTS-encrypted metadata, keys wrapped with kw(aes) under a known
// passphrase) read, unlocked, dumped, and refused when truncated or tampered.
#include "test_util.hpp"

#include <blkcrypt/fvault2/fvault2.hpp>
#include <blkcrypt/kdf.hpp>
#include <blkcrypt/base64.hpp>
#include <blkcrypt/shash.hpp>
#include <blkcrypt/skcipher.hpp>

#include <catch2/catch.hpp>

#include <cstring>
#include <string>

using namespace blkcrypt;
using testutil::hex;
using testutil::registry;
using testutil::text;
using testutil::unhex;

namespace {

void put32(std::vector<uint8_t>& b, std::size_t o, uint32_t v) {
    for (int i = 0; i < 4; ++i) b[o + i] = static_cast<uint8_t>(v >> (8 * i));
}
void put64(std::vector<uint8_t>& b, std::size_t o, uint64_t v) {
    for (int i = 0; i < 8; ++i) b[o + i] = static_cast<uint8_t>(v >> (8 * i));
}

// Core Storage's checksum: seed ~0 at 4, the uninverted CRC-32C at 0.
void seal(std::vector<uint8_t>& b) {
    put32(b, 4, 0xffffffffu);
    auto h = Shash::alloc(registry(), "crc32c");
    REQUIRE(h);
    std::array<uint8_t, 4> d{};
    REQUIRE(h->digest(ConstBytes(b).subspan(8), d) == Status::Ok);
    const uint32_t inverted = d[0] | d[1] << 8 | d[2] << 16 | static_cast<uint32_t>(d[3]) << 24;
    put32(b, 0, ~inverted);
}

std::vector<uint8_t> wrap(ConstBytes kek, ConstBytes key) {
    auto kw = Skcipher::alloc(registry(), "kw(aes)");
    REQUIRE(kw);
    REQUIRE(kw->setkey(kek) == Status::Ok);
    std::vector<uint8_t> out(8 + key.size()), a(8);
    REQUIRE(kw->encrypt(key, Bytes(out).subspan(8), a) == Status::Ok);
    std::memcpy(out.data(), a.data(), 8);
    return out;
}

constexpr uint32_t kBs = 4096;
constexpr uint64_t kLvOffset = 65536, kLvSize = 8192;
const std::string kFamily = "33A76CAA-1481-4BC5-8D04-1AC1707C19C0";
const std::string kPassphrase = "correct horse";

struct Synthetic {
    std::vector<uint8_t> image;
    std::vector<uint8_t> volume_key;
};

// Block 0: volume header; blocks 1-2: disk label (0x0011); block 3: volume
// groups descriptor; blocks 4..: encrypted metadata (0x0305, 0x0019, 0x001a,
// then zeros); the logical volume at 64 KiB.
Synthetic make_volume() {
    Synthetic s;
    s.image.assign(kLvOffset + kLvSize, 0);
    std::vector<uint8_t> vh(512, 0);
    put32(vh, 8, 1);  // version 1, block type 0x10
    vh[10] = 0x10;
    vh[88] = 'C', vh[89] = 'S';
    put32(vh, 96, kBs);
    put64(vh, 104, 1);  // disk label at block 1
    put32(vh, 168, 16);
    put32(vh, 172, 2);
    const auto md_key = unhex("00112233445566778899aabbccddeeff");
    const auto pv_uuid = unhex("fc52bfae5a1f4f9bb3a6f33303a0e401");
    std::memcpy(vh.data() + 176, md_key.data(), 16);
    std::memcpy(vh.data() + 304, pv_uuid.data(), 16);
    seal(vh);
    std::memcpy(s.image.data(), vh.data(), vh.size());

    std::vector<uint8_t> label(fvault2::kBlockSize, 0);
    label[10] = 0x11;
    put32(label, 220, 8192);  // the descriptor right after the label
    seal(label);
    std::memcpy(s.image.data() + kBs, label.data(), label.size());
    std::vector<uint8_t> vgd(40, 0);
    put64(vgd, 8, 16);  // up to 16 blocks; a zero block ends them first
    put64(vgd, 32, 4);
    std::memcpy(s.image.data() + kBs + 8192, vgd.data(), vgd.size());

    // The keys: passphrase -> PBKDF2 -> unwraps the KEK -> unwraps the first
    // half of the volume key.
    const auto salt = unhex("2c249edb6663d6fbcc7905b7a4d72752");
    std::vector<uint8_t> pk(16);
    REQUIRE(pbkdf2(registry(), "sha256", text(kPassphrase), salt, 1000, pk));
    const auto kek = unhex("0f0e0d0c0b0a09080706050403020100");
    const auto half = unhex("20734d3389212774d7610c29d7328809");
    std::vector<uint8_t> pwk(284, 0), kwvk(256, 0);
    put32(pwk, 0, 3), put32(pwk, 4, 16);
    std::memcpy(pwk.data() + 8, salt.data(), 16);
    put32(pwk, 24, 16), put32(pwk, 28, 24);
    const auto wk = wrap(pk, kek);
    std::memcpy(pwk.data() + 32, wk.data(), 24);
    put32(pwk, 168, 1000);
    put32(kwvk, 0, 2), put32(kwvk, 4, 24);
    const auto wv = wrap(kek, half);
    std::memcpy(kwvk.data() + 8, wv.data(), 24);
    const auto family = unhex("33a76caa14814bc58d041ac1707c19c0");
    std::vector<uint8_t> h_in(half);
    h_in.insert(h_in.end(), family.begin(), family.end());
    auto sha = Shash::alloc(registry(), "sha256");
    REQUIRE(sha);
    std::vector<uint8_t> d(32);
    REQUIRE(sha->digest(h_in, d) == Status::Ok);
    s.volume_key = half;
    s.volume_key.insert(s.volume_key.end(), d.begin(), d.begin() + 16);

    auto xml_block = [](uint16_t type, std::size_t off_field, const std::string& xml) {
        std::vector<uint8_t> b(fvault2::kBlockSize, 0);
        b[10] = static_cast<uint8_t>(type), b[11] = static_cast<uint8_t>(type >> 8);
        put32(b, off_field, 512);
        put32(b, off_field + 4, static_cast<uint32_t>(xml.size() + 1));
        std::memcpy(b.data() + 512, xml.data(), xml.size());
        return b;
    };
    std::vector<std::vector<uint8_t>> blocks;
    std::vector<uint8_t> offset_block(fvault2::kBlockSize, 0);
    offset_block[10] = 0x05, offset_block[11] = 0x03;
    put32(offset_block, 104, static_cast<uint32_t>(kLvOffset / kBs));
    blocks.push_back(offset_block);
    // An empty KEKWrappedVolumeKeyStruct first, as macOS writes one.
    blocks.push_back(xml_block(0x0019, 112,
                               "<dict><key>KEKWrappedVolumeKeyStruct</key><data ID=\"1\"></data>"
                               "<key>PassphraseWrappedKEKStruct</key><data ID=\"2\">" +
                                   base64_encode(pwk) +
                                   "</data><key>KEKWrappedVolumeKeyStruct</key><data ID=\"3\">" +
                                   base64_encode(kwvk) + "</data></dict>"));
    blocks.push_back(xml_block(0x001a, 128,
                               "<dict><key>com.apple.corestorage.lv.familyUUID</key><string ID=\"2\">" + kFamily +
                                   "</string><key>com.apple.corestorage.lv.size</key><integer size=\"64\" ID=\"8\">"
                                   "0x2000</integer></dict>"));
    auto xts = Skcipher::alloc(registry(), "xts(aes)");
    REQUIRE(xts);
    std::vector<uint8_t> xkey(md_key);
    xkey.insert(xkey.end(), pv_uuid.begin(), pv_uuid.end());
    REQUIRE(xts->setkey(xkey) == Status::Ok);
    for (std::size_t i = 0; i < blocks.size(); ++i) {
        seal(blocks[i]);
        std::vector<uint8_t> tweak(16, 0), enc(fvault2::kBlockSize);
        tweak[0] = static_cast<uint8_t>(i);
        REQUIRE(xts->encrypt(blocks[i], enc, tweak) == Status::Ok);
        std::memcpy(s.image.data() + 4 * kBs + i * fvault2::kBlockSize, enc.data(), enc.size());
    }
    return s;
}

Result<fvault2::Metadata> read(const std::vector<uint8_t>& image) {
    MemoryStore m(image.size());
    m.data() = image;
    return fvault2::read_metadata(registry(), m);
}

}  // namespace

TEST_CASE("kw(aes) unwraps RFC 3394 4.1 and refuses a tampered or malformed input", "[fvault2]") {
    auto kw = Skcipher::alloc(registry(), "kw(aes)");
    REQUIRE(kw);
    REQUIRE(kw->setkey(unhex("000102030405060708090a0b0c0d0e0f")) == Status::Ok);
    auto c = unhex("1fa68b0a8112b447aef34bd8fb5a7b829d3e862371d2cfe5");
    std::vector<uint8_t> a(c.begin(), c.begin() + 8), out(16);
    REQUIRE(kw->decrypt(ConstBytes(c).subspan(8), out, a) == Status::Ok);
    CHECK(hex(out) == "00112233445566778899aabbccddeeff");
    c[20] ^= 1;
    a.assign(c.begin(), c.begin() + 8);
    CHECK(kw->decrypt(ConstBytes(c).subspan(8), out, a) == Status::BadMsg);
    CHECK(hex(out) == std::string(32, '0'));  // nothing of a failed unwrap is handed out
    std::vector<uint8_t> one(8);  // a single semiblock is not a wrapped key
    CHECK(kw->decrypt(one, one, a) == Status::Invalid);
    CHECK_FALSE(Skcipher::alloc(registry(), "kw(des3_ede)"));  // 8-byte blocks
}

TEST_CASE("fvault2 plist lookup is the leftmost match of cryptsetup's pattern", "[fvault2]") {
    const std::string xml = "<key>K</key><data ID=\"1\"></data><key>K</key><data ID=\"2\">abc</data>"
                            "<key>N</key><integer size=\"64\">0x10</integer>";
    CHECK(fvault2::plist_value(xml, "K", "data") == "abc");
    CHECK(fvault2::plist_value(xml, "N", "integer") == "0x10");
    CHECK_FALSE(fvault2::plist_value(xml, "N", "string"));
    CHECK_FALSE(fvault2::plist_value(xml, "M", "data"));
    CHECK_FALSE(fvault2::plist_value("<key>K</key><data>abc</dat>", "K", "data"));
}

TEST_CASE("fvault2 reads, unlocks and dumps a synthetic Core Storage volume", "[fvault2]") {
    const Synthetic s = make_volume();
    auto md = read(s.image);
    REQUIRE(md);
    CHECK(md->pv_uuid == "fc52bfae-5a1f-4f9b-b3a6-f33303a0e401");
    CHECK(md->family_uuid == "33a76caa-1481-4bc5-8d04-1ac1707c19c0");
    CHECK(md->lv_offset == kLvOffset);
    CHECK(md->lv_size == kLvSize);
    CHECK(md->pbkdf2_iterations == 1000);
    CHECK(fvault2::dump(*md, "img") ==
          "Header information for FVAULT2 device img.\n"
          "Physical volume UUID: \tfc52bfae-5a1f-4f9b-b3a6-f33303a0e401\n"
          "Family UUID:          \t33a76caa-1481-4bc5-8d04-1ac1707c19c0\n"
          "Logical volume offset:\t65536 [bytes]\n"
          "Logical volume size:  \t8192 [bytes]\n"
          "Cipher:               \taes\n"
          "Cipher mode:          \txts-plain64\n"
          "PBKDF2 iterations:    \t1000\n"
          "PBKDF2 salt:          \t2c 24 9e db 66 63 d6 fb cc 79 05 b7 a4 d7 27 52 \n");

    auto vk = fvault2::unlock(registry(), *md, text(kPassphrase));
    REQUIRE(vk);
    CHECK(hex(*vk) == hex(s.volume_key));
    const SecureBuffer d = fvault2::dump_volume_key(*md, "img", *vk);
    const std::string ds(reinterpret_cast<const char*>(d.data()), d.size());
    CHECK(ds.substr(ds.find("Volume key:")) == "Volume key:       \t20 73 4d 33 89 21 27 74 d7 61 0c 29 d7 32 88 09 " +
                                                    [&] {
                                                        std::string t;
                                                        for (std::size_t i = 16; i < 32; ++i)
                                                            t += hex(ConstBytes(s.volume_key).subspan(i, 1)) + " ";
                                                        return t;
                                                    }() + "\n");

    auto wrong = fvault2::unlock(registry(), *md, text("correct horsf"));
    REQUIRE_FALSE(wrong);
    CHECK(wrong.status() == Status::NoKey);
    CHECK(wrong.error().message == "No key available with this passphrase.");

    auto table = fvault2::dm_table(*md, *vk, s.image.size(), "img");
    REQUIRE(table);
    REQUIRE(table->size() == 1);
    const dm::CryptTable& t = *table->front().crypt;
    CHECK(t.alg_name == "plain64(xts(aes))");
    CHECK(t.offset == kLvOffset / 512);
    CHECK(t.iv_offset == 0);
    CHECK(t.length == kLvSize / 512);
    CHECK(table->front().length == kLvSize / 512);
    CHECK(dm::format_dm_table(*table, false) == "0 " + std::to_string(kLvSize / 512) + " crypt aes-xts-plain64 " +
                                                    std::string(64, '0') + " 0 img " + std::to_string(kLvOffset / 512) +
                                                    "\n");
    CHECK_FALSE(fvault2::dm_table(*md, *vk, s.image.size() - 512, "img"));
}

TEST_CASE("fvault2 refuses truncated, foreign and tampered metadata", "[fvault2]") {
    const Synthetic s = make_volume();
    auto fails = [](std::vector<uint8_t> img, const std::string& what) {
        auto md = read(img);
        REQUIRE_FALSE(md);
        CHECK_THAT(md.error().message, Catch::Contains(what));
    };
    fails(std::vector<uint8_t>(s.image.begin(), s.image.begin() + 100), "too short for the FVAULT2 volume header");
    fails(std::vector<uint8_t>(s.image.begin(), s.image.begin() + 4 * kBs + 100), "too short");
    fails(std::vector<uint8_t>(s.image.size(), 0), "checksum");  // foreign: no header
    auto t = s.image;
    t[200] ^= 1;  // the volume header
    fails(t, "No FVAULT2 volume header");
    t = s.image;
    t[kBs + 300] ^= 1;  // the disk label
    fails(t, "disk label checksum");
    t = s.image;
    t[4 * kBs + fvault2::kBlockSize + 700] ^= 1;  // encrypted metadata block 1
    fails(t, "block 1 checksum");
    t = s.image;
    std::memset(t.data() + 4 * kBs + 2 * fvault2::kBlockSize, 0, fvault2::kBlockSize);  // no 0x001a block
    fails(t, "Necessary FVAULT2 metadata blocks not found");
    t = s.image;
    put64(t, kBs + 8192 + 32, (fvault2::kMaxOffset / kBs) + 1);  // metadata beyond 1 GiB
    fails(t, "beyond 1 GiB");
}
