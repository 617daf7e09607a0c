#include "json.hpp"

#include <cstdio>
#include <string>

namespace cli {

std::string json_quote(std::string_view s) {
    std::string q = "\"";
    for (const char c : s) {
        switch (c) {
        case '"': q += "\\\""; break;
        case '\\': q += "\\\\"; break;
        case '\b': q += "\\b"; break;
        case '\f': q += "\\f"; break;
        case '\n': q += "\\n"; break;
        case '\r': q += "\\r"; break;
        case '\t': q += "\\t"; break;
        default:
            if (static_cast<unsigned char>(c) < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
                q += buf;
            } else {
                q += c;  // UTF-8 passes through unchanged
            }
        }
    }
    return q + "\"";
}

void JsonWriter::newline() {
    if (indented_) out_ << '\n' << std::string(2 * first_.size(), ' ');
}

void JsonWriter::before_value() {
    if (after_key_) {
        after_key_ = false;
        return;
    }
    if (first_.empty()) return;
    if (!first_.back()) out_ << (indented_ ? "," : ", ");
    first_.back() = false;
    newline();
}

void JsonWriter::close(char bracket) {
    const bool empty = first_.back();
    first_.pop_back();
    if (!empty) newline();
    out_ << bracket;
    if (first_.empty()) out_ << '\n';
}

void JsonWriter::begin_array() {
    before_value();
    out_ << '[';
    first_.push_back(true);
}

void JsonWriter::end_array() { close(']'); }

void JsonWriter::begin_object() {
    before_value();
    out_ << '{';
    first_.push_back(true);
}

void JsonWriter::end_object() { close('}'); }

void JsonWriter::key(std::string_view k) {
    before_value();
    out_ << json_quote(k) << ": ";
    after_key_ = true;
}

void JsonWriter::string(std::string_view s) {
    before_value();
    out_ << json_quote(s);
}

void JsonWriter::number(int64_t n) {
    before_value();
    out_ << n;
}

void JsonWriter::unsigned_number(uint64_t n) {
    before_value();
    out_ << n;
}

void JsonWriter::decimal(double d) {
    before_value();
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", d);
    out_ << buf;
}

void JsonWriter::boolean(bool b) {
    before_value();
    out_ << (b ? "true" : "false");
}

}  // namespace cli
