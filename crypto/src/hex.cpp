// The hex codec; see <blkcrypt/hex.hpp>.
#include <blkcrypt/hex.hpp>

namespace blkcrypt {

std::string hex_encode(ConstBytes b) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string s(b.size() * 2, '\0');
    for (std::size_t i = 0; i < b.size(); ++i) {
        s[2 * i] = kDigits[b[i] >> 4];
        s[2 * i + 1] = kDigits[b[i] & 15];
    }
    return s;
}

Result<void> hex_check(std::string_view hex) {
    if (hex.size() % 2) return make_error(Status::Invalid, "odd number of hex digits");
    for (std::size_t i = 0; i < hex.size(); ++i)
        if (hex_digit_value(hex[i]) < 0)
            return make_error(Status::Invalid,
                              "not a hex digit at position " + std::to_string(i + 1));
    return {};
}

Result<void> hex_decode_into(std::string_view hex, Bytes out) {
    if (Result<void> r = hex_check(hex); !r) return r;
    if (out.size() != hex.size() / 2)
        return make_error(Status::Invalid, "hex output buffer of the wrong size");
    for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = static_cast<uint8_t>(hex_digit_value(hex[2 * i]) << 4 |
                                      hex_digit_value(hex[2 * i + 1]));
    return {};
}

Result<std::vector<uint8_t>> hex_decode(std::string_view hex) {
    std::vector<uint8_t> out(hex.size() / 2);
    if (Result<void> r = hex_decode_into(hex, out); !r) return r.error();
    return out;
}

Result<SecureBuffer> hex_decode_secret(std::string_view hex) {
    // Checked first, so that a bad string never leaves half a key behind.
    if (Result<void> r = hex_check(hex); !r) return r.error();
    SecureBuffer out(hex.size() / 2);
    if (Result<void> r = hex_decode_into(hex, out.span()); !r) return r.error();
    return out;
}

}  // namespace blkcrypt
