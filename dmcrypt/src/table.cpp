// Parsing follows drivers/md/dm-crypt.c (crypt_ctr, crypt_ctr_cipher_old/new,
// crypt_ctr_optional) so that a table the kernel accepts means the same here,
// and the error messages use the kernel's words where they exist.
#include <blkcrypt/hex.hpp>
#include <blkcrypt/alg_name.hpp>
#include <blkcrypt/dm/table.hpp>

#include <bit>
#include <charconv>
#include <vector>

namespace blkcrypt::dm {
namespace {

Error bad(std::string msg) { return make_error(Status::Invalid, std::move(msg)); }

constexpr uint64_t kMaxTagSize = 480;  // dm-crypt's MAX_TAG_SIZE

bool iequal(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        auto lc = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
        if (lc(a[i]) != lc(b[i])) return false;
    }
    return true;
}

std::vector<std::string_view> words(std::string_view s) {
    std::vector<std::string_view> out;
    std::size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n')) ++i;
        std::size_t j = i;
        while (j < s.size() && s[j] != ' ' && s[j] != '\t' && s[j] != '\n') ++j;
        if (j > i) out.push_back(s.substr(i, j - i));
        i = j;
    }
    return out;
}

bool parse_u64(std::string_view s, uint64_t* v) {
    if (s.empty()) return false;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
    return ec == std::errc() && p == s.data() + s.size();
}

Result<void> parse_key(std::string_view k, SecureBuffer* out) {
    if (k == "-") {
        out->clear();
        return {};
    }
    if (!k.empty() && k[0] == ':')
        return bad("keyring keys (':size:type:description') are not available in userspace; "
                   "give the key in hex");
    if (k.size() % 2) return bad("key must be an even number of hex digits");
    auto key = hex_decode_secret(k);
    if (!key) return bad("key is not hex");  // never echo key material
    *out = std::move(key).value();
    return {};
}

// Builds the registry name of the IV template family for the parsed parts.
Result<void> name_alg(CryptTable& t) {
    if (auto n = AlgName::parse(t.api); !n) return bad("Invalid cipher specification: " + n.error().message);
    const std::string& m = t.ivmode;
    if (m.empty()) {
        t.alg_name = t.api;
    } else if (m == "essiv") {
        if (t.ivopts.empty()) return bad("Digest algorithm missing for ESSIV mode");
        t.alg_name = "plain64(essiv(" + t.api + "," + t.ivopts + "))";
    } else if (m == "random") {
        // Random IVs live in the integrity metadata; the engine passes them
        // to the bare transform (check() refuses them without the feature).
        t.alg_name = t.api;
    } else {
        // plain, plain64, benbi, lmk, ... or an IV template a plugin
        // registered: the crypt target's registry lookup decides. ivopts,
        // when given, become the template's second argument.
        t.alg_name = m + "(" + t.api + (t.ivopts.empty() ? "" : "," + t.ivopts) + ")";
    }
    if (auto n = AlgName::parse(t.alg_name); !n) return bad(n.error().message);
    return {};
}

Result<void> parse_capi(std::string_view spec, CryptTable& t) {
    std::string s(spec.substr(5));
    if (auto c = s.rfind(':'); c != std::string::npos) {
        t.ivopts = s.substr(c + 1);
        s.resize(c);
    }
    if (auto d = s.rfind('-'); d != std::string::npos) {
        t.ivmode = s.substr(d + 1);
        s.resize(d);
    }
    if (s.empty()) return bad("Invalid cipher specification");
    t.api = s;
    if (t.ivmode == "lmk") t.key_count = 64;  // as crypt_ctr_cipher_new
    return {};
}

