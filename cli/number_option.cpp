#include "number_option.hpp"

#include <cmath>
#include <cstdlib>

namespace cli {

namespace po = boost::program_options;

std::optional<uint64_t> parse_unsigned(const std::string& s) {
    if (s.empty() || s.size() > 20) return std::nullopt;
    uint64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return std::nullopt;
        const auto d = static_cast<uint64_t>(c - '0');
        if (v > (UINT64_MAX - d) / 10) return std::nullopt;
        v = v * 10 + d;
    }
    return v;
}

std::optional<uint64_t> parse_bytes(const std::string& s) {
    const size_t digits = s.find_first_not_of("0123456789");
    if (digits == 0) return std::nullopt;
    const auto n = parse_unsigned(s.substr(0, digits));
    if (!n || digits == std::string::npos) return n;
    const std::string unit = s.substr(digits);
    // The unit letter, then nothing (binary), "B" (decimal) or "iB" (binary).
    uint64_t base = 0;
    if (unit.size() == 1 || (unit.size() == 3 && unit.compare(1, 2, "iB") == 0)) base = 1024;
    else if (unit.size() == 2 && unit[1] == 'B') base = 1000;
    else return std::nullopt;
    uint64_t mult = 1;
    switch (unit[0]) {
        case 's': case 'S': mult = 512; break;
        case 'e': case 'E': mult *= base; [[fallthrough]];
        case 'p': case 'P': mult *= base; [[fallthrough]];
        case 't': case 'T': mult *= base; [[fallthrough]];
        case 'g': case 'G': mult *= base; [[fallthrough]];
        case 'm': case 'M': mult *= base; [[fallthrough]];
        case 'k': case 'K': mult *= base; break;
        default: return std::nullopt;
    }
    if (*n != 0 && mult > UINT64_MAX / *n) return std::nullopt;
    return *n * mult;
}

std::optional<double> parse_decimal(const std::string& s) {
    // Digits with at most one point; strtod alone would take "-1", "1e9", "inf", " 1".
    if (s.empty() || s.size() > 32 || s == ".") return std::nullopt;
    bool point = false;
    for (char c : s) {
        if (c == '.' && !point) point = true;
        else if (c < '0' || c > '9') return std::nullopt;
    }
    const double v = std::strtod(s.c_str(), nullptr);
    if (!std::isfinite(v)) return std::nullopt;
    return v;
}

namespace {

// Reads the protected substitution table of a Boost error (where the
// offending value is kept) without going through what().
struct ErrorFields : po::error_with_option_name {
    static std::string get(const po::error_with_option_name& e, const std::string& key) {
        const auto& subs = e.*(&ErrorFields::m_substitutions);
        const auto it = subs.find(key);
        return it == subs.end() ? std::string() : it->second;
    }
};

}  // namespace

std::string option_error_message(const po::error& e, const std::string& command,
                                 const std::string& actions) {
    const std::string see = " (see " + command + " --help)";
    const auto* named = dynamic_cast<const po::error_with_option_name*>(&e);
    if (!named) {
        // The rest have fixed texts, safe to show.
        if (dynamic_cast<const po::too_many_positional_options_error*>(&e)) return "too many arguments" + see;
        return std::string(e.what()) + see;
    }
    const std::string opt = named->get_option_name();
    if (const auto* n = dynamic_cast<const NumberError*>(&e))
        return opt + ": '" + n->value + "' is not " + n->range;
    if (dynamic_cast<const po::unknown_option*>(&e)) {
        // "--kye=HEX" (a typo of --key): the name only, never the value.
        const std::size_t eq = opt.rfind("--", 0) == 0 ? opt.find('=') : std::string::npos;
        return "unknown option '" + opt.substr(0, eq) + "'" + see;
    }
    if (dynamic_cast<const po::ambiguous_option*>(&e)) return "ambiguous option '" + opt + "'" + see;
    if (dynamic_cast<const po::multiple_occurrences*>(&e)) return "option '" + opt + "' given more than once";
    if (dynamic_cast<const po::multiple_values*>(&e)) return "option '" + opt + "' takes a single value";
    if (dynamic_cast<const po::required_option*>(&e)) {
        if (po::strip_prefixes(opt) == "action")  // the hidden positional of "blkcrypt CMD ACTION"
            return "missing action" + (actions.empty() ? "" : ": " + actions) + see;
        return "option '" + opt + "' is required" + see;
    }
    if (const auto* s = dynamic_cast<const po::invalid_syntax*>(&e)) {
        switch (s->kind()) {
        case po::invalid_syntax::missing_parameter: return "option '" + opt + "' needs a value" + see;
        case po::invalid_syntax::extra_parameter: return "option '" + opt + "' takes no value" + see;
        case po::invalid_syntax::empty_adjacent_parameter: return "option '" + opt + "' has an empty value" + see;
        default: return "invalid option syntax '" + opt + "'" + see;
        }
    }
    if (const auto* v = dynamic_cast<const po::validation_error*>(&e)) {
        const std::string value = ErrorFields::get(*named, "value");
        switch (v->kind()) {
        case po::validation_error::multiple_values_not_allowed: return "option '" + opt + "' takes a single value";
        case po::validation_error::at_least_one_value_required: return "option '" + opt + "' needs a value" + see;
        default: return opt + ": invalid value '" + value + "'";
        }
    }
    return "invalid option '" + opt + "'" + see;
}

}  // namespace cli
