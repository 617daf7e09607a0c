// Device-mapper tables in userspace: the table file, the currency between
// the container formats (each unlocks to a table) and the engines, built
// into a block device from the target kinds of targets.hpp.
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
//   integrity <dev> <offset> <tag_size> <mode> [<#opts> <opts>...]
// crypt, verity and integrity arguments go through their own parsers
// (dm/table.hpp, verity/table.hpp, dm/integrity_table.hpp). A table with a verity line is read-only as a whole: the
// kernel refuses to load a verity target in a writable table.
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/table.hpp>
#include <blkcrypt/dm/block_device.hpp>
#include <blkcrypt/dm/integrity_table.hpp>
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
struct Corruption;
}

namespace blkcrypt::dm {

// --- table files -------------------------------------------------------

struct DmLine {
    unsigned line_no = 0;  // in the file, from 1
    uint64_t start = 0, length = 0;  // 512-byte sectors
    std::string target;              // linear, zero, error, crypt, verity, integrity
    std::string device;              // linear
    uint64_t offset = 0;             // linear: sectors into device
    std::optional<dm::CryptTable> crypt;       // device and offset inside
    std::optional<verity::VerityTable> verity;  // data_dev, hash_dev inside
    std::optional<IntegrityTable> integrity;    // device, meta_device inside
};

// A whole table: its lines in order, covering the device from sector 0.
using DmTable = std::vector<DmLine>;

// Parses a whole table file (no I/O). Errors name the line: "line 3: ...";
// they never contain key material.
Result<DmTable> parse_dm_table(std::string_view text);

struct DmBuildOptions {
    bool read_only = false;
    unsigned threads = 0;  // crypt workers and I/O threads; 0 = one per core
    // A device name that is another table (the caller's /dev/mapper/NAME),
    // or nullptr: then it is a path, opened by `open` once per path,
    // writable when a linear or crypt line of a writable table uses it.
    std::function<std::shared_ptr<BlockDevice>(const std::string& name)> named;
    std::function<Result<std::shared_ptr<BackingStore>>(const std::string& path, bool writable)> open;
    std::function<void(const verity::Corruption&)> on_corruption;  // verity: each corruption found
    std::function<void(const Error&)> on_integrity_failure;  // integrity: each failed request (make_integrity_device)
    std::string description;  // for describe()
};

// The one line of a table a format maps with a single crypt target:
// sectors [0, length) of the table, `device` from t.offset. t's start,
// length and device are set to match.
DmLine crypt_line(CryptTable t, uint64_t length, std::string device);

// The table as dmsetup prints it (one line each, "\n"-terminated), which
// parse_dm_table reads back; crypt keys only with show_key, as
// `dmsetup table --showkeys`.
std::string format_dm_table(const DmTable& table, bool show_key);

// The device a parsed table describes.
Result<std::shared_ptr<BlockDevice>> build_dm_table(Registry& reg, const DmTable& lines,
                                                    const DmBuildOptions& opts);

// Tables that stack, lowest first, as `dmsetup create` loads them one after
// the other (LUKS2 --integrity: NAME_dif, then NAME over /dev/mapper/NAME_dif).
// Each is built with build_dm_table; a later table's /dev/mapper/NAME is the
// device of the earlier table called NAME (before opts.named is asked).
// The top table's device.
struct NamedDmTable {
    std::string name;
    DmTable table;
};
Result<std::shared_ptr<BlockDevice>> build_dm_stack(Registry& reg, const std::vector<NamedDmTable>& tables,
                                                    const DmBuildOptions& opts);

}  // namespace blkcrypt::dm
