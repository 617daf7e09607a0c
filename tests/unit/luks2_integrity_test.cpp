// LUKS2 containers with integrity (cryptsetup luksFormat --integrity), from
// the images cryptsetup 2.6.1 made in the kernel (tests/golden/luks2-integrity,
// record.sh): the segment's integrity object, the kernel cipher and tag size
// cryptsetup derives, and the two tables it stacks, equal to what the
// kernel reported for each image (`dmsetup table --showkeys`).
#include "paths.hpp"
#include "kernel_probes.hpp"
#include "golden_files.hpp"
#include "test_util.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/containers/container.hpp>
#include <blkcrypt/dm/dm_table.hpp>
#include <blkcrypt/luks/container.hpp>
#include <blkcrypt/luks/luks2.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace fs = std::filesystem;
using namespace blkcrypt;
using testutil::registry;
namespace luks2 = blkcrypt::luks::luks2;

namespace {

const fs::path kGold = fs::path(testutil::kSourceDir) / "tests/golden/luks2-integrity";

std::map<std::string, std::string> read_info(const fs::path& p) { return testutil::read_info(p.string()); }

// The image, decompressed by xz (as the CLI tests do) into memory.
std::shared_ptr<MemoryStore> unxz(const fs::path& p) {
    auto bytes = testutil::decompress("xz", p.string());
    auto s = std::make_shared<MemoryStore>(bytes.size());
    s->data() = std::move(bytes);
    return s;
}

std::vector<std::string> cases() {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(kGold))
        if (e.path().extension() == ".info") names.push_back(e.path().stem().string());
    std::sort(names.begin(), names.end());
    return names;
}

// "0 8096 integrity 254:16 2048 ..." with the device field replaced.
std::string with_device(std::string line, std::size_t field, const std::string& dev) {
    std::size_t b = 0;
    for (std::size_t i = 0; i < field; ++i) b = line.find(' ', b) + 1;
    const std::size_t e = line.find(' ', b);
    return line.replace(b, e - b, dev);
}

}  // namespace

TEST_CASE("luks2 integrity: cryptsetup's kernel cipher and tag size for each segment", "[luks2][integrity]") {
    struct Row {
        const char *enc, *integ, *cipher;
        uint32_t tag, key;
    };
    // docs: /work/shared/docs/integrity-reencrypt.md 1.6, cryptsetup's
    // tests/luks2-integrity-test tag sizes.
    const Row rows[] = {
        {"aes-xts-plain64", "hmac(sha256)", "capi:authenc(hmac(sha256),xts(aes))-plain64", 32, 32},
        {"aes-xts-random", "hmac(sha256)", "capi:authenc(hmac(sha256),xts(aes))-random", 48, 32},
        {"aes-xts-random", "hmac(sha512)", "capi:authenc(hmac(sha512),xts(aes))-random", 80, 64},
        {"aes-xts-random", "hmac(sha1)", "capi:authenc(hmac(sha1),xts(aes))-random", 36, 20},
        {"aes-cbc-essiv:sha256", "hmac(sha256)", nullptr, 0, 0},  // cryptsetup maps no essiv with integrity here
        {"aes-gcm-random", "aead", "capi:gcm(aes)-random", 28, 0},
        {"aes-ccm-random", "aead", "capi:rfc4309(ccm(aes))-random", 24, 0},
        {"chacha20-random", "poly1305", "capi:rfc7539(chacha20,poly1305)-random", 28, 0},
        {"chacha20-plain64", "poly1305", "capi:rfc7539(chacha20,poly1305)-plain64", 16, 0},
        {"aegis128-random", "aead", "capi:aegis128-random", 32, 0},
        {"aes-xts-plain64", "aead", nullptr, 0, 0},      // xts is no AEAD
        {"aes-gcm-random", "poly1305", nullptr, 0, 0},   // poly1305 only with chacha20
        {"aes-xts-plain64", "hmac(md5)", nullptr, 0, 0}, // not a cryptsetup MAC
    };
    for (const Row& r : rows) {
        CAPTURE(r.enc, r.integ);
        auto p = luks::integrity_profile(r.enc, r.integ);
        if (!r.cipher) {
            CHECK(p.status() == Status::Unsupported);
            continue;
        }
        REQUIRE(p);
        CHECK(p->cipher == r.cipher);
        CHECK(p->tag_size == r.tag);
        CHECK(p->key_size == r.key);
    }
}

