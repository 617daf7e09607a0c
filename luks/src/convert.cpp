// LUKS1 <-> LUKS2 conversion (see <blkcrypt/luks/convert.hpp>): the JSON
// cryptsetup 2.6.1's converter builds, member for member, and its checks;
// keyslot areas kept in place so that every write is crash-safe.
#include <blkcrypt/luks/convert.hpp>

#include <blkcrypt/base64.hpp>

#include <blkcrypt/luks/luks1.hpp>
#include <blkcrypt/luks/luks2.hpp>
#include <blkcrypt/random.hpp>
#include <blkcrypt/registry.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace blkcrypt::luks {

namespace {

using json = nlohmann::ordered_json;

constexpr uint64_t kHdr16K = 16384;              // the metadata size of a converted header
constexpr uint64_t kLuks2Areas = 2 * kHdr16K;    // where LUKS2 keyslot areas may start
constexpr uint64_t kSector = 512;

Error invalid(std::string msg) { return make_error(Status::Invalid, std::move(msg)); }

uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

// The keyslot area one LUKS1 keyslot takes: its AF sectors rounded to 4 KiB
// (cryptsetup's stride between LUKS1 keyslots, and the LUKS2 area size it
// accepts back).
uint64_t area_bytes(uint64_t key_bytes) {
    return round_up(luks1::af_sectors(key_bytes, luks1::kStripes) * kSector, luks1::kAlignKeyslots);
}

bool overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen) { return a < b + blen && b < a + alen; }

Result<void> write_flush(BackingStore& s, uint64_t off, ConstBytes data, const char* what) {
    if (Status st = s.write(off, data); st != Status::Ok) return make_error(st, s.name() + ": cannot write " + what);
    if (Status st = s.flush(); st != Status::Ok) return make_error(st, s.name() + ": cannot flush " + what);
    return {};
}

Result<void> zero(BackingStore& s, uint64_t off, uint64_t len, const char* what) {
    if (len == 0) return {};
    std::vector<uint8_t> zeros(static_cast<std::size_t>(len), 0);
    return write_flush(s, off, zeros, what);
}

// Byte offset of keyslot i's key-material-offset field in the LUKS1 header
// (208 + 48 i + 40): slots 0..5 have theirs in the first 512-byte sector.
constexpr uint64_t offset_field(unsigned i) { return 208 + 48 * i + 40; }

// cryptsetup's json_luks1_object, in its member order.
json luks1_json(const luks1::Header& h, const std::array<uint64_t, luks1::kNumKeyslots>& area, uint64_t area_size,
                uint64_t keyslots_size) {
    const std::string cipher = h.cipher_mode.empty() ? h.cipher_name : h.cipher_spec();
    json root;
    json keyslots = json::object();
    json slot_ids = json::array();
    for (unsigned k = 0; k < luks1::kNumKeyslots; ++k) {
        const luks1::Keyslot& ks = h.keyslots[k];
        if (!ks.enabled()) continue;
        json o;
        o["type"] = "luks2";
        o["key_size"] = h.key_bytes;
        o["kdf"] = json{{"type", "pbkdf2"},
                        {"hash", h.hash_spec},
                        {"iterations", ks.iterations},
                        {"salt", base64_encode(ks.salt)}};
        o["af"] = json{{"type", "luks1"}, {"hash", h.hash_spec}, {"stripes", luks1::kStripes}};
        o["area"] = json{{"type", "raw"},
                         {"encryption", cipher},
                         {"key_size", h.key_bytes},
                         {"offset", std::to_string(area[k])},
                         {"size", std::to_string(area_size)}};
        keyslots[std::to_string(k)] = std::move(o);
        slot_ids.push_back(std::to_string(k));
    }
    root["keyslots"] = std::move(keyslots);
    root["tokens"] = json::object();
    root["segments"]["0"] = json{{"type", "crypt"},
                                 {"offset", std::to_string(uint64_t{h.payload_offset} * kSector)},
                                 {"iv_tweak", "0"},
                                 {"size", "dynamic"},
                                 {"encryption", cipher},
                                 {"sector_size", 512}};
    root["digests"]["0"] = json{{"type", "pbkdf2"},
                                {"keyslots", std::move(slot_ids)},
                                {"segments", json::array({"0"})},
                                {"hash", h.hash_spec},
                                {"salt", base64_encode(h.mk_digest_salt)},
                                {"digest", base64_encode(h.mk_digest)},
                                {"iterations", h.mk_digest_iterations}};
    root["config"] = json{{"json_size", std::to_string(kHdr16K - luks2::kBinHeaderSize)},
                          {"keyslots_size", std::to_string(keyslots_size)}};
    return root;
}

}  // namespace

