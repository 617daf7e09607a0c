// Tests for blkcrypt::AlgName: parsing algorithm names such as
// "essiv(cbc(aes),sha256)" into a tree, the canonical str() form, and the
// error messages for malformed names.
#include <blkcrypt/alg_name.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>

using blkcrypt::AlgName;
using blkcrypt::kMaxAlgNameLen;
using blkcrypt::Status;

namespace {

// Parses text, which must be valid, and returns the tree.
AlgName parse_ok(std::string_view text) {
    auto r = AlgName::parse(text);
    INFO("name: '" << std::string(text) << "'");
    INFO("error: " << (r.ok() ? std::string("none") : r.error().message));
    REQUIRE(r.ok());
    return std::move(r).value();
}

// Parses text, which must be rejected, and returns the error message.
std::string parse_err(std::string_view text) {
    auto r = AlgName::parse(text);
    INFO("name: '" << std::string(text) << "' (" << text.size() << " bytes)");
    INFO("parsed as: " << (r.ok() ? r.value().str() : std::string("(rejected)")));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status() == Status::Invalid);
    CHECK(r.error().status == Status::Invalid);
    CHECK_FALSE(r.error().message.empty());
    return r.error().message;
}

std::string nested(int depth) {
    std::string s;
    for (int i = 0; i < depth; ++i) s += "t(";
    s += "a";
    s += std::string(static_cast<std::size_t>(depth), ')');
    return s;
}

int depth_of(const AlgName& n) {
    int d = 0;
    for (const auto& a : n.args()) d = std::max(d, depth_of(a) + 1);
    return d;
}

bool same_tree(const AlgName& a, const AlgName& b) {
    if (a.base() != b.base() || a.args().size() != b.args().size()) return false;
    for (std::size_t i = 0; i < a.args().size(); ++i)
        if (!same_tree(a.args()[i], b.args()[i])) return false;
    return true;
}

}  // namespace

TEST_CASE("AlgName: plain names", "[algname]") {
    auto n = parse_ok("aes");
    CHECK(n.base() == "aes");
    CHECK(n.args().empty());
    CHECK_FALSE(n.is_template());
    CHECK(n.str() == "aes");

    for (const char* s : {"a", "Z", "0", "3des", "sha256", "aes-generic", "aes-cryptopp",
                          "sha3_256", "blake2b-512", "aes.ni", "aes+neon", "-", "_", ".", "+",
                          "AES-XTS_plain64.v2+x", "chacha20poly1305"}) {
        auto p = parse_ok(s);
        CHECK(p.base() == s);
        CHECK_FALSE(p.is_template());
        CHECK(p.str() == s);
    }
}

TEST_CASE("AlgName: one-argument templates", "[algname]") {
    auto n = parse_ok("xts(aes)");
    CHECK(n.base() == "xts");
    REQUIRE(n.args().size() == 1);
    CHECK(n.is_template());
    CHECK(n.args()[0].base() == "aes");
    CHECK_FALSE(n.args()[0].is_template());
    CHECK(n.str() == "xts(aes)");

    auto r = parse_ok("rfc4309(ccm(aes))");
    CHECK(r.base() == "rfc4309");
    REQUIRE(r.args().size() == 1);
    const auto& ccm = r.args()[0];
    CHECK(ccm.base() == "ccm");
    REQUIRE(ccm.args().size() == 1);
    CHECK(ccm.args()[0].base() == "aes");
    CHECK(ccm.args()[0].args().empty());
    CHECK(r.str() == "rfc4309(ccm(aes))");

    auto c = parse_ok("cryptd(xts(aes-cryptopp))");
    CHECK(c.base() == "cryptd");
    REQUIRE(c.args().size() == 1);
    CHECK(c.args()[0].base() == "xts");
    REQUIRE(c.args()[0].args().size() == 1);
    CHECK(c.args()[0].args()[0].base() == "aes-cryptopp");
    CHECK(c.args()[0].args()[0].args().empty());
    CHECK(c.str() == "cryptd(xts(aes-cryptopp))");
}

