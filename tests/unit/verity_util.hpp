// Helpers for the verity tests: deterministic data (the same AES-128-CTR
// keystream tests/verity/veritysetup/make-golden.sh makes with openssl),
// hex, sha256 through Crypto++ directly (independent of the registry), and the golden
// case tables.
#pragma once

#include "paths.hpp"
#include "reference.hpp"
#include "test_util.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/skcipher.hpp>
#include <blkcrypt/verity/params.hpp>

#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace verity_test {

using testutil::hex;
using testutil::unhex;

inline std::string sha256_hex(blkcrypt::ConstBytes b) { return hex(ref::sha256(b)); }

// head -c n /dev/zero | openssl enc -aes-128-ctr -K 000102..0f -iv IV
inline std::vector<uint8_t> ctr_data(blkcrypt::Registry& reg, std::size_t n, const std::string& iv_hex) {
    auto ctr = blkcrypt::Skcipher::alloc(reg, "ctr(aes)");
    if (!ctr) throw std::runtime_error(ctr.error().message);
    std::vector<uint8_t> key(16);
    for (int i = 0; i < 16; ++i) key[i] = static_cast<uint8_t>(i);
    if (ctr->setkey(key) != blkcrypt::Status::Ok) throw std::runtime_error("setkey");
    std::vector<uint8_t> out(n), iv = unhex(iv_hex);
    if (n && ctr->encrypt(std::vector<uint8_t>(n), out, iv) != blkcrypt::Status::Ok)
        throw std::runtime_error("ctr");
    return out;
}

// The format options of cases.tsv (veritysetup's names) as parameters.
inline blkcrypt::verity::VerityParams params_from_args(const std::string& args, uint64_t data_size) {
    blkcrypt::verity::VerityParams p;
    std::istringstream in(args);
    std::string opt, val;
    bool blocks_given = false;
    while (in >> opt) {
        if (opt == "--no-superblock") { p.superblock = false; continue; }
        in >> val;
        if (opt == "--hash") p.hash_name = val;
        else if (opt == "--format") p.hash_type = static_cast<uint32_t>(std::stoul(val));
        else if (opt == "--data-block-size") p.data_block_size = static_cast<uint32_t>(std::stoul(val));
        else if (opt == "--hash-block-size") p.hash_block_size = static_cast<uint32_t>(std::stoul(val));
        else if (opt == "--hash-offset") p.hash_offset = std::stoull(val);
        else if (opt == "--data-blocks") { p.data_blocks = std::stoull(val); blocks_given = true; }
        else if (opt == "--salt") p.salt = val == "-" ? std::vector<uint8_t>{} : unhex(val);
        else throw std::runtime_error("unknown option " + opt);
    }
    if (!blocks_given) p.data_blocks = data_size / p.data_block_size;
    // make-golden.sh's fixed --uuid 00000000-1111-4222-8333-444444444444
    p.uuid = {0, 0, 0, 0, 0x11, 0x11, 0x42, 0x22, 0x83, 0x33, 0x44, 0x44, 0x44, 0x44, 0x44, 0x44};
    return p;
}

struct GoldenCase {
    std::string name, iv, args, root, hash_sha256;
    std::size_t data_size = 0, hash_size = 0;
};

inline std::vector<std::vector<std::string>> read_tsv(const std::string& path) {
    std::ifstream f(path);
    if (!f) throw std::runtime_error("cannot open " + path);
    std::vector<std::vector<std::string>> rows;
    for (std::string line; std::getline(f, line);) {
        if (line.empty() || line[0] == '#') continue;
        std::vector<std::string> cols;
        std::istringstream ls(line);
        for (std::string c; std::getline(ls, c, '\t');) cols.push_back(c);
        rows.push_back(cols);
    }
    return rows;
}

inline std::vector<GoldenCase> golden_cases() {
    const std::string dir = std::string(testutil::kSourceDir) + "/tests/verity/veritysetup/";
    auto cases = read_tsv(dir + "cases.tsv");
    auto golden = read_tsv(dir + "golden.tsv");
    if (cases.size() != golden.size()) throw std::runtime_error("cases.tsv and golden.tsv disagree");
    std::vector<GoldenCase> out;
    for (std::size_t i = 0; i < cases.size(); ++i) {
        if (cases[i].at(0) != golden[i].at(0)) throw std::runtime_error("case order differs");
        out.push_back({cases[i][0], cases[i][2], cases[i][3], golden[i][1], golden[i][2],
                       std::stoul(cases[i][1]), std::stoul(golden[i][3])});
    }
    return out;
}

}  // namespace verity_test
