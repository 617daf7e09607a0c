// blkcrypt fsverity sign | verify-sig (cmd_fsverity_sig.cpp), and what they
// share with fsverity digest (cmd_fsverity.cpp).
#pragma once

#include "common.hpp"

#include <blkcrypt/verity/fsverity.hpp>

#include <string>
#include <vector>

namespace cli {

// --hash-alg, --block-size, --salt, --threads as `fsverity digest|sign` take them.
blkcrypt::verity::FsverityParams fsverity_params(const po::variables_map& vm);
// The words with fsverity-utils' "--salt=" (no salt) in a form Boost takes.
std::vector<std::string> fsverity_salt_words(Args args);

int run_fsverity_sign(Args args);
int run_fsverity_verify_sig(Args args);

}  // namespace cli
