#include <blkcrypt/hex.hpp>
#include <blkcrypt/internal/testvec.hpp>

#include <cctype>
#include <map>
#include <memory>
#include <mutex>
#include <set>

namespace blkcrypt {

struct EmbeddedFile {
    const char* name;
    const char* text;
};
extern const EmbeddedFile kEmbeddedVectorFiles[];  // generated: vectors_data.cpp
extern const std::size_t kEmbeddedVectorFileCount;

namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

// A field value: "ascii" or hex digits (empty allowed).
bool decode_value(std::string_view v, std::string* out) {
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') {
        *out = std::string(v.substr(1, v.size() - 2));
        return true;
    }
    out->assign(v.size() / 2, '\0');
    return hex_decode_into(v, Bytes(reinterpret_cast<uint8_t*>(out->data()), out->size())).ok();
}

bool is_number_field(std::string_view k) {
    for (std::string_view n : {"repeat", "authsize", "novrfy", "setkey_fails", "sector_size",
                               "iv_large_sectors", "key_count"})
        if (k == n) return true;
    return false;
}

}  // namespace

std::vector<uint8_t> TestVector::bytes(std::string_view k) const {
    auto it = fields.find(k);
    if (it == fields.end()) return {};
    return {it->second.begin(), it->second.end()};
}

std::size_t TestVector::number(std::string_view k, std::size_t dflt) const {
    auto it = fields.find(k);
    return it == fields.end() ? dflt : std::stoul(it->second);
}

Result<std::vector<VectorSet>> parse_vector_file(std::string_view text, std::string_view file) {
    std::vector<VectorSet> sets;
    TestVector cur;
    int lineno = 0;
    auto err = [&](const std::string& what) {
        return make_error(Status::Invalid,
                          std::string(file) + ":" + std::to_string(lineno) + ": " + what);
    };
    auto flush = [&] {
        if (!cur.fields.empty()) sets.back().vectors.push_back(std::move(cur));
        cur = TestVector{};
    };
    while (!text.empty()) {
        std::size_t nl = text.find('\n');
        std::string_view line = trim(text.substr(0, nl));
        text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
        ++lineno;
        if (line.empty()) {
            if (!sets.empty()) flush();
            continue;
        }
        if (line.front() == '#') continue;
        if (line.front() == '[') {
            if (line.back() != ']') return err("unterminated [name]");
            if (!sets.empty()) flush();
            sets.push_back(VectorSet{std::string(trim(line.substr(1, line.size() - 2))), {}});
            continue;
        }
        if (sets.empty()) return err("field before any [name]");
        std::size_t eq = line.find('=');
        if (eq == std::string_view::npos) return err("expected 'field = value'");
        std::string key(trim(line.substr(0, eq)));
        std::string_view val = trim(line.substr(eq + 1));
        if (cur.fields.empty()) cur.where = std::string(file) + ":" + std::to_string(lineno);
        std::string decoded;
        if (is_number_field(key)) {
            if (val.empty() || val.find_first_not_of("0123456789") != std::string_view::npos)
                return err("'" + key + "' needs a decimal number");
            // number() must not overflow; no field means anything near this.
            if (val.size() > 10 || std::stoull(std::string(val)) > 0xffffffffu)
                return err("'" + key + "' out of range (at most 4294967295)");
            decoded = std::string(val);
        } else if (!decode_value(val, &decoded)) {
            return err("bad value for '" + key + "' (hex or \"text\")");
        }
        if (!cur.fields.emplace(key, std::move(decoded)).second)
            return err("field '" + key + "' given twice");
    }
    if (!sets.empty()) flush();
    return sets;
}

namespace {
// The compiled-in vectors, parsed per name when a self-test first asks for
// them: a command that tests one algorithm does not parse all of them. They
// are constants, so what was parsed never goes stale.
class Index {
public:
    static Index& get() {
        static Index idx;
        return idx;
    }

    // The names with vectors; built once by reading only the [name] lines.
    const std::map<std::string, std::vector<std::size_t>, std::less<>>& files() const { return files_; }