Result<void> parse_legacy(std::string_view spec, CryptTable& t) {
    if (spec.find('(') != std::string_view::npos) return bad("Bad cipher specification");
    std::string_view rest = spec;
    auto take = [&](char sep) {
        std::size_t p = rest.find(sep);
        std::string_view tok = rest.substr(0, p);
        rest = p == std::string_view::npos ? std::string_view() : rest.substr(p + 1);
        return std::pair(tok, p != std::string_view::npos);
    };
    auto [first, more] = take('-');
    std::string_view cipher = first, keycount;
    if (auto c = first.find(':'); c != std::string_view::npos) {
        cipher = first.substr(0, c);
        keycount = first.substr(c + 1);
        uint64_t n = 0;
        if (!parse_u64(keycount, &n) || n == 0 || n > 1024 || !std::has_single_bit(n))
            return bad("Bad cipher key count specification");
        t.key_count = static_cast<unsigned>(n);
    }
    if (cipher.empty()) return bad("Bad cipher specification");
    std::string chainmode;
    if (more) {
        auto [cm, more2] = take('-');
        chainmode = cm;
        if (more2) {
            auto [iv, has_opts] = take(':');
            t.ivmode = iv;
            if (has_opts) t.ivopts = std::string(rest);
        }
    }
    // The original format named only the cipher: cbc-plain.
    if (chainmode.empty() || (chainmode == "plain" && t.ivmode.empty())) {
        chainmode = "cbc";
        t.ivmode = "plain";
    }
    if (chainmode != "ecb" && t.ivmode.empty()) return bad("IV mechanism required");
    t.api = chainmode + "(" + std::string(cipher) + ")";
    return {};
}

Result<void> parse_opts(std::span<const std::string_view> w, CryptTable& t) {
    if (w.empty()) return {};
    uint64_t n = 0;
    if (!parse_u64(w[0], &n) || n != w.size() - 1) return bad("Invalid number of feature args");
    for (std::string_view o : w.subspan(1)) {
        if (o == "allow_discards") t.allow_discards = true;
        else if (o == "same_cpu_crypt") t.same_cpu_crypt = true;
        else if (o == "submit_from_crypt_cpus") t.submit_from_crypt_cpus = true;
        else if (o == "no_read_workqueue") t.no_read_workqueue = true;
        else if (o == "no_write_workqueue") t.no_write_workqueue = true;
        else if (o == "iv_large_sectors") t.iv_large_sectors = true;
        else if (o.starts_with("integrity:")) {
            // crypt_ctr_optional: "integrity:%u:" then the profile, aead or none.
            const std::string_view rest = o.substr(10);
            const std::size_t c = rest.find(':');
            uint64_t v = 0;
            if (c == std::string_view::npos || !parse_u64(rest.substr(0, c), &v) || v == 0 || v > kMaxTagSize)
                return bad("Invalid integrity arguments");
            const std::string_view auth = rest.substr(c + 1);
            if (!iequal(auth, "aead") && !iequal(auth, "none"))
                return bad("Unknown integrity profile '" + std::string(auth) +
                           "' (the kernel takes aead or none; an HMAC goes in the cipher: "
                           "capi:authenc(hmac(sha256),xts(aes))-random with integrity:48:aead)");
            t.integrity_tag_size = static_cast<unsigned>(v);
            t.integrity_auth = std::string(auth);
        } else if (o.starts_with("sector_size:")) {
            uint64_t ss = 0;
            if (!parse_u64(o.substr(12), &ss) || ss < 512 || ss > 4096 || !std::has_single_bit(ss))
                return bad("Invalid feature value for sector_size");
            t.sector_size = ss;
        } else {
            return bad("Invalid feature arguments: '" + std::string(o) + "'");
        }
    }
    return {};
}

Result<void> check(CryptTable& t) {
    if (t.ivmode == "random" && !t.integrity_tag_size)
        return bad("IV mode 'random' needs the integrity feature (integrity:<bytes>:aead|none over "
                   "dm-integrity): the IVs are stored beside each sector");
    if (t.integrity_tag_size) {
        // crypt_ctr_cipher_old refuses AEAD in the legacy grammar.
        if (t.integrity_aead() && !t.cipher.starts_with("capi:")) return bad("Bad cipher specification");
        if (t.key_count != 1) return bad("the integrity feature takes a single key");
        // The engine makes the IV per sector and gives it to the bare transform.
        t.alg_name = t.api;
    }
    uint64_t step = t.sector_size >> 9;
    if (t.iv_offset % step) return bad("Invalid iv_offset sector");
    if (t.sector_size != 512 && t.ivmode == "lmk") return bad("Unsupported sector size for LMK");
    if (t.sector_size != 512 && t.ivmode == "tcw") return bad("Unsupported sector size for TCW");
    return {};
}

