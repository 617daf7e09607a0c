// LUKS2 binary headers and JSON metadata: parsing and cryptsetup's
// validation rules (lib/luks2/luks2_disk_metadata.c, luks2_json_metadata.c,
// luks2_keyslot_luks2.c of cryptsetup 2.6 describe the behaviour matched).
#include <blkcrypt/base64.hpp>
#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/luks/luks2.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>

#include <nlohmann/json.hpp>

#include "luks2_internal.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

namespace blkcrypt::luks::luks2 {

// Ordered: tokens and the dumps keep cryptsetup's member order.
using json = nlohmann::ordered_json;

namespace {

constexpr uint8_t kMagic1[6] = {'L', 'U', 'K', 'S', 0xba, 0xbe};
constexpr uint8_t kMagic2[6] = {'S', 'K', 'U', 'L', 0xba, 0xbe};
constexpr uint32_t kStripes = 4000;    // the only AF stripe count cryptsetup accepts
constexpr uint32_t kMaxKeyBytes = 512;  // far above any cipher; bounds AF buffers
constexpr int kMaxJsonDepth = 32;       // json-c's default tokener depth

Error bad(std::string msg) { return make_error(Status::Invalid, std::move(msg)); }

std::string fixed_string(const uint8_t* p, std::size_t n) {
    // The field's last byte is forced to NUL, as hdr_from_disk does.
    const std::size_t len = strnlen(reinterpret_cast<const char*>(p), n - 1);
    return std::string(reinterpret_cast<const char*>(p), len);
}

// The length of the top-level JSON value if text (up to the first NUL) is
// one object nested at most kMaxJsonDepth deep; 0 otherwise. json-c stops
// at the object's end; what follows must be NUL padding.
std::size_t json_object_extent(std::string_view text) {
    if (text.empty() || text[0] != '{') return 0;
    int depth = 0;
    bool in_string = false, escape = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '\0') return 0;
        if (in_string) {
            if (escape) escape = false;
            else if (c == '\\') escape = true;
            else if (c == '"') in_string = false;
            continue;
        }
        if (c == '"') in_string = true;
        else if (c == '{' || c == '[') {
            if (++depth > kMaxJsonDepth) return 0;
        } else if (c == '}' || c == ']') {
            if (--depth == 0) return i + 1;
            if (depth < 0) return 0;
        }
    }
    return 0;
}

using detail::parse_u64;

std::optional<int> parse_id(std::string_view s, int max) {
    auto v = parse_u64(s);
    if (!v || *v >= static_cast<uint64_t>(max)) return std::nullopt;
    return static_cast<int>(*v);
}

// Accessors that check the JSON type first (nothing here throws).
const json* member(const json& o, const char* key) {
    if (!o.is_object()) return nullptr;
    auto it = o.find(key);
    return it == o.end() ? nullptr : &*it;
}

std::optional<std::string> get_string(const json& o, const char* key) {
    const json* v = member(o, key);
    if (!v || !v->is_string()) return std::nullopt;
    return v->get_ref<const std::string&>();
}

// A JSON integer in uint32 range (validate_json_uint32); floats are refused.
std::optional<uint32_t> get_u32(const json& o, const char* key) {
    const json* v = member(o, key);
    if (!v) return std::nullopt;
    if (v->is_number_unsigned()) {
        const uint64_t x = v->get<uint64_t>();
        if (x > std::numeric_limits<uint32_t>::max()) return std::nullopt;
        return static_cast<uint32_t>(x);
    }
    if (v->is_number_integer()) {
        const int64_t x = v->get<int64_t>();
        if (x < 0 || x > static_cast<int64_t>(std::numeric_limits<uint32_t>::max())) return std::nullopt;
        return static_cast<uint32_t>(x);
    }
    return std::nullopt;
}

std::optional<uint64_t> get_u64_string(const json& o, const char* key) {
    auto s = get_string(o, key);
    if (!s) return std::nullopt;
    return parse_u64(*s);
}

std::optional<std::vector<uint8_t>> get_base64(const json& o, const char* key) {
    auto s = get_string(o, key);
    if (!s) return std::nullopt;
    return base64_decode(*s);
}