Result<void> convert_to_luks2(Registry& reg, BackingStore& store) {
    Result<Version> v = detect(store);
    if (!v) return v.error();
    if (*v == Version::Luks2) return invalid("Device is already LUKS2 type.");
    Result<luks1::Header> hr = luks1::read_header(reg, store);
    if (!hr) return hr.error();
    luks1::Header h = std::move(hr).value();

    // The room for LUKS2 metadata and keyslots: up to the data, or the whole
    // detached header device (cryptsetup's max_size), at most 128 MiB of areas.
    uint64_t max_size = uint64_t{h.payload_offset} * kSector;
    if (max_size == 0) max_size = store.size() / luks1::kAlignKeyslots * luks1::kAlignKeyslots;
    if (max_size <= kLuks2Areas) return invalid("Unable to move keyslot area. Not enough space.");
    const uint64_t keyslots_size = std::min(max_size - kLuks2Areas, luks2::kMaxKeyslotsSize);
    const uint64_t areas_end = kLuks2Areas + keyslots_size;
    const uint64_t asize = area_bytes(h.key_bytes);

    // Where each keyslot's area will be: in place when it lies inside the
    // LUKS2 keyslots area; else (under the new header copies) in the area of
    // a disabled keyslot whose offset field shares the header's first
    // sector, so that one atomic sector write swaps the two.
    std::array<uint64_t, luks1::kNumKeyslots> at{};
    for (unsigned k = 0; k < luks1::kNumKeyslots; ++k) at[k] = uint64_t{h.keyslots[k].key_material_offset} * kSector;
    const std::array<uint64_t, luks1::kNumKeyslots> old_at = at;
    std::vector<std::pair<unsigned, unsigned>> swaps;  // (enabled slot, disabled slot)
    std::array<bool, luks1::kNumKeyslots> taken{};
    auto fits = [&](uint64_t off) { return off >= kLuks2Areas && off + asize <= areas_end; };
    for (unsigned k = 0; k < luks1::kNumKeyslots; ++k) {
        if (!h.keyslots[k].enabled() || fits(at[k])) continue;
        bool found = false;
        for (unsigned j = 0; j < luks1::kNumKeyslots && !found; ++j) {
            if (h.keyslots[j].enabled() || taken[j] || !fits(old_at[j])) continue;
            if (offset_field(j) / kSector != offset_field(k) / kSector) continue;
            bool clash = false;
            for (unsigned i = 0; i < luks1::kNumKeyslots; ++i)
                if (h.keyslots[i].enabled() && overlaps(old_at[j], asize, old_at[i], asize)) clash = true;
            if (clash) continue;
            taken[j] = true;
            swaps.emplace_back(k, j);
            found = true;
        }
        if (!found)
            return invalid("Unable to move keyslot area of keyslot " + std::to_string(k) +
                           " crash-safely: no free keyslot among 1..5 to move it to (remove a keyslot first).");
    }
    for (auto [k, j] : swaps) std::swap(at[k], at[j]);
    // The final areas must not overlap each other (cryptsetup's LUKS2 validation would refuse).
    for (unsigned a = 0; a < luks1::kNumKeyslots; ++a)
        for (unsigned b = a + 1; b < luks1::kNumKeyslots; ++b)
            if (h.keyslots[a].enabled() && h.keyslots[b].enabled() && overlaps(at[a], asize, at[b], asize))
                return invalid("LUKS1 keyslot areas " + std::to_string(a) + " and " + std::to_string(b) +
                               " overlap once rounded to 4 KiB; cannot convert.");

    std::string text;
    try {
        text = luks1_json(h, at, asize, keyslots_size).dump(-1, ' ', false, json::error_handler_t::strict);
    } catch (const json::type_error&) {
        // A LUKS1 name field (cipher, mode, hash) that is not UTF-8 cannot be a JSON string.
        return invalid("the LUKS1 header holds a cipher or hash name that is not text; cannot convert.");
    }
    luks2::BinaryHeader bh;
    bh.hdr_size = kHdr16K;
    bh.seqid = 2;  // what cryptsetup's converter leaves (it writes seqid 1 + 1)
    bh.checksum_alg = "sha256";
    bh.uuid = h.uuid;
    std::array<std::vector<uint8_t>, 2> copies;
    for (int c = 0; c < 2; ++c) {
        if (auto r = random_bytes(bh.salt); !r) return r.error();
        Result<std::vector<uint8_t>> copy = luks2::build_copy(reg, bh, c == 1, text);
        if (!copy) return copy.error();
        copies[c] = std::move(copy).value();
    }
    // Checked as any reader will check it, before anything is written.
    Result<luks2::Metadata> md = luks2::parse_metadata(
        ConstBytes(copies[0].data() + luks2::kBinHeaderSize, kHdr16K - luks2::kBinHeaderSize), bh);
    if (!md) return md.error();
    if (store.size() < areas_end) return make_error(Status::IoError, store.name() + ": the header device is too small for LUKS2");

    // 1. Copies of the moved areas into free areas; 2. the LUKS1 header
    // pointing at them (one sector changes). The LUKS1 header is still the
    // one in use, and each keyslot opens from one place or the other.
    for (auto [k, j] : swaps) {
        std::vector<uint8_t> buf(static_cast<std::size_t>(asize));
        if (Status s = store.read(old_at[k], buf); s != Status::Ok) return make_error(s, store.name() + ": cannot read a keyslot");
        if (auto r = write_flush(store, old_at[j], buf, "a keyslot area"); !r) return r;
        std::fill(buf.begin(), buf.end(), 0);
    }
    if (!swaps.empty()) {
        luks1::Header moved = h;
        for (auto [k, j] : swaps) std::swap(moved.keyslots[k].key_material_offset, moved.keyslots[j].key_material_offset);
        if (auto r = luks1::write_header(store, moved); !r) return r;
    }
    // 3. The secondary copy (outside the LUKS1 header and every area in
    // use), then the primary, its first sector alone first. That sector
    // (the LUKS2 magic) is the atomic switch: before it, the LUKS1 header
    // is whole and in use; after it, LUKS2 is, from the secondary until the
    // rest of the primary lands. Written in one piece, a write that landed
    // without its first sector would leave the LUKS1 magic over a LUKS1
    // header whose keyslots 6 and 7 (in sector 1) are zeros: neither a
    // LUKS1 nor a LUKS2 reader would open that.
    if (auto r = write_flush(store, kHdr16K, copies[1], "the secondary LUKS2 header"); !r) return r;
    if (auto r = write_flush(store, 0, ConstBytes(copies[0]).first(kSector), "the primary LUKS2 header"); !r) return r;
    if (auto r = write_flush(store, kSector, ConstBytes(copies[0]).subspan(kSector), "the primary LUKS2 header"); !r)
        return r;
    // 4. The rest of each moved area's old copy, now unreferenced (its key
    // material only: the rounding may reach into the next area).
    const uint64_t af_bytes = luks1::af_sectors(h.key_bytes, luks1::kStripes) * kSector;
    for (auto [k, j] : swaps) {
        const uint64_t from = std::max(old_at[k], kLuks2Areas), end = old_at[k] + af_bytes;
        if (end > from)
            if (auto r = zero(store, from, end - from, "the old keyslot area"); !r) return r;
    }
    return {};
}

