// dmsetup table files: parsed line by line (crypt and verity arguments by
// their own parsers) and built into a concatenation of block devices.
#include <blkcrypt/dm/aead_target.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/dm/dm_table.hpp>
#include <blkcrypt/dm/targets.hpp>
#include <blkcrypt/integrity/device.hpp>
#include <blkcrypt/verity/target.hpp>

#include "table_words.hpp"

#include <charconv>
#include <map>
#include <set>

namespace blkcrypt::dm {
namespace {

Error at_line(unsigned n, const std::string& msg, Status s = Status::Invalid) {
    return make_error(s, "line " + std::to_string(n) + ": " + msg);
}

using detail::table_words;
bool number(std::string_view s, uint64_t& v) { return detail::table_number(s, v); }

constexpr uint64_t kMaxSectors = UINT64_MAX / 512;

// An integrity line's target over its device (and metadata device).
template <class StoreOf>
Result<std::shared_ptr<BlockDevice>> build_integrity(Registry& reg, const IntegrityTable& t, bool read_only,
                                                     unsigned threads, const IntegrityFailure& on_failure,
                                                     StoreOf& store_of) {
    auto dev = store_of(t.device);
    if (!dev) return dev.error();
    std::shared_ptr<BackingStore> meta;
    if (!t.meta_device.empty()) {
        auto m = store_of(t.meta_device);
        if (!m) return m.error();
        meta = *m;
    }
    integrity::OpenOptions o;
    o.start = t.offset;
    o.tag_size = static_cast<uint16_t>(t.tag_size > UINT16_MAX ? 0 : t.tag_size);
    if (t.tag_size > UINT16_MAX) return make_error(Status::Invalid, "Too big tag size");
    o.block_size = t.block_size.value_or(0);
    o.mode = t.mode;
    o.internal_hash = t.internal_hash;
    o.internal_hash_key = t.internal_hash_key;
    o.journal_crypt = t.journal_crypt;
    o.journal_crypt_key = t.journal_crypt_key;
    o.journal_mac = t.journal_mac;
    o.journal_mac_key = t.journal_mac_key;
    o.allow_discards = t.allow_discards;
    o.read_only = read_only;
    if (t.buffer_sectors) o.buffer_sectors = *t.buffer_sectors;
    o.journal_sectors = t.journal_sectors.value_or(0);
    if (t.journal_watermark) o.journal_watermark = *t.journal_watermark;
    if (t.commit_time) o.commit_time = *t.commit_time;
    o.sectors_per_bit = t.sectors_per_bit.value_or(0);
    if (t.bitmap_flush_interval) o.bitmap_flush_interval = *t.bitmap_flush_interval;
    o.recalculate = t.recalculate;
    auto target = integrity::IntegrityTarget::open(reg, *dev, meta, o);
    if (!target) return target.error();
    return make_integrity_device(std::move(target).value(), threads, on_failure);
}

}  // namespace

Result<DmTable> parse_dm_table(std::string_view text) {
    DmTable lines;
    uint64_t next = 0;
    unsigned n = 0;
    while (!text.empty()) {
        const std::size_t nl = text.find('\n');
        const std::string_view raw = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
        ++n;
        const auto w = table_words(raw);
        if (w.empty() || w[0].front() == '#') continue;
        if (w.size() < 3) return at_line(n, "expected '<start> <length> <target> [<args>...]'");
        DmLine l;
        l.line_no = n;
        if (!number(w[0], l.start) || !number(w[1], l.length))
            return at_line(n, "invalid start or length '" + std::string(w[0]) + " " + std::string(w[1]) + "'");
        if (l.length == 0) return at_line(n, "zero-length target");
        if (l.start != next)
            return at_line(n, (l.start > next ? "gap in the table: sector " : "overlap in the table: sector ") +
                                  std::to_string(l.start) + ", expected " + std::to_string(next));
        if (l.length > kMaxSectors - l.start) return at_line(n, "the table is too large");
        next = l.start + l.length;
        l.target = std::string(w[2]);
        const std::size_t nargs = w.size() - 3;
        if (l.target == "linear") {
            if (nargs != 2) return at_line(n, "linear: expected '<device> <offset>'");
            l.device = std::string(w[3]);
            if (!number(w[4], l.offset) || l.offset > kMaxSectors) return at_line(n, "linear: invalid device sector");
        } else if (l.target == "zero" || l.target == "error") {
            if (nargs != 0) return at_line(n, l.target + ": no arguments expected");
        } else if (l.target == "crypt") {
            auto t = parse_table_line(raw);
            if (!t) return at_line(n, "crypt: " + t.error().message);
            if (t->offset > kMaxSectors) return at_line(n, "crypt: invalid device sector");
            l.crypt = std::move(t).value();
        } else if (l.target == "verity") {
            const std::size_t args_at = static_cast<std::size_t>(w[2].data() + w[2].size() - raw.data());
            auto t = verity::parse_verity_args(raw.substr(args_at));
            if (!t) return at_line(n, "verity: " + t.error().message);
            const uint64_t spb = t->params.data_block_size / 512;
            if (l.length % spb) return at_line(n, "verity: the length is not a multiple of the data block size");
            if (l.length / spb > t->params.data_blocks)
                return at_line(n, "verity: the target covers " + std::to_string(l.length) + " sectors; the tree " +
                                      std::to_string(t->params.data_blocks * spb));
            t->start = l.start;
            t->length = l.length;
            l.verity = std::move(t).value();
        } else if (l.target == "integrity") {
            const std::size_t args_at = static_cast<std::size_t>(w[2].data() + w[2].size() - raw.data());
            auto t = parse_integrity_args(raw.substr(args_at));
            if (!t) return at_line(n, "integrity: " + t.error().message);
            l.integrity = std::move(t).value();
        } else {
            return at_line(n, "unknown target type '" + l.target + "' (linear, zero, error, crypt, verity, integrity)");
        }
        lines.push_back(std::move(l));
    }
    if (lines.empty()) return make_error(Status::Invalid, "the table has no lines");
    return lines;
}

DmLine crypt_line(CryptTable t, uint64_t length, std::string device) {
    DmLine l;
    l.length = length;
    l.target = "crypt";
    t.start = 0;
    t.length = length;
    t.device = std::move(device);
    l.crypt = std::move(t);
    return l;
}

std::string format_dm_table(const DmTable& table, bool show_key) {
    std::string out;
    for (const DmLine& l : table) {
        out += std::to_string(l.start) + " " + std::to_string(l.length) + " " + l.target;
        if (l.target == "linear")
            out += " " + l.device + " " + std::to_string(l.offset);
        else if (l.crypt)
            out += " " + l.crypt->crypt_args(show_key);
        else if (l.verity)
            out += " " + l.verity->args();
        else if (l.integrity)
            out += " " + l.integrity->args(show_key);
        out += "\n";
    }
    return out;
}

Result<std::shared_ptr<BlockDevice>> build_dm_table(Registry& reg, const DmTable& lines,
                                                    const DmBuildOptions& opts) {
    if (lines.empty()) return make_error(Status::Invalid, "the table has no lines");
    if (!opts.open) return make_error(Status::Invalid, "no way to open devices");
    bool read_only = opts.read_only;
    for (const DmLine& l : lines) read_only = read_only || l.verity.has_value();
    // Paths a writable target writes to are opened writable, the rest not.
    std::set<std::string> written;
    if (!read_only) {
        for (const DmLine& l : lines) {
            if (l.target == "linear") written.insert(l.device);
            if (l.crypt) written.insert(l.crypt->device);
            if (l.integrity) {
                written.insert(l.integrity->device);
                if (!l.integrity->meta_device.empty()) written.insert(l.integrity->meta_device);
            }
        }
    }

    std::map<std::string, std::shared_ptr<BackingStore>> stores;
    std::map<std::string, std::shared_ptr<BlockDevice>> store_devs;
    auto named = [&](const std::string& name) { return opts.named ? opts.named(name) : nullptr; };
    auto store_of = [&](const std::string& name) -> Result<std::shared_ptr<BackingStore>> {
        if (auto d = named(name)) return device_store(d, name);
        if (auto it = stores.find(name); it != stores.end()) return it->second;
        auto s = opts.open(name, written.count(name) > 0);
        if (!s) return s;
        stores[name] = *s;
        return *s;
    };
    auto device_of = [&](const std::string& name) -> Result<std::shared_ptr<BlockDevice>> {
        if (auto d = named(name)) return d;
        if (auto it = store_devs.find(name); it != store_devs.end()) return it->second;
        auto s = store_of(name);
        if (!s) return s.error();
        StoreDeviceOptions so;
        so.read_only = !written.count(name);
        so.discard = !so.read_only;  // a hole in the file, as a discard to a disk
        so.threads = opts.threads;
        auto d = make_store_device(*s, so);
        if (!d) return make_error(d.status(), name + ": " + d.error().message);
        store_devs[name] = *d;
        return *d;
    };

    std::vector<Segment> segs;
    for (const DmLine& l : lines) {
        const uint64_t bytes = l.length * 512;
        // A table a format built (line 0) has no file to point into: its
        // errors are the target's own, as when the format made the target.
        auto fail = [&](const Error& e) {
            return l.line_no ? at_line(l.line_no, l.target + ": " + e.message, e.status) : e;
        };
        std::shared_ptr<BlockDevice> dev;
        if (l.target == "zero") {
            dev = make_zero_device(bytes, read_only);
        } else if (l.target == "error") {
            dev = make_error_device(bytes);
        } else if (l.target == "linear") {
            auto lower = device_of(l.device);
            if (!lower) return fail(lower.error());
            auto d = make_linear_device(*lower, l.offset * 512, bytes);
            if (!d) return fail(d.error());
            dev = *d;
        } else if (l.crypt && l.crypt->integrity_tag_size) {
            // As the kernel stacks it: the tags come from the device below
            // (a dm-integrity table), which must keep them.
            auto lower = device_of(l.crypt->device);
            if (!lower) return fail(lower.error());
            auto tagged = (*lower)->tagged();
            if (!tagged)
                return fail(make_error(Status::Invalid,
                                       "Integrity profile not supported: " + l.crypt->device +
                                           " keeps no integrity tags (integrity:" +
                                           std::to_string(l.crypt->integrity_tag_size) + ":" +
                                           l.crypt->integrity_auth +
                                           " needs a dm-integrity device below, e.g. a table's integrity line)"));
            AeadCryptOptions ao;
            ao.threads = opts.threads;
            ao.read_only = read_only;
            auto d = make_aead_crypt_device(reg, *l.crypt, std::move(tagged), l.length, ao);
            if (!d) return fail(d.error());
            dev = *d;
        } else if (l.crypt) {
            auto store = store_of(l.crypt->device);
            if (!store) return fail(store.error());
            const uint64_t have = (*store)->size() / 512;
            if (l.crypt->offset > have || l.length > have - l.crypt->offset)
                return fail(make_error(Status::Invalid, l.crypt->device + " is too small: " + std::to_string(have) +
                                                            " sectors, the line needs " +
                                                            std::to_string(l.crypt->offset + l.length)));
            CryptTargetOptions to;
            to.threads = opts.threads;
            auto t = CryptTarget::create(reg, *l.crypt, *store, l.length, to);
            if (!t) return fail(t.error());
            dev = make_crypt_device(std::move(t).value(), *store, read_only);
        } else if (l.verity) {
            auto data = store_of(l.verity->data_dev);
            if (!data) return fail(data.error());
            auto hash = store_of(l.verity->hash_dev);
            if (!hash) return fail(hash.error());
            verity::VerityTargetOptions vo;
            vo.log = opts.on_corruption;
            auto t = verity::VerityTarget::create(reg, *l.verity, *data, *hash, vo);
            if (!t) return fail(t.error());
            auto d = make_verity_device(std::move(t).value(), opts.threads, "verity " + l.verity->data_dev);
            if (!d) return fail(d.error());
            dev = *d;
            if (dev->size() != bytes) {  // a target shorter than the tree
                auto w = make_linear_device(dev, 0, bytes);
                if (!w) return fail(w.error());
                dev = *w;
            }
        } else if (l.integrity) {
            auto d = build_integrity(reg, *l.integrity, read_only, opts.threads, opts.on_integrity_failure, store_of);
            if (!d) return fail(d.error());
            dev = *d;
            if (dev->size() < bytes)
                return fail(make_error(Status::Invalid, "Not enough provided sectors for requested mapping size (" +
                                                            std::to_string(dev->size() / 512) + " provided)"));
            if (dev->size() != bytes) {
                auto w = make_linear_device(dev, 0, bytes);
                if (!w) return fail(w.error());
                dev = *w;
            }
        } else {
            return at_line(l.line_no, "unknown target type '" + l.target + "'");
        }
        segs.push_back({l.start * 512, std::move(dev)});
    }
    std::string what = opts.description;
    if (what.empty()) {
        what = "table of " + std::to_string(lines.size()) + (lines.size() == 1 ? " target (" : " targets (");
        for (std::size_t i = 0; i < lines.size(); ++i) what += (i ? " " : "") + lines[i].target;
        what += ")";
    }
    return make_concat_device(std::move(segs), read_only, what);
}

Result<std::shared_ptr<BlockDevice>> build_dm_stack(Registry& reg, const std::vector<NamedDmTable>& tables,
                                                    const DmBuildOptions& opts) {
    if (tables.empty()) return make_error(Status::Invalid, "no table to build");
    std::map<std::string, std::shared_ptr<BlockDevice>> built;
    std::shared_ptr<BlockDevice> top;
    for (const NamedDmTable& t : tables) {
        DmBuildOptions o = opts;
        o.named = [&](const std::string& name) -> std::shared_ptr<BlockDevice> {
            if (auto it = built.find(name); it != built.end()) return it->second;
            return opts.named ? opts.named(name) : nullptr;
        };
        auto d = build_dm_table(reg, t.table, o);
        if (!d) return d.error();
        top = *d;
        built["/dev/mapper/" + t.name] = top;
    }
    return top;
}

}  // namespace blkcrypt::dm
