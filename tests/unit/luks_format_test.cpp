// luks::format and luks::keyslot_options (container.hpp): one set of options
// for either version, the version's layout and checks inside the library.
#include "test_util.hpp"

#include <blkcrypt/luks/container.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

using namespace blkcrypt;
using testutil::registry;
using testutil::text;

namespace {

// PBKDF2 at 1000 iterations: the tests check layout and checks, not cost.
luks::FormatOptions cheap(luks::Version v) {
    luks::FormatOptions o;
    o.version = v;
    o.key_bits = 256;
    o.kdf.pbkdf = "pbkdf2";
    o.kdf.iterations = 1000;
    return o;
}

}  // namespace

TEST_CASE("luks format: one options struct formats either version, each as cryptsetup lays it out", "[luks][luks1][luks2]") {
    const std::vector<uint8_t> vk(32, 0x3c);
    for (const luks::Version v : {luks::Version::Luks1, luks::Version::Luks2}) {
        for (const bool detached : {false, true}) {
            CAPTURE(static_cast<int>(v), detached);
            luks::FormatOptions o = cheap(v);
            o.detached = detached;
            o.uuid = "0c5e1b3a-2f47-4d8e-9a61-7b2c3d4e5f60";
            const Result<luks::FormatLayout> layout = luks::format_layout(registry(), o);
            REQUIRE(layout.ok());
            CHECK(layout->version == v);
            CHECK(layout->key_size == 32);
            // cryptsetup 2.6.1's layouts: LUKS1's eight keyslots (128 KiB
            // each for 256 bits) end past 1 MiB, so the payload is aligned
            // to 2 MiB (4096 sectors); LUKS2 at 16 MiB with 4096-byte
            // sectors; detached: the data from sector 0 of its own device.
            CHECK(layout->sector_size == (v == luks::Version::Luks1 ? 512u : 4096u));
            CHECK(layout->data_offset == (detached ? 0 : v == luks::Version::Luks1 ? 2u << 20 : 16u << 20));
            if (!detached) CHECK(layout->file_size == layout->data_offset);

            auto store = std::make_shared<MemoryStore>(layout->file_size);
            REQUIRE(luks::format(registry(), *store, o, vk, text("pass")).ok());
            Result<luks::Version> found = luks::detect(*store);
            REQUIRE(found.ok());
            CHECK(*found == v);
            Result<luks::Volume> vol = luks::open(registry(), *store, text("pass"));
            REQUIRE(vol.ok());
            CHECK(vol->uuid == o.uuid);
            CHECK(vol->keyslot == 0);
            CHECK(vol->table.cipher == "aes-xts-plain64");
            CHECK(vol->table.sector_size == layout->sector_size);
            CHECK(vol->table.offset * 512 == layout->data_offset);
            CHECK(std::equal(vk.begin(), vk.end(), vol->table.key.data(), vol->table.key.data() + vol->table.key.size()));
            CHECK(luks::open(registry(), *store, text("wrong")).status() == Status::NoKey);
        }
    }
}

TEST_CASE("luks format: a random volume key, and keyslot 3 when asked", "[luks][luks1][luks2]") {
    for (const luks::Version v : {luks::Version::Luks1, luks::Version::Luks2}) {
        luks::FormatOptions o = cheap(v);
        o.keyslot = 3;
        auto store = std::make_shared<MemoryStore>(luks::format_layout(registry(), o)->file_size);
        REQUIRE(luks::format(registry(), *store, o, {}, text("pass")).ok());
        Result<luks::Volume> vol = luks::open(registry(), *store, text("pass"));
        REQUIRE(vol.ok());
        CHECK(vol->keyslot == 3);
        CHECK(vol->table.key.size() == 32);
        const uint8_t* k = vol->table.key.data();
        CHECK(std::any_of(k, k + 32, [](uint8_t b) { return b != 0; }));
    }
}

