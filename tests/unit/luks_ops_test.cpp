// LUKS1 <-> LUKS2 conversion (convert.hpp): the keys, UUID and data offset
// survive both ways, cryptsetup's refusals hold, and a crash at any write,
// with any prefix of that write's sectors on disk, leaves a container that
// opens with every passphrase, for us and (when installed) for cryptsetup. (tests/cli/luks_ops.sh checks the results
// against cryptsetup convert itself.)
#include "test_util.hpp"
#include "torn_store.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/luks/container.hpp>
#include <blkcrypt/luks/convert.hpp>
#include <blkcrypt/luks/luks1.hpp>
#include <blkcrypt/luks/luks2.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <stdlib.h>

using namespace blkcrypt;
namespace luks2 = blkcrypt::luks::luks2;
using testutil::registry;
namespace luks1 = blkcrypt::luks::luks1;

namespace {

using testutil::TornStore;
using testutil::text;

// The volume key the passphrase opens in image, or empty.
std::vector<uint8_t> key_of(const std::vector<uint8_t>& image, const std::string& pw) {
    MemoryStore s(0);
    s.data() = image;
    Result<luks::Volume> v = luks::open(registry(), s, text(pw));
    if (!v) return {};
    return {v->table.key.data(), v->table.key.data() + v->table.key.size()};
}

// Whether cryptsetup itself opens image with pw (true when it is not
// installed: the live check is skipped, our own check still runs).
bool cryptsetup_opens(const std::vector<uint8_t>& image, const std::string& pw) {
    static const bool have = std::system("cryptsetup --version >/dev/null 2>&1") == 0;
    if (!have) return true;
    char tmpl[] = "/tmp/blkcrypt-convert-XXXXXX";
    if (!::mkdtemp(tmpl)) return false;
    const std::string dir = tmpl;
    std::ofstream(dir + "/img", std::ios::binary).write(reinterpret_cast<const char*>(image.data()),
                                                         static_cast<std::streamsize>(image.size()));
    std::ofstream(dir + "/pw", std::ios::binary) << pw;
    const int rc = std::system(("cryptsetup open --test-passphrase --key-file '" + dir + "/pw' '" + dir +
                                "/img' 2>/dev/null").c_str());
    (void)std::system(("rm -rf '" + dir + "'").c_str());
    return rc == 0;
}

luks::Version version(const std::vector<uint8_t>& image) {
    MemoryStore s(0);
    s.data() = image;
    Result<luks::Version> v = luks::detect(s);
    REQUIRE(v.ok());
    return *v;
}

// A LUKS1 container laid out as cryptsetup's default (64-byte key: the
// eight areas fill the 2 MiB before the payload) with `slots` enabled.
std::vector<uint8_t> luks1_image(const std::vector<unsigned>& slots, const std::vector<uint8_t>& vk) {
    luks1::FormatParams p;
    p.force_iterations = 1000;
    p.key_bytes = static_cast<uint32_t>(vk.size());
    p.keyslot = slots.at(0);
    p.uuid = "0b6d5d8c-8c43-4b8e-9a3c-2d1e6f4a7b90";
    MemoryStore s(3u << 20);
    Result<luks1::Header> h = luks1::format(registry(), s, p, vk, text("pw" + std::to_string(slots[0])));
    REQUIRE(h.ok());
    for (std::size_t i = 1; i < slots.size(); ++i)
        REQUIRE(luks1::add_keyslot(registry(), s, *h, slots[i], vk, text("pw" + std::to_string(slots[i])), 1000).ok());
    return s.data();
}

// A small LUKS2 container of our own: keyslot 0 under "pw0", pbkdf2 at 1000.
void small_luks2(MemoryStore& s) {
    luks2::FormatOptions fo;
    fo.pbkdf = "pbkdf2";
    fo.iterations = 1000;
    fo.data_offset = 1u << 20;
    REQUIRE(luks2::format(registry(), s, text("pw0"), fo).ok());
}

using Convert = Result<void> (*)(Registry&, BackingStore&);

// Converts `image` crashing at every write with 0, 1, half and all but one
// of its sectors on disk: every passphrase opens the same volume key each
// time. Returns the cleanly converted image.
std::vector<uint8_t> crash_everywhere(const std::vector<uint8_t>& image, Convert convert,
                                      const std::vector<unsigned>& slots, const std::vector<uint8_t>& vk) {
    TornStore clean(image, 0, 0);
    REQUIRE(convert(registry(), clean).ok());
    const int n = clean.writes();
    CHECK(n >= 2);  // at least the two LUKS2 copies, or the LUKS1 header
    for (int at = 1; at <= n; ++at) {
        for (std::size_t keep : {std::size_t{0}, std::size_t{1}, std::size_t{16}, std::size_t{31}}) {
            INFO("crash at write " << at << " of " << n << " keeping " << keep << " sectors");
            TornStore s(image, at, keep);
            CHECK_FALSE(convert(registry(), s).ok());
            for (unsigned k : slots) {
                CHECK(key_of(s.image(), "pw" + std::to_string(k)) == vk);
                CHECK(cryptsetup_opens(s.image(), "pw" + std::to_string(k)));  // and so does the real peer
            }
        }
    }
    for (unsigned k : slots) CHECK(key_of(clean.image(), "pw" + std::to_string(k)) == vk);
    CHECK(key_of(clean.image(), "wrong").empty());
    return clean.image();
}

}  // namespace

