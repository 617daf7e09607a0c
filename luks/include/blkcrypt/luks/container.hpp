// A LUKS container, LUKS1 or LUKS2, opened to what the dm-crypt engine
// needs for its data segment.
#pragma once

#include <blkcrypt/dm/table.hpp>

#include <cstdint>
#include <string>

namespace blkcrypt::luks {

enum class Version { Luks1 = 1, Luks2 = 2 };

struct Volume {
    Version version;
    std::string uuid, label;
    dm::CryptTable table;     // cipher, key, sector_size, iv_large_sectors, offset (sectors)
    uint64_t length_sectors;  // 0 = to end
    int keyslot;
};

}  // namespace blkcrypt::luks