TEST_CASE("AlgName: multi-argument templates", "[algname]") {
    auto e = parse_ok("essiv(cbc(aes),sha256)");
    CHECK(e.base() == "essiv");
    REQUIRE(e.args().size() == 2);
    CHECK(e.args()[0].base() == "cbc");
    REQUIRE(e.args()[0].args().size() == 1);
    CHECK(e.args()[0].args()[0].base() == "aes");
    CHECK(e.args()[1].base() == "sha256");
    CHECK(e.args()[1].args().empty());
    CHECK(e.str() == "essiv(cbc(aes),sha256)");

    auto a = parse_ok("authenc(hmac(sha256),cbc(aes))");
    CHECK(a.base() == "authenc");
    REQUIRE(a.args().size() == 2);
    CHECK(a.args()[0].base() == "hmac");
    REQUIRE(a.args()[0].args().size() == 1);
    CHECK(a.args()[0].args()[0].base() == "sha256");
    CHECK(a.args()[1].base() == "cbc");
    REQUIRE(a.args()[1].args().size() == 1);
    CHECK(a.args()[1].args()[0].base() == "aes");
    CHECK(a.str() == "authenc(hmac(sha256),cbc(aes))");

    auto t = parse_ok("t(a,b.c,d_e,f+g,h-i)");
    REQUIRE(t.args().size() == 5);
    CHECK(t.args()[0].base() == "a");
    CHECK(t.args()[1].base() == "b.c");
    CHECK(t.args()[2].base() == "d_e");
    CHECK(t.args()[3].base() == "f+g");
    CHECK(t.args()[4].base() == "h-i");
    CHECK(t.str() == "t(a,b.c,d_e,f+g,h-i)");

    auto m = parse_ok("x(y(z(a,b),c),d(e))");
    REQUIRE(m.args().size() == 2);
    REQUIRE(m.args()[0].args().size() == 2);
    REQUIRE(m.args()[0].args()[0].args().size() == 2);
    CHECK(m.args()[0].args()[0].args()[1].base() == "b");
    CHECK(m.args()[0].args()[1].base() == "c");
    CHECK(m.args()[1].args()[0].base() == "e");
    CHECK(m.str() == "x(y(z(a,b),c),d(e))");
}

TEST_CASE("AlgName: a parsed name can be copied and reparsed", "[algname]") {
    auto n = parse_ok("essiv(cbc(aes-generic),sha256)");
    AlgName copy = n;
    CHECK(copy.str() == n.str());
    auto again = parse_ok(n.str());
    CHECK(same_tree(again, n));
}

TEST_CASE("AlgName: length limit", "[algname]") {
    REQUIRE(kMaxAlgNameLen == 127);

    std::string max(127, 'a');
    auto n = parse_ok(max);
    CHECK(n.str() == max);

    // 127 characters that form a template.
    std::string tmpl = "x(" + std::string(124, 'b') + ")";
    REQUIRE(tmpl.size() == 127);
    auto t = parse_ok(tmpl);
    REQUIRE(t.args().size() == 1);
    CHECK(t.args()[0].base().size() == 124);

    std::string msg = parse_err(std::string(128, 'a'));
    CHECK_THAT(msg, Catch::Contains("too long"));
    CHECK_THAT(msg, Catch::Contains("128"));

    std::string tmpl128 = "x(" + std::string(125, 'b') + ")";
    CHECK_THAT(parse_err(tmpl128), Catch::Contains("too long"));
    CHECK_THAT(parse_err(std::string(100000, 'a')), Catch::Contains("too long"));
}

TEST_CASE("AlgName: nesting limit", "[algname]") {
    // Real names nest a handful of levels; at least 8 must work.
    for (int d = 0; d <= 8; ++d) {
        auto n = parse_ok(nested(d));
        CHECK(depth_of(n) == d);
        CHECK(n.str() == nested(d));
    }
    // Far deeper than any real name, yet within the length limit: must be
    // rejected for its depth, not its length.
    std::string deep = nested(40);
    REQUIRE(deep.size() <= kMaxAlgNameLen);
    CHECK_THAT(parse_err(deep), Catch::Contains("nested too deeply"));

    // Once a depth is rejected, every greater depth is rejected too, always for
    // the nesting, and never with a crash.
    int max_ok = -1;
    bool failed = false;
    for (int d = 0; 3 * d + 1 <= static_cast<int>(kMaxAlgNameLen); ++d) {
        auto r = AlgName::parse(nested(d));
        INFO("depth " << d);
        if (r.ok()) {
            CHECK_FALSE(failed);
            CHECK(depth_of(r.value()) == d);
            max_ok = d;
        } else {
            failed = true;
            CHECK_THAT(r.error().message, Catch::Contains("nested too deeply"));
        }
    }
    CHECK(failed);
    CHECK(max_ok >= 8);

    // Depth counts nesting, not the number of arguments.
    std::string wide = "t(";
    for (int i = 0; i < 40; ++i) wide += (i ? ",a" : "a");
    wide += ")";
    auto w = parse_ok(wide);
    CHECK(w.args().size() == 40);
}

