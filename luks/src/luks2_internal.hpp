// Pieces of the LUKS2 reader and writer (luks2_header.cpp, luks2_format.cpp)
// that reencryption reuses.
#pragma once

#include <blkcrypt/luks/luks2.hpp>

#include <nlohmann/json.hpp>

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

// A pbkdf2 digest object over data (LUKS2_digest_create): 32-byte salt, the
// hash's full output (reencrypt_meta.cpp).
Result<nlohmann::ordered_json> pbkdf2_digest(Registry& reg, const std::string& hash, uint32_t iterations,
                                             ConstBytes data, const std::vector<std::string>& keyslots,
                                             const std::vector<std::string>& segments);

// Encrypts or decrypts buf in place as segment seg's data (a crypt segment)
// with key at IV sector iv_sector (512-byte units), through a dm-crypt target
// over memory (reencrypt.cpp).
Result<void> crypt_mem(Registry& reg, const Segment& seg, ConstBytes key, uint64_t iv_sector, Bytes buf, bool encrypt);

}  // namespace blkcrypt::luks::luks2::detail
