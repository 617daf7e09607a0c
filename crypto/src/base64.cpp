#include <blkcrypt/base64.hpp>

#include <cstdint>

namespace blkcrypt {

// RFC 4648 base64 with padding; whitespace or missing padding refuses.
std::optional<std::vector<uint8_t>> base64_decode(std::string_view s) {
    auto val = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+') return 62;
        if (c == '/') return 63;
        return -1;
    };
    if (s.size() % 4) return std::nullopt;
    std::vector<uint8_t> out;
    out.reserve(s.size() / 4 * 3);
    for (std::size_t i = 0; i < s.size(); i += 4) {
        const bool last = i + 4 == s.size();
        int v[4];
        int pad = 0;
        for (int j = 0; j < 4; ++j) {
            const char c = s[i + j];
            if (c == '=' && last && j >= 2) {
                v[j] = 0;
                ++pad;
                continue;
            }
            if (pad) return std::nullopt;  // data after '='
            v[j] = val(c);
            if (v[j] < 0) return std::nullopt;
        }
        const uint32_t w = (uint32_t(v[0]) << 18) | (uint32_t(v[1]) << 12) | (uint32_t(v[2]) << 6) | uint32_t(v[3]);
        out.push_back(static_cast<uint8_t>(w >> 16));
        if (pad < 2) out.push_back(static_cast<uint8_t>(w >> 8));
        if (pad < 1) out.push_back(static_cast<uint8_t>(w));
    }
    return out;
}

std::string base64_encode(ConstBytes b) {
    static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    for (std::size_t i = 0; i < b.size(); i += 3) {
        uint32_t w = uint32_t(b[i]) << 16;
        if (i + 1 < b.size()) w |= uint32_t(b[i + 1]) << 8;
        if (i + 2 < b.size()) w |= b[i + 2];
        out += a[(w >> 18) & 63];
        out += a[(w >> 12) & 63];
        out += i + 1 < b.size() ? a[(w >> 6) & 63] : '=';
        out += i + 2 < b.size() ? a[w & 63] : '=';
    }
    return out;
}

}  // namespace blkcrypt
