// The one progress display of every long-running command (crypt
// encrypt/decrypt, verity format/verify/read, fsverity digest).
//
// Text: "[#####.....]  42.0%  123.4 MiB/s  ETA 00m12s" on stderr, redrawn in
// place on a terminal (one line per update otherwise), and always ended -
// finish() ends it with a newline, an unfinished bar is cleared - before
// anything else is printed. JSON (--progress-json): cryptsetup 2.6's lines on
// stdout, {"device":"...","device_bytes":"...","device_size":"...",
// "speed":"...","eta_ms":"...","time_ms":"..."}, every value a string.
#pragma once

#include "common.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace cli {

struct ProgressSettings {
    enum Mode { Auto, Text, Off, Json } mode = Auto;  // Auto: Text when stderr is a terminal
    double frequency = 0;  // seconds between reports; 0: 0.2 s on a terminal, else 0.5 s
};

// --progress, --no-progress, --progress-json, --progress-frequency SECONDS.
void add_progress_options(po::options_description& opts);
// Their long names, for only_for().
std::vector<std::string> progress_option_names();

// The settings the options ask for (UsageError when they contradict).
ProgressSettings progress_settings(const po::variables_map& vm);

class Progress {
public:
    // device names the object of the work in the JSON lines.
    Progress(const ProgressSettings& settings, std::string device, uint64_t total);
    ~Progress();  // clears an unfinished text line
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;

    // done bytes of total; reports at most once per frequency.
    void update(uint64_t done);
    // The final report (100%, the average rate); ends the text line.
    void finish();
    // The same, for a total that was unknown (0) until the end of a stream.
    void finish(uint64_t done);
    bool prints_to_stdout() const noexcept { return mode_ == ProgressSettings::Json; }

    // The text line and the JSON object for a state (exposed for the tests).
    static std::string text_line(uint64_t done, uint64_t total, double seconds, bool final);
    static std::string json_line(const std::string& device, uint64_t done, uint64_t total,
                                 double seconds, bool final);

private:
    using Clock = std::chrono::steady_clock;
    void report(uint64_t done, bool final);

    ProgressSettings::Mode mode_;
    bool tty_ = false;
    bool open_line_ = false;  // a text line is drawn and not ended
    bool finished_ = false;
    std::string device_;
    uint64_t total_;
    std::chrono::duration<double> interval_;
    Clock::time_point start_ = Clock::now(), last_ = start_;
};

}  // namespace cli
