#include <blkcrypt/hex.hpp>
#include <blkcrypt/verity/table.hpp>

#include <charconv>

namespace blkcrypt::verity {

namespace {

Error bad(std::string msg) { return make_error(Status::Invalid, "verity table: " + std::move(msg)); }

std::vector<std::string_view> words(std::string_view s) {
    std::vector<std::string_view> out;
    std::size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n')) ++i;
        const std::size_t b = i;
        while (i < s.size() && s[i] != ' ' && s[i] != '\t' && s[i] != '\n') ++i;
        if (i > b) out.push_back(s.substr(b, i - b));
    }
    return out;
}

template <class T>
bool number(std::string_view w, T& out) {
    const auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), out);
    return ec == std::errc() && p == w.data() + w.size();
}

bool hex(std::string_view w, std::vector<uint8_t>& out) {
    auto r = hex_decode(w);
    if (!r) return false;
    out = std::move(r).value();
    return true;
}

// An FEC option and its value, w[i + 1] (which counts as an option word).
Result<void> parse_fec_option(const std::vector<std::string_view>& w, std::size_t& i, VerityFecArgs& f) {
    const std::string o(w[i]);
    if (i + 1 >= w.size()) return bad("option '" + o + "' needs a value");
    const std::string_view v = w[++i];
    if (o == "use_fec_from_device") {
        f.device = v;
        return {};
    }
    uint64_t n = 0;
    if (!number(v, n)) return bad("invalid " + o + " '" + std::string(v) + "'");
    if (o == "fec_start") f.start = n;
    else if (o == "fec_blocks") f.blocks = n;
    else if (n < 2 || n > 24) return bad("invalid fec_roots '" + std::string(v) + "' (2..24)");
    else f.roots = static_cast<uint32_t>(n);
    return {};
}

// The kernel's verity_fec_ctr checks, as far as the table alone shows them.
Result<void> check_fec(const VerityTable& t) {
    const VerityFecArgs& f = t.fec;
    if (f.device.empty() && !f.blocks && !f.roots && !f.start) return {};
    if (f.device.empty()) return bad("FEC options need use_fec_from_device");
    if (!f.roots) return bad("FEC needs fec_roots");
    if (!f.blocks) return bad("FEC needs fec_blocks");
    if (t.params.data_block_size != t.params.hash_block_size)
        return bad("block sizes must match to use FEC");
    if (f.blocks < t.params.data_blocks) return bad("invalid fec_blocks (fewer than the data blocks)");
    return {};
}

Result<void> parse_options(std::vector<std::string_view> w, VerityTable& t) {
    if (w.empty()) return {};
    unsigned n = 0;
    if (!number(w[0], n) || n != w.size() - 1)
        return bad("#opt_params '" + std::string(w[0]) + "' does not match the " +
                   std::to_string(w.size() - 1) + " words after it");
    for (std::size_t i = 1; i < w.size(); ++i) {
        const std::string_view o = w[i];
        if (o == "ignore_corruption") t.on_corruption = CorruptionMode::Ignore;
        else if (o == "restart_on_corruption") t.on_corruption = CorruptionMode::Restart;
        else if (o == "panic_on_corruption") t.on_corruption = CorruptionMode::Panic;
        else if (o == "ignore_zero_blocks") t.ignore_zero_blocks = true;
        else if (o == "check_at_most_once") t.check_at_most_once = true;
        else if (o == "restart_on_error" || o == "panic_on_error" || o == "try_verify_in_tasklet")
            t.other_flags.emplace_back(o);
        else if (o == "root_hash_sig_key_desc") {
            // The key (in the kernel's keyring) holding the signature.
            if (i + 1 >= w.size()) return bad("option 'root_hash_sig_key_desc' needs a key description");
            t.root_hash_sig_key_desc = w[++i];
        }
        else if (o == "use_fec_from_device" || o == "fec_roots" || o == "fec_blocks" || o == "fec_start") {
            if (auto r = parse_fec_option(w, i, t.fec); !r) return r.error();
        }
        else return bad("unknown option '" + std::string(o) + "'");
    }
    return {};
}

}  // namespace

