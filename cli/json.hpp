// A minimal JSON writer, without pulling in a JSON library. The caller is
// trusted to nest begin/end calls properly. Each top-level value is ended by
// a newline: on one line by default (--json prints one object per line, see
// docs/json.md), or indented (`list --json`).
#pragma once

#include <blkcrypt/json_string.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace cli {

class JsonWriter {
public:
    enum Layout { Line, Indented };
    explicit JsonWriter(std::ostream& out, Layout layout = Line) : out_(out), indented_(layout == Indented) {}

    void begin_array();
    void end_array();
    void begin_object();
    void end_object();
    void key(std::string_view k);  // inside an object, before each value

    // Distinct names, not overloads: a const char* would otherwise pick bool.
    void string(std::string_view s);
    void number(int64_t n);
    void unsigned_number(uint64_t n);  // offsets and counts past INT64_MAX
    void boolean(bool b);
    void decimal(double d);  // fixed, three decimals: seconds

private:
    void before_value();
    void newline();
    void close(char bracket);

    std::ostream& out_;
    bool indented_;
    std::vector<bool> first_;  // per open container: nothing written in it yet
    bool after_key_ = false;
};

// s as a quoted JSON string literal (the library's quoter).
inline std::string json_quote(std::string_view s) { return blkcrypt::json_string(s); }

}  // namespace cli