// An array of numbered strings naming existing objects of `section`.
template <class Map>
std::optional<std::vector<int>> get_refs(const json& o, const char* key, const Map& section, int max) {
    const json* a = member(o, key);
    if (!a || !a->is_array()) return std::nullopt;
    std::vector<int> out;
    for (const json& e : *a) {
        if (!e.is_string()) return std::nullopt;
        auto id = parse_id(e.get_ref<const std::string&>(), max);
        if (!id || !section.count(*id)) return std::nullopt;
        out.push_back(*id);
    }
    return out;
}

std::optional<std::vector<std::string>> get_strings(const json& a) {
    if (!a.is_array()) return std::nullopt;
    std::vector<std::string> out;
    for (const json& e : a) {
        if (!e.is_string()) return std::nullopt;
        out.push_back(e.get<std::string>());
    }
    return out;
}

Result<void> parse_kdf(const json& k, Kdf& kdf, const std::string& where) {
    auto type = get_string(k, "type");
    if (!type) return bad(where + ": kdf has no type");
    kdf.type = *type;
    auto salt = get_base64(k, "salt");
    if (!salt || salt->empty()) return bad(where + ": kdf salt is missing or not base64");
    kdf.salt = std::move(*salt);
    if (kdf.type == "pbkdf2") {
        auto hash = get_string(k, "hash");
        auto it = get_u32(k, "iterations");
        if (!hash || !it || *it == 0) return bad(where + ": pbkdf2 needs hash and iterations");
        kdf.hash = *hash;
        kdf.iterations = *it;
    } else if (kdf.type == "argon2i" || kdf.type == "argon2id" || kdf.type == "argon2") {
        // "argon2" stays as written: luksDump prints it so (it is unlocked
        // as argon2i, luks2_open.cpp).
        auto t = get_u32(k, "time"), m = get_u32(k, "memory"), p = get_u32(k, "cpus");
        if (!t || !m || !p || *t == 0 || *m == 0 || *p == 0)
            return bad(where + ": argon2 needs time, memory and cpus");
        kdf.time = *t;
        kdf.memory = *m;
        kdf.cpus = *p;
    } else {
        return bad(where + ": unknown kdf type " + kdf.type);
    }
    return {};
}

Result<void> parse_luks2_keyslot(const json& v, Keyslot& ks, const std::string& where) {
    const json* kdf = member(v, "kdf");
    const json* af = member(v, "af");
    const json* area = member(v, "area");
    if (!kdf || !kdf->is_object() || !af || !af->is_object() || !area || !area->is_object())
        return bad(where + " needs kdf, af and area objects");
    if (auto r = parse_kdf(*kdf, ks.kdf, where); !r) return r;

    auto af_type = get_string(*af, "type");
    auto stripes = get_u32(*af, "stripes");
    auto af_hash = get_string(*af, "hash");
    if (!af_type || *af_type != "luks1" || !stripes || !af_hash)
        return bad(where + ": af must be type luks1 with stripes and hash");
    if (*stripes != kStripes) return bad(where + ": af stripes must be 4000");
    ks.af_type = *af_type;
    ks.stripes = *stripes;
    ks.af_hash = *af_hash;

    auto area_type = get_string(*area, "type");
    auto off = get_u64_string(*area, "offset");
    auto size = get_u64_string(*area, "size");
    auto enc = get_string(*area, "encryption");
    auto aks = get_u32(*area, "key_size");
    if (!area_type || *area_type != "raw") return bad(where + ": only raw keyslot areas exist");
    if (!off || !size || !enc || !aks)
        return bad(where + ": area needs offset, size (strings of digits), encryption, key_size");
    if (*aks == 0 || *aks > kMaxKeyBytes) return bad(where + ": area key_size out of range");
    ks.area_type = *area_type;
    ks.area_offset = *off;
    ks.area_size = *size;
    ks.area_encryption = *enc;
    ks.area_key_size = *aks;
    if (ks.key_size == 0 || ks.key_size > kMaxKeyBytes) return bad(where + ": key_size out of range");
    // AF data longer than the area is refused when the keyslot is unlocked
    // (unlock_keyslot), not here: cryptsetup 2.6.1 reads such a header.
    return {};
}