TEST_CASE("luks convert: LUKS1 -> LUKS2 -> LUKS1 keeps keys, UUID and offset through a crash at any write", "[luks]") {
    const std::vector<uint8_t> vk(64, 0x3c);
    const std::vector<unsigned> slots{0, 3};
    const std::vector<uint8_t> l1 = luks1_image(slots, vk);

    const std::vector<uint8_t> l2 = crash_everywhere(l1, luks::convert_to_luks2, slots, vk);
    REQUIRE(version(l2) == luks::Version::Luks2);
    MemoryStore s2(0);
    s2.data() = l2;
    Result<luks2::Header> h2 = luks2::read_header(registry(), s2);
    REQUIRE(h2.ok());
    CHECK(h2->primary_ok);
    CHECK(h2->secondary_ok);
    CHECK(h2->md.hdr.uuid == "0b6d5d8c-8c43-4b8e-9a3c-2d1e6f4a7b90");
    CHECK(h2->md.hdr.seqid == 2);
    CHECK(h2->md.segments.at(0).offset == 2u << 20);
    CHECK(h2->md.segments.at(0).sector_size == 512);
    CHECK(h2->md.config.keyslots_size == (2u << 20) - 32768);
    // Keyslot 0 (under the new header copies) moved into slot 1's area; 3 stayed.
    CHECK(h2->md.keyslots.at(0).area_offset == 4096 + 258048);
    CHECK(h2->md.keyslots.at(3).area_offset == 4096 + 3 * 258048);
    // Nothing of slot 0's old copy is left past the header copies.
    CHECK(std::all_of(l2.begin() + 32768, l2.begin() + 4096 + 256000, [](uint8_t b) { return b == 0; }));
    CHECK(luks::convert_to_luks2(registry(), s2).error().message == "Device is already LUKS2 type.");

    const std::vector<uint8_t> back = crash_everywhere(l2, luks::convert_to_luks1, slots, vk);
    REQUIRE(version(back) == luks::Version::Luks1);
    Result<luks1::Header> h1 = luks1::parse_header(back);
    REQUIRE(h1.ok());
    CHECK(h1->uuid == "0b6d5d8c-8c43-4b8e-9a3c-2d1e6f4a7b90");
    CHECK(h1->payload_offset == 4096);
    CHECK(h1->keyslots[0].enabled());
    CHECK(h1->keyslots[3].enabled());
    CHECK_FALSE(h1->keyslots[1].enabled());
    CHECK(h1->keyslots[1].key_material_offset == 8);  // a placeholder in the old metadata, as cryptsetup wants it
    // No LUKS2 copy is left behind the LUKS1 header.
    CHECK(std::all_of(back.begin() + luks1::kHeaderSize, back.begin() + 32768, [](uint8_t b) { return b == 0; }));
    MemoryStore s1(0);
    s1.data() = back;
    CHECK(luks::convert_to_luks1(registry(), s1).error().message == "Device is already LUKS1 type.");
    // And once more to LUKS2: the round trip of our own result works too.
    CHECK(key_of(crash_everywhere(back, luks::convert_to_luks2, slots, vk), "pw3") == vk);
}

