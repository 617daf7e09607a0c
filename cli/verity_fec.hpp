// `blkcrypt verity ... --fec-device F --fec-roots N --fec-offset B`: the FEC
// options and what format and verify do with them (veritysetup's meaning).
#pragma once

#include "common.hpp"
#include "verity_actions.hpp"

#include <blkcrypt/verity/fec.hpp>
#include <blkcrypt/verity/table.hpp>
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
// --repair, --repair-to, --repair-hash-to (verify only).
std::vector<std::string> repair_option_names();
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

// The FEC geometry veritysetup would use for these options: the hash
// device covered to its end, or up to the FEC area when that is on it.
blkcrypt::verity::FecGeometry fec_geometry_for(const FecOptions& fec, const blkcrypt::verity::VerityParams& params,
                                               const blkcrypt::verity::TreeGeometry& geometry,
                                               const std::string& hash_path, uint64_t hash_size);

// table/read/serve: the table's FEC arguments from --fec-device etc.
void apply_fec_options(const po::variables_map& vm, blkcrypt::verity::VerityTable& t,
                       const blkcrypt::verity::VerityParams& params, const blkcrypt::verity::TreeGeometry& geometry,
                       uint64_t hash_size);
// The FEC store a target needs for t (sharing DATA's or HASH's when it is one of them).
Store fec_store_for(const blkcrypt::verity::VerityTable& t, const Store& data, const Store& hash);

// verify with --fec-device: corrupted blocks FEC restores are reported as
// corrected (exit 0, as veritysetup verify), the rest as corrupted (exit 2);
// --repair writes the restored blocks back into DATA and HASH; --repair-to
// and --repair-hash-to write corrected copies through the output policy.
int run_verify_fec(const po::variables_map& vm, const std::vector<std::string>& files, const FecOptions& fec,
                   const blkcrypt::verity::VerityParams& params, const blkcrypt::verity::TreeGeometry& geometry,
                   const std::vector<uint8_t>& root, blkcrypt::BackingStore& data, blkcrypt::BackingStore& hash,
                   const blkcrypt::verity::TreeOptions& opts, Progress& progress);

}  // namespace cli
