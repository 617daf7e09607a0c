// The LUKS front (container.hpp) opens both versions: LUKS2 goes to the
// luks2 reader, with its header warnings handed back to the caller.
#include "test_util.hpp"

#include <blkcrypt/luks/container.hpp>
#include <blkcrypt/luks/luks2.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace blkcrypt;
namespace luks2 = blkcrypt::luks::luks2;
using testutil::registry;
using testutil::text;

TEST_CASE("luks front: open and open_with_volume_key dispatch LUKS2", "[luks][luks2]") {
    auto store = std::make_shared<MemoryStore>(2u << 20);
    luks2::FormatOptions fo;
    fo.pbkdf = "pbkdf2";
    fo.iterations = 1000;
    fo.data_offset = 1u << 20;
    fo.sector_size = 512;
    fo.label = "front";
    const std::string pw = "front passphrase";
    Result<luks::Volume> made = luks2::format(registry(), *store, text(pw), fo);
    REQUIRE(made.ok());

    Result<luks::Version> version = luks::detect(*store);
    REQUIRE(version.ok());
    CHECK(version.value() == luks::Version::Luks2);

    Result<luks::Volume> v = luks::open(registry(), *store, text(pw));
    REQUIRE(v.ok());
    CHECK(v->version == luks::Version::Luks2);
    CHECK(v->label == "front");
    CHECK(v->keyslot == 0);
    CHECK(v->table.offset == 2048);
    CHECK(testutil::hex(v->table.key) == testutil::hex(made->table.key));

    Result<luks::Volume> wrong = luks::open(registry(), *store, text("not it"));
    REQUIRE_FALSE(wrong.ok());
    CHECK(wrong.status() == Status::NoKey);
    CHECK(wrong.error().message == "No key available with this passphrase.");

    Result<luks::Volume> byvk = luks::open_with_volume_key(registry(), *store, made->table.key);
    REQUIRE(byvk.ok());
    CHECK(byvk->version == luks::Version::Luks2);
    CHECK(byvk->keyslot == -1);
    SecureBuffer other(made->table.key.size());
    CHECK(luks::open_with_volume_key(registry(), *store, other).status() == Status::NoKey);

    // A damaged primary: both entry points still open, from the secondary,
    // and say so through opts.warnings.
    store->data()[4096 + 10] ^= 0x5a;
    std::vector<std::string> warnings;
    luks::OpenOptions o;
    o.warnings = &warnings;
    REQUIRE(luks::open(registry(), *store, text(pw), o).ok());
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("primary LUKS2 header is damaged") != std::string::npos);
    warnings.clear();
    REQUIRE(luks::open_with_volume_key(registry(), *store, made->table.key, o).ok());
    CHECK(warnings.size() == 1);
}

namespace {

// A fresh container of either version in memory, with "first" in keyslot 0
// (PBKDF2 at 1000 iterations: the tests measure behaviour, not cost).
std::shared_ptr<MemoryStore> make_container(luks::Version v) {
    auto store = std::make_shared<MemoryStore>(4u << 20);
    if (v == luks::Version::Luks1) {
        luks::luks1::FormatParams p;
        p.force_iterations = 1000;
        p.key_bytes = 32;
        const std::vector<uint8_t> vk(32, 0x5a);
        REQUIRE(luks::luks1::format(registry(), *store, p, vk, text("first")).ok());
    } else {
        luks2::FormatOptions fo;
        fo.pbkdf = "pbkdf2";
        fo.iterations = 1000;
        fo.key_size = 32;
        fo.data_offset = 2u << 20;
        fo.sector_size = 512;
        REQUIRE(luks2::format(registry(), *store, text("first"), fo).ok());
    }
    return store;
}

luks::KeyslotOptions cheap_kdf() {
    luks::KeyslotOptions k;
    k.pbkdf = "pbkdf2";
    k.iterations = 1000;
    return k;
}

}  // namespace