// Walks a section of numbered objects ("0".."max-1"): f(id, where, object)
// for each, where naming it for messages; the first error stops the walk.
template <typename F>
Result<void> for_each_numbered(const json& section, const char* noun, int max, F&& f) {
    for (auto it = section.begin(); it != section.end(); ++it) {
        const std::string where = std::string(noun) + " " + it.key();
        auto id = parse_id(it.key(), max);
        if (!id) return bad(where + ": not a " + noun + " number 0.." + std::to_string(max - 1));
        if (Result<void> r = f(*id, where, *it); !r) return r;
    }
    return {};
}

// One parser per section, in cryptsetup's hdr_validate_* order: keyslots
// first (the others reference them), then segments, digests, tokens and
// config; the checks across sections come after the sections they join.

Result<Keyslot> parse_keyslot(const std::string& where, const json& o) {
    Keyslot ks;
    auto type = get_string(o, "type");
    auto key_size = get_u32(o, "key_size");
    if (!type || !key_size) return bad(where + " needs type and key_size");
    ks.type = *type;
    ks.key_size = *key_size;
    if (member(o, "priority")) {
        auto pr = get_u32(o, "priority");
        if (!pr || *pr > 2) return bad(where + ": priority must be 0, 1 or 2");
        ks.priority = static_cast<int>(*pr);
    }
    if (ks.type == "luks2") {
        if (auto r = parse_luks2_keyslot(o, ks, where); !r) return r.error();
    } else if (const json* area = member(o, "area")) {
        // Other types (reencrypt) still own an area that must fit.
        auto off = get_u64_string(*area, "offset");
        auto size = get_u64_string(*area, "size");
        if (!off || !size) return bad(where + ": area needs offset and size");
        ks.area_offset = *off;
        ks.area_size = *size;
    } else {
        return bad(where + ": no area");
    }
    return ks;
}

// The fields only a crypt segment has (hdr_validate_crypt_segment).
Result<void> parse_crypt_segment(const std::string& where, const json& o, Segment& s) {
    auto tweak = get_u64_string(o, "iv_tweak");
    auto enc = get_string(o, "encryption");
    auto ss = get_u32(o, "sector_size");
    if (!tweak || !enc || !ss) return bad(where + " needs iv_tweak, encryption and sector_size");
    if (*ss < 512 || *ss > 4096 || (*ss & (*ss - 1))) return bad(where + ": sector_size must be a power of two 512..4096");
    if (s.size.value_or(0) % *ss) return bad(where + ": size is not a multiple of the sector size");
    s.iv_tweak = *tweak;
    s.encryption = *enc;
    s.sector_size = *ss;
    if (const json* integ = member(o, "integrity")) {
        auto t = get_string(*integ, "type");
        auto je = get_string(*integ, "journal_encryption");
        auto ji = get_string(*integ, "journal_integrity");
        if (!t || !je || !ji) return bad(where + ": integrity needs type, journal_encryption, journal_integrity");
        SegmentIntegrity si{*t, *je, *ji, std::nullopt};
        if (member(*integ, "key_size")) {
            auto ks = get_u32(*integ, "key_size");
            if (!ks || *ks == 0) return bad(where + ": integrity key_size must be a positive number");
            si.key_size = *ks;
        }
        s.integrity = std::move(si);
    }
    return {};
}

Result<Segment> parse_segment(const std::string& where, const json& o) {
    Segment s;
    auto type = get_string(o, "type");
    auto off = get_u64_string(o, "offset");
    auto size = get_string(o, "size");
    if (!type || !off || !size) return bad(where + " needs type, offset and size");
    s.type = *type;
    s.offset = *off;
    if (*size != "dynamic") {
        auto n = parse_u64(*size);
        if (!n || *n == 0) return bad(where + ": size must be \"dynamic\" or a number");
        s.size = *n;
    }
    if (s.offset % 512 || s.size.value_or(0) % 512) return bad(where + ": offset and size must be multiples of 512");
    if (s.size && *s.size > std::numeric_limits<uint64_t>::max() - s.offset)
        return bad(where + ": offset + size overflows");
    if (const json* f = member(o, "flags")) {
        auto flags = get_strings(*f);
        if (!flags) return bad(where + ": flags must be an array of strings");
        s.flags = std::move(*flags);
    }
    if (s.type == "crypt")
        if (auto r = parse_crypt_segment(where, o, s); !r) return r.error();
    return s;
}

