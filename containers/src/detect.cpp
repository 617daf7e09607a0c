// Format detection by signature, as blkid and cryptsetup's loaders look.
#include <blkcrypt/containers/container.hpp>
#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/integrity/superblock.hpp>
#include <blkcrypt/verity/superblock.hpp>

#include <array>
#include <cstring>

namespace blkcrypt::containers {
namespace {

constexpr uint8_t kLuksMagic[6] = {'L', 'U', 'K', 'S', 0xba, 0xbe};
constexpr uint8_t kLuksSecondaryMagic[6] = {'S', 'K', 'U', 'L', 0xba, 0xbe};
// Where cryptsetup looks for a LUKS2 secondary header: just past every
// possible primary size (lib/luks2/luks2_disk_metadata.c hdr2_offsets).
constexpr uint64_t kSecondaryOffsets[] = {0x4000, 0x8000, 0x10000, 0x20000, 0x40000,
                                          0x80000, 0x100000, 0x200000, 0x400000};

// Reads [at, at + out.size()) when it lies inside the image: false past the end.
Result<bool> read_at(BackingStore& s, uint64_t at, Bytes out) {
    if (at > s.size() || out.size() > s.size() - at) return false;
    if (Status st = s.read(at, out); st != Status::Ok)
        return make_error(st, (s.name().empty() ? std::string("the image") : s.name()) + ": cannot read");
    return true;
}

}  // namespace

std::string_view format_name(Format f) noexcept {
    switch (f) {
    case Format::Luks1: return "LUKS1";
    case Format::Luks2: return "LUKS2";
    case Format::Bitlk: return "BITLK";
    case Format::Fvault2: return "FVAULT2";
    case Format::Verity: return "VERITY";
    case Format::Integrity: return "INTEGRITY";
    }
    return "?";
}

Result<Format> detect(BackingStore& image) {
    std::array<uint8_t, 512> head{};
    auto got = read_at(image, 0, head);
    if (!got) return got.error();
    if (*got) {
        if (std::memcmp(head.data(), kLuksMagic, sizeof kLuksMagic) == 0) {
            const uint16_t v = get_be16(head.data() + 6);
            if (v == 1) return Format::Luks1;
            if (v == 2) return Format::Luks2;
        }
        // BitLocker: the boot code jump, "-FVE-FS-" (To Go: "MSWIN4.1", which
        // any FAT volume may carry) and the BitLocker GUID where its
        // superblock starts (byte 160; To Go 424), as blkid checks.
        static constexpr uint8_t kJump[3] = {0xeb, 0x58, 0x90};
        static constexpr uint8_t kGuid[16] = {0x3b, 0xd6, 0x67, 0x49, 0x29, 0x2e, 0xd8, 0x4a,
                                              0x83, 0x99, 0xf6, 0xa3, 0x39, 0xe3, 0xd0, 0x01};
        if (std::memcmp(head.data(), kJump, 3) == 0) {
            if (std::memcmp(head.data() + 3, "-FVE-FS-", 8) == 0 && std::memcmp(head.data() + 160, kGuid, 16) == 0)
                return Format::Bitlk;
            if (std::memcmp(head.data() + 3, "MSWIN4.1", 8) == 0 && std::memcmp(head.data() + 424, kGuid, 16) == 0)
                return Format::Bitlk;
        }
        // Core Storage: version 1, then "CS" at byte 88 (blkid's check).
        if (get_le16(head.data() + 8) == 1 && head[88] == 'C' && head[89] == 'S') return Format::Fvault2;
        if (verity::decode_superblock(head)) return Format::Verity;
        // As blkid and integritysetup: the magic and a version they know.
        if (integrity::decode_superblock(head)) return Format::Integrity;
    }
    std::array<uint8_t, 8> second{};
    for (uint64_t at : kSecondaryOffsets) {
        auto r = read_at(image, at, second);
        if (!r) return r.error();
        if (*r && std::memcmp(second.data(), kLuksSecondaryMagic, sizeof kLuksSecondaryMagic) == 0 &&
            get_be16(second.data() + 6) == 2)
            return Format::Luks2;
    }
    return make_error(Status::NotFound, (image.name().empty() ? std::string("the image") : image.name()) +
                                            ": no LUKS, BitLocker, FileVault 2, dm-verity or dm-integrity signature");
}

}  // namespace blkcrypt::containers
