// Output files that never appear half-written: TempOutput writes under a
// temporary name next to the final one and renames it when done; SignalGuard
// turns SIGINT/SIGTERM into a flag the long-running commands poll, so the
// temporary file is removed on the way out.
#pragma once

#include <atomic>
#include <csignal>
#include <string>

namespace cli {

// The signal received while a SignalGuard was active, or 0.
int pending_signal() noexcept;

class SignalGuard {
public:
    SignalGuard();
    ~SignalGuard();
    SignalGuard(const SignalGuard&) = delete;
    SignalGuard& operator=(const SignalGuard&) = delete;

private:
    struct sigaction old_int_ {}, old_term_ {};
};

class TempOutput {
public:
    // copy_existing: start from the final file's current content (a hash
    // device whose other regions must survive).
    explicit TempOutput(const std::string& final_path, bool copy_existing = false);
    ~TempOutput();
    TempOutput(const TempOutput&) = delete;
    TempOutput& operator=(const TempOutput&) = delete;

    int fd() const noexcept { return fd_; }
    const std::string& path() const noexcept { return path_; }
    void commit();  // fsync, close, rename into place

private:
    void cleanup() noexcept;
    std::string final_, path_;
    int fd_ = -1;
};

}  // namespace cli