// A digest names keyslots and segments already parsed in md.
Result<Digest> parse_digest(const std::string& where, const json& o, const Metadata& md) {
    Digest d;
    auto type = get_string(o, "type");
    auto ks = get_refs(o, "keyslots", md.keyslots, kMaxKeyslots);
    auto segs = get_refs(o, "segments", md.segments, kMaxSegments);
    if (!type || !ks || !segs) return bad(where + " needs type and keyslots/segments naming existing ones");
    d.type = *type;
    d.keyslots = std::move(*ks);
    d.segments = std::move(*segs);
    if (d.type == "pbkdf2") {
        auto hash = get_string(o, "hash");
        auto iter = get_u32(o, "iterations");
        auto salt = get_base64(o, "salt");
        auto dig = get_base64(o, "digest");
        if (!hash || !iter || *iter == 0 || !salt || !dig || dig->empty())
            return bad(where + ": pbkdf2 digest needs hash, iterations, salt and digest");
        d.hash = *hash;
        d.iterations = *iter;
        d.salt = std::move(*salt);
        d.digest = std::move(*dig);
    }
    return d;
}

// A crypt segment must have a digest (hdr_validate_crypt_segment), and a
// keyslot belongs to at most one digest (hdr_validate_digests).
Result<void> check_digest_references(const Metadata& md) {
    for (const auto& [sid, s] : md.segments) {
        if (s.type != "crypt") continue;
        bool found = false;
        for (const auto& [did, d] : md.digests) found = found || std::count(d.segments.begin(), d.segments.end(), sid);
        if (!found) return bad("segment " + std::to_string(sid) + " has no digest");
    }
    for (const auto& [kid, k] : md.keyslots) {
        int n = 0;
        for (const auto& [did, d] : md.digests) n += static_cast<int>(std::count(d.keyslots.begin(), d.keyslots.end(), kid));
        if (n > 1) return bad("keyslot " + std::to_string(kid) + " is assigned to more than one digest");
        // cryptsetup's LUKS2_keyslots_validate refuses the whole header otherwise.
        if (n == 0 && k.type == "luks2") return bad("keyslot " + std::to_string(kid) + " is assigned to no digest");
    }
    return {};
}

// Tokens are kept whole; only their type and keyslot references are checked.
Result<Token> parse_token(const std::string& where, const json& o, const Metadata& md) {
    Token t;
    auto type = get_string(o, "type");
    auto ks = get_refs(o, "keyslots", md.keyslots, kMaxKeyslots);
    if (!type || !ks) return bad(where + " needs type and keyslots naming existing ones");
    t.type = *type;
    t.keyslots = std::move(*ks);
    t.json = o.dump();
    return t;
}

// hdr_validate_config: the sizes against the binary header and the JSON
// text, flags and mandatory requirements.
Result<Config> parse_config(const json& o, const BinaryHeader& hdr, std::size_t json_text_size) {
    Config c;
    auto json_size = get_u64_string(o, "json_size");
    auto ks_size = get_u64_string(o, "keyslots_size");
    if (!json_size || !ks_size) return bad("config needs json_size and keyslots_size (strings of digits)");
    c.json_size = *json_size;
    c.keyslots_size = *ks_size;
    if (*json_size != hdr.hdr_size - kBinHeaderSize) return bad("config json_size does not match the binary header's size");
    if (*ks_size % 4096 || *ks_size > kMaxKeyslotsSize)
        return bad("config keyslots_size must be 4 KiB aligned and at most 128 MiB");
    if (json_text_size > *json_size) return bad("the JSON does not fit its area");
    if (const json* f = member(o, "flags")) {
        auto flags = get_strings(*f);
        if (!flags) return bad("config flags must be an array of strings");
        c.flags = std::move(*flags);
    }
    if (const json* r = member(o, "requirements")) {
        if (!r->is_object()) return bad("config requirements must be an object");
        if (const json* m = member(*r, "mandatory")) {
            auto req = get_strings(*m);
            if (!req) return bad("config requirements.mandatory must be an array of strings");
            c.requirements = std::move(*req);
        }
    }
    return c;
}

