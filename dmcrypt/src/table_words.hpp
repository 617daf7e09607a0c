// The words and numbers of a device-mapper table line, as the kernel reads
// them: dm_split_args splits on isspace, the targets' sscanf("%llu%c")
// takes decimal digits with nothing after. Shared by the table file
// (dm_table.cpp) and the integrity line's arguments (integrity_table.cpp).
#pragma once

#include <charconv>
#include <string_view>
#include <vector>

namespace blkcrypt::dm::detail {

inline bool is_table_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

inline std::vector<std::string_view> table_words(std::string_view s) {
    std::vector<std::string_view> w;
    std::size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && is_table_space(s[i])) ++i;
        const std::size_t b = i;
        while (i < s.size() && !is_table_space(s[i])) ++i;
        if (i > b) w.push_back(s.substr(b, i - b));
    }
    return w;
}

// Decimal digits only, no sign, nothing after, no overflow of T.
template <class T>
bool table_number(std::string_view s, T& v) {
    if (s.empty() || s.size() > 20) return false;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace blkcrypt::dm::detail
