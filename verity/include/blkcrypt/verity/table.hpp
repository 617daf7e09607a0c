// dm-verity table lines, parsed as the kernel's verity_ctr does:
//
//   <start> <len> verity <version> <data_dev> <hash_dev> <data_block_size>
//     <hash_block_size> <num_data_blocks> <hash_start_block> <algorithm>
//     <root_digest> <salt|-> [<#opt_params> <opt_params>...]
//
// or just the part after "verity". Options: ignore_corruption,
// restart_on_corruption, panic_on_corruption, restart_on_error,
// panic_on_error, ignore_zero_blocks, check_at_most_once,
// try_verify_in_tasklet, FEC: use_fec_from_device <dev> fec_start <blk>
// fec_blocks <n> fec_roots <n>, and root_hash_sig_key_desc <key>.
#pragma once

#include <blkcrypt/status.hpp>
#include <blkcrypt/verity/params.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace blkcrypt::verity {

enum class CorruptionMode { Error, Ignore, Restart, Panic };

// The FEC options (device empty: no FEC). Units as the kernel's: blocks of
// the data block size.
struct VerityFecArgs {
    std::string device;
    uint64_t start = 0;   // fec_start: where the parity starts on the device
    uint64_t blocks = 0;  // fec_blocks: data + hash blocks covered
    uint32_t roots = 0;   // fec_roots: 2..24
};

struct VerityTable {
    uint64_t start = 0, length = 0;  // 512-byte sectors; whole lines only
    std::string data_dev, hash_dev;
    VerityParams params;             // hash_type = <version>; no superblock
    uint64_t hash_start_block = 0;
    std::vector<uint8_t> root_hash;
    CorruptionMode on_corruption = CorruptionMode::Error;
    bool ignore_zero_blocks = false;
    bool check_at_most_once = false;
    std::string root_hash_sig_key_desc;   // empty: no signature option
    std::vector<std::string> other_flags;  // accepted, no effect here (restart_on_error...)
    VerityFecArgs fec;

    // The arguments after "verity", as `dmsetup table` shows them.
    std::string args() const;
    // "<start> <len> verity <args>".
    std::string line() const;
};

Result<VerityTable> parse_verity_args(std::string_view args);
Result<VerityTable> parse_verity_line(std::string_view line);
// Either form: a full line when its third word is "verity", else the
// arguments only. The error is that of the form the text is in.
Result<VerityTable> parse_verity_table(std::string_view text);

// The table for a tree built with params (hash_start_block from the
// superblock/offset rules), as cryptsetup would load it.
VerityTable make_verity_table(const VerityParams& p, const TreeGeometry& g,
                              std::vector<uint8_t> root_hash, std::string data_dev,
                              std::string hash_dev);

}  // namespace blkcrypt::verity