// Keyslot areas inside [2 * metadata size, end of keyslots area), not empty,
// not overlapping (validate_intervals); the data past the keyslots area
// unless the header is detached (first crypt segment at offset 0).
Result<void> check_areas(const Metadata& md) {
    const uint64_t areas_begin = 2 * md.metadata_size();
    const uint64_t areas_end = md.hdr_and_areas_size();
    for (const auto& [id, k] : md.keyslots) {
        const std::string where = "keyslot " + std::to_string(id);
        if (k.area_offset < areas_begin) return bad(where + ": area starts inside the metadata");
        if (k.area_size == 0) return bad(where + ": empty area");
        if (k.area_size > areas_end || k.area_offset > areas_end - k.area_size)
            return bad(where + ": area runs past the keyslots area (ends at " + std::to_string(areas_end) + ")");
        for (const auto& [id2, k2] : md.keyslots)
            if (id2 != id && k.area_offset >= k2.area_offset && k.area_offset < k2.area_offset + k2.area_size)
                return bad("keyslots " + std::to_string(id) + " and " + std::to_string(id2) + " overlap");
    }
    uint64_t first = std::numeric_limits<uint64_t>::max();
    for (const auto& [id, s] : md.segments)
        if (s.type == "crypt") first = std::min(first, s.offset);
    if (first != 0 && first != std::numeric_limits<uint64_t>::max() &&
        (first < md.config.keyslots_size || first - md.config.keyslots_size < areas_begin))
        return bad("the data segment (offset " + std::to_string(first) + ") overlaps the header and keyslots area");
    return {};
}

// Parses every numbered object of a section into `into` with parse(where, o).
template <typename Map, typename F>
Result<void> parse_section(const json& section, const char* noun, int max, Map& into, F&& parse) {
    return for_each_numbered(section, noun, max, [&](int id, const std::string& where, const json& o) -> Result<void> {
        auto v = parse(where, o);
        if (!v) return v.error();
        into.emplace(id, std::move(v).value());
        return {};
    });
}

Result<Metadata> parse_metadata_json(const json& root, const BinaryHeader& hdr, std::string text) {
    Metadata md;
    md.hdr = hdr;
    md.json = std::move(text);
    if (!root.is_object()) return bad("LUKS2 metadata is not a JSON object");
    const json* jks = member(root, "keyslots");
    const json* jtok = member(root, "tokens");
    const json* jseg = member(root, "segments");
    const json* jdig = member(root, "digests");
    const json* jcfg = member(root, "config");
    if (!jks || !jks->is_object()) return bad("LUKS2 metadata: missing keyslots section");
    if (!jtok || !jtok->is_object()) return bad("LUKS2 metadata: missing tokens section");
    if (!jseg || !jseg->is_object()) return bad("LUKS2 metadata: missing segments section");
    if (!jdig || !jdig->is_object()) return bad("LUKS2 metadata: missing digests section");
    if (!jcfg || !jcfg->is_object()) return bad("LUKS2 metadata: missing config section");

    if (auto r = parse_section(*jks, "keyslot", kMaxKeyslots, md.keyslots, parse_keyslot); !r) return r.error();
    if (jseg->empty()) return bad("LUKS2 metadata: empty segments section");
    if (auto r = parse_section(*jseg, "segment", kMaxSegments, md.segments, parse_segment); !r) return r.error();
    auto digest = [&](const std::string& where, const json& o) { return parse_digest(where, o, md); };
    if (auto r = parse_section(*jdig, "digest", kMaxDigests, md.digests, digest); !r) return r.error();
    if (auto r = check_digest_references(md); !r) return r.error();
    auto token = [&](const std::string& where, const json& o) { return parse_token(where, o, md); };
    if (auto r = parse_section(*jtok, "token", kMaxTokens, md.tokens, token); !r) return r.error();
    Result<Config> cfg = parse_config(*jcfg, hdr, md.json.size());
    if (!cfg) return cfg.error();
    md.config = std::move(cfg).value();
    if (auto r = check_areas(md); !r) return r.error();
    return md;
}

