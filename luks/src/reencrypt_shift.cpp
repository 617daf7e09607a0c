// In-place encryption with a data shift (cryptsetup 2.6.1's reencrypt
// --encrypt --reduce-device-size): the init, the segment map of each step
// (as lib/luks2/luks2_reencrypt.c's reencrypt_make_hot_segments /
// _post_segments for encryption with a moved segment write it, checked
// against cryptsetup's own maps) and the backward engine with the datashift
// recovery.
#include "luks2_internal.hpp"

#include <blkcrypt/luks/reencrypt_shift.hpp>
#include <blkcrypt/random.hpp>
#include <blkcrypt/registry.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <optional>

namespace blkcrypt::luks::luks2 {

namespace {

using json = nlohmann::ordered_json;

Error bad(std::string msg) { return make_error(Status::Invalid, std::move(msg)); }

constexpr std::size_t kIoChunk = 4u << 20;     // memory per transform pass
constexpr uint64_t kDatashiftArea = 4096;      // the reencrypt keyslot's area (nothing is kept in it)

std::string u64s(uint64_t v) { return std::to_string(v); }

bool has_flag(const Segment& s, std::string_view f) { return std::count(s.flags.begin(), s.flags.end(), f) > 0; }

// The first keyslot-area gap of `len` bytes (LUKS2_find_area_gap).
Result<uint64_t> first_gap(const Metadata& md, uint64_t len) {
    std::vector<std::pair<uint64_t, uint64_t>> used;
    for (const auto& [id, ks] : md.keyslots) used.emplace_back(ks.area_offset, ks.area_offset + ks.area_size);
    std::sort(used.begin(), used.end());
    uint64_t at = 2 * md.metadata_size();
    for (const auto& [b, e] : used) {
        if (b >= at + len) break;
        at = std::max(at, e);
    }
    if (at + len > md.hdr_and_areas_size()) return bad("Not enough free keyslot area for reencryption.");
    return at;
}

Status write_flush(BackingStore& dev, uint64_t off, ConstBytes b) {
    if (Status s = dev.write(off, b); s != Status::Ok) return s;
    return dev.flush();
}

// The geometry the backup segments fix.
struct Geometry {
    uint64_t shift = 0;        // S: the data offset of the result
    uint64_t length = 0;       // L: the plaintext's bytes
    uint64_t moved = 0;        // M: where the first S bytes were copied
    uint64_t moved_size = 0;
};

Result<Geometry> geometry(const Metadata& md, const ReencryptState& st) {
    if (st.mode != "encrypt" || st.direction != "backward" || st.area_type != "datashift" || st.seg_moved < 0)
        return make_error(Status::Unsupported, "not an encryption with a data shift and a moved segment");
    const Segment& prev = md.segments.at(st.seg_previous);
    const Segment& fin = md.segments.at(st.seg_final);
    const Segment& mov = md.segments.at(st.seg_moved);
    if (prev.type != "linear" || fin.type != "crypt" || mov.type != "linear")
        return bad("the backup segments of an encryption must be linear, crypt and linear");
    Geometry g;
    g.shift = st.shift_size;
    if (prev.offset != 0 || !prev.size || fin.offset != g.shift || fin.iv_tweak != 0 || !mov.size)
        return bad("the backup segments do not describe a data shift of " + u64s(g.shift) + " bytes");
    g.length = *prev.size;
    g.moved = mov.offset;
    g.moved_size = *mov.size;
    if (g.length == 0 || g.moved_size != std::min(g.shift, g.length) || g.moved != g.shift + g.length)
        return bad("the moved segment does not follow the shifted data");
    const uint64_t align = std::max<uint64_t>(fin.sector_size, 512);
    if (g.length % align || g.shift % align) return bad("the data is not a multiple of the sector size");
    return g;
}

// A header built in memory written over dev: keyslot areas, then the
// secondary copy, then the primary, each flushed; from the secondary on, a
// crash leaves a header both tools read.
Result<void> write_header_image(BackingStore& dev, const std::vector<uint8_t>& img, uint64_t hdr_size) {
    const uint64_t copies = 2 * hdr_size;
    if (Status s = write_flush(dev, copies, ConstBytes(img.data() + copies, img.size() - copies)); s != Status::Ok)
        return make_error(s, "cannot write the keyslot areas");
    if (Status s = write_flush(dev, hdr_size, ConstBytes(img.data() + hdr_size, hdr_size)); s != Status::Ok)
        return make_error(s, "cannot write the LUKS2 header");
    if (Status s = write_flush(dev, 0, ConstBytes(img.data(), hdr_size)); s != Status::Ok)
        return make_error(s, "cannot write the LUKS2 header");
    return {};
}

// A header decryption may start from (decrypt_detached_init,
// decrypt_shift_init), unlocked: both copies whole, no requirement, one
// crypt segment without an integrity profile.
struct Decryptable {
    Header h;
    luks::Volume vol;
};
Result<Decryptable> decryptable(Registry& reg, BackingStore& store, ConstBytes passphrase) {
    Result<Header> h = read_header(reg, store);
    if (!h) return h.error();
    const Metadata& md = h->md;
    if (!h->primary_ok || !h->secondary_ok)
        return bad("a LUKS2 header copy is damaged; repair it (cryptsetup repair) before decrypting");
    if (!md.config.requirements.empty()) return bad("the header has requirements (is it in reencryption already?)");
    if (md.segments.size() != 1 || !md.segments.count(0) || md.segments.at(0).type != "crypt")
        return bad("decryption needs one crypt data segment");
    if (md.segments.at(0).integrity)
        return make_error(Status::Unsupported, "Reencryption of device with integrity profile is not supported.");
    Result<luks::Volume> vol = open(reg, store, passphrase);
    if (!vol) return vol.error();
    return Decryptable{std::move(*h), std::move(*vol)};
}

}  // namespace

namespace detail {

Result<void> copy_flushed(BackingStore& from, uint64_t src, BackingStore& to, uint64_t dst, uint64_t len) {
    std::vector<uint8_t> buf;
    for (uint64_t at = 0; at < len;) {
        buf.resize(static_cast<std::size_t>(std::min<uint64_t>(kIoChunk, len - at)));
        if (Status s = from.read(src + at, buf); s != Status::Ok) return make_error(s, "cannot read the data");
        if (Status s = to.write(dst + at, buf); s != Status::Ok) return make_error(s, "cannot move the data");
        at += buf.size();
    }
    if (Status s = to.flush(); s != Status::Ok) return make_error(s, "cannot flush the moved data");
    return {};
}

Result<void> wipe_random(BackingStore& dev, uint64_t off, uint64_t len) {
    std::vector<uint8_t> noise;
    for (uint64_t at = 0; at < len;) {
        noise.resize(static_cast<std::size_t>(std::min<uint64_t>(kIoChunk, len - at)));
        if (auto r = random_bytes(noise); !r) return r.error();
        if (Status s = dev.write(off + at, noise); s != Status::Ok) return make_error(s, "cannot wipe the old data");
        at += noise.size();
    }
    if (Status s = dev.flush(); s != Status::Ok) return make_error(s, "cannot flush the wipe");
    return {};
}

}  // namespace detail

using detail::lowest_free;
using detail::raw_json;

Result<ReencryptState> encrypt_shift_init(Registry& reg, BackingStore& device, ConstBytes passphrase,
                                          const EncryptShiftOptions& o) {
    const uint64_t n = o.reduce_size;
    if (n == 0 || n % (2 * 4096)) return bad("--reduce-device-size must be a non-zero multiple of 8 KiB");
    const uint64_t shift = n / 2, dev_size = device.size() / 512 * 512;
    if (dev_size <= n) return bad("Device is too small for encryption with --reduce-device-size " + u64s(n) + ".");
    const uint64_t length = dev_size - n;
    const uint32_t sector = o.format.sector_size;
    if (sector < 512 || sector > 4096 || (sector & (sector - 1))) return bad("sector size must be 512..4096, a power of two");
    if (length % sector || shift % sector) return bad("the data is not a multiple of the sector size " + u64s(sector));
    {
        uint8_t magic[6];
        if (Status s = device.read(0, magic); s != Status::Ok) return make_error(s, "cannot read the device");
        if (std::memcmp(magic, "LUKS\xba\xbe", 6) == 0 || std::memcmp(magic, "SKUL\xba\xbe", 6) == 0)
            return bad("the device already holds a LUKS header");
    }

    // The header as cryptsetup's temporary header file holds it: formatted
    // with the data at S, keyslots filling the rest of [0, S).
    FormatOptions fo = o.format;
    fo.data_offset = shift;
    fo.keyslots_size = 0;
    auto hdr = std::make_shared<MemoryStore>(shift);
    Result<luks::Volume> vol = format(reg, *hdr, passphrase, fo);
    if (!vol) return vol.error();
    Result<Header> h = read_header(reg, *hdr);
    if (!h) return h.error();
    const Metadata& md = h->md;
    Result<json> rootr = raw_json(md);
    if (!rootr) return rootr.error();
    json root = std::move(*rootr);

    Result<uint64_t> area = first_gap(md, kDatashiftArea);
    if (!area) return area.error();
    const int reenc_ks = lowest_free(root["keyslots"], kMaxKeyslots);
    if (reenc_ks < 0) return bad("no free keyslot for the reencrypt keyslot");
    root["keyslots"][std::to_string(reenc_ks)] =
        json{{"area", {{"offset", u64s(*area)}, {"size", u64s(kDatashiftArea)}, {"type", "datashift"}, {"shift_size", u64s(shift)}}},
             {"type", "reencrypt"}, {"key_size", 1}, {"mode", "encrypt"}, {"direction", "backward"}, {"priority", 0}};

    // The head moved past the data's new end: S bytes, or all of a shorter
    // plaintext (as cryptsetup sizes it).
    const uint64_t moved = shift + length, moved_size = std::min(shift, length);
    json fin = root["segments"]["0"];
    fin["flags"] = json::array({"backup-final"});
    json segs = json::object();
    segs["0"] = json{{"type", "linear"}, {"offset", u64s(moved)}, {"size", u64s(moved_size)}};
    int next = 1;
    if (length > shift) segs[std::to_string(next++)] = json{{"type", "linear"}, {"offset", u64s(shift)}, {"size", u64s(length - shift)}};
    const std::string moved_id = std::to_string(next++), prev_id = std::to_string(next++), fin_id = std::to_string(next++);
    segs[moved_id] = json{{"type", "linear"}, {"offset", u64s(moved)}, {"size", u64s(moved_size)}, {"flags", json::array({"backup-moved-segment"})}};
    segs[prev_id] = json{{"type", "linear"}, {"offset", "0"}, {"size", u64s(length)}, {"flags", json::array({"backup-previous"})}};
    segs[fin_id] = fin;
    root["segments"] = segs;
    const int new_digest = md.digest_for_keyslot(vol->keyslot);
    if (new_digest < 0) return bad("the new keyslot has no digest");
    root["digests"][std::to_string(new_digest)]["segments"] = json::array({fin_id});
    root["config"]["requirements"]["mandatory"] = json::array({"online-reencrypt-v2"});

    // The verification digest over the header as it will be, added last.
    if (auto r = detail::add_reencrypt_digest(reg, root, md, reenc_ks, fo.digest_iterations, {}, vol->table.key); !r)
        return r.error();
    if (auto r = write_metadata(reg, *hdr, md, root.dump()); !r) return r.error();

    // The first S bytes to the end, flushed; then the header over them:
    // keyslot areas, the secondary copy, the primary, each flushed. From the
    // secondary on, a crash leaves a header both tools read (and resume);
    // before it, the plaintext's head is whole in the moved copy.
    if (auto r = detail::copy_flushed(device, 0, device, moved, moved_size); !r) return r.error();
    if (auto r = write_header_image(device, hdr->data(), md.hdr.hdr_size); !r) return r.error();

    return detail::persisted_state(reg, device);
}

Result<ReencryptState> encrypt_detached_init(Registry& reg, BackingStore& header, ConstBytes passphrase,
                                             const EncryptDetachedOptions& o) {
    if (o.resilience != "checksum" && o.resilience != "journal" && o.resilience != "none")
        return bad("Requested --resilience option cannot be applied to current reencryption operation.");
    FormatOptions fo = o.format;
    // --offset / --align-payload: the data starts there in the data device
    // (cryptsetup's keyslots area then reaches up to it); else at 0.
    const uint64_t data_at = o.data_offset;
    fo.data_offset = data_at;
    uint64_t ks_size = fo.keyslots_size ? fo.keyslots_size
                       : data_at        ? data_at - 2 * fo.metadata_size
                                        : (16u << 20) - 2 * fo.metadata_size;
    if (data_at && 2 * fo.metadata_size + ks_size > data_at) return bad("the keyslots area reaches past the data offset");
    auto hdr = std::make_shared<MemoryStore>(2 * fo.metadata_size + ks_size);
    Result<luks::Volume> vol = format(reg, *hdr, passphrase, fo);
    if (!vol) return vol.error();
    Result<Header> h = read_header(reg, *hdr);
    if (!h) return h.error();
    const Metadata& md = h->md;
    Result<json> rootr = raw_json(md);
    if (!rootr) return rootr.error();
    json root = std::move(*rootr);

    // The reencrypt keyslot over the largest gap (LUKS2_find_area_max_gap).
    Result<int> reenc_ksr = detail::add_reencrypt_keyslot(root, md, {}, o.resilience, o.hash,
                                                          std::max<uint32_t>(o.checksum_block, fo.sector_size), "encrypt", "forward");
    if (!reenc_ksr) return reenc_ksr.error();
    const int reenc_ks = *reenc_ksr;

    json fin = root["segments"]["0"];
    fin["flags"] = json::array({"backup-final"});
    json segs = json::object();
    segs["0"] = json{{"type", "linear"}, {"offset", std::to_string(data_at)}, {"size", "dynamic"}};
    segs["1"] = json{{"type", "linear"}, {"offset", std::to_string(data_at)}, {"size", "dynamic"},
                     {"flags", json::array({"backup-previous"})}};
    segs["2"] = fin;
    root["segments"] = segs;
    const int new_digest = md.digest_for_keyslot(vol->keyslot);
    if (new_digest < 0) return bad("the new keyslot has no digest");
    root["digests"][std::to_string(new_digest)]["segments"] = json::array({"2"});
    root["config"]["requirements"]["mandatory"] = json::array({"online-reencrypt-v2"});

    if (auto r = detail::add_reencrypt_digest(reg, root, md, reenc_ks, fo.digest_iterations, {}, vol->table.key); !r)
        return r.error();
    if (auto r = write_metadata(reg, *hdr, md, root.dump()); !r) return r.error();

    // Keyslot areas, then the secondary copy, then the primary.
    const std::vector<uint8_t>& img = hdr->data();
    if (header.size() < img.size()) return make_error(Status::IoError, "the header device is too small");
    if (auto r = write_header_image(header, img, md.hdr.hdr_size); !r) return r.error();
    return detail::persisted_state(reg, header);
}

Result<ReencryptState> decrypt_detached_init(Registry& reg, BackingStore& header, ConstBytes passphrase,
                                             const DecryptDetachedOptions& o) {
    if (o.resilience != "checksum" && o.resilience != "journal" && o.resilience != "none")
        return bad("Requested --resilience option cannot be applied to current reencryption operation.");
    Result<Decryptable> dh = decryptable(reg, header, passphrase);
    if (!dh) return dh.error();
    const Metadata& md = dh->h.md;
    const Segment& old = md.segments.at(0);
    const luks::Volume* vol = &dh->vol;
    Result<json> rootr = raw_json(md);
    if (!rootr) return rootr.error();
    json root = std::move(*rootr);

    // The reencrypt keyslot over the largest gap (LUKS2_find_area_max_gap).
    Result<int> reenc_ksr = detail::add_reencrypt_keyslot(root, md, {}, o.resilience, o.hash,
                                                          std::max<uint32_t>(o.checksum_block, old.sector_size), "decrypt", "backward");
    if (!reenc_ksr) return reenc_ksr.error();
    const int reenc_ks = *reenc_ksr;
    json prev = root["segments"]["0"];
    prev["flags"] = json::array({"backup-previous"});
    root["segments"]["1"] = prev;
    root["segments"]["2"] = json{{"type", "linear"}, {"offset", u64s(old.offset)}, {"size", "dynamic"},
                                 {"flags", json::array({"backup-final"})}};
    const int old_digest = md.digest_for_keyslot(vol->keyslot, 0);
    if (old_digest < 0) return bad("the data segment has no digest");
    root["digests"][std::to_string(old_digest)]["segments"].push_back("1");
    root["config"]["requirements"]["mandatory"] = json::array({"online-reencrypt-v2"});

    if (auto r = detail::add_reencrypt_digest(reg, root, md, reenc_ks, o.digest_iterations, vol->table.key, {}); !r)
        return r.error();
    if (auto r = write_metadata(reg, header, md, root.dump()); !r) return r.error();
    return detail::persisted_state(reg, header);
}

Result<ReencryptState> decrypt_shift_init(Registry& reg, BackingStore& image, BackingStore& header, ConstBytes passphrase,
                                          const DecryptShiftOptions& o) {
    std::string type = o.resilience;
    if (type == "checksum" || type == "journal") type = "datashift-" + type;
    if (type != "datashift-checksum" && type != "datashift-journal")
        return bad("Requested --resilience option cannot be applied to current reencryption operation.");
    Result<Decryptable> dh = decryptable(reg, image, passphrase);
    if (!dh) return dh.error();
    const Metadata& md = dh->h.md;
    const Segment& old = md.segments.at(0);
    const uint64_t shift = old.offset;
    if (shift == 0 || old.iv_tweak != 0 || old.size)
        return bad("LUKS2 decryption with a data shift needs the data at an offset, to the end of the device");
    const uint64_t align = std::max<uint64_t>({old.sector_size, 512, o.checksum_block});
    if (shift % align) return bad("the data offset is not a multiple of " + u64s(align));
    if (image.size() <= shift) return bad("the device ends before its data");
    const uint64_t length = (image.size() - shift) / old.sector_size * old.sector_size;
    const uint64_t moved = std::min(shift, length);
    // The moved segment is decrypted in place under the area's checksums,
    // one per block: a partial last block would go unprotected.
    if (type == "datashift-checksum" && moved % std::max<uint64_t>(o.checksum_block, old.sector_size))
        return bad("the data (" + u64s(length) + " bytes) is shorter than the data offset and not a multiple of the "
                   "checksum block " + u64s(o.checksum_block) + ": use --resilience journal");
    const uint64_t export_size = md.hdr_and_areas_size();
    if (export_size > shift) return bad("the header areas overlap the data");
    if (header.size() < export_size) return make_error(Status::IoError, "the new header file is too small");

    Result<json> rootr = raw_json(md);
    if (!rootr) return rootr.error();
    json root = std::move(*rootr);
    Result<int> reenc_ksr = detail::add_reencrypt_keyslot(root, md, {}, type, o.hash,
                                                          std::max<uint32_t>(o.checksum_block, old.sector_size), "decrypt", "forward");
    if (!reenc_ksr) return reenc_ksr.error();
    const int reenc_ks = *reenc_ksr;
    json& area = root["keyslots"][std::to_string(reenc_ks)]["area"];
    area["shift_size"] = u64s(shift);
    const uint64_t area_size = std::stoull(area["size"].get<std::string>());
    if (type == "datashift-journal" && area_size < moved)
        return bad("Moved segment too large. Requested size " + u64s(moved) + ", available space for: " + u64s(area_size) + ".");

    // The future layout: the head's ciphertext at 0 (moved), the rest where
    // it is; the plaintext ends at 0.
    json prev = root["segments"]["0"];
    json head = prev;
    head["offset"] = "0";
    head["size"] = u64s(moved);
    json segs = json::object();
    segs["0"] = head;
    int next = 1;
    if (length > moved) {
        json rest = prev;
        rest["offset"] = u64s(shift + moved);
        rest["iv_tweak"] = u64s(moved / 512);
        segs[std::to_string(next++)] = rest;
    }
    head["flags"] = json::array({"backup-moved-segment"});
    segs[std::to_string(next++)] = head;
    prev["flags"] = json::array({"backup-previous"});
    segs[std::to_string(next++)] = prev;
    segs[std::to_string(next++)] = json{{"type", "linear"}, {"offset", "0"}, {"size", "dynamic"}, {"flags", json::array({"backup-final"})}};
    root["segments"] = segs;
    const int old_digest = md.digest_for_keyslot(dh->vol.keyslot, 0);
    if (old_digest < 0) return bad("the data segment has no digest");
    json ids = json::array();
    for (int i = 0; i < next - 1; ++i) ids.push_back(std::to_string(i));
    root["digests"][std::to_string(old_digest)]["segments"] = ids;
    root["config"]["requirements"]["mandatory"] = json::array({"online-reencrypt-v3"});
    if (auto r = detail::add_reencrypt_digest(reg, root, md, reenc_ks, o.digest_iterations, dh->vol.table.key, {}); !r)
        return r.error();
    const std::string text = root.dump();

    // The header exported as it is, then the head's ciphertext over it, then
    // the reencryption written into NEW: until then NEW is a plain copy of
    // the header, which describes the untouched ciphertext from S on.
    if (auto r = detail::copy_flushed(image, 0, header, 0, export_size); !r) return r.error();
    if (auto r = detail::copy_flushed(image, shift, image, 0, moved); !r) return r.error();
    if (auto r = write_metadata(reg, header, md, text); !r) return r.error();
    return detail::persisted_state(reg, header);
}

Result<std::string> decrypt_shift_progress_json(const Metadata& md, const ReencryptState& st, uint64_t data_size,
                                                uint64_t done, uint64_t hot, bool moved_hot) {
    if (st.mode != "decrypt" || st.direction != "forward" || st.seg_moved < 0 || st.shift_size == 0)
        return make_error(Status::Unsupported, "not a decryption with a data shift and a moved segment");
    Result<json> rootr = raw_json(md);
    if (!rootr) return rootr.error();
    json root = std::move(*rootr);
    const json& cur = root["segments"];
    json prev = cur[std::to_string(st.seg_previous)], fin = cur[std::to_string(st.seg_final)],
         mov = cur[std::to_string(st.seg_moved)];
    const Segment& moved_seg = md.segments.at(st.seg_moved);
    const uint64_t shift = st.shift_size, moved = moved_seg.size.value_or(0);
    if (moved == 0 || moved > data_size || done < moved || done + hot > data_size || (moved_hot && (hot || done != data_size)))
        return bad("decryption progress outside the data");
    json out = json::object();
    std::vector<std::string> crypt_ids;
    int id = 0;
    auto add = [&](json s) {
        const std::string k = std::to_string(id++);
        if (s["type"] == "crypt") crypt_ids.push_back(k);
        out[k] = std::move(s);
    };
    auto linear = [](uint64_t off, std::optional<uint64_t> size, bool in_flight) {
        json s{{"type", "linear"}, {"offset", u64s(off)}, {"size", size ? u64s(*size) : std::string("dynamic")}};
        if (in_flight) s["flags"] = json::array({"in-reencryption"});
        return s;
    };
    if (moved_hot) {
        add(linear(0, moved, true));
        if (data_size > moved) add(linear(moved, std::nullopt, false));
    } else {
        json m = mov;
        m.erase("flags");
        add(m);
        const uint64_t end = done + hot;
        if (done > moved) add(linear(moved, end == data_size && !hot ? std::nullopt : std::optional<uint64_t>(done - moved), false));
        if (hot) add(linear(done, hot, true));
        if (end < data_size) {
            json o = prev;
            o.erase("flags");
            o["offset"] = u64s(shift + end);
            o["iv_tweak"] = u64s(md.segments.at(st.seg_previous).iv_tweak + end / 512);
            add(o);
        }
    }
    // As cryptsetup's reencrypt_assign_segments_simple: the live ones, then
    // backup-previous, backup-final, backup-moved-segment; the old digest
    // takes the backups first, then the live crypt segments in order.
    std::vector<std::string> live = crypt_ids;
    crypt_ids.clear();
    add(prev);
    add(fin);
    add(mov);
    crypt_ids.insert(crypt_ids.end(), live.begin(), live.end());
    root["segments"] = out;
    root["digests"][std::to_string(st.digest_old)]["segments"] = crypt_ids;
    return root.dump();
}

Result<std::string> encrypt_shift_progress_json(const Metadata& md, const ReencryptState& st, uint64_t done_from,
                                                uint64_t hot) {
    Result<Geometry> g = geometry(md, st);
    if (!g) return g.error();
    if (done_from > g->length || hot > done_from) return bad("encryption progress past the data");
    if (done_from % 512 || hot % 512) return bad("encryption progress must be in 512-byte units");
    const uint64_t plain_end = done_from - hot;
    if (plain_end > 0 && plain_end < g->shift && hot) return bad("a hotzone must not split the moved segment");
    Result<json> rootr = raw_json(md);
    if (!rootr) return rootr.error();
    json root = std::move(*rootr);
    const json& old = root["segments"];
    json prev = old[std::to_string(st.seg_previous)], fin = old[std::to_string(st.seg_final)],
         mov = old[std::to_string(st.seg_moved)];
    json out = json::object();
    std::vector<std::string> live_new;
    int id = 0;
    auto add = [&](json s) {
        out[std::to_string(id++)] = std::move(s);
        return std::to_string(id - 1);
    };
    auto crypt = [&](uint64_t logical, uint64_t size, bool dynamic) {
        json s = fin;
        s.erase("flags");
        s["offset"] = u64s(g->shift + logical);
        s["size"] = dynamic ? std::string("dynamic") : u64s(size);
        s["iv_tweak"] = u64s(logical / 512);
        return s;
    };
    if (plain_end > 0) {
        json m = mov;
        m.erase("flags");
        m["size"] = u64s(std::min(plain_end, g->shift));
        add(m);
    }
    if (plain_end > g->shift)
        add(json{{"type", "linear"}, {"offset", u64s(g->shift)}, {"size", u64s(plain_end - g->shift)}});
    if (hot) {
        json h = crypt(plain_end, hot, false);
        h["flags"] = json::array({"in-reencryption"});
        live_new.push_back(add(h));
    }
    if (done_from < g->length) live_new.push_back(add(crypt(done_from, g->length - done_from, done_from == 0 && !hot)));
    add(prev);
    const std::string fin_id = add(fin);
    add(mov);
    root["segments"] = out;
    live_new.insert(live_new.begin(), fin_id);
    root["digests"][std::to_string(st.digest_new)]["segments"] = live_new;
    return root.dump();
}

Result<ReencryptRunResult> encrypt_shift_run(Registry& reg, BackingStore& dev, ConstBytes passphrase,
                                             const ReencryptRunOptions& opts) {
    Metadata md;
    ReencryptState st;
    auto reload = [&]() -> Result<void> { return detail::read_reencryption(reg, dev, md, st); };
    if (auto r = reload(); !r) return r.error();
    if (st.repair_needed) return bad("Reencryption metadata is invalid; run cryptsetup repair first.");
    Result<Geometry> g = geometry(md, st);
    if (!g) return g.error();
    if (dev.size() < g->moved + g->moved_size) return bad("the device ends before its moved segment (has it shrunk?)");
    Result<ReencryptKeys> keys = reencrypt_unlock(reg, dev, md, st, passphrase);
    if (!keys) return keys.error();
    if (keys->new_key.empty()) return make_error(Status::NoKey, "No key available with this passphrase.");
    const SecureBuffer key = std::move(keys->new_key);
    if (auto r = reencrypt_verify(reg, md, st, {}, key); !r) return r.error();
    const Segment fin = md.segments.at(st.seg_final);

    // Where the data stands: the encrypted tail from done_from, a hotzone
    // in flight just before it.
    uint64_t done_from = g->length;
    std::optional<std::pair<uint64_t, uint64_t>> hot;
    for (const auto& [sid, seg] : md.segments) {
        const int id = sid;
        const Segment& s = seg;
        if (id == st.seg_previous || id == st.seg_final || id == st.seg_moved || s.type != "crypt") continue;
        const uint64_t logical = s.iv_tweak * 512;
        if (s.offset != g->shift + logical) return bad("segment " + std::to_string(id) + " is not where the data shift puts it");
        const uint64_t len = s.size ? *s.size : g->length - std::min(logical, g->length);
        if (has_flag(s, "in-reencryption")) hot = std::make_pair(logical, len);
        else done_from = std::min(done_from, logical);
    }
    const uint64_t align = std::max<uint64_t>(fin.sector_size, 512);
    uint64_t hz = g->shift;
    if (opts.hotzone_size) hz = std::max(align, std::min(hz, opts.hotzone_size / align * align));

    ReencryptRunResult out;
    out.data_size = g->length;
    out.hotzone = hz;
    // Encrypts [at, at + len): read from where the plaintext still lies
    // (the moved copy for the first S bytes), written S further on.
    std::vector<uint8_t> buf;
    auto step_data = [&](uint64_t at, uint64_t len) -> Result<void> {
        for (uint64_t pos = 0; pos < len;) {
            const uint64_t x = at + pos;
            uint64_t n = std::min<uint64_t>(kIoChunk, len - pos);
            if (x < g->shift) n = std::min(n, g->shift - x);
            buf.resize(static_cast<std::size_t>(n));
            const uint64_t src = x < g->shift ? g->moved + x : x;
            if (Status s = dev.read(src, buf); s != Status::Ok) return make_error(s, "cannot read the data");
            if (auto r = detail::crypt_mem(reg, fin, key, fin.iv_tweak + x / 512, buf, true); !r) return r;
            if (Status s = dev.write(g->shift + x, buf); s != Status::Ok) return make_error(s, "cannot write the data");
            pos += n;
        }
        if (Status s = dev.flush(); s != Status::Ok) return make_error(s, "cannot flush the data");
        return {};
    };
    auto write_map = [&](uint64_t from, uint64_t h) -> Result<void> {
        Result<std::string> text = encrypt_shift_progress_json(md, st, from, h);
        if (!text) return text.error();
        if (auto r = write_metadata(reg, dev, md, *text); !r) return r;
        return reload();
    };

    if (hot) {
        // The datashift recovery: the hotzone's source is intact, so it is
        // re-read and written again whole.
        if (hot->first + hot->second != done_from) return bad("the crashed hotzone does not precede the encrypted data");
        if (auto r = step_data(hot->first, hot->second); !r) return r.error();
        done_from = hot->first;
        if (auto r = write_map(done_from, 0); !r) return r.error();
        out.recovered = true;
    }
    if (opts.recover_only) return out;
    while (done_from > 0) {
        // Backward, one shift at most, never across the moved segment's end.
        const uint64_t start = done_from > g->shift ? std::max(g->shift, done_from - std::min(hz, done_from)) : 0;
        const uint64_t len = done_from - start;
        if (auto r = write_map(done_from, len); !r) return r.error();
        if (auto r = step_data(start, len); !r) return r.error();
        done_from = start;
        if (auto r = write_map(done_from, 0); !r) return r.error();
        if (opts.progress && !opts.progress(g->length - done_from, g->length)) return out;
    }
    // The plaintext copy at the end goes before the header forgets it.
    if (auto r = detail::wipe_random(dev, g->moved, g->moved_size); !r) return r.error();
    if (auto r = reencrypt_finish(reg, dev, md, st); !r) return r.error();
    out.finished = true;
    return out;
}

}  // namespace blkcrypt::luks::luks2
