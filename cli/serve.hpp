// What every `serve` action shares: the server options, signal handling
// (SIGINT/SIGTERM stop it gracefully), the pid file and the log.
#pragma once

#include "common.hpp"

#include <blkcrypt/nbd/block_device.hpp>

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

// Serves dev until a stop signal; the in-flight requests finish, the device
// is flushed, and the command exits 0.
int serve_device(const po::variables_map& vm, std::shared_ptr<blkcrypt::nbd::BlockDevice> dev);

}  // namespace cli
