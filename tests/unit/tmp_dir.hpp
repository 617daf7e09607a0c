// A temporary directory for tests that run the peer tools (cryptsetup) on
// image files, removed with everything in it at the end of its scope.
#pragma once

#include "test_util.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <stdlib.h>

namespace testutil {

// Whether cryptsetup runs here (tests against it are skipped without it).
inline bool have_cryptsetup() {
    static const bool have = std::system("cryptsetup --version >/dev/null 2>&1") == 0;
    return have;
}

struct TmpDir {
    std::string path;
    explicit TmpDir(const std::string& prefix = "blkcrypt-test") {
        std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        path = tmpl;
    }
    ~TmpDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    TmpDir(const TmpDir&) = delete;
    TmpDir& operator=(const TmpDir&) = delete;
    std::string operator/(const std::string& name) const { return path + "/" + name; }
    void put(const std::string& name, const std::vector<uint8_t>& b) const {
        std::ofstream(*this / name, std::ios::binary)
            .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    }
    std::vector<uint8_t> get(const std::string& name) const {
        std::vector<uint8_t> b;
        REQUIRE(read_file(*this / name, &b));
        return b;
    }
    // Runs the shell command cmd in the directory; its exit status.
    int run(const std::string& cmd) const { return std::system(("cd '" + path + "' && " + cmd).c_str()); }
};

}  // namespace testutil
