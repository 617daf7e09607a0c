#include <blkcrypt/guid.hpp>

#include <cstdio>

namespace blkcrypt {

namespace {
std::string format(const uint8_t* b, const int (&order)[16]) {
    char s[37];
    std::snprintf(s, sizeof s, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[order[0]],
                  b[order[1]], b[order[2]], b[order[3]], b[order[4]], b[order[5]], b[order[6]], b[order[7]],
                  b[order[8]], b[order[9]], b[order[10]], b[order[11]], b[order[12]], b[order[13]], b[order[14]],
                  b[order[15]]);
    return s;
}
}  // namespace

std::string uuid_text(const uint8_t* b) {
    static const int order[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    return format(b, order);
}

std::string guid_text(const uint8_t* b) {
    static const int order[16] = {3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15};
    return format(b, order);
}

}  // namespace blkcrypt