TEST_CASE("luks format: each version's refusals, with cryptsetup's words, write nothing", "[luks][luks1][luks2]") {
    using V = luks::Version;
    struct Case {
        V version;
        std::function<void(luks::FormatOptions&)> change;
        Status status;
        std::string message;
    };
    const std::vector<Case> cases{
        // LUKS1's parameter errors are usage errors (Invalid), LUKS2's
        // cryptsetup's exit 1 (Unsupported).
        {V::Luks1, [](auto& o) { o.key_bits = 100; }, Status::Invalid, "--key-size must be a multiple of 8 bits"},
        {V::Luks2, [](auto& o) { o.key_bits = 100; }, Status::Unsupported, "--key-size must be a multiple of 8 bits"},
        {V::Luks1, [](auto& o) { o.key_bits = 1024; }, Status::Invalid, "--key-size: LUKS1 volume keys are at most 512 bits here"},
        {V::Luks1, [](auto& o) { o.keyslot = 8; }, Status::Unsupported, "Key slot 8 is invalid."},
        {V::Luks2, [](auto& o) { o.keyslot = 32; }, Status::Unsupported, "Key slot 32 is invalid."},
        {V::Luks1, [](auto& o) { o.offset = 7; }, Status::Invalid, "Data offset is not multiple of 4096 bytes."},
        {V::Luks2, [](auto& o) { o.offset = 9; }, Status::Unsupported, "Data offset is not multiple of 4096 bytes."},
        {V::Luks2, [](auto& o) { o.offset = 8, o.align = 16; }, Status::Unsupported, "--offset and --align-payload exclude each other"},
        {V::Luks1, [](auto& o) { o.sector_size = 4096; }, Status::Invalid, "LUKS1 has no sector size, label, subsystem or metadata sizes"},
        {V::Luks2, [](auto& o) { o.sector_size = 1000; }, Status::Unsupported, "Unsupported encryption sector size."},
        {V::Luks2, [](auto& o) { o.label = std::string(48, 'l'); }, Status::Unsupported, "Label is too long."},
        {V::Luks2, [](auto& o) { o.subsystem = std::string(48, 's'); }, Status::Unsupported, "Subsystem is too long."},
        {V::Luks2, [](auto& o) { o.metadata_size = 20000; }, Status::Unsupported, "Unsupported LUKS2 metadata size."},
        {V::Luks2, [](auto& o) { o.keyslots_size = 1000; }, Status::Unsupported, "Unsupported LUKS2 keyslots size."},
        {V::Luks1, [](auto& o) { o.kdf.pbkdf = "argon2id"; }, Status::Invalid, "LUKS1 keyslots use --pbkdf pbkdf2 only"},
        {V::Luks2, [](auto& o) { o.kdf.pbkdf = "scrypt"; }, Status::Unsupported, "Unknown PBKDF type scrypt."},
    };
    for (const Case& c : cases) {
        CAPTURE(c.message);
        luks::FormatOptions o = cheap(c.version);
        c.change(o);
        const Result<luks::FormatLayout> layout = luks::format_layout(registry(), o);
        REQUIRE_FALSE(layout.ok());
        CHECK(layout.status() == c.status);
        CHECK(layout.error().message == c.message);
        MemoryStore store(32u << 20);
        std::fill(store.data().begin(), store.data().end(), uint8_t{0xa5});
        const Result<void> r = luks::format(registry(), store, o, {}, text("pass"));
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().message == c.message);
        CHECK(std::all_of(store.data().begin(), store.data().end(), [](uint8_t b) { return b == 0xa5; }));
    }
}

TEST_CASE("luks keyslot_options: each version's KDF checks and defaults", "[luks][luks1][luks2]") {
    using V = luks::Version;
    luks::KdfRequest r;
    Result<luks::KeyslotOptions> k = luks::keyslot_options(V::Luks1, r);
    REQUIRE(k.ok());
    CHECK(k->pbkdf == "pbkdf2");
    k = luks::keyslot_options(V::Luks2, r);
    REQUIRE(k.ok());
    CHECK(k->pbkdf == "argon2id");
    CHECK(k->iter_time_ms == 2000);

    // Forced Argon2 passes take cryptsetup's 1 GiB and at most 4 lanes.
    r.iterations = 4;
    k = luks::keyslot_options(V::Luks2, r);
    REQUIRE(k.ok());
    CHECK(k->iterations == 4);
    CHECK(k->memory_kib == 1024u * 1024);
    CHECK(k->parallel >= 1);
    CHECK(k->parallel <= 4);
    // ... and the LUKS1 floor is PBKDF2's.
    k = luks::keyslot_options(V::Luks1, r);
    REQUIRE_FALSE(k.ok());
    CHECK(k.status() == Status::Unsupported);
    CHECK(k.error().message == "Forced iteration count is too low for pbkdf2 (minimum is 1000).");

    r = {};
    r.iterations = 3;
    k = luks::keyslot_options(V::Luks2, r);
    CHECK(k.error().message == "Forced iteration count is too low for argon2id (minimum is 4).");

    r = {};
    r.memory_kib = 65536;
    k = luks::keyslot_options(V::Luks1, r);
    CHECK(k.status() == Status::Invalid);
    CHECK(k.error().message == "--pbkdf-memory: not for LUKS1");
    r.pbkdf = "pbkdf2";
    k = luks::keyslot_options(V::Luks2, r);
    CHECK(k.status() == Status::Unsupported);
    CHECK(k.error().message == "PBKDF max memory or parallel threads must not be set with pbkdf2.");

    r = {};
    r.iterations = 2000;
    r.iter_time_ms = 100;
    CHECK(luks::keyslot_options(V::Luks1, r).status() == Status::Invalid);
    CHECK(luks::keyslot_options(V::Luks2, r).status() == Status::Unsupported);
}
