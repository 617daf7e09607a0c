// A JSON string literal, escaped as json-c writes it with
// JSON_C_TO_STRING_NOSLASHESCAPE (cryptsetup's --dump-json-metadata): the
// quote, backslash and the named control escapes, other bytes below 0x20 as
// \u00XX, everything else (UTF-8 included) as it is. The one quoter for the
// LUKS2 dump and the CLI's JSON output.
#pragma once

#include <string>
#include <string_view>

namespace blkcrypt {

// Appends s, quoted, to out.
void append_json_string(std::string& out, std::string_view s);

// s, quoted.
inline std::string json_string(std::string_view s) {
    std::string out;
    append_json_string(out, s);
    return out;
}

}  // namespace blkcrypt