TEST_CASE("AlgName: malformed names are rejected with a reason", "[algname]") {
    struct Case {
        std::string_view name;
        const char* reason;    // must appear in the message
        const char* position;  // "position N", or nullptr
    };
    const Case cases[] = {
        {"", "empty name", nullptr},
        {"(", "'('", "position 1"},
        {")", "')'", "position 1"},
        {"aes(", "missing name", "position 5"},
        {"aes)", "unexpected ')'", "position 4"},
        {"xts(aes", "missing ')'", "position 8"},
        {"xts(aes))", "unexpected ')'", "position 9"},
        {"xts()", "empty name before ')'", "position 5"},
        {"xts(,aes)", "empty name before ','", "position 5"},
        {"xts(aes,)", "empty name before ')'", "position 9"},
        {"x(a)(b)", "unexpected '('", "position 5"},
        {"a,b", "unexpected ','", "position 2"},
        {"xts(aes),", "unexpected ','", "position 9"},
        {",", "','", "position 1"},
        {"()", "'('", "position 1"},
        {"xts((aes))", "empty name before '('", "position 5"},
        {"xts( aes)", "white space", "position 5"},
        {" aes", "white space", "position 1"},
        {"aes ", "white space", "position 4"},
        {"xts (aes)", "white space", "position 4"},
        {"xts(aes )", "white space", "position 8"},
        {"a!b", "unexpected '!'", "position 2"},
        {"cbc(aes)/x", "unexpected '/'", "position 9"},
        {"x(a;b)", "unexpected ';'", "position 4"},
    };
    for (const auto& c : cases) {
        INFO("name: '" << std::string(c.name) << "'");
        std::string msg = parse_err(c.name);
        INFO("message: " << msg);
        CHECK_THAT(msg, Catch::Contains(c.reason));
        if (c.position) CHECK_THAT(msg, Catch::Contains(c.position));
        // The message names the offending input so a user can find it.
        if (!c.name.empty()) CHECK_THAT(msg, Catch::Contains(std::string(c.name)));
    }
}

TEST_CASE("AlgName: control characters and white space inside a name", "[algname]") {
    using namespace std::string_literals;
    CHECK_THAT(parse_err("xts(\taes)"), Catch::Contains("white space"));
    CHECK_THAT(parse_err("xts(aes)\n"), Catch::Contains("white space"));
    CHECK_THAT(parse_err("aes\n"), Catch::Contains("position 4"));
    CHECK_THAT(parse_err("a\rb"), Catch::Contains("white space"));

    std::string nul = "xts(a\0es)"s;
    REQUIRE(nul.size() == 9);  // the NUL is inside the string_view, not a terminator
    std::string msg = parse_err(nul);
    CHECK_THAT(msg, Catch::Contains("control character"));
    CHECK_THAT(msg, Catch::Contains("position 6"));
    CHECK_THAT(parse_err("aes\0"s), Catch::Contains("control character"));
    CHECK_THAT(parse_err("\0"s), Catch::Contains("control character"));

    // Every non-name ASCII character is rejected wherever it appears.
    for (int c = 0; c < 128; ++c) {
        char ch = static_cast<char>(c);
        bool name_char = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                         (c >= 'A' && c <= 'Z') || ch == '-' || ch == '_' || ch == '.' ||
                         ch == '+';
        if (name_char || ch == '(' || ch == ')' || ch == ',') continue;
        INFO("character code " << c);
        std::string mid = "xts(a"s + ch + "es)";
        std::string end = "cbc(aes)"s + ch;
        std::string start = ch + "aes"s;
        for (const auto& s : {mid, end, start}) {
            auto r = AlgName::parse(s);
            REQUIRE_FALSE(r.ok());
            CHECK(r.status() == Status::Invalid);
            if (c < 0x20 || c == 0x7f) {
                bool says = r.error().message.find("control character") != std::string::npos ||
                            r.error().message.find("white space") != std::string::npos;
                CHECK(says);
            }
        }
    }
}

