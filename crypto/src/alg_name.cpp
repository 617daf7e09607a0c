#include <blkcrypt/alg_name.hpp>

#include <string>

namespace blkcrypt {

namespace {
constexpr int kMaxDepth = 16;

// ASCII only, whatever the C locale says: the grammar's ALPHA / DIGIT.
bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_' || c == '.' || c == '+';
}

std::string describe(char c) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) {
        static constexpr char kHex[] = "0123456789ABCDEF";
        return std::string("a non-ASCII byte (0x") + kHex[u >> 4] + kHex[u & 0xF] + ")";
    }
    if (c == ' ' || (c >= '\t' && c <= '\r')) return "white space";
    if (u < 0x20 || u == 0x7F) return "a control character";
    return std::string("'") + c + "'";
}
}  // namespace

class AlgNameParser {
public:
    explicit AlgNameParser(std::string_view s) : s_(s) {}

    Result<AlgName> run() {
        if (s_.empty()) return fail("empty name");
        if (s_.size() > kMaxAlgNameLen)
            return make_error(Status::Invalid, "algorithm name too long (" +
                                                   std::to_string(s_.size()) + " characters, at most " +
                                                   std::to_string(kMaxAlgNameLen) + ")");
        AlgName out;
        if (auto r = parse(out, 0); !r) return r.error();
        if (pos_ != s_.size()) return fail("unexpected " + describe(s_[pos_]));
        return out;
    }

private:
    Result<void> parse(AlgName& out, int depth) {
        if (depth > kMaxDepth) return fail("nested too deeply");
        std::size_t start = pos_;
        while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
        if (pos_ == start) {
            if (pos_ >= s_.size()) return fail("missing name");
            char c = s_[pos_];
            if (c == ',' || c == ')' || c == '(') return fail("empty name before " + describe(c));
            return fail("unexpected " + describe(c));
        }
        out.base_ = std::string(s_.substr(start, pos_ - start));
        if (pos_ >= s_.size() || s_[pos_] != '(') return {};
        ++pos_;  // '('
        for (;;) {
            AlgName arg;
            if (auto r = parse(arg, depth + 1); !r) return r;
            out.args_.push_back(std::move(arg));
            if (pos_ >= s_.size()) return fail("unbalanced parentheses: missing ')'");
            if (s_[pos_] == ',') { ++pos_; continue; }
            if (s_[pos_] == ')') { ++pos_; return {}; }
            return fail("unexpected " + describe(s_[pos_]));
        }
    }

    Error fail(const std::string& what) const {
        return make_error(Status::Invalid, "malformed algorithm name '" + std::string(s_) +
                                               "': " + what + " at position " +
                                               std::to_string(pos_ + 1));
    }

    std::string_view s_;
    std::size_t pos_ = 0;
};

Result<AlgName> AlgName::parse(std::string_view text) { return AlgNameParser(text).run(); }

std::string AlgName::str() const {
    std::string s = base_;
    if (args_.empty()) return s;
    s += '(';
    for (std::size_t i = 0; i < args_.size(); ++i) {
        if (i) s += ',';
        s += args_[i].str();
    }
    s += ')';
    return s;
}

}  // namespace blkcrypt
