// Numeric options: every count, size and offset of every command is parsed
// here, never by Boost's lexical_cast (which reads "-1" as 2^64-1 for an
// unsigned type). Only plain decimal digits are accepted, range-checked;
// anything else is a NumberError that parse_command_line turns into a
// one-line usage error naming the option and its range.
#pragma once

#include <boost/program_options.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace cli {

// The most worker threads any --threads accepts; more only thrash (and each
// costs a stack), and a typo such as 100000 must not exhaust the process.
inline constexpr unsigned kMaxThreads = 256;

// Decimal digits only (no sign, space or suffix), no overflow.
std::optional<uint64_t> parse_unsigned(const std::string& s);
// A byte size as cryptsetup 2.6.1 reads one (tools_string_to_size): decimal
// digits, then optionally a unit K M G T P E (either case) for 1024^n, with
// "B" after it for 1000^n or "iB" for 1024^n, or s/S for 512-byte sectors
// ("16k", "16KiB" = 16384; "16KB" = 16000; "32s" = 16384). No overflow.
std::optional<uint64_t> parse_bytes(const std::string& s);
// A finite decimal number ("0.25", "2"), no sign, no exponent, no "inf"/"nan".
std::optional<double> parse_decimal(const std::string& s);

// Thrown while Boost stores the value, so Boost adds the option name (read
// back with get_option_name()). Its what() is never used: the message is
// built from the fields.
class NumberError : public boost::program_options::error_with_option_name {
public:
    NumberError(std::string value, std::string range)
        : error_with_option_name(""), value(std::move(value)), range(std::move(range)) {}
    std::string value;
    std::string range;  // "a number from 0 to 256"
};

template <class T>
class NumberValue final : public boost::program_options::typed_value<T> {
public:
    NumberValue(T min, T max, bool bytes = false)
        : boost::program_options::typed_value<T>(nullptr), min_(min), max_(max), bytes_(bytes) {}

    void xparse(boost::any& store, const std::vector<std::string>& tokens) const override {
        namespace po = boost::program_options;
        po::validators::check_first_occurrence(store);
        const std::string& s = po::validators::get_single_string(tokens);
        if constexpr (std::is_floating_point_v<T>) {
            const auto v = parse_decimal(s);
            if (!v || *v < min_ || *v > max_) throw NumberError(s, range());
            store = static_cast<T>(*v);
        } else {
            const auto v = bytes_ ? parse_bytes(s) : parse_unsigned(s);
            if (!v || *v < static_cast<uint64_t>(min_) || *v > static_cast<uint64_t>(max_))
                throw NumberError(s, range());
            store = static_cast<T>(*v);
        }
    }

private:
    std::string range() const {
        auto str = [](T v) {
            if constexpr (std::is_floating_point_v<T>) {
                std::string s = std::to_string(v);
                s.erase(s.find_last_not_of('0') + 1);
                if (s.back() == '.') s.pop_back();
                return s;
            } else {
                return std::to_string(v);
            }
        };
        if (bytes_) return "a size from " + str(min_) + " to " + str(max_) + " bytes (suffixes k, KiB, KB, M, ..., s)";
        return "a number from " + str(min_) + " to " + str(max_);
    }
    T min_, max_;
    bool bytes_;
};

// The value semantic for a numeric option accepting [min, max]:
//   ("threads", number_value<unsigned>(0, kMaxThreads)->value_name("N"), ...)
// Read it back as usual with vm["threads"].as<unsigned>().
template <class T>
NumberValue<T>* number_value(T min, T max) {
    static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>);
    static_assert(std::is_floating_point_v<T> || std::is_unsigned_v<T>, "counts are never negative");
    return new NumberValue<T>(min, max);
}

// A byte-size option that cryptsetup parses with unit suffixes
// (parse_bytes): --luks2-metadata-size 16k works as typed for cryptsetup.
template <class T>
NumberValue<T>* bytes_value(T min, T max) {
    static_assert(std::is_unsigned_v<T> && !std::is_same_v<T, bool>);
    return new NumberValue<T>(min, max, true);
}

// The common case: a --threads option, 0 = one per core.
inline NumberValue<unsigned>* threads_value() { return number_value<unsigned>(0, kMaxThreads); }

}  // namespace cli

namespace cli {

// The one-line message for a Boost parse error, built from the error's type
// and fields. error_with_option_name::what() is never called: it substitutes
// "%value%"-style placeholders in a loop that never ends when the option
// name or value itself contains one. `command` is "blkcrypt hash" (for the
// "see ... --help" hint); `actions` lists a missing positional action.
std::string option_error_message(const boost::program_options::error& e, const std::string& command,
                                 const std::string& actions);

}  // namespace cli
