// See Container::dump_summary_json in <blkcrypt/luks/container.hpp>: which
// fields `luks dump --json` reports for each version is format knowledge, so
// it lives here; the layout is the CLI's one-line JSON (docs/json.md).
#include <blkcrypt/json_string.hpp>
#include <blkcrypt/luks/container.hpp>
#include <blkcrypt/luks/luks1.hpp>
#include <blkcrypt/luks/luks2.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace blkcrypt::luks {
namespace {

// Members and elements written in order, each container's items separated
// by ", " and a key followed by ": ", as the CLI's JsonWriter writes a line.
class Line {
public:
    std::string out;

    void begin(char bracket) {
        item();
        out += bracket;
        first_.push_back(true);
    }
    void end(char bracket) {
        first_.pop_back();
        out += bracket;
    }
    void key(std::string_view k) {
        item();
        append_json_string(out, k);
        out += ": ";
        after_key_ = true;
    }
    void string(std::string_view s) {
        item();
        append_json_string(out, s);
    }
    void number(int64_t n) {
        item();
        out += std::to_string(n);
    }
    void strings(std::string_view name, const std::vector<std::string>& v) {
        key(name);
        begin('[');
        for (const std::string& x : v) string(x);
        end(']');
    }

private:
    // Before each value: a separator unless it follows its key or opens its container.
    void item() {
        if (after_key_) {
            after_key_ = false;
            return;
        }
        if (first_.empty()) return;
        if (!first_.back()) out += ", ";
        first_.back() = false;
    }
    std::vector<bool> first_;
    bool after_key_ = false;
};

void keyslot_json(Line& j, int id, uint64_t key_bytes, const std::string& kdf, const std::string& hash,
                  uint64_t iterations, uint64_t memory, uint64_t cpus, int priority, uint64_t off, uint64_t size) {
    j.begin('{');
    j.key("keyslot"), j.number(id);
    j.key("key_bits"), j.number(static_cast<int64_t>(key_bytes * 8));
    j.key("priority"), j.string(priority == 0 ? "ignore" : priority == 2 ? "prefer" : "normal");
    j.key("pbkdf"), j.string(kdf);
    if (!hash.empty()) j.key("hash"), j.string(hash);
    j.key(kdf == "pbkdf2" ? "iterations" : "time"), j.number(static_cast<int64_t>(iterations));
    if (kdf != "pbkdf2") {
        j.key("memory_kib"), j.number(static_cast<int64_t>(memory));
        j.key("parallel"), j.number(static_cast<int64_t>(cpus));
    }
    j.key("area_offset"), j.number(static_cast<int64_t>(off));
    j.key("area_size"), j.number(static_cast<int64_t>(size));
    j.end('}');
}

void luks1_json(Line& j, const luks1::Header& h) {
    j.key("version"), j.number(1);
    j.key("uuid"), j.string(h.uuid);
    j.key("cipher"), j.string(h.cipher_spec());
    j.key("key_bits"), j.number(h.key_bytes * 8);
    j.key("sector_size"), j.number(512);
    j.key("data_offset"), j.number(static_cast<int64_t>(uint64_t{h.payload_offset} * 512));
    j.key("hash"), j.string(h.hash_spec);
    j.key("keyslots");
    j.begin('[');
    for (unsigned k = 0; k < luks1::kNumKeyslots; ++k) {
        const luks1::Keyslot& ks = h.keyslots[k];
        if (!ks.enabled()) continue;
        keyslot_json(j, static_cast<int>(k), h.key_bytes, "pbkdf2", h.hash_spec, ks.iterations, 0, 0, 1,
                     uint64_t{ks.key_material_offset} * 512, luks1::af_sectors(h.key_bytes, ks.stripes) * 512);
    }
    j.end(']');
}

void luks2_json(Line& j, const luks2::Metadata& md, std::size_t key_bytes) {
    const luks2::Segment& seg = md.segments.at(0);
    j.key("version"), j.number(2);
    j.key("uuid"), j.string(md.hdr.uuid);
    j.key("label"), j.string(md.hdr.label);
    j.key("subsystem"), j.string(md.hdr.subsystem);
    j.key("epoch"), j.number(static_cast<int64_t>(md.hdr.seqid));
    j.key("metadata_size"), j.number(static_cast<int64_t>(md.metadata_size()));
    j.key("keyslots_size"), j.number(static_cast<int64_t>(md.config.keyslots_size));
    j.key("cipher"), j.string(seg.encryption);
    j.key("key_bits"), j.number(static_cast<int64_t>(key_bytes * 8));
    j.key("sector_size"), j.number(seg.sector_size);
    j.key("data_offset"), j.number(static_cast<int64_t>(seg.offset));
    if (seg.size) j.key("data_size"), j.number(static_cast<int64_t>(*seg.size));
    j.strings("flags", md.config.flags);
    j.strings("requirements", md.config.requirements);
    j.key("keyslots");
    j.begin('[');
    for (const auto& [k, ks] : md.keyslots)
        keyslot_json(j, k, ks.key_size, ks.kdf.type, ks.kdf.hash, ks.kdf.type == "pbkdf2" ? ks.kdf.iterations : ks.kdf.time,
                     ks.kdf.memory, ks.kdf.cpus, ks.priority, ks.area_offset, ks.area_size);
    j.end(']');
    j.key("tokens");
    j.begin('[');
    for (const auto& [id, t] : md.tokens) {
        j.begin('{');
        j.key("token"), j.number(id);
        j.key("type"), j.string(t.type);
        j.key("keyslots");
        j.begin('[');
        for (int k : t.keyslots) j.number(k);
        j.end(']');
        j.end('}');
    }
    j.end(']');
}

}  // namespace

Result<std::string> Container::dump_summary_json(std::string_view device) const {
    Line j;
    j.begin('{');
    j.key("device"), j.string(device);
    if (version_ == Version::Luks1) {
        luks1_json(j, *luks1_);
    } else {
        auto key_bytes = volume_key_size();
        if (!key_bytes) return key_bytes.error();
        luks2_json(j, *luks2_, *key_bytes);
    }
    j.end('}');
    return std::move(j.out);
}

}  // namespace blkcrypt::luks
