// Byte-order helpers: kept for the files that include this name; the helpers
// live in bytes_util.hpp.
#pragma once

#include <blkcrypt/internal/bytes_util.hpp>