TEST_CASE("AlgName: non-ASCII bytes are rejected", "[algname]") {
    // UTF-8 "aés".
    std::string msg = parse_err("xts(a\xc3\xa9s)");
    CHECK_THAT(msg, Catch::Contains("non-ASCII"));
    CHECK_THAT(msg, Catch::Contains("position 6"));
    CHECK_THAT(parse_err("\xef\xbb\xbf" "aes"), Catch::Contains("non-ASCII"));  // BOM

    for (int c = 0x80; c <= 0xff; ++c) {
        INFO("byte 0x" << std::hex << c);
        std::string s = "cbc(a";
        s += static_cast<char>(c);
        s += ")";
        auto r = AlgName::parse(s);
        REQUIRE_FALSE(r.ok());
        CHECK(r.status() == Status::Invalid);
        CHECK_THAT(r.error().message, Catch::Contains("non-ASCII"));
        CHECK_THAT(r.error().message, Catch::Contains("position 6"));
    }
}

TEST_CASE("AlgName: fuzzing never crashes and str() is stable", "[algname]") {
    static constexpr char kAlphabet[] = "a(),- x";
    static constexpr std::size_t kAlphabetSize = sizeof kAlphabet - 1;
    std::mt19937 rng(20240611u);
    std::uniform_int_distribution<std::size_t> len_dist(0, 40);
    std::uniform_int_distribution<std::size_t> char_dist(0, kAlphabetSize - 1);

    int parsed = 0, templates = 0, rejected = 0;
    for (int iter = 0; iter < 20000; ++iter) {
        std::string s(len_dist(rng), '\0');
        for (auto& ch : s) ch = kAlphabet[char_dist(rng)];
        auto r = AlgName::parse(s);
        if (!r.ok()) {
            ++rejected;
            if (r.status() != Status::Invalid || r.error().message.empty()) {
                INFO("input: '" << s << "'");
                FAIL("bad error for rejected input");
            }
            continue;
        }
        ++parsed;
        if (r.value().is_template()) ++templates;
        std::string canon = r.value().str();
        auto again = AlgName::parse(canon);
        if (!again.ok() || again.value().str() != canon || canon != s ||
            !same_tree(again.value(), r.value())) {
            INFO("input: '" << s << "' canonical: '" << canon << "'");
            FAIL("str() is not a fixed point of parse");
        }
    }
    // The loop must actually have exercised both paths.
    CHECK(parsed > 50);
    CHECK(templates > 0);
    CHECK(rejected > 10000);
}

TEST_CASE("AlgName: random valid trees survive str() and parse()", "[algname]") {
    std::mt19937 rng(7u);
    static constexpr char kChars[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.+";
    std::uniform_int_distribution<std::size_t> pick(0, sizeof kChars - 2);

    // Builds a random well-formed name string of bounded depth and size.
    auto gen = [&](auto& self, int depth) -> std::string {
        std::string s(1 + rng() % 6, 'a');
        for (auto& ch : s) ch = kChars[pick(rng)];
        if (depth < 4 && rng() % 3 == 0) {
            int nargs = 1 + static_cast<int>(rng() % 3);
            s += '(';
            for (int i = 0; i < nargs; ++i) {
                if (i) s += ',';
                s += self(self, depth + 1);
            }
            s += ')';
        }
        return s;
    };
    int checked = 0;
    for (int iter = 0; iter < 2000; ++iter) {
        std::string s = gen(gen, 0);
        if (s.size() > kMaxAlgNameLen) continue;
        ++checked;
        auto r = AlgName::parse(s);
        if (!r.ok()) {
            INFO("input: '" << s << "' error: " << r.error().message);
            FAIL("valid name rejected");
        }
        if (r.value().str() != s) {
            INFO("input: '" << s << "' str: '" << r.value().str() << "'");
            FAIL("str() differs from a canonical input");
        }
    }
    CHECK(checked > 1000);
}