std::string hex_csum(ConstBytes c) {
    static const char* d = "0123456789abcdef";
    std::string s;
    for (uint8_t b : c) {
        s += d[b >> 4];
        s += d[b & 15];
    }
    return s;
}

}  // namespace

uint64_t Keyslot::af_size() const {
    const uint64_t bytes = static_cast<uint64_t>(key_size) * stripes;
    return (bytes + 511) / 512 * 512;
}

int Metadata::digest_for_keyslot(int k, int s) const {
    for (const auto& [id, d] : digests) {
        if (!std::count(d.keyslots.begin(), d.keyslots.end(), k)) continue;
        if (s >= 0 && !std::count(d.segments.begin(), d.segments.end(), s)) continue;
        return id;
    }
    return -1;
}

Result<BinaryHeader> parse_binary_header(ConstBytes bin, bool secondary, uint64_t offset) {
    if (bin.size() < kBinHeaderSize) return bad("short LUKS2 binary header");
    const uint8_t* p = bin.data();
    if (std::memcmp(p, secondary ? kMagic2 : kMagic1, 6) != 0) return bad("no LUKS2 magic");
    if (get_be16(p + 6) != 2) return bad("not LUKS version 2");
    BinaryHeader h;
    h.hdr_size = get_be64(p + 8);
    h.seqid = get_be64(p + 16);
    h.label = fixed_string(p + 24, 48);
    h.checksum_alg = fixed_string(p + 72, 32);
    std::copy(p + 104, p + 168, h.salt.begin());
    h.uuid = fixed_string(p + 168, 40);
    h.subsystem = fixed_string(p + 208, 48);
    h.hdr_offset = get_be64(p + 256);
    std::copy(p + 448, p + 512, h.csum.begin());
    if (h.hdr_offset != offset)
        return bad("header offset " + std::to_string(h.hdr_offset) + " differs from its place " + std::to_string(offset));
    if (h.hdr_size < kMinHdrSize || h.hdr_size > kMaxHdrSize || (h.hdr_size & (h.hdr_size - 1)))
        return bad("bogus header size " + std::to_string(h.hdr_size));
    if (secondary && offset != h.hdr_size) return bad("secondary header offset does not match its size");
    return h;
}

Result<Metadata> parse_metadata(ConstBytes json_area, const BinaryHeader& hdr) {
    if (json_area.size() != hdr.hdr_size - kBinHeaderSize) return bad("JSON area of the wrong size");
    std::string_view area(reinterpret_cast<const char*>(json_area.data()), json_area.size());
    const std::size_t len = json_object_extent(area);
    if (len == 0 || len >= area.size()) return bad("the JSON area is not one JSON object followed by NULs");
    // json-c's tokener takes whitespace after the object as part of it
    // (cryptsetup 2.6.1 accepts "{...} "); anything else before the NULs
    // is refused (validate_json_area).
    std::size_t end = len;
    while (end < area.size() && (area[end] == ' ' || area[end] == '\t' || area[end] == '\n' || area[end] == '\r')) ++end;
    if (end >= area.size()) return bad("no NUL after the JSON text");
    for (std::size_t i = end; i < area.size(); ++i)
        if (area[i] != '\0') return bad("bytes other than NUL after the JSON text");
    try {
        json root = json::parse(area.substr(0, len), nullptr, /*allow_exceptions=*/false);
        if (root.is_discarded()) return bad("the JSON area is not valid JSON");
        return parse_metadata_json(root, hdr, std::string(area.substr(0, len)));
    } catch (const std::bad_alloc&) {
        return make_error(Status::NoMem, "out of memory parsing LUKS2 metadata");
    } catch (const std::exception& e) {
        // The accessors above check types first; this only guards against a
        // case they missed turning into a crash.
        return bad(std::string("LUKS2 metadata: ") + e.what());
    }
}

