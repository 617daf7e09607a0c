// Pieces of the LUKS2 writer (luks2_format.cpp) that reencryption reuses.
#pragma once

#include <blkcrypt/luks/luks2.hpp>

#include <string>
#include <utility>
#include <vector>

namespace blkcrypt::luks::luks2::detail {

// A luks2 keyslot for vk under passphrase: its JSON object (compact text)
// and its encrypted area, for area_offset.
Result<std::pair<std::string, std::vector<uint8_t>>> new_keyslot(Registry& reg, ConstBytes vk, ConstBytes passphrase,
                                                                  const KeyslotOptions& o, const std::string& cipher,
                                                                  uint64_t area_offset);

// The first keyslot-area gap holding a keyslot for a key_size-byte key.
Result<uint64_t> keyslot_gap(const Metadata& md, std::size_t key_size);

}  // namespace blkcrypt::luks::luks2::detail