Result<void> convert_to_luks1(Registry& reg, BackingStore& store) {
    Result<Version> v = detect(store);
    if (!v) return v.error();
    if (*v == Version::Luks1) return invalid("Device is already LUKS1 type.");
    Result<luks2::Header> hr = luks2::read_header(reg, store);
    if (!hr) return hr.error();
    if (auto r = luks2::check_requirements(hr->md); !r) return r;
    if (!hr->primary_ok || !hr->secondary_ok)
        return invalid("a LUKS2 header copy is damaged; repair it (cryptsetup repair) before converting");
    const luks2::Metadata& md = hr->md;
    const std::string no = "Cannot convert to LUKS1 format - ";
    auto dg = md.digests.find(0);
    auto sg = md.segments.find(0);
    if (dg == md.digests.end() || sg == md.segments.end()) return invalid(no + "no digest or segment 0.");
    const luks2::Segment& seg = sg->second;
    const luks2::Digest& dig = dg->second;
    if (seg.sector_size != kSector) return invalid(no + "default segment encryption sector size is not 512 bytes.");
    if (dig.type != "pbkdf2" || md.digests.size() != 1) return invalid(no + "key slot digests are not LUKS1 compatible.");
    if (md.segments.size() != 1) return invalid(no + "device uses more segments.");
    if (!md.tokens.empty()) return invalid(no + "LUKS2 header contains " + std::to_string(md.tokens.size()) + " token(s).");
    uint32_t key_size = 0;
    for (int k : dig.keyslots)
        if (auto it = md.keyslots.find(k); it != md.keyslots.end()) key_size = it->second.key_size;
    if (key_size == 0 || key_size > luks1::kMaxKeyBytes) return invalid(no + "no keyslot gives the volume key size.");
    const uint64_t asize = area_bytes(key_size);
    for (const auto& [k, ks] : md.keyslots) {
        if (k >= static_cast<int>(luks1::kNumKeyslots))
            return invalid(no + "slot " + std::to_string(k) + " (over maximum slots) is still active.");
        const bool ok = ks.type == "luks2" && ks.kdf.type == "pbkdf2" && ks.kdf.hash == dig.hash &&
                        ks.stripes == luks1::kStripes && ks.af_hash == dig.hash && ks.area_encryption == seg.encryption &&
                        ks.key_size == key_size && ks.area_key_size == key_size && ks.area_size == asize &&
                        ks.kdf.salt.size() == luks1::kSaltSize;
        if (!ok) return invalid(no + "keyslot " + std::to_string(k) + " is not LUKS1 compatible.");
    }
    if (dig.digest.size() < luks1::kDigestSize || dig.salt.size() != luks1::kSaltSize)
        return invalid(no + "key slot digests are not LUKS1 compatible.");
    if (seg.offset % kSector || seg.offset / kSector > UINT32_MAX) return invalid(no + "the data offset does not fit LUKS1.");

    luks1::Header h;
    const std::string& enc = seg.encryption;
    const std::size_t dash = enc.find('-');
    h.cipher_name = enc.substr(0, dash);
    h.cipher_mode = dash == std::string::npos ? std::string() : enc.substr(dash + 1);
    h.hash_spec = dig.hash;
    h.payload_offset = static_cast<uint32_t>(seg.offset / kSector);
    h.key_bytes = key_size;
    std::copy_n(dig.digest.begin(), luks1::kDigestSize, h.mk_digest.begin());
    std::copy_n(dig.salt.begin(), luks1::kSaltSize, h.mk_digest_salt.begin());
    h.mk_digest_iterations = dig.iterations;
    h.uuid = md.hdr.uuid;
    // Enabled slots keep their areas; the others get placeholder areas in
    // the first free gaps (cryptsetup's placeholders), from 4 KiB: once the
    // LUKS1 header is in place the LUKS2 metadata there is dead space, and
    // a placeholder at 4 KiB is what lets cryptsetup convert it back.
    std::vector<std::pair<uint64_t, uint64_t>> used;
    for (const auto& [k, ks] : md.keyslots) used.emplace_back(ks.area_offset, ks.area_offset + ks.area_size);
    const uint64_t first = 2 * md.metadata_size(), end = md.hdr_and_areas_size();
    for (unsigned k = 0; k < luks1::kNumKeyslots; ++k) {
        luks1::Keyslot& ks = h.keyslots[k];
        ks.stripes = luks1::kStripes;
        uint64_t off = 0;
        if (auto it = md.keyslots.find(static_cast<int>(k)); it != md.keyslots.end()) {
            ks.active = luks1::kKeyEnabled;
            ks.iterations = it->second.kdf.iterations;
            std::copy_n(it->second.kdf.salt.begin(), luks1::kSaltSize, ks.salt.begin());
            off = it->second.area_offset;
        } else {
            std::sort(used.begin(), used.end());
            off = luks1::kAlignKeyslots;
            for (const auto& [b, e] : used) {
                if (b >= off + asize) break;
                off = std::max(off, round_up(e, luks1::kAlignKeyslots));
            }
            if (off + asize > end) return invalid("Unable to convert: the keyslots area has no room for LUKS1's eight keyslot areas.");
            used.emplace_back(off, off + asize);
        }
        if (off % kSector || off / kSector > UINT32_MAX) return invalid(no + "a keyslot area does not fit LUKS1.");
        ks.key_material_offset = static_cast<uint32_t>(off / kSector);
    }
    Result<std::array<uint8_t, luks1::kHeaderSize>> raw = luks1::serialize_header(h);
    if (!raw) return raw.error();
    // Checked as any LUKS1 reader will check it, before anything is written.
    if (Result<luks1::Header> back = luks1::parse_header(*raw); !back) return back.error();
    if (store.size() < luks1::device_sectors(h) * kSector)
        return make_error(Status::IoError, store.name() + ": the header device is too small for LUKS1");

    // The LUKS1 header's second sector first: it lies in the padding of the
    // primary's binary header, which turns damaged (the secondary is read);
    // then its first sector, atomically the switch to LUKS1; then what is
    // left of the LUKS2 metadata.
    if (auto r = write_flush(store, kSector, ConstBytes(*raw).subspan(kSector), "the LUKS1 header"); !r) return r;
    if (auto r = write_flush(store, 0, ConstBytes(*raw).first(kSector), "the LUKS1 header"); !r) return r;
    return zero(store, luks1::kHeaderSize, first - luks1::kHeaderSize, "the old LUKS2 metadata");
}

Result<void> convert(Registry& reg, BackingStore& header, Version to) {
    return to == Version::Luks2 ? convert_to_luks2(reg, header) : convert_to_luks1(reg, header);
}

}  // namespace blkcrypt::luks
