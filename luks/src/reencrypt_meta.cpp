// LUKS2 reencryption metadata: parse and check it as cryptsetup 2.6.1 does
// (luks2_keyslot_reenc.c reenc_keyslot_validate, luks2_reencrypt.c
// LUKS2_reencrypt_status, luks2_reencrypt_digest.c), and write each stage
// of a forward re-key in the same form.
#include "luks2_internal.hpp"

#include <blkcrypt/base64.hpp>
#include <blkcrypt/dm/plain_key.hpp>
#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/kdf.hpp>
#include <blkcrypt/luks/reencrypt.hpp>
#include <blkcrypt/random.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>

namespace blkcrypt::luks::luks2 {

namespace {

using json = nlohmann::ordered_json;

Error bad(std::string msg) { return make_error(Status::Invalid, std::move(msg)); }

constexpr const char* kInvalidMeta = "Reencryption metadata is invalid.";

bool has_flag(const Segment& s, std::string_view f) { return std::count(s.flags.begin(), s.flags.end(), f) > 0; }

bool pow2(uint64_t v) { return v && !(v & (v - 1)); }

int digest_of_segment(const Metadata& md, int seg) {
    for (const auto& [id, d] : md.digests)
        if (std::count(d.segments.begin(), d.segments.end(), seg)) return id;
    return -1;
}

// One field of the verification data (luks2_reencrypt_digest.c sr()):
// strings of 1..64 bytes raw, 64-bit numbers as big-endian from their
// digit strings, "dynamic" sizes as the word, 32-bit JSON integers
// big-endian. Anything else makes the data unbuildable.
enum class F { Str, U64, X64, U32 };

bool put(std::vector<uint8_t>& out, const json& o, const char* key, F f) {
    if (!o.is_object()) return false;
    auto it = o.find(key);
    if (it == o.end()) return false;
    const json& v = *it;
    uint8_t be[8];
    switch (f) {
    case F::Str: {
        if (!v.is_string()) return false;
        const std::string& s = v.get_ref<const std::string&>();
        if (s.empty() || s.size() > 64) return false;
        out.insert(out.end(), s.begin(), s.end());
        return true;
    }
    case F::X64:
        if (v.is_string() && v.get_ref<const std::string&>() == "dynamic") {
            const std::string& s = v.get_ref<const std::string&>();
            out.insert(out.end(), s.begin(), s.end());
            return true;
        }
        [[fallthrough]];
    case F::U64: {
        if (!v.is_string()) return false;
        auto n = detail::parse_u64(v.get_ref<const std::string&>());
        if (!n) return false;
        put_be64(be, *n);
        out.insert(out.end(), be, be + 8);
        return true;
    }
    case F::U32: {
        if (!v.is_number_integer()) return false;
        const int64_t n = v.get<int64_t>();
        if (n < 0 || n > static_cast<int64_t>(std::numeric_limits<uint32_t>::max())) return false;
        put_be32(be, static_cast<uint32_t>(n));
        out.insert(out.end(), be, be + 4);
        return true;
    }
    }
    return false;
}

bool put_segment(std::vector<uint8_t>& out, const json& s) {
    if (!s.is_object() || !s.contains("type") || !s["type"].is_string()) return false;
    const std::string& type = s["type"].get_ref<const std::string&>();
    if (type != "crypt" && type != "linear") return false;
    if (!put(out, s, "type", F::Str) || !put(out, s, "offset", F::U64) || !put(out, s, "size", F::X64)) return false;
    if (type == "linear") return true;
    return put(out, s, "iv_tweak", F::U64) && put(out, s, "encryption", F::Str) && put(out, s, "sector_size", F::U32);
}

bool put_keyslot(std::vector<uint8_t>& out, const json& ks) {
    if (!ks.is_object() || !ks.contains("area")) return false;
    const json& area = ks["area"];
    if (!area.is_object() || !area.contains("type") || !area["type"].is_string()) return false;
    const std::string& type = area["type"].get_ref<const std::string&>();
    if (!put(out, ks, "mode", F::Str) || !put(out, ks, "direction", F::Str) || !put(out, area, "type", F::Str) ||
        !put(out, area, "offset", F::U64) || !put(out, area, "size", F::U64))
        return false;
    if (type == "checksum" || type == "datashift-checksum")
        if (!put(out, area, "hash", F::Str) || !put(out, area, "sector_size", F::U32)) return false;
    if (type == "datashift" || type == "datashift-journal" || type == "datashift-checksum")
        if (!put(out, area, "shift_size", F::U64)) return false;
    return true;
}

Result<bool> pbkdf2_digest_matches(Registry& reg, const Digest& d, ConstBytes data) {
    if (d.type != "pbkdf2") return bad("unknown digest type " + d.type);
    SecureBuffer out(d.digest.size());
    if (auto r = pbkdf2(reg, dm::plain_hash_alg(d.hash), data, d.salt, d.iterations, out.span()); !r) return r.error();
    uint8_t diff = 0;
    for (std::size_t i = 0; i < out.size(); ++i) diff |= static_cast<uint8_t>(out[i] ^ d.digest[i]);
    return diff == 0;
}

}  // namespace

namespace detail {

// A pbkdf2 digest object over data (LUKS2_digest_create): 32-byte salt,
// the hash's full output.
Result<json> pbkdf2_digest(Registry& reg, const std::string& hash, uint32_t iterations, ConstBytes data,
                           const std::vector<std::string>& keyslots, const std::vector<std::string>& segments) {
    Result<Shash> h = Shash::alloc(reg, dm::plain_hash_alg(hash));
    if (!h) return h.error();
    std::vector<uint8_t> salt(32), dig(h->digestsize());
    if (auto r = random_bytes(salt); !r) return r.error();
    if (auto r = pbkdf2(reg, dm::plain_hash_alg(hash), data, salt, iterations, dig); !r) return r.error();
    json d;
    d["type"] = "pbkdf2";
    d["keyslots"] = keyslots;
    d["segments"] = segments;
    d["hash"] = hash;
    d["iterations"] = iterations;
    d["salt"] = base64_encode(salt);
    d["digest"] = base64_encode(dig);
    return d;
}


// The raw JSON of md: the serialisation takes the stored JSON types.
Result<json> raw_json(const Metadata& md) {
    json root = json::parse(md.json, nullptr, /*allow_exceptions=*/false);
    if (root.is_discarded() || !root.is_object()) return bad("LUKS2 metadata is not a JSON object");
    return root;
}

int lowest_free(const json& section, int max) {
    for (int i = 0; i < max; ++i)
        if (!section.contains(std::to_string(i))) return i;
    return -1;
}

// md with new JSON text, parsed and checked as a reader would.
Result<Metadata> reparse(const Metadata& md, const std::string& text) {
    std::vector<uint8_t> area(static_cast<std::size_t>(md.hdr.hdr_size - kBinHeaderSize), 0);
    if (text.size() >= area.size()) return bad("the LUKS2 metadata does not fit its area");
    std::copy(text.begin(), text.end(), area.begin());
    return parse_metadata(area, md.hdr);
}

// The largest free gap of the keyslots area (LUKS2_find_area_max_gap),
// given the keyslot areas in use.
static std::pair<uint64_t, uint64_t> max_gap(const Metadata& md, std::vector<std::pair<uint64_t, uint64_t>> used) {
    std::sort(used.begin(), used.end());
    uint64_t at = 2 * md.metadata_size(), best_off = 0, best_len = 0;
    const uint64_t end = md.hdr_and_areas_size();
    for (const auto& [b, e] : used) {
        if (b > at && b - at > best_len) best_off = at, best_len = b - at;
        at = std::max(at, e);
    }
    if (end > at && end - at > best_len) best_off = at, best_len = end - at;
    return {best_off, best_len};
}

Result<int> add_reencrypt_keyslot(json& root, const Metadata& md, std::vector<std::pair<uint64_t, uint64_t>> used,
                                  const std::string& resilience, const std::string& hash, uint32_t checksum_sector_size,
                                  const std::string& mode, const std::string& direction) {
    for (const auto& [id, ks] : md.keyslots) used.emplace_back(ks.area_offset, ks.area_offset + ks.area_size);
    const auto [area_off, area_len] = max_gap(md, std::move(used));
    if (area_len == 0) return bad("Not enough free keyslot area for reencryption.");
    const int reenc_ks = lowest_free(root["keyslots"], kMaxKeyslots);
    if (reenc_ks < 0) return bad("no free keyslot for the reencrypt keyslot");
    json area = {{"offset", std::to_string(area_off)}, {"size", std::to_string(area_len)}, {"type", resilience}};
    if (resilience == "checksum" || resilience == "datashift-checksum") {
        area["hash"] = hash;
        area["sector_size"] = checksum_sector_size;
    }
    root["keyslots"][std::to_string(reenc_ks)] =
        json{{"area", area}, {"type", "reencrypt"}, {"key_size", 1}, {"mode", mode}, {"direction", direction},
             {"priority", 0}};
    return reenc_ks;
}

Result<void> add_reencrypt_digest(Registry& reg, json& root, const Metadata& md, int reenc_ks, uint32_t iterations,
                                  ConstBytes vk_old, ConstBytes vk_new) {
    Result<Metadata> staged = reparse(md, root.dump());
    if (!staged) return staged.error();
    Result<std::optional<ReencryptState>> st = reencrypt_state(*staged);
    if (!st) return st.error();
    if (!*st) return bad("the reencryption metadata did not parse");
    Result<SecureBuffer> vdata = reencrypt_verification_data(*staged, **st, vk_old, vk_new);
    if (!vdata) return vdata.error();
    const int reenc_digest = lowest_free(root["digests"], kMaxDigests);
    if (reenc_digest < 0) return bad("no free digest");
    Result<json> rd = pbkdf2_digest(reg, "sha256", iterations, *vdata, {std::to_string(reenc_ks)}, {});
    if (!rd) return rd.error();
    root["digests"][std::to_string(reenc_digest)] = *rd;
    return {};
}

Result<ReencryptState> persisted_state(Registry& reg, BackingStore& header) {
    Result<Header> back = read_header(reg, header);
    if (!back) return back.error();
    Result<std::optional<ReencryptState>> st = reencrypt_state(back->md);
    if (!st) return st.error();
    if (!*st) return bad("the reencryption metadata did not persist");
    return std::move(**st);
}

Result<void> read_reencryption(Registry& reg, BackingStore& header, Metadata& md, ReencryptState& st) {
    Result<Header> h = read_header(reg, header);
    if (!h) return h.error();
    md = std::move(h->md);
    Result<std::optional<ReencryptState>> s = reencrypt_state(md);
    if (!s) return s.error();
    if (!*s) return bad("Device is not marked for LUKS2 reencryption.");
    st = std::move(**s);
    return {};
}

}  // namespace detail

using detail::pbkdf2_digest;
using detail::raw_json;
using detail::lowest_free;
using detail::reparse;

Result<std::optional<ReencryptState>> reencrypt_state(const Metadata& md) {
    int version = 0;
    for (const std::string& r : md.config.requirements) {
        if (r == "online-reencrypt") version = 1;
        else if (r == "online-reencrypt-v2") version = 2;
        else if (r == "online-reencrypt-v3") version = 3;
        else if (r.rfind("online-reencrypt", 0) == 0)
            return make_error(Status::Unsupported, "Unmet LUKS2 requirements detected (" + r + ").");
    }
    int keyslot = -1;
    for (const auto& [id, ks] : md.keyslots) {
        if (ks.type != "reencrypt") continue;
        if (keyslot >= 0) return bad("more than one reencrypt keyslot");
        keyslot = id;
    }
    if (version == 0 && keyslot < 0) return std::optional<ReencryptState>{};
    if (version == 0) return bad("reencrypt keyslot " + std::to_string(keyslot) + " without an online-reencrypt requirement");
    if (keyslot < 0) return bad("an online-reencrypt requirement without a reencrypt keyslot");

    Result<json> root = raw_json(md);
    if (!root) return root.error();
    const json& k = (*root)["keyslots"][std::to_string(keyslot)];
    ReencryptState st;
    st.version = version;
    st.keyslot = keyslot;
    const std::string where = "reencrypt keyslot " + std::to_string(keyslot);
    if (!k.contains("key_size") || !k["key_size"].is_number_integer() || k["key_size"].get<int64_t>() != 1)
        return bad(where + ": key_size must be 1");
    if (!k.contains("mode") || !k["mode"].is_string() || !k.contains("direction") || !k["direction"].is_string())
        return bad(where + " needs mode and direction strings");
    st.mode = k["mode"].get<std::string>();
    st.direction = k["direction"].get<std::string>();
    if (st.mode != "reencrypt" && st.mode != "encrypt" && st.mode != "decrypt")
        return bad(where + ": unknown mode " + st.mode);
    if (st.direction != "forward" && st.direction != "backward")
        return bad(where + ": unknown direction " + st.direction);
    const json& area = k["area"];
    if (!area.is_object() || !area.contains("type") || !area["type"].is_string()) return bad(where + ": area needs a type");
    st.area_type = area["type"].get<std::string>();
    const Keyslot& ks = md.keyslots.at(keyslot);
    st.area_offset = ks.area_offset;
    st.area_size = ks.area_size;
    const bool checksum = st.area_type == "checksum" || st.area_type == "datashift-checksum";
    const bool datashift = st.area_type.rfind("datashift", 0) == 0;
    if (!checksum && !datashift && st.area_type != "journal" && st.area_type != "none")
        return bad(where + ": unknown area type " + st.area_type);
    if (checksum) {
        if (!area.contains("hash") || !area["hash"].is_string() || !area.contains("sector_size") ||
            !area["sector_size"].is_number_integer())
            return bad(where + ": a checksum area needs hash and sector_size");
        const int64_t ss = area["sector_size"].get<int64_t>();
        if (ss < 512 || ss > std::numeric_limits<uint32_t>::max() || !pow2(static_cast<uint64_t>(ss)))
            return bad(where + ": the checksum sector_size must be a power of two of at least 512");
        st.hash = area["hash"].get<std::string>();
        st.hash_block = static_cast<uint32_t>(ss);
    }
    if (datashift && st.area_type != "datashift-checksum" && st.area_type != "datashift-journal" &&
        st.area_type != "datashift")
        return bad(where + ": unknown area type " + st.area_type);
    if (datashift) {
        std::optional<uint64_t> shift;
        if (area.contains("shift_size") && area["shift_size"].is_string()) shift = detail::parse_u64(area["shift_size"].get<std::string>());
        if (!shift || *shift == 0 || *shift % 512) return bad(where + ": shift_size must be a non-zero multiple of 512");
        st.shift_size = *shift;
    }

    for (const auto& [seg_id, seg] : md.segments) {
        // Named copies: clang cannot capture structured bindings.
        const int id = seg_id;
        const Segment& s = seg;
        auto mark = [&](const char* flag, int& slot) -> Result<void> {
            if (!has_flag(s, flag)) return {};
            if (slot >= 0) return bad(std::string("two segments flagged ") + flag);
            slot = id;
            return {};
        };
        if (auto r = mark("backup-previous", st.seg_previous); !r) return r.error();
        if (auto r = mark("backup-final", st.seg_final); !r) return r.error();
        if (auto r = mark("backup-moved-segment", st.seg_moved); !r) return r.error();
        if (has_flag(s, "in-reencryption")) st.crashed = true;
    }
    if (st.seg_previous < 0 || st.seg_final < 0) return bad("reencryption without backup-previous and backup-final segments");
    for (int seg : {st.seg_previous, st.seg_final, st.seg_moved}) {
        if (seg < 0) continue;
        const Segment& s = md.segments.at(seg);
        if (s.type != "crypt" && s.type != "linear") return bad("backup segment " + std::to_string(seg) + " of type " + s.type);
    }
    st.digest_old = md.segments.at(st.seg_previous).type == "crypt" ? digest_of_segment(md, st.seg_previous) : -1;
    st.digest_new = md.segments.at(st.seg_final).type == "crypt" ? digest_of_segment(md, st.seg_final) : -1;
    if (st.digest_old < 0 && st.digest_new < 0) return bad("reencryption between two linear segments");
    // Live segments of one key must name that key's cipher and sector size.
    for (const auto& [id, s] : md.segments) {
        if (s.type != "crypt" || id == st.seg_previous || id == st.seg_final || id == st.seg_moved) continue;
        const int d = digest_of_segment(md, id);
        const Segment* ref = d >= 0 && d == st.digest_old ? &md.segments.at(st.seg_previous)
                             : d >= 0 && d == st.digest_new ? &md.segments.at(st.seg_final)
                                                            : nullptr;
        if (!ref) return bad("segment " + std::to_string(id) + " belongs to neither key of the reencryption");
        if (has_flag(s, "in-reencryption")) continue;
        // --keep-key: one digest for both forms, so either backup may match.
        const Segment& fin = md.segments.at(st.seg_final);
        if (st.digest_old == st.digest_new && s.encryption == fin.encryption && s.sector_size == fin.sector_size)
            continue;
        if (s.encryption != ref->encryption || s.sector_size != ref->sector_size)
            return bad("segment " + std::to_string(id) + " differs from its backup segment's cipher");
    }
    for (const auto& [id, d] : md.digests)
        if (d.keyslots.size() == 1 && d.keyslots[0] == keyslot) st.digest = id;
    if (st.version == 1 || st.digest < 0) st.repair_needed = true;
    return std::optional<ReencryptState>(std::move(st));
}

Result<SecureBuffer> reencrypt_verification_data(const Metadata& md, const ReencryptState& st, ConstBytes vk_old,
                                                 ConstBytes vk_new) {
    if (st.version < 1 || st.version > 0xff - 0x30) return bad(kInvalidMeta);
    if (st.digest_old >= 0 && vk_old.empty()) return bad("the old volume key is needed");
    if (st.digest_new >= 0 && st.digest_new != st.digest_old && vk_new.empty()) return bad("the new volume key is needed");
    Result<json> root = raw_json(md);
    if (!root) return root.error();
    std::vector<uint8_t> meta;
    if (!put_keyslot(meta, (*root)["keyslots"][std::to_string(st.keyslot)])) return bad(kInvalidMeta);
    const json& segs = (*root)["segments"];
    for (int seg : {st.seg_previous, st.seg_final, st.seg_moved}) {
        if (seg < 0) continue;
        if (!put_segment(meta, segs[std::to_string(seg)])) return bad(kInvalidMeta);
    }
    std::size_t n = 2 + meta.size();
    if (st.digest_old >= 0) n += vk_old.size();
    if (st.digest_new >= 0 && st.digest_new != st.digest_old) n += vk_new.size();
    SecureBuffer out(n);
    std::size_t at = 0;
    out[at++] = 0x76;
    out[at++] = static_cast<uint8_t>(0x30 + st.version);
    auto append = [&](ConstBytes b) {
        std::copy(b.begin(), b.end(), out.data() + at);
        at += b.size();
    };
    if (st.digest_old >= 0) append(vk_old);
    if (st.digest_new >= 0 && st.digest_new != st.digest_old) append(vk_new);
    append(meta);
    secure_wipe(meta.data(), meta.size());
    return out;
}

Result<void> reencrypt_verify(Registry& reg, const Metadata& md, const ReencryptState& st, ConstBytes vk_old,
                              ConstBytes vk_new) {
    if (st.digest < 0) return bad(std::string(kInvalidMeta) + " (no reencryption digest: cryptsetup repair rewrites it)");
    Result<SecureBuffer> data = reencrypt_verification_data(md, st, vk_old, vk_new);
    if (!data) return data.error();
    Result<bool> ok = pbkdf2_digest_matches(reg, md.digests.at(st.digest), *data);
    if (!ok) return ok.error();
    if (!*ok) return bad(kInvalidMeta);
    return {};
}

Result<ReencryptKeys> reencrypt_unlock(Registry& reg, BackingStore& header, const Metadata& md,
                                       const ReencryptState& st, ConstBytes passphrase) {
    ReencryptKeys keys;
    bool any = false;
    for (const auto& [id, ks] : md.keyslots) {
        if (ks.type != "luks2") continue;
        const int d = md.digest_for_keyslot(id);
        if (d < 0) continue;
        if ((d == st.digest_old && !keys.old_key.empty()) || (d == st.digest_new && !keys.new_key.empty())) continue;
        if (d != st.digest_old && d != st.digest_new) continue;
        Result<SecureBuffer> k = unlock_keyslot(reg, header, md, id, passphrase);
        if (!k) {
            if (k.error().status == Status::NoKey) continue;
            return k.error();
        }
        any = true;
        if (d == st.digest_old && d == st.digest_new) keys.new_key.assign(k->span());  // --keep-key
        if (d == st.digest_old) keys.old_key = std::move(*k);
        else keys.new_key = std::move(*k);
    }
    if (!any) return make_error(Status::NoKey, "No key available with this passphrase.");
    return keys;
}

namespace {

// A re-key's two backups after the data segment: backup-previous, the data
// as it is; backup-final, the same under the new cipher and sector size.
void add_rekey_backups(json& root, const std::string& cipher, uint32_t sector_size) {
    json prev = root["segments"]["0"], fin = prev;
    prev["flags"] = json::array({"backup-previous"});
    fin["encryption"] = cipher;
    fin["sector_size"] = sector_size;
    fin["flags"] = json::array({"backup-final"});
    root["segments"]["1"] = std::move(prev);
    root["segments"]["2"] = std::move(fin);
}

// reencrypt_init's header for --keep-key (cryptsetup's, checked live): no
// new keyslot or digest; the reencrypt keyslot over the largest keyslot-area
// gap, and backup-final on the old key's digest beside segment 0 and
// backup-previous; the verification digest then holds the key once.
Result<ReencryptState> init_keep_key(Registry& reg, BackingStore& header, const Metadata& md, json root,
                                     ConstBytes key, const std::string& cipher, uint32_t sector_size,
                                     const ReencryptInitOptions& o) {
    const Segment& old = md.segments.at(0);
    Result<int> reenc_ks = detail::add_reencrypt_keyslot(root, md, {}, o.resilience, o.hash,
                                                         std::max({4096u, sector_size, old.sector_size}),
                                                         "reencrypt", "forward");
    if (!reenc_ks) return reenc_ks.error();
    add_rekey_backups(root, cipher, sector_size);
    const int digest = digest_of_segment(md, 0);
    if (digest < 0) return bad("the data segment has no digest");
    root["digests"][std::to_string(digest)]["segments"] = json::array({"0", "1", "2"});
    root["config"]["requirements"]["mandatory"] = json::array({"online-reencrypt-v2"});
    if (auto r = detail::add_reencrypt_digest(reg, root, md, *reenc_ks, o.digest_iterations, key, key); !r)
        return r.error();
    if (auto r = write_metadata(reg, header, md, root.dump()); !r) return r.error();
    return detail::persisted_state(reg, header);
}

}  // namespace

Result<ReencryptState> reencrypt_init(Registry& reg, BackingStore& header, ConstBytes passphrase,
                                      const ReencryptInitOptions& o) {
    Result<Header> h = read_header(reg, header);
    if (!h) return h.error();
    const Metadata& md = h->md;
    if (!h->primary_ok || !h->secondary_ok)
        return bad("a LUKS2 header copy is damaged; repair it (cryptsetup repair) before reencrypting");
    if (auto r = check_requirements(md); !r) return r.error();
    if (md.segments.size() != 1 || !md.segments.count(0) || md.segments.at(0).type != "crypt")
        return bad("reencryption needs one crypt data segment");
    const Segment& old = md.segments.at(0);
    if (o.resilience != "checksum" && o.resilience != "journal" && o.resilience != "none")
        return bad("unknown resilience " + o.resilience + " for a re-key (checksum, journal, none)");
    Result<luks::Volume> vol = open(reg, header, passphrase);
    if (!vol) return vol.error();
    const SecureBuffer& old_key = vol->table.key;

    const std::string cipher = o.cipher.empty() ? old.encryption : o.cipher;
    const uint32_t key_size = o.key_size ? o.key_size : static_cast<uint32_t>(old_key.size());
    const uint32_t sector_size = o.sector_size ? o.sector_size : old.sector_size;
    if (!pow2(sector_size) || sector_size < 512 || sector_size > 4096) return bad("sector size must be 512..4096, a power of two");
    if (old.size.value_or(0) % sector_size) return bad("the data segment is not a multiple of the new sector size");
    if (old.integrity) {
        // The dm-integrity device under the data stays as it is (its block
        // and tag size were fixed when it was formatted): the new cipher must
        // fit its tags, and only the journal keeps a block's data and tag
        // together through a crash.
        if (o.resilience == "checksum")
            return make_error(Status::Unsupported,
                              "Resilience checksum cannot protect a device with an integrity profile (a block whose "
                              "new data landed without its tag, which holds a random IV, is neither the old nor the "
                              "new one): use --resilience journal.");
        if (sector_size != old.sector_size)
            return make_error(Status::Unsupported, "The sector size of a device with an integrity profile is its "
                                                   "dm-integrity block size, fixed at format: it cannot change.");
        auto po = luks::integrity_profile(old.encryption, old.integrity->type);
        if (!po) return po.error();
        auto pn = luks::integrity_profile(cipher, old.integrity->type);
        if (!pn) return pn.error();
        if (pn->tag_size != po->tag_size)
            return make_error(Status::Unsupported,
                              "Cipher " + cipher + " with integrity " + old.integrity->type + " needs " +
                                  std::to_string(pn->tag_size) + "-byte tags; the dm-integrity device keeps " +
                                  std::to_string(po->tag_size) + "-byte ones (format a new device to change them).");
        if (key_size <= old.integrity->key_size.value_or(pn->key_size))
            return bad("the new volume key is too short for integrity " + old.integrity->type);
    }
    if (o.keep_key) {
        if (o.key_size || !o.new_key.empty()) return bad("--keep-key keeps the volume key: no new key or key size");
        if (cipher == old.encryption && sector_size == old.sector_size)
            return bad("No data segment parameters changed. Reencryption aborted.");
        // The kept key must suit the new cipher (cryptsetup's own check).
        Segment probe = old;
        probe.encryption = cipher;
        probe.sector_size = sector_size;
        std::vector<uint8_t> block(sector_size);
        if (!probe.integrity && !detail::crypt_mem(reg, probe, old_key, 0, block, true))
            return make_error(Status::Unsupported, "Unable to use cipher specification " + cipher + " for LUKS2.");
    }
    SecureBuffer new_key(key_size);
    if (o.keep_key) {
        new_key.assign(old_key);
    } else if (!o.new_key.empty()) {
        if (o.new_key.size() != key_size) return bad("the new volume key has the wrong size");
        new_key.assign(o.new_key);
    } else if (auto r = random_bytes(new_key.span()); !r) {
        return r.error();
    }

    Result<json> rootr = raw_json(md);
    if (!rootr) return rootr.error();
    json root = std::move(*rootr);

    if (o.keep_key) return init_keep_key(reg, header, md, std::move(root), old_key, cipher, sector_size, o);

    // The new key's keyslot, in the first gap (as luksAddKey).
    const int new_ks = o.keyslot.keyslot >= 0 ? o.keyslot.keyslot : lowest_free(root["keyslots"], kMaxKeyslots);
    if (new_ks < 0 || new_ks >= kMaxKeyslots || root["keyslots"].contains(std::to_string(new_ks)))
        return bad("no free keyslot for the new volume key");
    Result<uint64_t> gap = detail::keyslot_gap(md, key_size);
    if (!gap) return gap.error();
    // The new keyslot's area is encrypted as the unlocked one's (cryptsetup's
    // set_keyslot_params): the new data cipher may be one the kernel's
    // crypto API, which cryptsetup unlocks keyslots with, lacks.
    const Keyslot& unlocked = md.keyslots.at(vol->keyslot);
    const bool null_area = unlocked.area_encryption.rfind("cipher_null", 0) == 0;
    auto nk = detail::new_keyslot(reg, new_key, passphrase, o.keyslot,
                                  null_area ? "aes-xts-plain64" : unlocked.area_encryption, *gap,
                                  null_area ? 64 : unlocked.area_key_size);
    if (!nk) return nk.error();
    root["keyslots"][std::to_string(new_ks)] = json::parse(nk->first);

    // The reencrypt keyslot over the largest gap left.
    Result<int> reenc_ks =
        detail::add_reencrypt_keyslot(root, md, {{*gap, *gap + nk->second.size()}}, o.resilience, o.hash,
                                      std::max(sector_size, old.sector_size), "reencrypt", "forward");
    if (!reenc_ks) return reenc_ks.error();

    // Segments: the data as it is, then the two backups.
    add_rekey_backups(root, cipher, sector_size);

    const int old_digest = md.digest_for_keyslot(vol->keyslot, 0);
    if (old_digest < 0) return bad("the data segment has no digest");
    root["digests"][std::to_string(old_digest)]["segments"].push_back("1");
    const int new_digest = lowest_free(root["digests"], kMaxDigests);
    if (new_digest < 0) return bad("no free digest");
    Result<json> nd = pbkdf2_digest(reg, "sha256", o.digest_iterations, new_key, {std::to_string(new_ks)}, {"2"});
    if (!nd) return nd.error();
    root["digests"][std::to_string(new_digest)] = *nd;
    root["config"]["requirements"]["mandatory"] = json::array({"online-reencrypt-v2"});

    // The verification digest needs the header as it will be (its backups
    // and keyslot); it is added last, as cryptsetup does.
    if (auto r = detail::add_reencrypt_digest(reg, root, md, *reenc_ks, o.digest_iterations, old_key, new_key); !r)
        return r.error();
    const std::string text = root.dump();

    if (Status s = header.write(*gap, nk->second); s != Status::Ok) return make_error(s, "cannot write the new keyslot");
    if (Status s = header.flush(); s != Status::Ok) return make_error(s, "cannot flush the new keyslot");
    if (auto r = write_metadata(reg, header, md, text); !r) return r.error();
    return detail::persisted_state(reg, header);
}

namespace {

// A segment map as a reencryption step writes it: segments numbered in the
// order added, each on the old and/or the new digest's list, the two backups
// last.
struct SegmentMap {
    json root;       // the header's JSON, its segments replaced by finish()
    json prev, fin;  // the backup segments: the data's old and new form
    uint64_t base = 0, tweak = 0;  // the data's start (bytes) and IV tweak (sectors)
    json out = json::object();
    std::vector<std::string> old_segs, new_segs;

