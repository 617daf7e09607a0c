#include "progress.hpp"

#include "json.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <iostream>

#include <unistd.h>

namespace cli {

void add_progress_options(po::options_description& opts) {
    opts.add_options()
        ("progress", po::bool_switch(), "show progress on stderr even when it is not a terminal")
        ("no-progress", po::bool_switch(), "show no progress (default when stderr is not a terminal)")
        ("progress-json", po::bool_switch(), "print progress as JSON lines on stdout, as cryptsetup does")
        ("progress-frequency", po::value<double>()->value_name("SECONDS"),
         "report progress every SECONDS (default 0.2 on a terminal, else 0.5)");
}

std::vector<std::string> progress_option_names() {
    return {"progress", "no-progress", "progress-json", "progress-frequency"};
}

ProgressSettings progress_settings(const po::variables_map& vm) {
    ProgressSettings s;
    const bool text = vm["progress"].as<bool>(), off = vm["no-progress"].as<bool>(),
               json = vm["progress-json"].as<bool>();
    if (text + off + json > 1)
        throw UsageError("give at most one of --progress, --no-progress and --progress-json");
    s.mode = text ? ProgressSettings::Text : off ? ProgressSettings::Off
           : json ? ProgressSettings::Json : ProgressSettings::Auto;
    if (vm.count("progress-frequency")) {
        s.frequency = vm["progress-frequency"].as<double>();
        // !(x > 0) also catches NaN.
        if (!(s.frequency > 0) || s.frequency > 86400)
            throw UsageError("--progress-frequency: give seconds from 0 to 86400 (exclusive of 0)");
    }
    return s;
}

namespace {

// "00m12s", "02h01m00s", "03 days", as cryptsetup prints times.
std::string human_time(double seconds) {
    const auto s = static_cast<uint64_t>(std::max(0.0, seconds));
    char buf[64];
    if (s < 90 * 60)
        std::snprintf(buf, sizeof buf, "%02" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
    else if (s < 36 * 3600)
        std::snprintf(buf, sizeof buf, "%02" PRIu64 "h%02" PRIu64 "m%02" PRIu64 "s", s / 3600, s / 60 % 60, s % 60);
    else
        std::snprintf(buf, sizeof buf, "%02" PRIu64 " days", s / 86400);
    return buf;
}

}  // namespace

std::string Progress::text_line(uint64_t done, uint64_t total, double seconds, bool final) {
    const double frac = total ? static_cast<double>(std::min(done, total)) / static_cast<double>(total) : 1.0;
    const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0.0;  // bytes/s
    std::string bar(30, '.');
    std::fill_n(bar.begin(), static_cast<std::size_t>(frac * 30), '#');
    char buf[160];
    int n = std::snprintf(buf, sizeof buf, "[%s] %5.1f%%  %8.1f MiB/s  ", bar.c_str(), frac * 100,
                          rate / (1 << 20));
    std::string line(buf, static_cast<std::size_t>(n));
    if (!total && !final) {  // a stream of unknown size: what has passed so far
        std::snprintf(buf, sizeof buf, "%.1f MiB  %8.1f MiB/s", static_cast<double>(done) / (1 << 20), rate / (1 << 20));
        return buf;
    }
    if (final) line += "time " + human_time(seconds);
    else if (rate > 0) line += "ETA " + human_time(static_cast<double>(total - std::min(done, total)) / rate);
    else line += "ETA --m--s";
    return line;
}

std::string Progress::json_line(const std::string& device, uint64_t done, uint64_t total, double seconds,
                                bool final) {
    const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0.0;
    const uint64_t eta_ms =
        final || rate <= 0 ? 0 : static_cast<uint64_t>(static_cast<double>(total - std::min(done, total)) / rate * 1e3);
    // Field names, order and string-typed numbers as cryptsetup's log_progress_json.
    return "{\"device\":" + json_quote(device) +
           ",\"device_bytes\":\"" + std::to_string(done) +
           "\",\"device_size\":\"" + std::to_string(total) +
           "\",\"speed\":\"" + std::to_string(static_cast<uint64_t>(rate)) +
           "\",\"eta_ms\":\"" + std::to_string(eta_ms) +
           "\",\"time_ms\":\"" + std::to_string(static_cast<uint64_t>(seconds * 1e3)) + "\"}";
}

Progress::Progress(const ProgressSettings& settings, std::string device, uint64_t total)
    : mode_(settings.mode), device_(std::move(device)), total_(total) {
    tty_ = ::isatty(STDERR_FILENO) == 1;
    if (mode_ == ProgressSettings::Auto) mode_ = tty_ ? ProgressSettings::Text : ProgressSettings::Off;
    const double f = settings.frequency > 0 ? settings.frequency : mode_ == ProgressSettings::Text && tty_ ? 0.2 : 0.5;
    interval_ = std::chrono::duration<double>(f);
}

Progress::~Progress() {
    // An error message follows: it must start on a clean line.
    if (open_line_) std::fputs(tty_ ? "\r\33[2K" : "\n", stderr);
}

void Progress::update(uint64_t done) {
    if (mode_ == ProgressSettings::Off || finished_) return;
    const auto now = Clock::now();
    if (now - last_ < interval_) return;
    last_ = now;
    report(done, false);
}

void Progress::finish(uint64_t done) {
    if (!total_) total_ = done;
    finish();
}

void Progress::finish() {
    if (mode_ == ProgressSettings::Off || finished_) return;
    finished_ = true;
    report(total_, true);
}

void Progress::report(uint64_t done, bool final) {
    const double secs = std::chrono::duration<double>(Clock::now() - start_).count();
    if (mode_ == ProgressSettings::Json) {
        std::cout << json_line(device_, done, total_, secs, final) << std::endl;  // flushed: scripts read it live
        return;
    }
    const std::string line = text_line(done, total_, secs, final);
    std::cout.flush();  // whatever precedes on stdout comes first
    if (tty_) {
        std::fprintf(stderr, "\r\33[2K%s%s", line.c_str(), final ? "\n" : "");
        open_line_ = !final;
    } else {
        std::fprintf(stderr, "%s\n", line.c_str());  // a log or pipe gets whole lines
    }
    std::fflush(stderr);
}

}  // namespace cli
