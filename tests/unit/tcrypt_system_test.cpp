// TrueCrypt/VeraCrypt system encryption of one partition: the partition
// tables it is found in (MBR primary and logical, GPT) built here byte by
// byte, and the mapping of a system partition as cryptsetup maps /dev/sdaN
// (the generated disks and the fixture are checked against the kernel in
// tests/cli/tcrypt_system.sh).
#include "test_util.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/tcrypt/tcrypt.hpp>

#include <catch2/catch.hpp>

#include <cstring>
#include <string>

using namespace blkcrypt;

namespace {

constexpr std::size_t kSec = 512;

void le32(std::vector<uint8_t>& d, std::size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) d[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void le64(std::vector<uint8_t>& d, std::size_t at, uint64_t v) {
    for (int i = 0; i < 8; ++i) d[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void be(std::vector<uint8_t>& d, std::size_t at, uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i, v >>= 8) d[at + i] = static_cast<uint8_t>(v);
}
// zlib's CRC-32, bitwise.
uint32_t crc(const uint8_t* p, std::size_t n) {
    uint32_t c = ~0u;
    for (std::size_t i = 0; i < n; ++i) {
        c ^= p[i];
        for (int b = 0; b < 8; ++b) c = (c >> 1) ^ ((c & 1) ? 0xEDB88320u : 0);
    }
    return ~c;
}
// An MBR-style entry (type, LBA start, sectors) in slot `i` of sector `lba`.
void entry(MemoryStore& d, uint64_t lba, unsigned i, uint8_t type, uint32_t start, uint32_t count) {
    auto& b = d.data();
    const std::size_t at = lba * kSec + 446 + 16 * i;
    b[at + 4] = type;
    le32(b, at + 8, start);
    le32(b, at + 12, count);
    b[lba * kSec + 510] = 0x55;
    b[lba * kSec + 511] = 0xAA;
}

}  // namespace

TEST_CASE("tcrypt: MBR primary partitions, numbered by slot", "[tcrypt][partition]") {
    MemoryStore disk(64 * kSec);
    CHECK_FALSE(tcrypt::has_partition_table(disk));
    CHECK(tcrypt::find_partition(disk, 1).status() == Status::Invalid);  // no signature
    entry(disk, 0, 0, 0x07, 2048, 100);
    entry(disk, 0, 2, 0x0C, 63, 7);
    CHECK(tcrypt::has_partition_table(disk));
    auto p1 = tcrypt::find_partition(disk, 1);
    REQUIRE(p1.ok());
    CHECK(p1->start == 2048);  // outside this small disk: extents are not checked here
    CHECK(p1->sectors == 100);
    auto p3 = tcrypt::find_partition(disk, 3);
    REQUIRE(p3.ok());
    CHECK(p3->start == 63);
    CHECK(p3->sectors == 7);
    CHECK(tcrypt::find_partition(disk, 2).status() == Status::NotFound);  // an empty slot
    CHECK(tcrypt::find_partition(disk, 5).status() == Status::NotFound);  // no extended partition
    CHECK(tcrypt::find_partition(disk, 0).status() == Status::NotFound);
    MemoryStore tiny(100);
    CHECK_FALSE(tcrypt::has_partition_table(tiny));
    CHECK(tcrypt::find_partition(tiny, 1).status() == Status::Invalid);
}

TEST_CASE("tcrypt: MBR logical partitions from 5 along the extended chain", "[tcrypt][partition]") {
    MemoryStore disk(2048 * kSec);
    entry(disk, 0, 0, 0x07, 63, 900);
    entry(disk, 0, 1, 0x0F, 1000, 1000);  // extended
    entry(disk, 1000, 0, 0x83, 10, 50);   // logical 5, relative to its EBR
    entry(disk, 1000, 1, 0x05, 200, 100); // next EBR, relative to the extended start
    entry(disk, 1200, 0, 0x83, 5, 20);    // logical 6
    auto p5 = tcrypt::find_partition(disk, 5);
    REQUIRE(p5.ok());
    CHECK(p5->start == 1010);
    CHECK(p5->sectors == 50);
    auto p6 = tcrypt::find_partition(disk, 6);
    REQUIRE(p6.ok());
    CHECK(p6->start == 1205);
    CHECK(p6->sectors == 20);
    CHECK(tcrypt::find_partition(disk, 7).status() == Status::NotFound);
    CHECK(tcrypt::find_partition(disk, 2).status() == Status::Invalid);  // the extended partition itself
    // A chain looping back on itself ends (logical 5 then 6, then nothing).
    entry(disk, 1200, 1, 0x05, 0, 100);
    CHECK(tcrypt::find_partition(disk, 7).status() == Status::NotFound);
    // An EBR without its signature breaks the chain.
    disk.data()[1200 * kSec + 510] = 0;
    CHECK(tcrypt::find_partition(disk, 6).status() == Status::Invalid);
}

TEST_CASE("tcrypt: GPT partitions behind a protective MBR, CRC-32s checked", "[tcrypt][partition]") {
    MemoryStore disk(128 * kSec);
    entry(disk, 0, 0, 0xEE, 1, 127);
    auto& b = disk.data();
    // 4 entries of 128 bytes at LBA 2: entry 1 used, entry 2 empty, entry 3 used.
    const std::size_t ents = 2 * kSec;
    auto put = [&](unsigned i, uint64_t first, uint64_t last) {
        b[ents + 128 * i] = 0xA2;  // a non-zero type GUID
        le64(b, ents + 128 * i + 32, first);
        le64(b, ents + 128 * i + 40, last);
    };
    put(0, 34, 63);
    put(2, 64, 99);
    auto seal = [&] {
        std::memcpy(b.data() + kSec, "EFI PART", 8);
        le32(b, kSec + 12, 92);
        le64(b, kSec + 72, 2);
        le32(b, kSec + 80, 4);
        le32(b, kSec + 84, 128);
        le32(b, kSec + 88, crc(b.data() + ents, 4 * 128));
        le32(b, kSec + 16, 0);
        le32(b, kSec + 16, crc(b.data() + kSec, 92));
    };
    seal();
    auto p1 = tcrypt::find_partition(disk, 1);
    REQUIRE(p1.ok());
    CHECK(p1->start == 34);
    CHECK(p1->sectors == 30);
    auto p3 = tcrypt::find_partition(disk, 3);
    REQUIRE(p3.ok());
    CHECK(p3->start == 64);
    CHECK(p3->sectors == 36);
    CHECK(tcrypt::find_partition(disk, 2).status() == Status::NotFound);
    CHECK(tcrypt::find_partition(disk, 5).status() == Status::NotFound);  // beyond the entries
    // A changed entry fails the entries' CRC-32, a changed header its own.
    b[ents + 32] ^= 1;
    CHECK(tcrypt::find_partition(disk, 1).status() == Status::Invalid);
    seal();
    b[kSec + 80] = 5;
    CHECK(tcrypt::find_partition(disk, 1).status() == Status::Invalid);
    seal();
    put(0, 63, 34);  // ends before it starts
    seal();
    CHECK(tcrypt::find_partition(disk, 1).status() == Status::Invalid);
}

TEST_CASE("tcrypt: a system partition maps from its sector 0, IVs from its start on the disk", "[tcrypt][partition]") {
    // A decrypted VeraCrypt system header: encrypted area = a partition at
    // sector 6144, 4096 sectors.
    std::vector<uint8_t> dec(448);
    std::memcpy(dec.data(), "VERA", 4);
    be(dec, 4, 5, 2);
    be(dec, 6, 0x010B, 2);
    be(dec, 36, 4096 * kSec, 8);
    be(dec, 44, 6144 * kSec, 8);
    be(dec, 52, 4096 * kSec, 8);
    be(dec, 60, 1, 4);  // system encryption
    be(dec, 64, 512, 4);
    for (std::size_t i = 192; i < 448; ++i) dec[i] = static_cast<uint8_t>(i);
    be(dec, 8, crc(dec.data() + 192, 256), 4);
    be(dec, 188, crc(dec.data(), 188), 4);
    tcrypt::OpenOptions o;
    o.system = true;
    auto v = tcrypt::from_decrypted(dec, "aes", "xts-plain64", 12288 * kSec, o);
    REQUIRE(v.ok());
    // The whole disk: the encrypted area.
    CHECK(v->table.offset == 6144);
    CHECK(v->table.iv_offset == 6144);
    CHECK(v->length_sectors == 4096);

    tcrypt::Volume in_disk = *v;
    REQUIRE(tcrypt::map_system_partition(in_disk, {6144, 4096}, true) == Status::Ok);
    CHECK(in_disk.table.offset == 6144);
    CHECK(in_disk.table.iv_offset == 6144);
    CHECK(in_disk.length_sectors == 4096);
    // cryptsetup's payload offset of /dev/sdaN is 0: the partition's own.
    const SecureBuffer d = tcrypt::dump_volume_key(in_disk, "disk");
    CHECK(std::string(reinterpret_cast<const char*>(d.data()), d.size()).find("\nPayload offset:\t0\n") !=
          std::string::npos);

    tcrypt::Volume image = *v;
    REQUIRE(tcrypt::map_system_partition(image, {2048, 0}, false) == Status::Ok);
    CHECK(image.table.offset == 0);
    CHECK(image.table.iv_offset == 2048);
    CHECK(image.length_sectors == 0);  // to the image's end
    CHECK(image.partition_in_disk == 0);

    tcrypt::Volume bad = *v;
    CHECK(tcrypt::map_system_partition(bad, {6144, 0}, true) == Status::Invalid);
}