    static Result<SegmentMap> from(const Metadata& md, const ReencryptState& st) {
        Result<json> rootr = raw_json(md);
        if (!rootr) return rootr.error();
        SegmentMap m;
        m.root = std::move(*rootr);
        const json& segs = m.root["segments"];
        m.prev = segs[std::to_string(st.seg_previous)];
        m.fin = segs[std::to_string(st.seg_final)];
        const Segment& p = md.segments.at(st.seg_previous);
        m.base = p.offset;
        m.tweak = p.iv_tweak;
        return m;
    }
    // seg over [off, off + size) (size 0: "dynamic", to the end) with the IV
    // of sector iv; a linear (plaintext) side of --encrypt/--decrypt has none.
    static json live(json seg, uint64_t off, uint64_t size, uint64_t iv) {
        seg.erase("flags");
        seg["offset"] = std::to_string(off);
        seg["size"] = size ? std::to_string(size) : std::string("dynamic");
        if (seg["type"] == "crypt") seg["iv_tweak"] = std::to_string(iv);
        return seg;
    }
    json live_old(uint64_t off, uint64_t size, uint64_t iv) const { return live(prev, off, size, iv); }
    json live_new(uint64_t off, uint64_t size, uint64_t iv) const { return live(fin, off, size, iv); }
    void add(json seg, bool is_new, bool is_old) {
        const std::string k = std::to_string(out.size());
        out[k] = std::move(seg);
        if (is_new) new_segs.push_back(k);
        if (is_old) old_segs.push_back(k);
    }
    // The hotzone: the new form, flagged, on both digests' lists.
    void add_hot(uint64_t off, uint64_t size, uint64_t iv) {
        json h = live_new(off, size, iv);
        h["flags"] = json::array({"in-reencryption"});
        add(std::move(h), true, true);
    }
    // Every segment once, in id order: the one digest of a --keep-key run.
    std::vector<std::string> all_segs() const {
        std::vector<std::string> all;
        for (std::size_t i = 0; i < out.size(); ++i) all.push_back(std::to_string(i));
        return all;
    }
    // The JSON text with this map, then the backups, and the digests'
    // segment lists.
    std::string finish(const ReencryptState& st) {
        add(prev, false, true);
        add(fin, true, false);
        root["segments"] = out;
        for (auto& [k, d] : root["digests"].items()) {
            const int did = std::stoi(k);
            if (did == st.digest_old && did == st.digest_new) d["segments"] = all_segs();  // --keep-key
            else if (did == st.digest_old) d["segments"] = old_segs;
            else if (did == st.digest_new) d["segments"] = new_segs;
        }
        return root.dump();
    }
};

}  // namespace

Result<std::string> reencrypt_progress_json(const Metadata& md, const ReencryptState& st, uint64_t data_size,
                                            uint64_t done, uint64_t hot, bool fixed) {
    if (st.direction != "forward" || st.seg_moved >= 0 || (st.mode == "decrypt" && st.version != 2))
        return make_error(Status::Unsupported, "only a forward reencryption's segment map is written yet");
    if (done > data_size || hot > data_size - done) return bad("reencryption progress past the end of the data");
    if (done % 512 || hot % 512) return bad("reencryption progress must be in 512-byte units");
    Result<SegmentMap> m = SegmentMap::from(md, st);
    if (!m) return m.error();
    SegmentMap& map = *m;
    const uint64_t base = map.base, tweak = map.tweak;
    if (done) map.add(map.live_new(base, done, tweak), true, false);
    if (hot) map.add_hot(base + done, hot, tweak + done / 512);
    if (done + hot < data_size) {
        const Segment& p = md.segments.at(st.seg_previous);
        const uint64_t rest = fixed ? data_size - done - hot : p.size ? *p.size - done - hot : 0;
        map.add(map.live_old(base + done + hot, rest, tweak + (done + hot) / 512), false, true);
    }
    return map.finish(st);
}

Result<std::string> reencrypt_backward_progress_json(const Metadata& md, const ReencryptState& st, uint64_t data_size,
                                                     uint64_t old_end, uint64_t hot) {
    if (st.direction != "backward" || st.seg_moved >= 0)
        return make_error(Status::Unsupported, "not a backward reencryption without a data shift");
    if (old_end > data_size || hot > old_end) return bad("reencryption progress past the end of the data");
    if (old_end % 512 || hot % 512) return bad("reencryption progress must be in 512-byte units");
    Result<SegmentMap> m = SegmentMap::from(md, st);
    if (!m) return m.error();
    SegmentMap& map = *m;
    const uint64_t base = map.base, tweak = map.tweak;
    const uint64_t start = old_end - hot;  // the hotzone's start, the old data's end after it
    if (start) map.add(map.live_old(base, start, tweak), false, true);
    if (hot) map.add_hot(base + start, hot, tweak + start / 512);
    if (old_end < data_size || (!hot && start < data_size)) {
        const uint64_t from = hot ? old_end : start;
        map.add(map.live_new(base + from, 0, tweak + from / 512), true, false);
    }
    return map.finish(st);
}

Result<void> reencrypt_write_progress(Registry& reg, BackingStore& header, const Metadata& md,
                                      const ReencryptState& st, uint64_t data_size, uint64_t done, uint64_t hot,
                                      bool fixed) {
    Result<std::string> text = reencrypt_progress_json(md, st, data_size, done, hot, fixed);
    if (!text) return text.error();
    return write_metadata(reg, header, md, *text);
}

Result<void> reencrypt_finish(Registry& reg, BackingStore& header, const Metadata& md, const ReencryptState& st) {
    if (st.crashed) return bad("Device requires reencryption recovery. Run repair first.");
    Result<json> rootr = raw_json(md);
    if (!rootr) return rootr.error();
    json root = std::move(*rootr);
    json fin = root["segments"][std::to_string(st.seg_final)];
    fin.erase("flags");
    root["segments"] = json{{"0", fin}};
    std::vector<std::pair<uint64_t, uint64_t>> wipe;
    auto drop_digest = [&](int did) {
        if (did < 0) return;
        for (int k : md.digests.at(did).keyslots) {
            const Keyslot& ks = md.keyslots.at(k);
            wipe.emplace_back(ks.area_offset, ks.area_size);
            root["keyslots"].erase(std::to_string(k));
        }
        root["digests"].erase(std::to_string(did));
    };
    if (st.digest_old != st.digest_new) drop_digest(st.digest_old);
    drop_digest(st.digest);
    if (root["keyslots"].contains(std::to_string(st.keyslot))) {
        wipe.emplace_back(st.area_offset, st.area_size);
        root["keyslots"].erase(std::to_string(st.keyslot));
    }
    if (st.digest_new >= 0) root["digests"][std::to_string(st.digest_new)]["segments"] = json::array({"0"});
    json& cfg = root["config"];
    if (cfg.contains("requirements")) {
        json& m = cfg["requirements"]["mandatory"];
        json kept = json::array();
        for (const json& r : m)
            if (!(r.is_string() && r.get<std::string>().rfind("online-reencrypt", 0) == 0)) kept.push_back(r);
        if (kept.empty()) cfg.erase("requirements");
        else m = kept;
    }
    if (auto r = write_metadata(reg, header, md, root.dump()); !r) return r.error();
    std::vector<uint8_t> zeros(64 * 1024);
    for (const auto& [off, len] : wipe) {
        for (uint64_t at = 0; at < len;) {
            const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(zeros.size(), len - at));
            if (Status s = header.write(off + at, ConstBytes(zeros.data(), n)); s != Status::Ok)
                return make_error(s, "cannot wipe the old keyslot areas");
            at += n;
        }
    }
    if (Status s = header.flush(); s != Status::Ok) return make_error(s, "cannot flush the header");
    return {};
}

}  // namespace blkcrypt::luks::luks2
