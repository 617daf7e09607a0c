// Byte-span vocabulary used by every interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace blkcrypt {

using Bytes = std::span<uint8_t>;
using ConstBytes = std::span<const uint8_t>;

}  // namespace blkcrypt
