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
