// What every block device checks of an I/O: whole blocks inside the device.
#pragma once

#include <cstddef>
#include <cstdint>

namespace blkcrypt::dm {

inline bool inside(uint64_t offset, std::size_t len, uint64_t size, uint32_t bs) {
    return len && offset % bs == 0 && len % bs == 0 && offset <= size && len <= size - offset;
}

}  // namespace blkcrypt::dm
