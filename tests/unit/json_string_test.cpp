// The one JSON string quoter (<blkcrypt/json_string.hpp>): json-c's escaping
// as cryptsetup's --dump-json-metadata prints it, which the CLI's JSON uses too.
#include <blkcrypt/json_string.hpp>

#include <catch2/catch.hpp>

#include <string>

TEST_CASE("json_string escapes as json-c without slash escapes", "[json]") {
    using blkcrypt::json_string;
    CHECK(json_string("") == "\"\"");
    CHECK(json_string("a/b") == "\"a/b\"");
    CHECK(json_string("q\"b\\") == "\"q\\\"b\\\\\"");
    CHECK(json_string("\b\f\n\r\t") == "\"\\b\\f\\n\\r\\t\"");
    CHECK(json_string(std::string("\x01\x1f\x7f", 3)) == "\"\\u0001\\u001f\x7f\"");
    CHECK(json_string(std::string("nul\0x", 5)) == "\"nul\\u0000x\"");
    CHECK(json_string("caf\xc3\xa9") == "\"caf\xc3\xa9\"");  // UTF-8 as it is
    std::string out = "[";
    blkcrypt::append_json_string(out, "x");
    CHECK(out == "[\"x\"");
}
