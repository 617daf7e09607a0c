// What every `serve` action shares: the server options, signal handling
// (SIGINT/SIGTERM stop it gracefully), the pid file and the log.
#pragma once

#include "common.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/dm_table.hpp>
#include <blkcrypt/dm/targets.hpp>

#include <memory>
#include <string>
#include <vector>

namespace cli {

// --socket, --port, --bind, --read-only, --export-name, --pid-file.
void add_serve_options(po::options_description& opts);
std::vector<std::string> serve_option_names();

// Blocks SIGINT, SIGTERM and SIGHUP in this thread and every thread created
// after it, so that only the server's signal thread sees them. Call before
// making the device (its worker threads inherit the mask).
void block_stop_signals();

// The device a format's table describes (dm::build_dm_table), over the one
// store its lines name: the image the command opened. Errors throw Failure
// prefixed with `what_failed` (UsageError instead for a table the user's
// options made, when usage_faults and the store did not fail underneath).
struct TableDevice {
    bool read_only = false;
    unsigned threads = 0;      // 0: one per core
    std::string description;   // what the serve log line names
    std::string what_failed;   // "" or "IMAGE: "
    bool usage_faults = false;
};
std::shared_ptr<blkcrypt::dm::BlockDevice> table_device(const blkcrypt::dm::DmTable& table,
                                                        std::shared_ptr<blkcrypt::BackingStore> store,
                                                        const TableDevice& how);
// Tables that stack, lowest first (dm::build_dm_stack): LUKS2 --integrity's
// NAME_dif and NAME. Every path they name is `store`.
std::shared_ptr<blkcrypt::dm::BlockDevice> table_device(const std::vector<blkcrypt::dm::NamedDmTable>& stack,
                                                        std::shared_ptr<blkcrypt::BackingStore> store,
                                                        const TableDevice& how);

// A format's serve action once unlocked: table_device over IMAGE with the
// command line's --read-only and --threads, served until a stop signal.
int serve_table(const po::variables_map& vm, const blkcrypt::dm::DmTable& table,
                std::shared_ptr<blkcrypt::BackingStore> image, TableDevice how);
int serve_table(const po::variables_map& vm, const std::vector<blkcrypt::dm::NamedDmTable>& stack,
                std::shared_ptr<blkcrypt::BackingStore> image, TableDevice how);

// A format's table action: the lines `cryptsetup open` loads, the key hidden
// unless --show-key; a refused table is a Failure.
int print_table(const po::variables_map& vm, const blkcrypt::Result<blkcrypt::dm::DmTable>& table);

// Serves dev until a stop signal; the in-flight requests finish, the device
// is flushed, and the command exits 0.
int serve_device(const po::variables_map& vm, std::shared_ptr<blkcrypt::dm::BlockDevice> dev);

}  // namespace cli
