// Device-mapper tables in userspace: the block device kinds a dmsetup table
// is built from (linear, zero, error, a concatenation of segments, the
// verified view of a dm-verity target) and the table file itself.
//
// A table file is what `dmsetup create NAME FILE` reads: one target per line,
//   <start> <length> <target> <args...>      (512-byte sectors)
// blank lines and lines starting with '#' ignored. The lines must cover the
// device from sector 0 without gaps or overlaps, as the kernel requires.
// Targets and their arguments, as the kernel's constructors take them:
//   linear <device> <offset>
//   zero
//   error
//   crypt <cipher> <key> <iv_offset> <device> <offset> [<#opts> <opts>...]
//   verity <version> <data_dev> <hash_dev> <data_bs> <hash_bs> <blocks>
//          <hash_start> <alg> <root> <salt|-> [<#opts> <opts>...]
// crypt and verity arguments go through their own parsers (dm/table.hpp,
// verity/table.hpp). A table with a verity line is read-only as a whole: the
// kernel refuses to load a verity target in a writable table.
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/table.hpp>
#include <blkcrypt/nbd/block_device.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/status.hpp>
#include <blkcrypt/verity/table.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace blkcrypt::verity {
class VerityTarget;
struct Corruption;
}  // namespace blkcrypt::verity

namespace blkcrypt::nbd {

// --- the block device kinds --------------------------------------------

// [offset, offset + length) of `lower`, bytes; both multiples of its block size.
Result<std::shared_ptr<BlockDevice>> make_linear_device(std::shared_ptr<BlockDevice> lower, uint64_t offset,
                                                        uint64_t length);
// Reads zeros, drops writes (dm-zero).
std::shared_ptr<BlockDevice> make_zero_device(uint64_t size, bool read_only);
// Every read and write fails with IoError (dm-error).
std::shared_ptr<BlockDevice> make_error_device(uint64_t size);

struct Segment {
    uint64_t start = 0;  // bytes into the whole device
    std::shared_ptr<BlockDevice> dev;  // its size is the segment's length
};
// Segments back to back from 0. An I/O across a boundary is split; its
// result is the first failure of its parts. The block size is the largest
// of the segments'; every boundary must be a multiple of it. Read-only when
// read_only is set or any segment is.
Result<std::shared_ptr<BlockDevice>> make_concat_device(std::vector<Segment> segments, bool read_only,
                                                        std::string description);

// The verified data of a dm-verity target, read-only, on a pool of `threads`
// I/O threads (0: one per core); a block that fails verification fails its read.
Result<std::shared_ptr<BlockDevice>> make_verity_device(std::unique_ptr<verity::VerityTarget> target,
                                                        unsigned threads, std::string description);

// A block device as a synchronous BackingStore (for a target stacked on it).
// I/O must be in whole blocks of the device.
std::shared_ptr<BackingStore> device_store(std::shared_ptr<BlockDevice> dev, std::string name);

// --- table files -------------------------------------------------------

struct DmLine {
    unsigned line_no = 0;  // in the file, from 1
    uint64_t start = 0, length = 0;  // 512-byte sectors
    std::string target;              // linear, zero, error, crypt, verity
    std::string device;              // linear
    uint64_t offset = 0;             // linear: sectors into device
    std::optional<dm::CryptTable> crypt;       // device and offset inside
    std::optional<verity::VerityTable> verity;  // data_dev, hash_dev inside
};

// Parses a whole table file (no I/O). Errors name the line: "line 3: ...";
// they never contain key material.
Result<std::vector<DmLine>> parse_dm_table(std::string_view text);

struct DmBuildOptions {
    bool read_only = false;
    unsigned threads = 0;  // crypt workers and I/O threads; 0 = one per core
    // A device name that is another table (the caller's /dev/mapper/NAME),
    // or nullptr: then it is a path, opened by `open` once per path,
    // writable when a linear or crypt line of a writable table uses it.
    std::function<std::shared_ptr<BlockDevice>(const std::string& name)> named;
    std::function<Result<std::shared_ptr<BackingStore>>(const std::string& path, bool writable)> open;
    std::function<void(const verity::Corruption&)> on_corruption;  // verity: each corruption found
    std::string description;  // for describe()
};

// The device a parsed table describes.
Result<std::shared_ptr<BlockDevice>> build_dm_table(Registry& reg, const std::vector<DmLine>& lines,
                                                    const DmBuildOptions& opts);

}  // namespace blkcrypt::nbd
