// The whole-image copy through a dm-crypt target that `crypt encrypt|decrypt`
// and `luks encrypt|decrypt` share: plaintext IN written through a target
// whose backing store is OUT (encrypt), or a target over IN read into OUT
// (decrypt), 1 MiB bios with several in flight (dm::BioRing), the output
// policy of output_file.hpp, progress, streams in and out.
#pragma once

#include "common.hpp"
#include "output_file.hpp"
#include "progress.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/block_device.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/dm/dm_table.hpp>
#include <blkcrypt/dm/table.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace cli {

struct ImageCopy {
    bool encrypt = false;
    std::string in_path;  // "-", a FIFO, a character device, a file or a block device
    Output& out;          // opened by the caller (before any passphrase prompt)
    // table.offset: where the ciphertext starts in the encrypted file, in
    // 512-byte sectors (a multiple of the sector size).
    const blkcrypt::dm::CryptTable& table;
    // Encryption into an existing regular OUT keeps its bytes before
    // table.offset, as `cryptsetup open -o` and dd leave them (crypt, loopaes;
    // a container's header is written there instead).
    bool keep_prefix = false;
    // table.offset is a container's data offset, not an option: IN shorter
    // than it is a damaged container (exit 1).
    bool offset_from_header = false;
    // A range of the plaintext device: it starts at sector start_sectors
    // (IVs and ciphertext positions count from the device's sector 0) and
    // spans size_sectors. Decryption writes the range to OUT from byte 0;
    // encryption writes IN into it. Both in 512-byte sectors.
    uint64_t start_sectors = 0;
    std::optional<uint64_t> size_sectors;  // plaintext sectors; default: all of IN (after the offset)
    std::optional<uint64_t> max_sectors;   // a stream IN of unknown size may hold at most this much
    unsigned threads = 0;                  // 0: one per core
    ProgressSettings progress;
    std::string progress_name;  // the device the progress lines name
    // Committed together with OUT (Output::commit_all), as luks encrypt
    // --format's detached header: both complete, or neither replaced.
    Output* commit_with = nullptr;
};

struct CopyResult {
    uint64_t bytes = 0;
    double seconds = 0;
};

// Runs the copy and commits OUT. UsageError/Failure as the commands throw them.
CopyResult copy_image(const ImageCopy& job);

// What every copying command takes from its command line: --threads and the
// progress options, the progress line naming `name`.
void set_copy_options(const po::variables_map& vm, ImageCopy& job, const std::string& name);

// CryptTarget::create with its errors as exceptions: the table's fault
// (UsageError) unless the store failed underneath (Failure).
std::unique_ptr<blkcrypt::dm::CryptTarget> make_crypt_target(blkcrypt::Registry& reg,
                                                             const blkcrypt::dm::CryptTable& t,
                                                             std::shared_ptr<blkcrypt::dm::BackingStore> store,
                                                             uint64_t length_sectors,
                                                             const blkcrypt::dm::CryptTargetOptions& opts);

// A container's decrypt: the plaintext of a dm table over the opened IMAGE
// (zero, linear and crypt lines, in order) written to OUT, each crypt line
// through a ring of 1 MiB bios converting while the oldest is written, as
// copy_image runs. Reserves OUT, reports progress naming `name`, and leaves
// OUT uncommitted (the caller commits).
struct TableCopy {
    const blkcrypt::dm::DmTable& table;
    std::shared_ptr<blkcrypt::BackingStore> store;  // the device every line names
    Output& out;
    std::string name;       // IMAGE, in errors and progress lines
    unsigned threads = 0;   // 0: one per core
    ProgressSettings progress;
};
CopyResult copy_table(const TableCopy& job);

// A range of a block device the dm layer built (LUKS2 --integrity: dm-crypt
// stacked on dm-integrity), through the same ring of 1 MiB bios as the
// copies above, several in flight so that every worker converts while the
// oldest bio is written out (read) or the next is filled (write).
struct DeviceCopy {
    blkcrypt::dm::BlockDevice& device;
    uint64_t start = 0;  // bytes into the device
    uint64_t bytes = 0;  // the range; a write may end earlier (fill comes back short)
    bool write = false;
    // Read: the range to OUT from byte 0 (reserved first; left uncommitted).
    Output* out = nullptr;
    // Write: the bytes [pos, pos + want) of the range, in order: in the
    // slot's own buffer or any memory valid until the bio is retired; fewer
    // than want (whole blocks) ends the range.
    std::function<blkcrypt::Bytes(uint64_t pos, uint8_t* slot, std::size_t want)> fill;
    // Write: the bio [pos, pos + len) of the range is done (memory fill
    // gave for it may go).
    std::function<void(uint64_t pos, std::size_t len)> written;
    // A bio that failed at byte `at` of the device, `len` bytes (0: refused
    // before it ran): throws the command's error.
    std::function<void(uint64_t at, std::size_t len, blkcrypt::Status)> failed;
    std::string name;      // the progress lines' device
    unsigned threads = 0;  // as the device was built with (0: one per core): the ring's depth follows it
    ProgressSettings progress;
};
// The bytes done, and the time.
CopyResult copy_device(const DeviceCopy& job);

// The table's size in bytes.
uint64_t table_bytes(const blkcrypt::dm::DmTable& table);

}  // namespace cli