TEST_CASE("luks convert: every torn prefix and suffix of every write still opens", "[luks][luks1][luks2]") {
    // A disk may land any prefix or suffix of a multi-sector write (sector
    // writes themselves are atomic). Such states of every write, in both
    // directions, open with every passphrase for us and for cryptsetup. (A
    // 16 KiB LUKS2 primary written whole, landed without its first sector,
    // left the LUKS1 magic over zeroed keyslots 6 and 7: neither opened it.)
    const std::vector<uint8_t> vk(64, 0x5a);
    const std::vector<unsigned> slots{0, 3};
    const std::vector<uint8_t> l1 = luks1_image(slots, vk);
    std::vector<uint8_t> l2;
    {
        TornStore clean(l1, 0, 0);
        REQUIRE(luks::convert_to_luks2(registry(), clean).ok());
        l2 = clean.image();
    }
    std::set<std::size_t> seen;  // states already given to cryptsetup (by content hash)
    using Step = std::pair<const std::vector<uint8_t>*, Convert>;
    for (auto [image, convert] : {Step{&l1, luks::convert_to_luks2}, Step{&l2, luks::convert_to_luks1}}) {
        TornStore clean(*image, 0, 0);
        REQUIRE(convert(registry(), clean).ok());
        const std::vector<std::size_t> sizes = clean.write_sizes();
        for (int at : testutil::crash_points(static_cast<int>(sizes.size()))) {
            const std::size_t sectors = (sizes[at - 1] + 511) / 512;
            // Every length for header writes (at most 16 KiB); the keyslot
            // area copies and wipes (hundreds of sectors, into areas nothing
            // names yet or any more) at 0, 1, half, all but one and all.
            std::vector<std::size_t> keeps;
            if (sectors <= 32)
                for (std::size_t k = 0; k <= sectors; ++k) keeps.push_back(k);
            else
                keeps = {0, 1, sectors / 2, sectors - 1, sectors};
            for (auto tear : {TornStore::Tear::Prefix, TornStore::Tear::Suffix}) {
                for (std::size_t keep : keeps) {
                    INFO("write " << at << " of " << sizes.size() << " (" << sizes[at - 1] << " bytes), keeping its "
                                  << (tear == TornStore::Tear::Prefix ? "first " : "last ") << keep << " sectors");
                    TornStore s(*image, at, keep, tear);
                    CHECK_FALSE(convert(registry(), s).ok());
                    const bool fresh = seen.insert(std::hash<std::string_view>{}(std::string_view(
                                                       reinterpret_cast<const char*>(s.image().data()), s.image().size())))
                                           .second;
                    for (unsigned k : slots) {
                        CHECK(key_of(s.image(), "pw" + std::to_string(k)) == vk);
                        if (fresh) CHECK(cryptsetup_opens(s.image(), "pw" + std::to_string(k)));
                    }
                }
            }
        }
    }
}