namespace {

Result<void> header_checksum(Registry& reg, const std::string& alg, ConstBytes bin_zeroed, ConstBytes area,
                             std::vector<uint8_t>& sum) {
    Result<Shash> hash = Shash::alloc(reg, alg);
    if (!hash) return bad("unknown header checksum algorithm " + alg);
    const std::size_t n = hash->digestsize();
    if (n == 0 || n > 64) return bad("unusable header checksum algorithm " + alg);
    Result<ShashDesc> desc = hash->new_desc();
    if (!desc) return desc.error();
    sum.resize(n);
    desc->init();
    desc->update(bin_zeroed);
    if (desc->finup(area, sum) != Status::Ok)
        return bad("cannot compute the header checksum");
    return {};
}

void put_field(uint8_t* p, std::size_t n, const std::string& s) {
    std::memcpy(p, s.data(), std::min(s.size(), n - 1));  // the last byte stays NUL
}

}  // namespace

Result<std::vector<uint8_t>> build_copy(Registry& reg, const BinaryHeader& hdr, bool secondary,
                                        std::string_view json) {
    if (hdr.hdr_size < kMinHdrSize || hdr.hdr_size > kMaxHdrSize || (hdr.hdr_size & (hdr.hdr_size - 1)))
        return bad("bogus header size " + std::to_string(hdr.hdr_size));
    if (json.size() >= hdr.hdr_size - kBinHeaderSize) return bad("the JSON does not fit its area");
    std::vector<uint8_t> out(static_cast<std::size_t>(hdr.hdr_size), 0);
    uint8_t* p = out.data();
    std::memcpy(p, secondary ? kMagic2 : kMagic1, 6);
    put_be16(p + 6, 2);
    put_be64(p + 8, hdr.hdr_size);
    put_be64(p + 16, hdr.seqid);
    put_field(p + 24, 48, hdr.label);
    put_field(p + 72, 32, hdr.checksum_alg);
    std::copy(hdr.salt.begin(), hdr.salt.end(), p + 104);
    put_field(p + 168, 40, hdr.uuid);
    put_field(p + 208, 48, hdr.subsystem);
    put_be64(p + 256, secondary ? hdr.hdr_size : 0);
    std::memcpy(p + kBinHeaderSize, json.data(), json.size());
    std::vector<uint8_t> sum;
    if (auto r = header_checksum(reg, hdr.checksum_alg, ConstBytes(p, kBinHeaderSize),
                                 ConstBytes(p + kBinHeaderSize, out.size() - kBinHeaderSize), sum);
        !r)
        return r.error();
    std::copy(sum.begin(), sum.end(), p + 448);
    return out;
}

Result<Metadata> read_copy(Registry& reg, BackingStore& store, uint64_t offset, bool secondary) {
    // Only a failed read is an IoError (read_header words its warning by
    // that); a device too short for the copy is damage, as bad bytes are.
    if (store.size() < offset || store.size() - offset < kBinHeaderSize)
        return bad("the device is too small for a LUKS2 header");
    std::vector<uint8_t> bin(kBinHeaderSize);
    if (Status s = store.read(offset, bin); s != Status::Ok)
        return make_error(Status::IoError, "cannot read the LUKS2 header at byte " + std::to_string(offset) + ": " +
                                               to_string(s));
    Result<BinaryHeader> h = parse_binary_header(bin, secondary, offset);
    if (!h) return h.error();
    if (store.size() - offset < h->hdr_size) return bad("the device is too small for its LUKS2 header");
    std::vector<uint8_t> area(h->hdr_size - kBinHeaderSize);
    if (Status s = store.read(offset + kBinHeaderSize, area); s != Status::Ok)
        return make_error(Status::IoError, "cannot read the LUKS2 JSON area at byte " +
                                               std::to_string(offset + kBinHeaderSize) + ": " + to_string(s));
    // Checksum: the binary header with its csum field zeroed, then the whole
    // JSON area (hdr_checksum_calculate).
    std::memset(bin.data() + 448, 0, 64);
    std::vector<uint8_t> sum;
    if (auto r = header_checksum(reg, h->checksum_alg, bin, area, sum); !r) return r.error();
    const std::size_t n = sum.size();
    if (!std::equal(sum.begin(), sum.end(), h->csum.begin()))
        return bad("checksum mismatch (stored " + hex_csum({h->csum.data(), n}) + ", computed " + hex_csum(sum) + ")");
    return parse_metadata(area, *h);
}

