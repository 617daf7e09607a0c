// Random bytes from the kernel's CSPRNG (getrandom), for salts, keys,
// anti-forensic stripes and UUIDs.
#pragma once

#include <blkcrypt/bytes.hpp>
#include <blkcrypt/status.hpp>

namespace blkcrypt {

// Fills out entirely; IoError with the errno text if the kernel refuses.
Result<void> random_bytes(Bytes out);

}  // namespace blkcrypt
