// The tail every cryptsetup --dump-volume-key prints ("MK bits:", "MK dump:"
// and the key in hex, 16 bytes a line), for LUKS1, TCRYPT, BITLK and FVAULT2.
#pragma once

#include <blkcrypt/bytes.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <string_view>

namespace blkcrypt {

// `head` followed by those lines for vk, in wiping memory (they hold the key).
SecureBuffer key_dump_lines(std::string_view head, ConstBytes vk);

}  // namespace blkcrypt
