// Pieces of the LUKS2 reader and writer (luks2_header.cpp, luks2_format.cpp)
// that reencryption reuses.
#pragma once

#include <blkcrypt/luks/luks2.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace blkcrypt::luks::luks2::detail {

// A luks2 keyslot for vk under passphrase: its JSON object (compact text)
// and its encrypted area, for area_offset. The area is encrypted with
// cipher under an area_key_size-byte key (0: the volume key's size).
Result<std::pair<std::string, std::vector<uint8_t>>> new_keyslot(Registry& reg, ConstBytes vk, ConstBytes passphrase,
                                                                  const KeyslotOptions& o, const std::string& cipher,
                                                                  uint64_t area_offset, std::size_t area_key_size = 0);

// A JSON number string as cryptsetup reads one (json_str_to_uint64 with
// the "numbered" check): decimal digits only, within uint64.
std::optional<uint64_t> parse_u64(std::string_view s);

// The first keyslot-area gap holding a keyslot for a key_size-byte key.
Result<uint64_t> keyslot_gap(const Metadata& md, std::size_t key_size);

}  // namespace blkcrypt::luks::luks2::detail
