// The goldens' readers (tests/golden/*/), one home for the tests that read
// recorded images and their CASE.info files.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace testutil {

// The goldens' readers (tests/golden/*/): a command's whole stdout, e.g. a
// compressed image through "xz -dc 'PATH'" (the command must exit 0), a
// text file, and a CASE.info's key=value lines (# comments skipped; the
// first '=' splits). Failures throw: Catch reports them.
inline std::vector<uint8_t> command_output(const std::string& cmd) {
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) throw std::runtime_error("cannot run " + cmd);
    std::vector<uint8_t> out;
    uint8_t buf[65536];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.insert(out.end(), buf, buf + n);
    if (::pclose(p) != 0) throw std::runtime_error(cmd + " failed");
    return out;
}

// Its stdout's lines, without their '\n' (a peer's answers, one a line).
inline std::vector<std::string> command_lines(const std::string& cmd) {
    const std::vector<uint8_t> out = command_output(cmd);
    std::vector<std::string> lines;
    std::string cur;
    for (uint8_t c : out) {
        if (c == '\n') lines.push_back(std::exchange(cur, {}));
        else cur += static_cast<char>(c);
    }
    return lines;
}

// `tool -dc PATH` (gzip, xz).
inline std::vector<uint8_t> decompress(const std::string& tool, const std::string& path) {
    return command_output(tool + " -dc '" + path + "'");
}

inline std::string read_text(const std::string& path) {
    std::ifstream f(path);
    if (!f) throw std::runtime_error("cannot read " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

inline std::map<std::string, std::string> read_info(const std::string& path) {
    std::map<std::string, std::string> kv;
    std::istringstream in(read_text(path));
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        const auto eq = line.find('=');
        if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return kv;
}

}  // namespace testutil
