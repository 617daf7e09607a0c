#include "json.hpp"

#include <cstdio>
#include <string>

namespace cli {

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
