// The KDF options of a new LUKS keyslot as the user gave them (luks format,
// add-key, change-key, reencrypt): --pbkdf, --hash, --pbkdf-force-iterations,
// --iter-time, --pbkdf-memory, --pbkdf-parallel. The library checks them for
// the container's version.
#pragma once

#include "common.hpp"

#include <blkcrypt/luks/container.hpp>

namespace cli {

// Whether any of them was given.
bool kdf_given(const po::variables_map& vm);
blkcrypt::luks::KdfRequest kdf_request(const po::variables_map& vm);

}  // namespace cli
