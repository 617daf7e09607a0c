// Bugs the fuzz harnesses (tests/fuzz) found in the library, one test each;
// the crashing inputs themselves are replayed from tests/fuzz/crashes/.
#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/verity/params.hpp>
#include <blkcrypt/verity/table.hpp>
#include <blkcrypt/verity/target.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <string>

using namespace blkcrypt;

TEST_CASE("verity: a hash start near 2^64 is refused, not wrapped into a small device", "[verity][fuzz]") {
    // 1000 blocks of sha256 need 9 hash blocks; from this start the hash
    // device would end past 2^64 bytes, which wrapped to 32 KiB.
    const uint64_t start = UINT64_MAX / 4096;
    auto t = verity::parse_verity_args("1 d h 4096 4096 1000 " + std::to_string(start) + " sha256 " +
                                       std::string(64, '0') + " -");
    REQUIRE(t.ok());
    verity::VerityParams p = t->params;
    p.superblock = false;
    p.hash_offset = start * 4096;
    auto g = verity::compute_geometry(p, 32);
    REQUIRE_FALSE(g.ok());
    CHECK_THAT(g.error().message, Catch::Contains("overflows"));

    Registry reg;
    REQUIRE(register_defaults(reg));
    auto data = std::make_shared<dm::MemoryStore>(1000 * 4096);
    auto hash = std::make_shared<dm::MemoryStore>(64 * 1024);
    auto tg = verity::VerityTarget::create(reg, *t, data, hash);
    REQUIRE_FALSE(tg.ok());
    CHECK_THAT(tg.error().message, Catch::Contains("overflows"));

    verity::VerityParams q;
    q.data_blocks = 8;
    q.hash_offset = UINT64_MAX - 511;  // + the superblock wrapped too
    CHECK_FALSE(verity::compute_geometry(q, 32).ok());
}
