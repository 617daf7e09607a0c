// LUKS2 segments with integrity (cryptsetup luksFormat --integrity): the
// kernel cipher and tag size cryptsetup derives from the segment, and the
// two tables it stacks (lib/setup.c _open_and_activate_luks2 ->
// LUKS2_activate with an integrity profile; lib/libdevmapper.c cipher_c2dm;
// lib/integrity/integrity.c INTEGRITY_tag_size, INTEGRITY_activate).
#include <blkcrypt/dm/dm_table.hpp>
#include <blkcrypt/integrity/geometry.hpp>
#include <blkcrypt/integrity/superblock.hpp>
#include <blkcrypt/luks/container.hpp>

#include <blkcrypt/dm/block_device.hpp>
#include <blkcrypt/integrity/journal.hpp>

#include <array>
#include <vector>

namespace blkcrypt::luks {

namespace {

// The names integrity_device gives its stack: nothing outside it sees them.
const std::string kDataName = "DATA", kStackName = "luks";

Error unsupported(std::string_view enc, std::string_view integ) {
    return make_error(Status::Unsupported, "LUKS2 cipher " + std::string(enc) + " with integrity " +
                                               std::string(integ) + " has no kernel mapping in cryptsetup 2.6.1");
}

// An HMAC's key and digest bytes, or 0 for an unknown hash.
uint32_t hmac_size(std::string_view integ) {
    if (integ == "hmac(sha1)") return 20;
    if (integ == "hmac(sha256)") return 32;
    if (integ == "hmac(sha512)") return 64;
    return 0;
}

}  // namespace

Result<IntegrityProfile> integrity_profile(std::string_view enc, std::string_view integ) {
    // cipher-mode-iv, or cipher-iv for the AEADs without a mode
    // (aegis128-random, chacha20-random); crypt_parse_name_and_mode.
    std::string_view c = enc, mode, iv;
    const std::size_t d1 = enc.find('-');
    if (d1 == std::string_view::npos) return unsupported(enc, integ);
    c = enc.substr(0, d1);
    std::string_view rest = enc.substr(d1 + 1);
    if (const std::size_t d2 = rest.find('-'); d2 != std::string_view::npos) {
        mode = rest.substr(0, d2);
        iv = rest.substr(d2 + 1);
    } else {
        iv = rest;
    }
    if (c.empty() || iv.empty() || iv.find(':') != std::string_view::npos) return unsupported(enc, integ);

    IntegrityProfile p;
    uint32_t auth = 0;
    std::string api;
    if (integ == "aead") {
        auth = 16;
        if (mode == "gcm") api = "gcm(" + std::string(c) + ")";
        else if (mode == "ccm") api = "rfc4309(ccm(" + std::string(c) + "))";
        else if (mode.empty() && c.starts_with("aegis")) api = std::string(c);
        else return unsupported(enc, integ);
    } else if (integ == "poly1305") {
        auth = 16;
        if (c != "chacha20" || !mode.empty()) return unsupported(enc, integ);
        api = "rfc7539(chacha20,poly1305)";
    } else if (const uint32_t h = hmac_size(integ); h || integ == "cmac(aes)") {
        // An authenc() pairing of the MAC with the block cipher mode; the MAC
        // key follows the cipher key in the volume key.
        if (mode.empty()) return unsupported(enc, integ);
        auth = h ? h : 16;
        p.key_size = h ? h : 16;
        api = "authenc(" + std::string(integ) + "," + std::string(mode) + "(" + std::string(c) + "))";
    } else {
        return unsupported(enc, integ);
    }
    if (iv == "random") {
        // INTEGRITY_tag_size: the IV the kernel stores beside the tag.
        if (integ == "poly1305") p.iv_stored = 12;
        else if (mode == "xts") p.iv_stored = 16;
        else if (mode == "gcm") p.iv_stored = 12;
        else if (mode == "ccm") p.iv_stored = 8;
        else if (c == "aegis256") p.iv_stored = 32;
        else p.iv_stored = 16;
    }
    p.cipher = "capi:" + api + "-" + std::string(iv);
    p.tag_size = auth + p.iv_stored;
    return p;
}

namespace {

struct Opened {
    integrity::Superblock sb;
    integrity::Geometry geo;
};

// The superblock at the segment offset of `data` and the geometry the kernel
// computes for it over the whole data device (INTEGRITY_activate maps the
// whole device with the offset as the target's start).
Result<Opened> read_integrity(const Volume& vol, BackingStore& data) {
    const VolumeIntegrity& in = *vol.integrity;
    const std::string who = data.name().empty() ? std::string("the data device") : data.name();
    std::array<uint8_t, integrity::kSuperblockBytes> head{};
    if (data.size() < in.offset * 512 + head.size())
        return make_error(Status::Invalid, who + " ends before the dm-integrity superblock at sector " +
                                               std::to_string(in.offset));
    if (Status s = data.read(in.offset * 512, head); s != Status::Ok)
        return make_error(s, who + ": cannot read the dm-integrity superblock");
    if (!integrity::has_magic(head))
        return make_error(Status::NotFound, who + ": no dm-integrity superblock at sector " +
                                                std::to_string(in.offset) + " (the LUKS2 segment has integrity " +
                                                in.type + ")");
    auto sb = integrity::decode_superblock(head);
    if (!sb) return sb.error();
    if (sb->tag_size != in.tag_size)
        return make_error(Status::Invalid, who + ": the dm-integrity superblock has " + std::to_string(sb->tag_size) +
                                               "-byte tags, the LUKS2 segment needs " + std::to_string(in.tag_size));
    if (sb->sector_size() != vol.table.sector_size)
        return make_error(Status::Invalid, who + ": the dm-integrity block size " + std::to_string(sb->sector_size()) +
                                               " is not the LUKS2 sector size " +
                                               std::to_string(vol.table.sector_size));
    integrity::Devices dev;
    dev.data_sectors = data.size() / 512;
    dev.start = in.offset;
    auto geo = integrity::open_geometry(*sb, dev);
    if (!geo) return geo.error();
    return Opened{*sb, *geo};
}

}  // namespace

Result<std::string> integrity_table_line(const Volume& vol, BackingStore& data, const std::string& device) {
    if (!vol.integrity) return make_error(Status::Invalid, "the LUKS volume has no integrity");
    auto o = read_integrity(vol, data);
    if (!o) return o.error();
    const integrity::Geometry& g = o->geo;
    // dm-integrity's status (STATUSTYPE_TABLE): the arguments in the kernel's
    // order, counted before they are printed.
    std::vector<std::string> args;
    if (g.log2_sectors_per_block) args.push_back("block_size:" + std::to_string(vol.table.sector_size));
    args.push_back("journal_sectors:" + std::to_string(g.initial_sectors - 8));
    args.push_back("interleave_sectors:" + std::to_string(uint64_t(1) << g.log2_interleave_sectors));
    args.push_back("buffer_sectors:" + std::to_string(uint64_t(1) << g.log2_buffer_sectors));
    args.push_back("journal_watermark:50");
    args.push_back("commit_time:10000");
    if (o->sb.has(integrity::kFlagFixedPadding)) args.push_back("fix_padding");
    if (o->sb.has(integrity::kFlagFixedHmac)) args.push_back("fix_hmac");
    std::string line = "0 " + std::to_string(g.provided_data_sectors) + " integrity " + device + " " +
                       std::to_string(vol.integrity->offset) + " " + std::to_string(vol.integrity->tag_size) + " J " +
                       std::to_string(args.size());
    for (const std::string& a : args) line += " " + a;
    return line + "\n";
}

Result<uint64_t> integrity_provided_sectors(const Volume& vol, BackingStore& data) {
    auto o = read_integrity(vol, data);
    if (!o) return o.error();
    return o->geo.provided_data_sectors;
}

Result<integrity::Geometry> integrity_geometry(const Volume& vol, BackingStore& data) {
    if (!vol.integrity) return make_error(Status::Invalid, "the LUKS volume has no integrity");
    auto o = read_integrity(vol, data);
    if (!o) return o.error();
    return o->geo;
}

Result<std::shared_ptr<dm::BlockDevice>> integrity_device(Registry& reg, const Volume& vol,
                                                          std::shared_ptr<BackingStore> data,
                                                          IntegrityDeviceOptions opts) {
    if (!vol.integrity) return make_error(Status::Invalid, "the LUKS volume has no integrity");
    if (!data) return make_error(Status::Invalid, "no data device");
    // The same checks as the tables (superblock present, tag and block size
    // agreeing with the segment), with their words.
    if (auto o = read_integrity(vol, *data); !o) return o.error();
    auto tables = integrity_tables(vol, *data, kDataName, kStackName);
    if (!tables) return tables.error();
    dm::IntegrityTable& lower = *(*tables)[0].table.front().integrity;
    lower.mode = opts.mode;
    dm::DmBuildOptions bo;
    bo.read_only = opts.read_only;
    bo.threads = opts.threads;
    bo.open = [&](const std::string& path, bool) -> Result<std::shared_ptr<BackingStore>> {
        if (path == kDataName) return data;
        return make_error(Status::Invalid, "the LUKS2 integrity tables name " + path);
    };
    return dm::build_dm_stack(reg, *tables, bo);
}

Result<std::vector<dm::NamedDmTable>> integrity_tables(const Volume& vol, BackingStore& data,
                                                       const std::string& device, const std::string& name) {
    auto line = integrity_table_line(vol, data, device);
    if (!line) return line.error();
    auto lower = dm::parse_dm_table(*line);
    if (!lower) return lower.error();
    // Built here, not read from a file: errors are the target's own.
    for (dm::DmLine& l : *lower) l.line_no = 0;
    auto top = dm_table(vol, data, "/dev/mapper/" + name + "_dif");
    if (!top) return top.error();
    return std::vector<dm::NamedDmTable>{{name + "_dif", std::move(lower).value()}, {name, std::move(top).value()}};
}

Result<void> format_integrity(Registry& reg, const Volume& vol, std::shared_ptr<BackingStore> data,
                              const IntegrityFormatOptions& opts) {
    if (!vol.integrity) return make_error(Status::Invalid, "the LUKS volume has no integrity");
    if (!data) return make_error(Status::Invalid, "no data device");
    const uint64_t start = vol.integrity->offset;
    integrity::FormatParams p;
    p.tag_size = static_cast<uint16_t>(vol.integrity->tag_size);
    p.sector_size = vol.table.sector_size;
    p.internal_hash = false;  // dm-crypt above makes the tags
    p.fix_padding = !opts.legacy_padding;  // cryptsetup 2.6.1 on a kernel with target >= 1.4
    p.fix_hmac = true;        // sent too; without a hash or MAC it sets no flag
    integrity::Devices dev;
    dev.data_sectors = data->size() / 512;
    dev.start = start;
    auto sb = integrity::format_superblock(p, dev);
    if (!sb) return sb.error();
    auto geo = integrity::open_geometry(*sb, dev);
    if (!geo) return geo.error();
    // "Wipe integrity superblock" first, so an interrupted format leaves none.
    std::vector<uint8_t> zero(4096, 0);
    if (Status s = data->write(start * 512, zero); s != Status::Ok)
        return make_error(s, "cannot write the dm-integrity superblock area");
    if (auto r = integrity::init_journal(*data, *sb, *geo); !r) return r.error();
    if (Status s = data->flush(); s != Status::Ok) return make_error(s, "cannot flush the dm-integrity journal");
    std::vector<uint8_t> head = integrity::encode_superblock(*sb);
    head.resize(4096, 0);
    if (Status s = data->write(start * 512, head); s != Status::Ok)
        return make_error(s, "cannot write the dm-integrity superblock");
    if (Status s = data->flush(); s != Status::Ok) return make_error(s, "cannot flush the dm-integrity superblock");
    if (opts.no_wipe) return {};

    // The wipe: zeros through both targets, the integrity one without its
    // journal as cryptsetup activates it for this (CRYPT_ACTIVATE_NO_JOURNAL).
    auto devc = integrity_device(reg, vol, data, {.read_only = false, .mode = 'D', .threads = opts.threads});
    if (!devc) return devc.error();
    dm::BlockDevice& d = **devc;
    const uint64_t total = d.size();
    std::vector<uint8_t> zeros(4u << 20, 0);
    // Several chunks in flight: the crypt engine spreads each over its workers.
    for (uint64_t at = 0; at < total;) {
        const std::size_t len = static_cast<std::size_t>(std::min<uint64_t>(zeros.size(), total - at));
        if (Status s = dm::write_sync(d, at, ConstBytes(zeros.data(), len)); s != Status::Ok)
            return make_error(s, "cannot wipe the integrity device at byte " + std::to_string(at));
        at += len;
        if (opts.progress && !opts.progress(at, total)) return make_error(Status::Interrupted, "wipe interrupted");
    }
    if (Status s = d.flush(); s != Status::Ok) return make_error(s, "cannot flush the wiped integrity device");
    return {};
}

}  // namespace blkcrypt::luks
