// See <blkcrypt/bitlk/bitlk.hpp>. The segment list is the dm table cryptsetup
// 2.6's BITLK _activate builds: dm-zero over the three FVE areas and the
// volume header area, the boot region decrypted from where BitLocker moved
// it, and dm-crypt with the IV equal to the sector everywhere else.
#include <blkcrypt/bitlk/bitlk.hpp>

#include <algorithm>
#include <cstring>

namespace blkcrypt::bitlk {

namespace {

constexpr uint64_t kSector = 512;
constexpr uint16_t kStateNormal = 4, kStatePaused = 5;

// Zeros and CryptTargets behind one read-only store.
class View final : public BackingStore {
public:
    View(std::vector<Segment> segs, std::vector<std::unique_ptr<dm::CryptTarget>> targets, uint64_t align,
         std::shared_ptr<BackingStore> dev)
        : segs_(std::move(segs)), targets_(std::move(targets)), align_(align), dev_(std::move(dev)) {}

    Status read(uint64_t offset, Bytes out) override {
        if (offset > size() || out.size() > size() - offset) return Status::Invalid;
        while (!out.empty()) {
            // The segment holding offset (sorted, contiguous from 0).
            auto it = std::upper_bound(segs_.begin(), segs_.end(), offset / kSector,
                                       [](uint64_t s, const Segment& g) { return s < g.start; });
            const std::size_t i = static_cast<std::size_t>(it - segs_.begin()) - 1;
            const Segment& g = segs_[i];
            const uint64_t seg_off = offset - g.start * kSector;
            const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(out.size(), g.length * kSector - seg_off));
            if (g.zero) {
                std::memset(out.data(), 0, n);
            } else if (g.plain) {
                if (Status s = dev_->read(g.source * kSector + seg_off, out.first(n)); s != Status::Ok) return s;
            } else if (Status s = read_crypt(*targets_[i], seg_off, out.first(n)); s != Status::Ok) {
                return s;
            }
            offset += n;
            out = out.subspan(n);
        }
        return Status::Ok;
    }
    Status write(uint64_t, ConstBytes) override { return Status::Unsupported; }
    uint64_t size() const override { return segs_.empty() ? 0 : (segs_.back().start + segs_.back().length) * kSector; }

private:
    // Through a bounce buffer where the range is not whole encryption sectors.
    Status read_crypt(dm::CryptTarget& t, uint64_t off, Bytes out) {
        const uint64_t a = off / align_ * align_;
        const uint64_t e = (off + out.size() + align_ - 1) / align_ * align_;
        dm::Bio bio;
        bio.sector = a / kSector;
        if (a == off && e == off + out.size()) {
            bio.vecs.push_back({out.data(), out.size()});
            return t.submit_sync(bio);
        }
        std::vector<uint8_t> tmp(static_cast<std::size_t>(e - a));
        bio.vecs.push_back({tmp.data(), tmp.size()});
        if (Status s = t.submit_sync(bio); s != Status::Ok) return s;
        std::memcpy(out.data(), tmp.data() + (off - a), out.size());
        return Status::Ok;
    }

    std::vector<Segment> segs_;
    std::vector<std::unique_ptr<dm::CryptTarget>> targets_;  // null for zero and plain segments
    uint64_t align_;
    std::shared_ptr<BackingStore> dev_;
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

}  // namespace

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

Result<std::shared_ptr<BackingStore>> open_view(Registry& reg, const Metadata& md, ConstBytes key,
                                                std::shared_ptr<BackingStore> dev, dm::TargetOptions opts) {
    if (!dev) return make_error(Status::Invalid, "no device");
    if (key.size() * 8 != md.key_bits) return make_error(Status::Invalid, "the key does not fit the volume's cipher");
    auto segs = segments(md, dev->size() / kSector);
    if (!segs) return segs.error();
    if (auto spec = dm::parse_cipher_spec(md.cipher_spec()); !spec) return spec.error();
    std::vector<std::unique_ptr<dm::CryptTarget>> targets;
    for (const Segment& g : *segs) {
        if (g.zero || g.plain) {
            targets.emplace_back();
            continue;
        }
        auto t = dm::CryptTarget::create(reg, crypt_table(md, key, g), dev, g.length, opts);
        if (!t) return t.error();
        targets.push_back(std::move(t).value());
    }
    return std::shared_ptr<BackingStore>(std::make_shared<View>(std::move(*segs), std::move(targets), md.sector_size, dev));
}

}  // namespace blkcrypt::bitlk
