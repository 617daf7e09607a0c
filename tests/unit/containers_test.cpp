// containers::detect: each signature it knows, the look-alikes it must not
// take (a FAT volume's "MSWIN4.1" without the BitLocker GUID), a LUKS2 image
// whose primary header is gone, and an image with nothing.
#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/containers/container.hpp>
#include <blkcrypt/verity/superblock.hpp>

#include <catch2/catch.hpp>

#include <cstring>
#include <optional>

using namespace blkcrypt;
using containers::Format;

namespace {

constexpr uint8_t kGuid[16] = {0x3b, 0xd6, 0x67, 0x49, 0x29, 0x2e, 0xd8, 0x4a,
                               0x83, 0x99, 0xf6, 0xa3, 0x39, 0xe3, 0xd0, 0x01};

// The format detect names, or nullopt when it names none.
std::optional<Format> detected(BackingStore& s) {
    auto r = containers::detect(s);
    if (!r) return std::nullopt;
    return *r;
}

void put(MemoryStore& m, std::size_t at, const void* p, std::size_t n) { std::memcpy(m.data().data() + at, p, n); }

}  // namespace

TEST_CASE("containers::detect knows each signature", "[containers]") {
    MemoryStore m(1 << 20);
    CHECK(containers::detect(m).status() == Status::NotFound);

    const uint8_t luks1[8] = {'L', 'U', 'K', 'S', 0xba, 0xbe, 0, 1};
    put(m, 0, luks1, 8);
    CHECK(detected(m) == Format::Luks1);
    const uint8_t luks2[8] = {'L', 'U', 'K', 'S', 0xba, 0xbe, 0, 2};
    put(m, 0, luks2, 8);
    CHECK(detected(m) == Format::Luks2);
    const uint8_t luks9[8] = {'L', 'U', 'K', 'S', 0xba, 0xbe, 0, 9};
    put(m, 0, luks9, 8);
    CHECK(containers::detect(m).status() == Status::NotFound);

    // The primary gone (sector 0 zeroed), the secondary at 16 KiB... or 4 MiB.
    MemoryStore s(8 << 20);
    const uint8_t second[8] = {'S', 'K', 'U', 'L', 0xba, 0xbe, 0, 2};
    put(s, 0x4000, second, 8);
    CHECK(detected(s) == Format::Luks2);
    std::memset(s.data().data() + 0x4000, 0, 8);
    put(s, 0x400000, second, 8);
    CHECK(detected(s) == Format::Luks2);
    put(s, 0x400000 + 6, "\0\1", 2);  // a secondary of version 1 does not exist
    CHECK(containers::detect(s).status() == Status::NotFound);

    MemoryStore b(4096);
    const uint8_t jump[3] = {0xeb, 0x58, 0x90};
    put(b, 0, jump, 3);
    put(b, 3, "-FVE-FS-", 8);
    CHECK(containers::detect(b).status() == Status::NotFound);  // no GUID
    put(b, 160, kGuid, 16);
    CHECK(detected(b) == Format::Bitlk);
    MemoryStore fat(4096);
    put(fat, 0, jump, 3);
    put(fat, 3, "MSWIN4.1", 8);  // any FAT32 Windows formatted
    CHECK(containers::detect(fat).status() == Status::NotFound);
    put(fat, 424, kGuid, 16);  // BitLocker To Go
    CHECK(detected(fat) == Format::Bitlk);

    MemoryStore cs(4096);
    const uint8_t one[2] = {1, 0};
    put(cs, 8, one, 2);
    put(cs, 88, "CS", 2);
    CHECK(detected(cs) == Format::Fvault2);

    verity::VerityParams p;
    p.data_blocks = 8;
    auto sb = verity::encode_superblock(p);
    REQUIRE(sb);
    MemoryStore v(4096);
    put(v, 0, sb->data(), sb->size());
    CHECK(detected(v) == Format::Verity);

    CHECK(containers::format_name(Format::Fvault2) == "FVAULT2");
    MemoryStore tiny(100);  // shorter than a sector: nothing, not an error
    CHECK(containers::detect(tiny).status() == Status::NotFound);
}