Result<CryptTable> parse_cipher_only(std::string_view cipher);

Result<CryptTable> parse_common(std::span<const std::string_view> w, bool with_device) {
    std::size_t fixed = with_device ? 5 : 3;
    if (w.size() < fixed) return bad("Not enough arguments");
    auto t = parse_cipher_only(w[0]);
    if (!t) return t;
    if (auto r = parse_key(w[1], &t->key); !r) return r.error();
    if (!parse_u64(w[2], &t->iv_offset)) return bad("Invalid iv_offset sector");
    if (with_device) {
        t->device = std::string(w[3]);
        if (!parse_u64(w[4], &t->offset)) return bad("Invalid device sector");
    }
    if (auto r = parse_opts(w.subspan(fixed), *t); !r) return r.error();
    if (auto r = check(*t); !r) return r.error();
    return t;
}

Result<CryptTable> parse_cipher_only(std::string_view cipher) {
    CryptTable t;
    t.cipher = std::string(cipher);
    auto r = cipher.starts_with("capi:") ? parse_capi(cipher, t) : parse_legacy(cipher, t);
    if (!r) return r.error();
    if (auto n = name_alg(t); !n) return n.error();
    return t;
}

}  // namespace

Result<CryptTable> parse_cipher_spec(std::string_view cipher) {
    auto t = parse_cipher_only(cipher);
    if (!t) return t;
    if (auto r = check(*t); !r) return r.error();  // random without integrity
    return t;
}

bool CryptTable::integrity_aead() const { return iequal(integrity_auth, "aead"); }

Result<CryptTable> parse_crypt_args(std::string_view args) {
    auto w = words(args);
    return parse_common(w, false);
}

Result<CryptTable> parse_table_line(std::string_view line) {
    auto w = words(line);
    if (w.size() < 3 || w[2] != "crypt") return bad("not a crypt target line");
    uint64_t start = 0, len = 0;
    if (!parse_u64(w[0], &start) || !parse_u64(w[1], &len)) return bad("Invalid start or length");
    auto t = parse_common(std::span(w).subspan(3), true);
    if (!t) return t;
    t->start = start;
    t->length = len;
    return t;
}

std::string CryptTable::crypt_args(bool show_key) const {
    std::string s = cipher + " ";
    if (key.empty())
        s += "-";
    else
        s += show_key ? hex_encode(key) : std::string(2 * key.size(), '0');
    s += " " + std::to_string(iv_offset);
    if (!device.empty()) s += " " + device + " " + std::to_string(offset);
    std::vector<std::string> o;
    if (allow_discards) o.push_back("allow_discards");
    if (same_cpu_crypt) o.push_back("same_cpu_crypt");
    if (submit_from_crypt_cpus) o.push_back("submit_from_crypt_cpus");
    if (no_read_workqueue) o.push_back("no_read_workqueue");
    if (no_write_workqueue) o.push_back("no_write_workqueue");
    if (integrity_tag_size) o.push_back("integrity:" + std::to_string(integrity_tag_size) + ":" + integrity_auth);
    if (sector_size != 512) o.push_back("sector_size:" + std::to_string(sector_size));
    if (iv_large_sectors) o.push_back("iv_large_sectors");
    if (!o.empty()) {
        s += " " + std::to_string(o.size());
        for (const auto& x : o) s += " " + x;
    }
    return s;
}

std::string CryptTable::table_line(bool show_key) const {
    return std::to_string(start) + " " + std::to_string(length) + " crypt " + crypt_args(show_key);
}

}  // namespace blkcrypt::dm