TEST_CASE("luks convert: what cryptsetup refuses, refused with nothing written", "[luks]") {
    const std::vector<uint8_t> vk(64, 0x77);
    // Keyslot 0 has nowhere safe to go when slots 1..5 are all in use.
    {
        const std::vector<uint8_t> full = luks1_image({0, 1, 2, 3, 4, 5}, vk);
        MemoryStore s(0);
        s.data() = full;
        Result<void> r = luks::convert_to_luks2(registry(), s);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().message.find("keyslot 0") != std::string::npos);
        CHECK(s.data() == full);
    }
    // Slot 0 free: nothing needs to move.
    {
        const std::vector<uint8_t> l1 = luks1_image({1, 2, 3, 4, 5, 6, 7}, vk);
        MemoryStore s(0);
        s.data() = l1;
        REQUIRE(luks::convert_to_luks2(registry(), s).ok());
        CHECK(key_of(s.data(), "pw7") == vk);
    }
    auto luks2_with = [&](const luks2::FormatOptions& fo) {
        MemoryStore s(4u << 20);
        REQUIRE(luks2::format(registry(), s, text("pw0"), fo).ok());
        return s.data();
    };
    luks2::FormatOptions fo;
    fo.pbkdf = "pbkdf2";
    fo.iterations = 1000;
    fo.data_offset = 2u << 20;
    fo.sector_size = 512;
    fo.volume_key = vk;
    auto refused = [&](std::vector<uint8_t> image, const std::string& msg) {
        MemoryStore s(0);
        s.data() = image;
        Result<void> r = luks::convert_to_luks1(registry(), s);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().message == msg);
        CHECK(s.data() == image);
    };
    {
        luks2::FormatOptions o = fo;
        o.sector_size = 4096;
        refused(luks2_with(o), "Cannot convert to LUKS1 format - default segment encryption sector size is not 512 bytes.");
    }
    {
        luks2::FormatOptions o = fo;
        o.pbkdf = "argon2id";
        o.iterations = 4;
        o.memory_kib = 32;
        o.parallel = 1;
        refused(luks2_with(o), "Cannot convert to LUKS1 format - keyslot 0 is not LUKS1 compatible.");
    }
    {
        luks2::FormatOptions o = fo;
        o.keyslot = 8;
        refused(luks2_with(o), "Cannot convert to LUKS1 format - slot 8 (over maximum slots) is still active.");
    }
    {
        // A token (of a type nobody knows) stops the conversion, as in cryptsetup.
        MemoryStore s(0);
        s.data() = luks2_with(fo);
        Result<luks2::Header> h = luks2::read_header(registry(), s);
        REQUIRE(h.ok());
        std::string json = h->md.json;
        const std::string from = "\"tokens\":{}";
        REQUIRE(json.find(from) != std::string::npos);
        json.replace(json.find(from), from.size(), "\"tokens\":{\"0\":{\"type\":\"x-test\",\"keyslots\":[]}}");
        REQUIRE(luks2::write_metadata(registry(), s, h->md, json).ok());
        refused(s.data(), "Cannot convert to LUKS1 format - LUKS2 header contains 1 token(s).");
    }
    // The accepted case: LUKS2 made by format converts and opens as LUKS1.
    {
        MemoryStore s(0);
        s.data() = luks2_with(fo);
        REQUIRE(luks::convert_to_luks1(registry(), s).ok());
        CHECK(version(s.data()) == luks::Version::Luks1);
        CHECK(key_of(s.data(), "pw0") == vk);
    }
}

