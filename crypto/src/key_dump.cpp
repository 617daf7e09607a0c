#include <blkcrypt/key_dump.hpp>

#include <cstring>
#include <string>

namespace blkcrypt {

SecureBuffer key_dump_lines(std::string_view h, ConstBytes vk) {
    std::string head(h);
    head += "MK bits:       \t" + std::to_string(vk.size() * 8) + "\n";
    head += "MK dump:\t";
    // The key's hex goes straight into wiping memory: 3 characters a byte,
    // a newline per 16 bytes and two tabs before each continuation line.
    const std::size_t lines = (vk.size() + 15) / 16;
    SecureBuffer out(head.size() + vk.size() * 3 + lines + (lines ? 2 * (lines - 1) : 0));
    std::memcpy(out.data(), head.data(), head.size());
    std::size_t pos = head.size();
    static const char* digits = "0123456789abcdef";
    for (std::size_t i = 0; i < vk.size(); ++i) {
        if (i % 16 == 0 && i) out[pos++] = '\t', out[pos++] = '\t';
        out[pos++] = static_cast<uint8_t>(digits[vk[i] >> 4]);
        out[pos++] = static_cast<uint8_t>(digits[vk[i] & 15]);
        out[pos++] = ' ';
        if (i % 16 == 15 || i + 1 == vk.size()) out[pos++] = '\n';
    }
    return out;
}

}  // namespace blkcrypt
