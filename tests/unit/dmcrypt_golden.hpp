// The kernel's dm-crypt golden vectors (tests/dmcrypt/golden): the manifest
// and the table arguments each case was made with.
#pragma once

#include "paths.hpp"
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace golden {

inline const std::string kDir = std::string(testutil::kSourceDir) + "/tests/dmcrypt/golden/";

// The rows of a tab-separated file after its header line, those with at
// least `columns` fields.
inline std::vector<std::vector<std::string>> read_tsv(const std::string& path, std::size_t columns) {
    std::vector<std::vector<std::string>> rows;
    std::ifstream f(path);
    std::string line;
    std::getline(f, line);  // the header
    while (std::getline(f, line)) {
        std::vector<std::string> w;
        std::istringstream in(line);
        for (std::string x; std::getline(in, x, '\t');) w.push_back(x);
        if (w.size() >= columns) rows.push_back(std::move(w));
    }
    return rows;
}

struct Case {
    std::string name, cipher, key_hex, opts, ct_file;
    uint64_t iv_offset = 0;
    std::size_t sector_size = 512, size = 0;
};

// manifest.tsv: case cipher key_hex iv_offset sector_size opts size ct_file ct_sha256 command
inline std::vector<Case> read_manifest() {
    std::vector<Case> out;
    for (const auto& w : read_tsv(kDir + "manifest.tsv", 8)) {
        Case c;
        c.name = w[0];
        c.cipher = w[1];
        c.key_hex = w[2];
        c.iv_offset = std::stoull(w[3]);
        c.sector_size = std::stoul(w[4]);
        c.opts = w[5] == "-" ? "" : w[5];
        c.size = std::stoul(w[6]);
        c.ct_file = w[7];
        out.push_back(c);
    }
    return out;
}

// "<cipher> <key> <iv_offset> [<n> sector_size:N opts...]", as the table had it.
inline std::string crypt_args(const Case& c) {
    std::vector<std::string> opts;
    if (c.sector_size != 512) opts.push_back("sector_size:" + std::to_string(c.sector_size));
    std::istringstream in(c.opts);
    for (std::string o; in >> o;) opts.push_back(o);
    std::string args = c.cipher + " " + c.key_hex + " " + std::to_string(c.iv_offset);
    if (!opts.empty()) {
        args += " " + std::to_string(opts.size());
        for (const auto& o : opts) args += " " + o;
    }
    return args;
}

}  // namespace golden