TEST_CASE("luks2 config: labels and keyslot priorities, one header rewrite each", "[luks2]") {
    MemoryStore s(2u << 20);
    small_luks2(s);
    auto header = [&] {
        Result<luks2::Header> h = luks2::read_header(registry(), s);
        REQUIRE(h.ok());
        CHECK(h->primary_ok);
        CHECK(h->secondary_ok);
        return h->md;
    };
    REQUIRE(luks2::set_labels(registry(), s, "new label", std::string(60, 'x')).ok());
    luks2::Metadata md = header();
    CHECK(md.hdr.seqid == 2);
    CHECK(md.hdr.label == "new label");
    CHECK(md.hdr.subsystem == std::string(47, 'x'));  // truncated as cryptsetup does

    REQUIRE(luks2::set_priority(registry(), s, 0, 0).ok());
    md = header();
    CHECK(md.keyslots.at(0).priority == 0);
    CHECK(md.json.find("\"priority\":0") != std::string::npos);
    // An ignored keyslot opens only when named. With no other keyslot,
    // cryptsetup 2.6.1 answers "No usable keyslot is available." (exit 1),
    // not "No key available..." (checked live).
    Result<luks::Volume> none = luks::open(registry(), s, text("pw0"));
    REQUIRE_FALSE(none.ok());
    CHECK(none.status() == Status::Invalid);
    CHECK(none.error().message == "No usable keyslot is available.");
    luks::OpenOptions named;
    named.keyslot = 0;
    CHECK(luks::open(registry(), s, text("pw0"), named).ok());
    REQUIRE(luks2::set_priority(registry(), s, 0, 1).ok());
    md = header();
    CHECK(md.keyslots.at(0).priority == 1);
    CHECK(md.json.find("priority") == std::string::npos);  // normal is not written
    CHECK(md.hdr.label == "new label");
    CHECK(luks::open(registry(), s, text("pw0")).ok());
    CHECK(luks2::set_priority(registry(), s, 4, 2).error().message == "Keyslot 4 is not active.");
    CHECK_FALSE(luks2::set_priority(registry(), s, 0, 3).ok());
}

TEST_CASE("luks2 tokens: import, assign, remove keep every other token as it was", "[luks2]") {
    MemoryStore s(2u << 20);
    small_luks2(s);
    const std::string odd = R"({"type":"x-odd","keyslots":[],"z":{"b":[1,2.5,null],"a":"\u00e9"}})";
    Result<int> a = luks2::import_token(registry(), s, odd, -1, false);
    REQUIRE(a.ok());
    CHECK(*a == 0);
    Result<int> b = luks2::import_token(registry(), s, R"({"type":"luks2-keyring","keyslots":[],"key_description":"k"})", 7, false);
    REQUIRE(b.ok());
    CHECK(*b == 7);
    REQUIRE(luks2::assign_token(registry(), s, 7, 0).ok());
    REQUIRE(luks2::assign_token(registry(), s, 7, 0).ok());  // already there: unchanged
    Result<luks2::Header> h = luks2::read_header(registry(), s);
    REQUIRE(h.ok());
    CHECK(h->md.hdr.seqid == 4);  // format, two imports, one assignment
    CHECK(h->md.tokens.at(7).keyslots == std::vector<int>{0});
    const std::string kept = h->md.tokens.at(0).json;
    CHECK(kept.find("\"z\":{\"b\":[1,2.5,null]") != std::string::npos);

    CHECK(luks2::import_token(registry(), s, odd, 0, false).error().message == "Token 0 in use.");
    CHECK_FALSE(luks2::import_token(registry(), s, R"({"type":"x","keyslots":["3"]})", -1, false).ok());  // no keyslot 3
    CHECK_FALSE(luks2::import_token(registry(), s, R"({"type":"luks2-keyring","keyslots":[]})", -1, false).ok());
    CHECK_FALSE(luks2::import_token(registry(), s, "[1]", -1, false).ok());
    CHECK_FALSE(luks2::import_token(registry(), s, R"({"keyslots":[]})", -1, false).ok());
    CHECK(luks2::assign_token(registry(), s, 0, 5).error().message == "Keyslot 5 is not active.");

    // Killing the keyslot drops it from the token, and nothing else changes.
    REQUIRE(luks2::remove_keyslot(registry(), s, 0).ok());
    REQUIRE(luks2::remove_token(registry(), s, 7).ok());
    CHECK(luks2::remove_token(registry(), s, 7).error().message == "Token 7 is not in use.");
    h = luks2::read_header(registry(), s);
    REQUIRE(h.ok());
    REQUIRE(h->md.tokens.size() == 1);
    CHECK(h->md.tokens.at(0).json == kept);
}
