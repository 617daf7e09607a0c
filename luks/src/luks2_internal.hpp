// Pieces of the LUKS2 reader and writer (luks2_header.cpp, luks2_format.cpp)
// that reencryption reuses.
#pragma once

#include <blkcrypt/luks/luks2.hpp>
#include <blkcrypt/luks/reencrypt.hpp>

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

// The raw JSON of md: the serialisation keeps the stored JSON types.
Result<nlohmann::ordered_json> raw_json(const Metadata& md);
// The lowest id below max that section (keyslots, digests) does not use; -1 if none.
int lowest_free(const nlohmann::ordered_json& section, int max);
// md with new JSON text, parsed and checked as a reader would.
Result<Metadata> reparse(const Metadata& md, const std::string& text);

// Pieces of every reencryption init (reencrypt_meta.cpp), as cryptsetup
// builds one: the `reencrypt` keyslot with its resilience area over the
// largest free gap of the keyslots area (LUKS2_find_area_max_gap; besides
// md's keyslots, `used` are areas taken already), its id returned;
Result<int> add_reencrypt_keyslot(nlohmann::ordered_json& root, const Metadata& md,
                                  std::vector<std::pair<uint64_t, uint64_t>> used, const std::string& resilience,
                                  const std::string& hash, uint32_t checksum_sector_size, const std::string& mode,
                                  const std::string& direction);
// the digest over the verification data of root as it stands, added last
// (LUKS2_reencrypt_digest_create);
Result<void> add_reencrypt_digest(Registry& reg, nlohmann::ordered_json& root, const Metadata& md, int reenc_ks,
                                  uint32_t iterations, ConstBytes vk_old, ConstBytes vk_new);
// and the state read back from the header once written.
Result<ReencryptState> persisted_state(Registry& reg, BackingStore& header);
// The data moves of the data-shift modes (reencrypt_shift.cpp): len bytes
// copied from `from` at src to `to` at dst a chunk at a time, then `to`
// flushed; [off, off + len) of dev overwritten with random bytes, flushed.
Result<void> copy_flushed(BackingStore& from, uint64_t src, BackingStore& to, uint64_t dst, uint64_t len);
Result<void> wipe_random(BackingStore& dev, uint64_t off, uint64_t len);

// The header of a device in reencryption, and its state (the engines reload
// both after each metadata write); an error when none is in progress.
Result<void> read_reencryption(Registry& reg, BackingStore& header, Metadata& md, ReencryptState& st);

}  // namespace blkcrypt::luks::luks2::detail
