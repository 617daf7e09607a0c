// The LUKS1 legacy reencryption log (LUKS-<uuid>.log, one 512-byte sector of
// text) and the LUKS\xde\xad mark: parse_log must refuse or accept without
// reading past the sector; an accepted log prints back (format_log) to text
// that parses to the same values; unusable_uuid reads the input as an image.
#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/luks/reencrypt_luks1.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace blkcrypt;
namespace legacy = blkcrypt::luks::luks1::legacy;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    static const std::string uuid = "5d2f4a1e-8a7b-4c3d-9e0f-123456789abc";
    // Exactly the sector (short inputs padded), as the file is read.
    std::vector<uint8_t> sector(legacy::kLogSize, 0);
    if (size) std::memcpy(sector.data(), data, std::min(size, sector.size()));
    auto log = legacy::parse_log(sector, uuid);
    if (log) {
        const auto text = legacy::format_log(*log);
        auto back = legacy::parse_log(text, uuid);
        if (!back || back->direction != log->direction || back->mode != log->mode || back->offset != log->offset ||
            back->shift != log->shift || back->uuid != uuid)
            std::abort();
    }
    MemoryStore store(size);
    if (size) std::memcpy(store.data().data(), data, size);
    auto marked = legacy::unusable_uuid(store);
    if (marked && *marked && (*marked)->size() > 40) std::abort();
    return 0;
}