Result<Header> read_header(Registry& reg, BackingStore& store) {
    Header out;
    Result<Metadata> primary = read_copy(reg, store, 0, false);
    std::optional<Result<Metadata>> secondary;
    if (primary) {
        secondary = read_copy(reg, store, primary->hdr.hdr_size, true);
    } else {
        // No usable hdr_size: try every place the secondary can be.
        for (uint64_t off = kMinHdrSize; off <= kMaxHdrSize; off *= 2) {
            secondary = read_copy(reg, store, off, true);
            if (*secondary) break;
        }
    }
    out.primary_ok = primary.ok();
    out.secondary_ok = secondary && secondary->ok();
    if (!out.primary_ok && !out.secondary_ok) {
        std::string why = "primary header: " + primary.error().message;
        if (secondary) why += "; secondary header: " + secondary->error().message;
        const std::string name = store.name().empty() ? "" : store.name() + " ";
        return bad("Device " + name + "is not a valid LUKS device (" + why + ").");
    }
    if (out.primary_ok && out.secondary_ok) {
        // Of two good copies the higher seqid is current (an interrupted
        // update wrote only the primary).
        const bool use_secondary = secondary->value().hdr.seqid > primary->hdr.seqid;
        if (secondary->value().hdr.seqid != primary->hdr.seqid)
            out.warnings.push_back(std::string("LUKS2 header copies differ in seqid; using the ") +
                                   (use_secondary ? "secondary" : "primary") + " (newer) copy.");
        out.md = use_secondary ? std::move(secondary->value()) : std::move(primary.value());
        return out;
    }
    const bool use_primary = out.primary_ok;
    const Error& lost = use_primary ? secondary->error() : primary.error();
    const std::string which = use_primary ? "secondary" : "primary";
    const std::string other = use_primary ? "primary" : "secondary";
    // A read that failed (EIO from a disk or an NBD server) says nothing of
    // the bytes: the copy may be intact, and repair is no answer to it.
    if (lost.status == Status::IoError)
        out.warnings.push_back("WARNING: reading the " + which + " LUKS2 header failed (" + lost.message +
                               "); using the " + other + " header.");
    else
        out.warnings.push_back("WARNING: the " + which + " LUKS2 header is damaged (" + lost.message + "); using the " +
                               other + " header. cryptsetup repair restores it.");
    out.md = use_primary ? std::move(primary.value()) : std::move(secondary->value());
    return out;
}

Result<void> check_requirements(const Metadata& md) {
    for (const std::string& r : md.config.requirements) {
        if (r == "offline-reencrypt" || r.rfind("online-reencrypt", 0) == 0) {
            // cryptsetup refuses a device with an integrity profile, so it
            // is no way to finish one.
            const bool integrity = std::any_of(md.segments.begin(), md.segments.end(),
                                               [](const auto& s) { return s.second.integrity.has_value(); });
            return make_error(Status::Unsupported,
                              "The device is marked for LUKS2 reencryption (requirement " + r + "); finish it first with " +
                                  (integrity ? "blkcrypt reencrypt --resume-only (cryptsetup cannot reencrypt a "
                                               "device with an integrity profile)."
                                             : "blkcrypt reencrypt --resume-only or cryptsetup reencrypt --resume-only."));
        }
        return make_error(Status::Unsupported, "Unmet LUKS2 requirements detected (" + r + ").");
    }
    return {};
}

// Decimal digits only, no sign, no spaces, within uint64 (json_str_to_uint64
// with the "numbered" check).
std::optional<uint64_t> detail::parse_u64(std::string_view s) {
    if (s.empty() || s.size() > 20) return std::nullopt;
    uint64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return std::nullopt;
        const uint64_t d = static_cast<uint64_t>(c - '0');
        if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) return std::nullopt;
        v = v * 10 + d;
    }
    return v;
}

}  // namespace blkcrypt::luks::luks2