TEST_CASE("luks Container: keyslot actions behave the same on LUKS1 and LUKS2", "[luks][luks1][luks2]") {
    for (luks::Version v : {luks::Version::Luks1, luks::Version::Luks2}) {
        CAPTURE(static_cast<int>(v));
        auto store = make_container(v);
        Result<luks::Container> loaded = luks::Container::load(registry(), store);
        REQUIRE(loaded.ok());
        luks::Container c = std::move(loaded).value();
        CHECK(c.version() == v);
        CHECK(c.keyslot_limit() == (v == luks::Version::Luks1 ? 8 : 32));
        CHECK(c.active_keyslots() == std::vector<int>{0});
        REQUIRE(c.volume_key_size().ok());
        CHECK(c.volume_key_size().value() == 32);
        CHECK(c.check_requirements().ok());

        // Slot selection, in cryptsetup's words.
        CHECK(c.free_keyslot(-1).value() == 1);
        CHECK(c.free_keyslot(0).error().message == "Key slot 0 is full, please select another one.");
        const int limit = c.keyslot_limit();
        CHECK(c.free_keyslot(limit).error().message == "Key slot " + std::to_string(limit) + " is invalid.");
        CHECK(c.check_removable(5).error().message == "Keyslot 5 is not active.");

        // add: the volume key from an existing passphrase into keyslot 3.
        Result<luks::Unlocked> first = c.unlock(text("first"));
        REQUIRE(first.ok());
        CHECK(first->keyslot == 0);
        CHECK(c.unlock(text("wrong")).status() == Status::NoKey);
        CHECK(c.check_volume_key(first->volume_key).ok());
        SecureBuffer other(32);
        CHECK(c.check_volume_key(other).status() == Status::NoKey);
        luks::KeyslotOptions k = cheap_kdf();
        k.keyslot = 3;
        Result<int> added = c.add_keyslot(first->volume_key, text("second"), k);
        REQUIRE(added.ok());
        CHECK(*added == 3);
        CHECK(c.active_keyslots() == std::vector<int>{0, 3});
        CHECK(c.unlock(text("second"))->keyslot == 3);
        // The header read follows the write: a new load sees the same.
        CHECK(luks::Container::load(registry(), store)->active_keyslots() == std::vector<int>{0, 3});

        // change: LUKS1 moves the passphrase to a free keyslot, LUKS2 keeps
        // the number; either way "second" is gone and "third" opens.
        Result<luks::Unlocked> old = c.unlock_to_change(text("second"), -1);
        REQUIRE(old.ok());
        Result<int> target = c.change_target(*old, -1);
        REQUIRE(target.ok());
        CHECK(*target == (v == luks::Version::Luks1 ? 1 : 3));
        REQUIRE(c.change_keyslot(*old, *target, text("second"), text("third"), cheap_kdf()).ok());
        CHECK(c.unlock(text("second")).status() == Status::NoKey);
        CHECK(c.unlock(text("third"))->keyslot == *target);

        // backup, remove, restore.
        Result<std::vector<uint8_t>> backup = c.header_backup();
        REQUIRE(backup.ok());
        REQUIRE(c.remove_keyslot(0).ok());
        CHECK(c.unlock(text("first")).status() == Status::NoKey);
        REQUIRE(c.erase().ok());
        CHECK(c.active_keyslots().empty());
        // LUKS2 with no keyslot left is "No usable keyslot" (Invalid), as cryptsetup's exit 1.
        CHECK(c.unlock(text("third")).status() == (v == luks::Version::Luks1 ? Status::NoKey : Status::Invalid));
        MemoryStore saved(backup->size());
        saved.data() = *backup;
        REQUIRE(luks::header_restore(registry(), *store, saved).ok());
        Result<luks::Container> restored = luks::Container::load(registry(), store);
        REQUIRE(restored.ok());
        CHECK(restored->unlock(text("first"))->keyslot == 0);
        CHECK(restored->uuid() == c.uuid());

        // The dump of either version starts as cryptsetup's does.
        const std::string dump = restored->dump("dev");
        CHECK(dump.rfind(v == luks::Version::Luks1 ? "LUKS header information for dev" : "LUKS header information", 0) == 0);
        CHECK(restored->dump_json_metadata().ok() == (v == luks::Version::Luks2));
        // dump --json's object: one line in the CLI's layout, the keyslots restored.
        Result<std::string> summary = restored->dump_summary_json("dev");
        REQUIRE(summary.ok());
        CHECK(summary->rfind("{\"device\": \"dev\", \"version\": " + std::to_string(static_cast<int>(v)) + ", ", 0) == 0);
        CHECK(summary->find("\"keyslots\": [{\"keyslot\": 0, \"key_bits\": 256, ") != std::string::npos);
        CHECK(summary->back() == '}');
        CHECK(summary->find('\n') == std::string::npos);
        // LUKS2 without keyslots has no key size to report, as cryptsetup.
        CHECK(c.dump_summary_json("dev").ok() == (v == luks::Version::Luks1));
        CHECK(restored->set_labels("a", "b").ok() == (v == luks::Version::Luks2));
    }
}

TEST_CASE("luks Container: LUKS1's eight keyslots fill up", "[luks][luks1]") {
    auto store = make_container(luks::Version::Luks1);
    luks::Container c = std::move(luks::Container::load(registry(), store)).value();
    const SecureBuffer vk = std::move(c.unlock(text("first"))->volume_key);
    for (int k = 1; k < 8; ++k) REQUIRE(c.add_keyslot(vk, text("more"), cheap_kdf()).ok());
    CHECK(c.free_keyslot(-1).error().message == "All key slots full.");
    CHECK(c.add_keyslot(vk, text("more"), cheap_kdf()).error().message == "All key slots full.");
    Result<luks::Unlocked> old = c.unlock_to_change(text("first"), -1);
    REQUIRE(old.ok());
    CHECK(c.change_target(*old, -1).error().message == "All key slots full: a crash-safe change needs a free keyslot.");
}