TEST_CASE("luks2 integrity: the kernel's two tables from cryptsetup's images", "[luks2][integrity]") {
    const auto names = cases();
    REQUIRE(names.size() >= 13);
    for (const std::string& name : names) {
        CAPTURE(name);
        auto info = read_info(kGold / (name + ".info"));
        auto data = unxz(kGold / (name + ".img.xz"));
        std::shared_ptr<MemoryStore> header = data;
        if (fs::exists(kGold / (name + ".hdr.xz"))) header = unxz(kGold / (name + ".hdr.xz"));
        const auto vk = testutil::unhex(info.at("volume_key"));
        auto vol = luks::open_with_volume_key(registry(), *header, vk);
        REQUIRE(vol);
        REQUIRE(vol->integrity);
        if (info.at("keyslot_area").starts_with("kept")) {
            // The passphrase opens the same volume key through the keyslot.
            const std::string pw = info.at("passphrase");
            auto v2 = luks::open(registry(), *header, ConstBytes(reinterpret_cast<const uint8_t*>(pw.data()), pw.size()));
            REQUIRE(v2);
            CHECK(testutil::hex(v2->table.key) == info.at("volume_key"));
        }
        // The crypt line, over the integrity device the kernel named 253:0.
        auto crypt = luks::dm_table(*vol, *data, "/dev/mapper/x_dif");
        REQUIRE(crypt);
        const std::string want_crypt = with_device(info.at("table_crypt"), 6, "/dev/mapper/x_dif") + "\n";
        CHECK(dm::format_dm_table(*crypt, true) == want_crypt);
        // The integrity line, over the data device the kernel named 254:N.
        auto dif = luks::integrity_table_line(*vol, *data, "DATA");
        REQUIRE(dif);
        CHECK(*dif == with_device(info.at("table_dif"), 3, "DATA") + "\n");
    }
}

TEST_CASE("luks2 integrity: the segment's integrity object, with 2.8's key_size", "[luks2][integrity]") {
    auto store = unxz(kGold / "gcm-random-512.img.xz");
    auto hdr = luks2::read_header(registry(), *store);
    REQUIRE(hdr);
    const luks2::Metadata& md = hdr->md;
    REQUIRE(md.segments.at(0).integrity);
    CHECK(md.segments.at(0).integrity->type == "aead");
    CHECK(md.segments.at(0).integrity->journal_encryption == "none");
    CHECK(md.segments.at(0).integrity->journal_integrity == "none");
    CHECK(!md.segments.at(0).integrity->key_size);

    auto rewrite = [&](const std::string& from, const std::string& to) -> Result<luks2::Header> {
        std::string json = md.json;
        const auto at = json.find(from);
        REQUIRE(at != std::string::npos);
        json.replace(at, from.size(), to);
        auto copy = std::make_shared<MemoryStore>(store->size());
        copy->data() = store->data();
        if (auto w = luks2::write_metadata(registry(), *copy, md, json); !w) return w.error();
        return luks2::read_header(registry(), *copy);
    };
    auto with_key = rewrite("\"journal_integrity\":\"none\"", "\"journal_integrity\":\"none\",\"key_size\":32");
    REQUIRE(with_key);
    CHECK(with_key->md.segments.at(0).integrity->key_size == 32u);
    CHECK(!rewrite("\"journal_integrity\":\"none\"", "\"journal_integrity\":\"none\",\"key_size\":\"32\""));
    CHECK(!rewrite(",\"journal_integrity\":\"none\"", ""));
}

// containers::open unlocks a LUKS2 --integrity image to its two tables (the
// crypt one, and below it luks-UUID_dif), which the dm layer stacks into the
// plaintext the kernel read: each probe and range of record.sh.
TEST_CASE("luks2 integrity: containers::open unlocks to the two tables", "[luks2][integrity]") {
    int checked = 0;
    for (const std::string& name : cases()) {
        CAPTURE(name);
        auto info = read_info(kGold / (name + ".info"));
        if (fs::exists(kGold / (name + ".hdr.xz")) || !info.at("keyslot_area").starts_with("kept")) continue;
        const fs::path img = fs::temp_directory_path() / ("blkcrypt-l2i-" + std::to_string(::getpid()) + ".img");
        REQUIRE(std::system(("xz -dc '" + (kGold / (name + ".img.xz")).string() + "' > '" + img.string() + "'").c_str()) == 0);
        auto c = containers::open(registry(), img.string());
        REQUIRE(c);
        const std::string pw = info.at("passphrase");
        auto top = (*c)->unlock(ConstBytes(reinterpret_cast<const uint8_t*>(pw.data()), pw.size()));
        if (!top) FAIL(top.error().message);
        const auto& lower = (*c)->lower_tables();
        REQUIRE(lower.size() == 1);
        REQUIRE(lower[0].table.size() == 1);
        CHECK(lower[0].table[0].target == "integrity");
        CHECK(lower[0].table[0].integrity->device == img.string());
        REQUIRE(top->size() == 1);
        REQUIRE(top->front().crypt);
        CHECK(top->front().crypt->device == "/dev/mapper/" + lower[0].name);
        CHECK(testutil::hex((*c)->volume_key()) == info.at("volume_key"));

        std::vector<dm::NamedDmTable> stack = lower;
        stack.push_back({"top", *top});
        dm::DmBuildOptions o;
        o.read_only = true;
        o.open = [](const std::string& path, bool) { return open_file_store(path, false); };
        auto dev = dm::build_dm_stack(registry(), stack, o);
        if (!dev) FAIL(dev.error().message);
        CHECK(testutil::kernel_probe_mismatches(**dev, (kGold / (name + ".info")).string(),
                                                top->front().crypt->sector_size) == std::vector<std::string>{});
        fs::remove(img);
        ++checked;
    }
    CHECK(checked >= 2);
}
