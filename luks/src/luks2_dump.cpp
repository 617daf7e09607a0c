// `cryptsetup luksDump` for LUKS2 (cryptsetup 2.6: LUKS2_hdr_dump and the
// keyslot/digest/token dump handlers), and --dump-json-metadata, which is
// json-c's pretty printer over the stored JSON.
#include <blkcrypt/luks/luks2.hpp>
#include <blkcrypt/json_string.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

namespace blkcrypt::luks::luks2 {

namespace {

using json = nlohmann::ordered_json;

void appendf(std::string& out, const char* fmt, auto... args) {
    char buf[512];
    const int n = std::snprintf(buf, sizeof buf, fmt, args...);
    if (n > 0) out.append(buf, std::min<std::size_t>(static_cast<std::size_t>(n), sizeof buf - 1));
}

// hexprint_base64: 16 bytes a line, continuation lines indented.
void hexprint(std::string& out, const std::vector<uint8_t>& b, const char* line_sep) {
    for (std::size_t i = 0; i < b.size(); ++i) {
        if (i && i % 16 == 0) {
            out += "\n\t";
            out += line_sep;
        }
        appendf(out, "%02x ", b[i]);
    }
    out += "\n";
}

const char* priority_name(int p) {
    switch (p) {
        case 0: return "ignored";
        case 1: return "normal";
        case 2: return "preferred";
        default: return "invalid";
    }
}

void json_c_pretty(std::string& out, const json& v, int depth) {
    const auto indent = [&](int d) { out.append(static_cast<std::size_t>(2 * d), ' '); };
    if (v.is_object()) {
        out += '{';
        bool first = true;
        for (auto it = v.begin(); it != v.end(); ++it) {
            if (!first) out += ',';
            first = false;
            out += '\n';
            indent(depth + 1);
            append_json_string(out, it.key());
            out += ':';
            json_c_pretty(out, *it, depth + 1);
        }
        out += '\n';
        indent(depth);
        out += '}';
    } else if (v.is_array()) {
        out += '[';
        bool first = true;
        for (const json& e : v) {
            if (!first) out += ',';
            first = false;
            out += '\n';
            indent(depth + 1);
            json_c_pretty(out, e, depth + 1);
        }
        out += '\n';
        indent(depth);
        out += ']';
    } else if (v.is_string()) {
        append_json_string(out, v.get_ref<const std::string&>());
    } else {
        out += v.dump();  // numbers, booleans, null print alike
    }
}

}  // namespace

std::string dump(const Metadata& md) {
    std::string o;
    o += "LUKS header information\n";
    o += "Version:       \t2\n";
    appendf(o, "Epoch:         \t%llu\n", static_cast<unsigned long long>(md.hdr.seqid));
    appendf(o, "Metadata area: \t%llu [bytes]\n", static_cast<unsigned long long>(md.metadata_size()));
    appendf(o, "Keyslots area: \t%llu [bytes]\n", static_cast<unsigned long long>(md.config.keyslots_size));
    o += "UUID:          \t" + (md.hdr.uuid.empty() ? std::string("(no UUID)") : md.hdr.uuid) + "\n";
    o += "Label:         \t" + (md.hdr.label.empty() ? std::string("(no label)") : md.hdr.label) + "\n";
    o += "Subsystem:     \t" + (md.hdr.subsystem.empty() ? std::string("(no subsystem)") : md.hdr.subsystem) + "\n";

    o += "Flags:       \t";
    for (const std::string& f : md.config.flags) o += f + " ";
    o += md.config.flags.empty() ? "(no flags)" : "";
    o += "\n";
    o += md.config.requirements.empty() ? "\n" : "";
    if (!md.config.requirements.empty()) {
        o += "Requirements:\t";
        for (const std::string& r : md.config.requirements) o += r + " ";
        o += "\n\n";
    }

    o += "Data segments:\n";
    for (const auto& [id, s] : md.segments) {
        appendf(o, "  %d: %s\n", id, s.type.c_str());
        appendf(o, "\toffset: %llu [bytes]\n", static_cast<unsigned long long>(s.offset));
        if (s.size) appendf(o, "\tlength: %llu [bytes]\n", static_cast<unsigned long long>(*s.size));
        else o += "\tlength: (whole device)\n";
        if (s.type == "crypt") {
            o += "\tcipher: " + s.encryption + "\n";
            appendf(o, "\tsector: %u [bytes]\n", s.sector_size);
            if (s.integrity) o += "\tintegrity: " + s.integrity->type + "\n";
        }
        if (!s.flags.empty()) {
            o += "\tflags : " + s.flags[0];
            for (std::size_t i = 1; i < s.flags.size(); ++i) o += ", " + s.flags[i];
            o += "\n";
        }
        o += "\n";
    }

    o += "Keyslots:\n";
    for (const auto& [id, k] : md.keyslots) {
        const bool bound = md.digest_for_keyslot(id, 0) >= 0;
        appendf(o, "  %d: %s%s\n", id, k.type.c_str(), bound ? "" : " (unbound)");
        appendf(o, "\tKey:        %u bits\n", k.key_size * 8);
        appendf(o, "\tPriority:   %s\n", priority_name(k.priority));
        if (k.type == "luks2") {
            o += "\tCipher:     " + k.area_encryption + "\n";
            appendf(o, "\tCipher key: %u bits\n", k.area_key_size * 8);
            o += "\tPBKDF:      " + k.kdf.type + "\n";
            if (k.kdf.type == "pbkdf2") {
                o += "\tHash:       " + k.kdf.hash + "\n";
                appendf(o, "\tIterations: %u\n", k.kdf.iterations);
            } else {
                appendf(o, "\tTime cost:  %u\n", k.kdf.time);
                appendf(o, "\tMemory:     %u\n", k.kdf.memory);
                appendf(o, "\tThreads:    %u\n", k.kdf.cpus);
            }
            o += "\tSalt:       ";
            hexprint(o, k.kdf.salt, "            ");
            appendf(o, "\tAF stripes: %u\n", k.stripes);
            o += "\tAF hash:    " + k.af_hash + "\n";
            appendf(o, "\tArea offset:%llu [bytes]\n", static_cast<unsigned long long>(k.area_offset));
            appendf(o, "\tArea length:%llu [bytes]\n", static_cast<unsigned long long>(k.area_size));
        }
        for (const auto& [did, d] : md.digests)
            for (int ks : d.keyslots)
                if (ks == id) appendf(o, "\tDigest ID:  %d\n", did);
    }

    o += "Tokens:\n";
    for (const auto& [id, t] : md.tokens) {
        appendf(o, "  %d: %s\n", id, t.type.c_str());
        if (t.type == "luks2-keyring") {
            json j = json::parse(t.json, nullptr, false);
            if (j.is_object() && j.contains("key_description") && j["key_description"].is_string())
                o += "\tKey description: " + j["key_description"].get<std::string>() + "\n";
        }
        for (int ks : t.keyslots) appendf(o, "\tKeyslot:    %d\n", ks);
    }

    o += "Digests:\n";
    for (const auto& [id, d] : md.digests) {
        appendf(o, "  %d: %s\n", id, d.type.c_str());
        if (d.type == "pbkdf2") {
            o += "\tHash:       " + d.hash + "\n";
            appendf(o, "\tIterations: %u\n", d.iterations);
            o += "\tSalt:       ";
            hexprint(o, d.salt, "            ");
            o += "\tDigest:     ";
            hexprint(o, d.digest, "            ");
        }
    }
    return o;
}

std::string dump_json(const Metadata& md) {
    json j = json::parse(md.json, nullptr, false);
    std::string out;
    json_c_pretty(out, j, 0);
    return out;  // cryptsetup prints no newline after it
}

}  // namespace blkcrypt::luks::luks2
