// See <blkcrypt/bitlk/bitlk.hpp>. The table cryptsetup 2.6's BITLK
// _activate builds: dm-zero over the three FVE areas and the volume header
// area, the boot region decrypted from where BitLocker moved it, and
// dm-crypt with the IV equal to the sector everywhere else.
#include <blkcrypt/bitlk/bitlk.hpp>

#include <algorithm>
#include <cstring>

namespace blkcrypt::bitlk {

namespace {

constexpr uint64_t kSector = 512;
constexpr uint16_t kStateNormal = 4, kStatePaused = 5;

// One piece of the mapping: zeros, or dm-crypt over the device from device
// sector `source` with IV sector `source` (cryptsetup passes the same value
// as both), or (plain, a partially encrypted volume past its encrypted size)
// the device's sectors from `source` as stored. Sectors are 512 bytes.
struct Segment {
    uint64_t start = 0, length = 0;
    bool zero = false;
    uint64_t source = 0;
    bool plain = false;
};

// A crypt segment's stored sectors from `end` on are plain: a paused
// conversion has encrypted the device up to `end` only (dislocker reads it so).
void split_at(std::vector<Segment>& out, const Segment& g, uint64_t end) {
    if (g.zero || g.source + g.length <= end) {
        out.push_back(g);
        return;
    }
    if (g.source < end) {
        out.push_back({g.start, end - g.source, false, g.source});
        out.push_back({g.start + (end - g.source), g.source + g.length - end, false, end, true});
    } else {
        out.push_back({g.start, g.length, false, g.source, true});
    }
}

Result<std::vector<Segment>> segments(const Metadata& md, uint64_t device_sectors) {
    const bool paused = md.curr_state == kStatePaused;
    if (!paused && (md.curr_state != kStateNormal || md.next_state != kStateNormal))
        return make_error(Status::Unsupported, "This BITLK device is in an unsupported state and cannot be activated.");
    for (const Vmk& v : md.vmks)
        if (v.protection == kClearKey && v.clear_key.empty())
            return make_error(Status::Unsupported, "Activation of partially decrypted BITLK device is not supported.");
    const uint64_t ss = md.sector_size;
    auto sectors = [&](uint64_t bytes) -> Result<uint64_t> {
        if (bytes % ss) return make_error(Status::Invalid, "BITLK metadata area not aligned to the sector size.");
        return bytes / kSector;
    };
    std::vector<Segment> fixed;  // the zero areas and the relocated boot region
    for (uint64_t off : md.metadata_offset) {
        auto s = sectors(off);
        if (!s) return s.error();
        fixed.push_back({*s, kFveAreaSize / kSector, true, 0});
    }
    auto vho = sectors(md.volume_header_offset), vhs = sectors(md.volume_header_size);
    if (!vho) return vho.error();
    if (!vhs) return vhs.error();
    if (*vhs == 0) return make_error(Status::Invalid, "BITLK volume header area is empty.");
    fixed.push_back({*vho, *vhs, true, 0});
    fixed.push_back({0, *vhs, false, *vho});
    std::sort(fixed.begin(), fixed.end(), [](const Segment& a, const Segment& b) { return a.start < b.start; });

    std::vector<Segment> out;
    uint64_t at = 0;
    for (const Segment& f : fixed) {
        if (f.start < at) return make_error(Status::Invalid, "BITLK metadata areas overlap.");
        if (f.start + f.length > device_sectors || (!f.zero && f.source + f.length > device_sectors))
            return make_error(Status::Invalid, "BITLK metadata area beyond the end of the device.");
        if (f.start > at) out.push_back({at, f.start - at, false, at});
        out.push_back(f);
        at = f.start + f.length;
    }
    if (at < device_sectors) out.push_back({at, device_sectors - at, false, at});
    // cryptsetup builds at most 10 segments.
    if (out.size() > 10) return make_error(Status::Invalid, "Failed to calculate number of dm-crypt segments for open.");
    if (!paused) return out;
    if (md.volume_size % ss) return make_error(Status::Invalid, "BITLK encrypted size not aligned to the sector size.");
    std::vector<Segment> split;
    for (const Segment& g : out) split_at(split, g, std::min(md.volume_size / kSector, device_sectors));
    return split;
}

// The dm-crypt table of one crypt segment (cipher, key, IV offset, sector size).
dm::CryptTable crypt_table(const Metadata& md, ConstBytes key, const Segment& seg) {
    auto t = dm::parse_cipher_spec(md.cipher_spec());
    dm::CryptTable table = t ? std::move(t).value() : dm::CryptTable{};
    table.key.assign(key);
    table.sector_size = md.sector_size;
    // cryptsetup maps 4K volumes with iv_large_sectors (IVs count 4K sectors).
    table.iv_large_sectors = md.sector_size != 512;
    table.offset = seg.source;
    table.iv_offset = seg.source;
    table.start = seg.start;
    table.length = seg.length;
    return table;
}

}  // namespace

Result<dm::DmTable> dm_table(const Metadata& md, ConstBytes key, uint64_t device_sectors, const std::string& device) {
    if (!key.empty() && key.size() * 8 != md.key_bits)
        return make_error(Status::Invalid, "the key does not fit the volume's cipher");
    auto segs = segments(md, device_sectors);
    if (!segs) return segs.error();
    if (auto spec = dm::parse_cipher_spec(md.cipher_spec()); !spec) return spec.error();
    dm::DmTable table;
    for (const Segment& g : *segs) {
        dm::DmLine l;
        l.start = g.start;
        l.length = g.length;
        if (g.zero) {
            l.target = "zero";
        } else if (g.plain) {
            l.target = "linear";
            l.device = device;
            l.offset = g.source;
        } else {
            l.target = "crypt";
            dm::CryptTable t = crypt_table(md, key, g);
            t.device = device;
            l.crypt = std::move(t);
        }
        table.push_back(std::move(l));
    }
    return table;
}

}  // namespace blkcrypt::bitlk
