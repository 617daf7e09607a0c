// Progress: a one-line progress bar with throughput on stderr, drawn only
// when stderr is a terminal and at most five times a second.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include <unistd.h>

namespace cli {

// "[#####.....]  42%  123.4 MiB/s" on stderr, only when it is a terminal.
class Progress {
public:
    Progress(bool wanted, uint64_t total) : on_(wanted && ::isatty(STDERR_FILENO)), total_(total) {}
    void update(uint64_t done, bool force = false) {
        if (!on_) return;
        const auto now = Clock::now();
        if (!force && now - last_ < std::chrono::milliseconds(200)) return;
        last_ = now;
        const double secs = std::chrono::duration<double>(now - start_).count();
        const double mib_s = secs > 0 ? static_cast<double>(done) / secs / (1 << 20) : 0.0;
        const int pct = total_ ? static_cast<int>(done * 100 / total_) : 100;
        std::string bar(30, '.');
        std::fill_n(bar.begin(), pct * 30 / 100, '#');
        std::fprintf(stderr, "\r[%s] %3d%%  %8.1f MiB/s", bar.c_str(), pct, mib_s);
        drawn_ = true;
    }
    ~Progress() {
        if (drawn_) std::fputc('\n', stderr);
    }
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;

private:
    using Clock = std::chrono::steady_clock;
    bool on_;
    bool drawn_ = false;
    uint64_t total_;
    Clock::time_point start_ = Clock::now(), last_{};
};

}  // namespace cli