Result<VerityTable> parse_verity_args(std::string_view args) {
    const auto w = words(args);
    if (w.size() < 10) return bad("needs at least 10 arguments, got " + std::to_string(w.size()));
    VerityTable t;
    VerityParams& p = t.params;
    p.superblock = false;
    if (!number(w[0], p.hash_type) || p.hash_type > 1) return bad("invalid version '" + std::string(w[0]) + "'");
    t.data_dev = w[1];
    t.hash_dev = w[2];
    if (!number(w[3], p.data_block_size)) return bad("invalid data device block size '" + std::string(w[3]) + "'");
    if (!number(w[4], p.hash_block_size)) return bad("invalid hash device block size '" + std::string(w[4]) + "'");
    if (!number(w[5], p.data_blocks)) return bad("invalid data blocks '" + std::string(w[5]) + "'");
    if (!number(w[6], t.hash_start_block)) return bad("invalid hash start '" + std::string(w[6]) + "'");
    p.hash_name = w[7];
    if (!hex(w[8], t.root_hash) || t.root_hash.empty()) return bad("invalid root digest");
    if (w[9] != "-" && !hex(w[9], p.salt)) return bad("invalid salt");
    if (p.hash_block_size && t.hash_start_block > UINT64_MAX / p.hash_block_size)
        return bad("invalid hash start");
    p.hash_offset = t.hash_start_block * p.hash_block_size;
    if (auto ok = check_params(p); !ok) return bad(ok.error().message);
    if (auto ok = parse_options({w.begin() + 10, w.end()}, t); !ok) return ok.error();
    if (auto ok = check_fec(t); !ok) return ok.error();
    return t;
}

Result<VerityTable> parse_verity_line(std::string_view line) {
    const auto w = words(line);
    if (w.size() < 3 || w[2] != "verity") return bad("expected '<start> <len> verity ...'");
    uint64_t start = 0, length = 0;
    if (!number(w[0], start) || !number(w[1], length)) return bad("invalid start or length '" + std::string(w[0]) + " " + std::string(w[1]) + "'");
    const std::size_t skip = static_cast<std::size_t>(w[2].data() + w[2].size() - line.data());
    auto t = parse_verity_args(line.substr(skip));
    if (!t) return t;
    const uint64_t sectors = t->params.data_blocks * (t->params.data_block_size / 512);
    if (start != 0 || length > sectors)
        return bad("the target covers " + std::to_string(length) + " sectors from " +
                   std::to_string(start) + "; the tree covers " + std::to_string(sectors) +
                   " from 0");
    t->start = start;
    t->length = length;
    return t;
}

Result<VerityTable> parse_verity_table(std::string_view text) {
    const auto w = words(text);
    if (w.size() >= 3 && w[2] == "verity") return parse_verity_line(text);
    return parse_verity_args(text);
}

std::string VerityTable::args() const {
    const VerityParams& p = params;
    std::string s = std::to_string(p.hash_type) + " " + data_dev + " " + hash_dev + " " +
                    std::to_string(p.data_block_size) + " " + std::to_string(p.hash_block_size) +
                    " " + std::to_string(p.data_blocks) + " " + std::to_string(hash_start_block) +
                    " " + p.hash_name + " " + hex_encode(root_hash) + " " +
                    (p.salt.empty() ? std::string("-") : hex_encode(p.salt));
    std::vector<std::string> opts;
    if (on_corruption == CorruptionMode::Ignore) opts.emplace_back("ignore_corruption");
    if (on_corruption == CorruptionMode::Restart) opts.emplace_back("restart_on_corruption");
    if (on_corruption == CorruptionMode::Panic) opts.emplace_back("panic_on_corruption");
    for (const auto& f : other_flags) opts.push_back(f);
    if (ignore_zero_blocks) opts.emplace_back("ignore_zero_blocks");
    if (check_at_most_once) opts.emplace_back("check_at_most_once");
    if (!fec.device.empty()) {  // cryptsetup's order: FEC, then the signature key
        for (const auto& o : {std::string("use_fec_from_device"), fec.device, std::string("fec_start"),
                              std::to_string(fec.start), std::string("fec_blocks"), std::to_string(fec.blocks),
                              std::string("fec_roots"), std::to_string(fec.roots)})
            opts.push_back(o);
    }
    // Last, as cryptsetup writes it; the description is a word of its own.
    std::size_t words = opts.size();
    if (!root_hash_sig_key_desc.empty()) {
        opts.push_back("root_hash_sig_key_desc " + root_hash_sig_key_desc);
        words += 2;
    }
    if (!opts.empty()) {
        s += " " + std::to_string(words);
        for (const auto& o : opts) s += " " + o;
    }
    return s;
}

std::string VerityTable::line() const {
    return std::to_string(start) + " " + std::to_string(length) + " verity " + args();
}

VerityTable make_verity_table(const VerityParams& p, const TreeGeometry& g,
                              std::vector<uint8_t> root_hash, std::string data_dev,
                              std::string hash_dev) {
    VerityTable t;
    t.params = p;
    t.params.superblock = false;
    t.hash_start_block = g.hash_start_block;
    t.params.hash_offset = g.hash_start_block * p.hash_block_size;
    t.root_hash = std::move(root_hash);
    t.data_dev = std::move(data_dev);
    t.hash_dev = std::move(hash_dev);
    t.length = p.data_blocks * (p.data_block_size / 512);
    return t;
}

}  // namespace blkcrypt::verity
