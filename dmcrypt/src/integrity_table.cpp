// dm-integrity table arguments, parsed as dm_integrity_ctr parses them:
// sscanf("%llu%c") numbers (decimal, nothing after), options by prefix, the
// same checks on each value.
#include <blkcrypt/dm/integrity_table.hpp>

#include <blkcrypt/hex.hpp>

#include "table_words.hpp"

#include <charconv>
#include <vector>

namespace blkcrypt::dm {
namespace {

constexpr unsigned kMaxOptions = 18;  // dm_integrity_ctr's feature-argument limit

using detail::table_words;
template <class T>
bool number(std::string_view s, T& v) { return detail::table_number(s, v); }

Error invalid(std::string msg) { return make_error(Status::Invalid, std::move(msg)); }

// "NAME:VALUE" with a numeric VALUE into `out`.
template <class T>
bool numeric_opt(std::string_view opt, std::string_view name, std::optional<T>& out, bool& bad) {
    if (!opt.starts_with(name)) return false;
    T v{};
    if (!number(opt.substr(name.size()), v)) bad = true;
    else out = v;
    return true;
}

bool hex_digit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

}  // namespace

Result<IntegrityTable> parse_integrity_args(std::string_view args) {
    const auto w = table_words(args);
    if (w.size() < 4) return invalid("expected '<dev> <offset> <tag_size> <mode> [<#opts> <opts>...]'");
    IntegrityTable t;
    t.device = std::string(w[0]);
    if (!number(w[1], t.offset) || t.offset > UINT64_MAX / 512) return invalid("Invalid starting offset");
    if (!number(w[2], t.tag_size)) return invalid("Invalid tag size");
    if (w[3].size() != 1 || (w[3][0] != 'J' && w[3][0] != 'B' && w[3][0] != 'D' && w[3][0] != 'R'))
        return invalid("Invalid mode (expecting J, B, D, R)");
    t.mode = w[3][0];
    std::size_t i = 4;
    if (i < w.size()) {
        unsigned n = 0;
        if (!number(w[i], n) || n > kMaxOptions) return invalid("Invalid number of feature args");
        if (w.size() - i - 1 != n) return invalid("Invalid number of feature args");
        ++i;
    }
    for (; i < w.size(); ++i) {
        const std::string_view o = w[i];
        bool bad = false;
        if (numeric_opt(o, "journal_sectors:", t.journal_sectors, bad) ||
            numeric_opt(o, "interleave_sectors:", t.interleave_sectors, bad) ||
            numeric_opt(o, "buffer_sectors:", t.buffer_sectors, bad) ||
            numeric_opt(o, "journal_watermark:", t.journal_watermark, bad) ||
            numeric_opt(o, "commit_time:", t.commit_time, bad) ||
            numeric_opt(o, "block_size:", t.block_size, bad) ||
            numeric_opt(o, "sectors_per_bit:", t.sectors_per_bit, bad) ||
            numeric_opt(o, "bitmap_flush_interval:", t.bitmap_flush_interval, bad)) {
            if (bad) return invalid("Invalid argument '" + std::string(o.substr(0, o.find(':') + 1)) + "'");
            if (o.starts_with("journal_watermark:") && *t.journal_watermark > 100)
                return invalid("Invalid journal_watermark argument");
            if (o.starts_with("block_size:")) {
                const uint32_t v = *t.block_size;
                if (v < 512 || v > 4096 || (v & (v - 1))) return invalid("Invalid block_size argument");
            }
            if (o.starts_with("bitmap_flush_interval:") && uint64_t(*t.bitmap_flush_interval) >= uint64_t(UINT32_MAX))
                return invalid("Invalid bitmap_flush_interval argument");
        } else if (o.starts_with("meta_device:")) {
            t.meta_device = std::string(o.substr(12));
            if (t.meta_device.empty()) return invalid("Device lookup failed");
        } else if (o.starts_with("internal_hash:")) {
            std::string_view v = o.substr(14);
            const auto colon = v.find(':');
            t.internal_hash = std::string(v.substr(0, colon));
            if (t.internal_hash.empty()) return invalid("Invalid internal_hash argument");
            if (colon != std::string_view::npos) {
                const std::string_view k = v.substr(colon + 1);
                if (k.size() % 2) return invalid("Invalid internal_hash argument");
                for (char c : k)
                    if (!hex_digit(c)) return invalid("Invalid internal_hash argument");
                t.internal_hash_key.resize(k.size() / 2);
                for (std::size_t j = 0; j < k.size() / 2; ++j) {
                    auto nib = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
                    t.internal_hash_key[j] = static_cast<uint8_t>(nib(k[2 * j]) << 4 | nib(k[2 * j + 1]));
                }
            }
        } else if (o.starts_with("journal_crypt:") || o.starts_with("journal_mac:")) {
            // ALG[:HEXKEY], as internal_hash:; the key kept in wiping memory.
            const bool crypt = o.starts_with("journal_crypt:");
            const std::string_view v = o.substr(crypt ? 14 : 12);
            const auto colon = v.find(':');
            std::string& alg = crypt ? t.journal_crypt : t.journal_mac;
            SecureBuffer& key = crypt ? t.journal_crypt_key : t.journal_mac_key;
            const char* wrong = crypt ? "Invalid journal_crypt argument" : "Invalid journal_mac argument";
            alg = std::string(v.substr(0, colon));
            key = SecureBuffer();
            if (alg.empty()) return invalid(wrong);
            if (colon != std::string_view::npos) {
                const std::string_view k = v.substr(colon + 1);
                if (k.size() % 2) return invalid(wrong);
                for (char c : k)
                    if (!hex_digit(c)) return invalid(wrong);
                key.resize(k.size() / 2);
                for (std::size_t j = 0; j < k.size() / 2; ++j) {
                    auto nib = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
                    key[j] = static_cast<uint8_t>(nib(k[2 * j]) << 4 | nib(k[2 * j + 1]));
                }
            }
        } else if (o == "allow_discards") {
            t.allow_discards = true;
        } else if (o == "fix_padding") {
            t.fix_padding = true;
        } else if (o == "fix_hmac") {
            t.fix_hmac = true;
        } else if (o == "legacy_recalculate") {
            t.legacy_recalculate = true;
        } else if (o == "recalculate") {
            t.recalculate = true;
        } else if (o == "reset_recalculate") {
            t.recalculate = true;  // as the kernel: reset implies recalculate
            t.reset_recalculate = true;
        } else {
            return invalid("Invalid argument '" + std::string(o.substr(0, std::min<std::size_t>(o.size(), 40))) + "'");
        }
    }
    if (t.internal_hash.empty() && !t.internal_hash_key.empty()) return invalid("Invalid internal_hash argument");
    if (t.tag_size == 0 && t.internal_hash.empty()) return invalid("Unknown tag size");
    if (t.mode == 'B' && t.internal_hash.empty()) return invalid("Bitmap mode can be only used with internal hash");
    if (t.allow_discards && t.internal_hash.empty()) return invalid("Discard can be only used with internal hash");
    return t;
}

std::string IntegrityTable::args(bool show_key) const {
    std::vector<std::string> o;
    if (!meta_device.empty()) o.push_back("meta_device:" + meta_device);
    if (block_size && *block_size != 512) o.push_back("block_size:" + std::to_string(*block_size));
    if (recalculate) o.push_back("recalculate");
    if (reset_recalculate) o.push_back("reset_recalculate");
    if (allow_discards) o.push_back("allow_discards");
    if (journal_sectors) o.push_back("journal_sectors:" + std::to_string(*journal_sectors));
    if (interleave_sectors) o.push_back("interleave_sectors:" + std::to_string(*interleave_sectors));
    if (buffer_sectors) o.push_back("buffer_sectors:" + std::to_string(*buffer_sectors));
    if (mode == 'J') {
        if (journal_watermark) o.push_back("journal_watermark:" + std::to_string(*journal_watermark));
        if (commit_time) o.push_back("commit_time:" + std::to_string(*commit_time));
    }
    if (mode == 'B') {
        if (sectors_per_bit) o.push_back("sectors_per_bit:" + std::to_string(*sectors_per_bit));
        if (bitmap_flush_interval) o.push_back("bitmap_flush_interval:" + std::to_string(*bitmap_flush_interval));
    }
    if (fix_padding) o.push_back("fix_padding");
    if (fix_hmac) o.push_back("fix_hmac");
    if (legacy_recalculate) o.push_back("legacy_recalculate");
    if (!internal_hash.empty()) {
        std::string a = "internal_hash:" + internal_hash;
        if (!internal_hash_key.empty())
            a += ":" + (show_key ? hex_encode(internal_hash_key) : std::string(2 * internal_hash_key.size(), '0'));
        o.push_back(std::move(a));
    }
    if (!journal_crypt.empty()) {
        std::string a = "journal_crypt:" + journal_crypt;
        if (!journal_crypt_key.empty())
            a += ":" + (show_key ? hex_encode(journal_crypt_key) : std::string(2 * journal_crypt_key.size(), '0'));
        o.push_back(std::move(a));
    }
    if (!journal_mac.empty()) {
        std::string a = "journal_mac:" + journal_mac;
        if (!journal_mac_key.empty())
            a += ":" + (show_key ? hex_encode(journal_mac_key) : std::string(2 * journal_mac_key.size(), '0'));
        o.push_back(std::move(a));
    }
    std::string s = device + " " + std::to_string(offset) + " " + std::to_string(tag_size) + " " + mode + " " +
                    std::to_string(o.size());
    for (const auto& x : o) s += " " + x;
    return s;
}

}  // namespace blkcrypt::dm
