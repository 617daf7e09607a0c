// Pieces shared by the `blkcrypt verity` actions (cmd_verity.cpp and
// cmd_verity_read.cpp).
#pragma once

#include "common.hpp"
#include "output_file.hpp"  // same_file
#include "registry.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/verity/params.hpp>
#include <blkcrypt/verity/tree.hpp>

#include <memory>
#include <string>
#include <vector>

namespace cli {

using Store = std::shared_ptr<blkcrypt::dm::BackingStore>;

// Opens a DATA, HASH or FEC device. As veritysetup (and every container
// command), a missing path, or one that is no regular file or block device,
// exits 4: "Device X does not exist or access denied." / "... is not compatible".
// `role` names it in the second message.
Store open_store(const std::string& path, bool writable, const std::string& role);

// Parameters from the superblock at --hash-offset, or (--no-superblock)
// from the command line, with data_size giving the default block count.
blkcrypt::verity::VerityParams load_params(const po::variables_map& vm,
                                           blkcrypt::dm::BackingStore& hash, uint64_t data_size);

// ROOT_HEX (files[2]) or the content of --root-hash-file.
std::vector<uint8_t> root_hash_argument(const po::variables_map& vm, const std::vector<std::string>& files);

std::string describe(const blkcrypt::verity::Corruption& c);
// The corrupted blocks as a JSON array of {kind, block, level} (verify --json).
class JsonWriter;
void json_corruptions(JsonWriter& w, const std::vector<blkcrypt::verity::Corruption>& bad);

int run_verity_table(const po::variables_map& vm, const std::vector<std::string>& files);
int run_verity_read(const po::variables_map& vm, const std::vector<std::string>& files);
int run_verity_serve(const po::variables_map& vm, const std::vector<std::string>& files);

}  // namespace cli
