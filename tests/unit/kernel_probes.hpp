// The read-back lines tests/golden/luks2-integrity/record.sh wrote in the
// kernel ("range LABEL OFFSET LENGTH SHA256", "probe OFFSET ok SHA256",
// "probe OFFSET fail"), checked against a device that should read as the
// kernel's mapping read: what differs, one string each (empty: all agree).
#pragma once

#include "golden_files.hpp"
#include "test_util.hpp"

#include <blkcrypt/dm/block_device.hpp>
#include <blkcrypt/shash.hpp>

#include <sstream>
#include <string>
#include <vector>

namespace testutil {

inline std::vector<std::string> kernel_probe_mismatches(blkcrypt::dm::BlockDevice& dev, const std::string& info_path,
                                                        uint64_t sector_size) {
    using namespace blkcrypt;
    std::vector<std::string> bad;
    auto sha = Shash::alloc(registry(), "sha256");
    if (!sha) return {"no sha256"};
    std::istringstream in(read_text(info_path));
    for (std::string line; std::getline(in, line);) {
        if (!line.starts_with("probe ") && !line.starts_with("range ")) continue;
        std::istringstream cs(line);
        std::string kind, label, res, want;
        uint64_t off = 0, len = sector_size;
        if (line.starts_with("range ")) {
            cs >> kind >> label >> off >> len >> want;
            res = "ok";
        } else {
            cs >> kind >> off >> res >> want;
        }
        std::vector<uint8_t> buf(len);
        const Status s = dm::read_sync(dev, off, Bytes(buf.data(), len));
        if (res != "ok") {
            if (s != Status::BadMsg) bad.push_back(line + ": read gave " + std::string(to_string(s)) + ", want BadMsg");
            continue;
        }
        uint8_t d[32];
        if (s != Status::Ok || sha->digest(ConstBytes(buf.data(), len), Bytes(d, 32)) != Status::Ok)
            bad.push_back(line + ": read gave " + std::string(to_string(s)));
        else if (hex(ConstBytes(d, 32)) != want)
            bad.push_back(line + ": read " + hex(ConstBytes(d, 32)));
    }
    return bad;
}

}  // namespace testutil