    // Every vector of `name`, in file order; null when it has none. The
    // reference stays valid for the life of the process.
    const std::vector<TestVector>* find(std::string_view name) {
        auto f = files_.find(name);
        if (f == files_.end()) return nullptr;
        std::lock_guard lk(mu_);
        if (auto it = parsed_.find(name); it != parsed_.end()) return &it->second;
        std::vector<TestVector> v;
        for (std::size_t i : f->second) {
            const auto& file = kEmbeddedVectorFiles[i];
            auto sets = parse_vector_file(file.text, file.name);
            if (!sets) continue;  // the test suite parses every file and reports errors
            for (auto& set : *sets)
                if (set.name == name)
                    for (auto& tv : set.vectors) v.push_back(std::move(tv));
        }
        return &parsed_.emplace(std::string(name), std::move(v)).first->second;
    }

private:
    // Every process that self-tests pays for this scan of some 600 KiB, so it
    // jumps from one '[' to the next (memchr) instead of cutting every line:
    // a '[' heads a [name] line when only blanks precede it on its line.
    Index() {
        for (std::size_t i = 0; i < kEmbeddedVectorFileCount; ++i) {
            const std::string_view text = kEmbeddedVectorFiles[i].text;
            for (std::size_t at = text.find('['); at != std::string_view::npos; at = text.find('[', at + 1)) {
                const std::size_t bol = text.rfind('\n', at) + 1;  // npos + 1 == 0: the first line
                if (!trim(text.substr(bol, at - bol)).empty()) continue;
                const std::size_t eol = text.find('\n', at);
                const std::string_view line = trim(text.substr(at, eol == std::string_view::npos ? eol : eol - at));
                if (line.size() < 2 || line.back() != ']') continue;
                auto& in = files_[std::string(trim(line.substr(1, line.size() - 2)))];
                if (in.empty() || in.back() != i) in.push_back(i);
            }
        }
    }

    std::map<std::string, std::vector<std::size_t>, std::less<>> files_;  // name -> files with a [name]
    std::mutex mu_;
    std::map<std::string, std::vector<TestVector>, std::less<>> parsed_;
};
}  // namespace

std::vector<std::string> builtin_vector_errors() {
    std::vector<std::string> errs;
    for (std::size_t i = 0; i < kEmbeddedVectorFileCount; ++i) {
        const auto& f = kEmbeddedVectorFiles[i];
        if (auto r = parse_vector_file(f.text, f.name); !r) errs.push_back(r.error().message);
    }
    return errs;
}

std::vector<std::string> builtin_vector_names() {
    std::vector<std::string> names;
    for (const auto& [name, files] : Index::get().files()) names.push_back(name);
    return names;
}

namespace {
// Vectors added at run time (plugins), held by their registry. A set is
// shared with the self-tests running on it, so removing it (its plugin
// refused or unloaded) is safe while one runs.
struct Added {
    std::mutex mu;
    std::map<std::string, std::shared_ptr<const std::vector<TestVector>>, std::less<>> sets;
    struct Text {
        int refs = 0;
        std::vector<std::string> names;
    };
    std::map<std::string, Text> texts;  // source + '\n' + text
};

Added& added(Registry& reg) {
    static std::mutex create_mu;  // the slot itself is not guarded by the registry
    std::lock_guard lk(create_mu);
    auto& slot = reg.attachment("vectors");
    if (!slot) slot = std::make_shared<Added>();
    return *static_cast<Added*>(slot.get());
}
}  // namespace

const std::vector<TestVector>& vectors_for(std::string_view generic_name) {
    static const std::vector<TestVector> none;
    const auto* v = Index::get().find(generic_name);
    return v ? *v : none;
}

std::shared_ptr<const std::vector<TestVector>> find_vectors(Registry& reg, std::string_view generic_name) {
    if (const auto* v = Index::get().find(generic_name))
        return {std::shared_ptr<void>(), v};  // lives as long as the process: no owner needed
    Added& a = added(reg);
    std::lock_guard lk(a.mu);
    auto it = a.sets.find(generic_name);
    return it == a.sets.end() ? nullptr : it->second;
}

Result<void> add_vectors(Registry& reg, std::string_view text, std::string_view source) {
    auto sets = parse_vector_file(text, source);
    if (!sets) return sets.error();
    Added& a = added(reg);
    std::lock_guard lk(a.mu);
    const std::string key = std::string(source) + '\n' + std::string(text);
    if (auto it = a.texts.find(key); it != a.texts.end()) {
        ++it->second.refs;
        return {};
    }
    std::map<std::string, std::vector<TestVector>> merged;  // a name may have several sections
    for (auto& s : *sets) {
        if (Index::get().files().count(s.name) || a.sets.count(s.name))
            return make_error(Status::Invalid, std::string(source) + ": vectors for '" + s.name +
                                                   "' already exist");
        auto& m = merged[s.name];
        for (auto& v : s.vectors) m.push_back(std::move(v));
    }
    Added::Text& t = a.texts[key];
    t.refs = 1;
    for (auto& [name, vecs] : merged) {
        t.names.push_back(name);
        a.sets.emplace(name, std::make_shared<const std::vector<TestVector>>(std::move(vecs)));
    }
    return {};
}

void remove_vectors(Registry& reg, std::string_view text, std::string_view source) {
    Added& a = added(reg);
    std::lock_guard lk(a.mu);
    auto it = a.texts.find(std::string(source) + '\n' + std::string(text));
    if (it == a.texts.end() || --it->second.refs > 0) return;
    for (const auto& n : it->second.names) a.sets.erase(n);
    a.texts.erase(it);
}

}  // namespace blkcrypt
