// The blkcrypt commands. Each takes the words after its name and returns the
// exit status; errors are thrown as cli::UsageError or cli::Failure.
#pragma once

#include "common.hpp"
#include "registry.hpp"

namespace cli {

int run_list(Args args);
int run_selftest(Args args);
int run_hash(Args args);
int run_skcipher(Args args);
int run_aead(Args args);
int run_crypt(Args args);
int run_verity(Args args);
int run_integrity(Args args);
int run_fsverity(Args args);
int run_bench(Args args);
int run_luks(Args args);
int run_reencrypt(Args args);
int run_repair(Args args);
int run_tcrypt(Args args);
int run_bitlk(Args args);
int run_loopaes(Args args);
int run_fvault2(Args args);
int run_serve(Args args);
// The commands that detect IMAGE's format (cmd_detect.cpp, detect.hpp).
int run_dump_detected(Args args);
int run_test_passphrase_detected(Args args);
int run_decrypt_detected(Args args);
int run_table_detected(Args args);
int run_open(Args args);

}  // namespace cli
