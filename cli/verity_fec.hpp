// `blkcrypt verity ... --fec-device F --fec-roots N --fec-offset B`: the FEC
// options and what format and verify do with them (veritysetup's meaning).
#pragma once

#include "common.hpp"
#include "verity_actions.hpp"

#include <blkcrypt/verity/fec.hpp>
#include <blkcrypt/verity/tree.hpp>

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

class Progress;

// verify with --fec-device: corrupted blocks FEC restores are reported as
// corrected (exit 0, as veritysetup verify), the rest as corrupted (exit 2);
// --repair writes the restored blocks back into DATA and HASH.
int run_verify_fec(const po::variables_map& vm, const std::vector<std::string>& files, const FecOptions& fec,
                   const blkcrypt::verity::VerityParams& params, const blkcrypt::verity::TreeGeometry& geometry,
                   const std::vector<uint8_t>& root, blkcrypt::BackingStore& data, blkcrypt::BackingStore& hash,
                   const blkcrypt::verity::TreeOptions& opts, Progress& progress);

}  // namespace cli
