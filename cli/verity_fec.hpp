// `blkcrypt verity ... --fec-device F --fec-roots N --fec-offset B`: the FEC
// options and what format and verify do with them (veritysetup's meaning).
#pragma once

#include "common.hpp"
#include "verity_actions.hpp"

#include <blkcrypt/verity/fec.hpp>

#include <optional>
#include <string>
#include <vector>

namespace cli {

struct FecOptions {
    std::string device;
    uint32_t roots = blkcrypt::verity::kFecDefaultRoots;
    uint64_t offset = 0;  // bytes
};

void add_fec_options(po::options_description& opts);
std::vector<std::string> fec_option_names();
// None without --fec-device; --fec-roots/--fec-offset alone are refused.
std::optional<FecOptions> fec_from_options(const po::variables_map& vm);

// The lines veritysetup adds to its summary.
struct FecSummary {
    uint32_t roots = 0;
    uint64_t parity_blocks = 0;
    bool on_hash_device = false;  // "Hash device size" then includes the parity
    uint64_t offset = 0;          // "FEC device size" only for 0, off the hash device
};

}  // namespace cli
