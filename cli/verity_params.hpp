// The veritysetup-style options shared by `blkcrypt verity format|verify|dump`
// and the text/JSON summaries they print.
#pragma once

#include "common.hpp"

#include <blkcrypt/verity/params.hpp>

#include <string>

namespace blkcrypt { class Registry; }

namespace cli {

struct FecSummary;

// --hash, --data-block-size, --hash-block-size, --data-blocks, --hash-offset,
// --salt, --uuid, --format, --no-superblock, --root-hash-file, --threads,
// --async, --json.
void add_verity_options(po::options_description& opts);

// Parameters from the command line. data_size fills --data-blocks when it is
// not given (and must then be a whole number of blocks). A salt is generated
// when `generate` is set and --salt is absent.
blkcrypt::verity::VerityParams params_from_options(const po::variables_map& vm, uint64_t data_size,
                                                   bool generate);

// veritysetup takes the parameters from the superblock and ignores the
// options; a script may pass them. Those that agree are accepted (a --hash
// driver of the recorded algorithm too), a contradicting one is refused
// with both values.
void check_superblock_options(const po::variables_map& vm, const blkcrypt::verity::VerityParams& sb,
                              blkcrypt::Registry& reg);

std::string format_uuid(const std::array<uint8_t, 16>& uuid);

// veritysetup's "VERITY header information for X" block; the root hash line
// only when root is not empty.
void print_verity_summary(const std::string& device, const blkcrypt::verity::VerityParams& p,
                          const blkcrypt::verity::TreeGeometry& g, const std::string& root_hex,
                          bool json, const FecSummary* fec = nullptr);

}  // namespace cli
