#include "registry.hpp"

#include "common.hpp"

#include <blkcrypt/plugin.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <string_view>
#include <system_error>

namespace cli {

namespace {
namespace fs = std::filesystem;

std::vector<std::string>& plugin_paths() {
    static std::vector<std::string> paths;
    return paths;
}

void warn(const std::string& msg) {
    std::cout.flush();
    std::cerr << "blkcrypt: warning: " << msg << "\n";
}

// Loads a plugin once, whatever the path that names it (the default
// directory and --plugin may both name the same file).
class Loader {
public:
    explicit Loader(blkcrypt::Registry& reg) : reg_(reg) {}

    // False with the refusal's message in why; true when loaded now or before.
    bool load(const std::string& path, std::string& why) {
        std::error_code ec;
        fs::path canon = fs::weakly_canonical(path, ec);
        if (ec) canon = path;
        if (loaded_.count(canon.string())) return true;
        auto info = blkcrypt::load_plugin(reg_, path);
        if (!info) {
            why = info.error().message;
            return false;
        }
        loaded_.insert(canon.string());
        return true;
    }

    // Every *.so of dir in name order; refusals are warnings. A missing
    // directory is only reported when asked (the default one may be absent).
    void load_dir(const std::string& dir, bool report_missing) {
        std::error_code ec;
        std::vector<std::string> files;
        for (const auto& e : fs::directory_iterator(dir, ec))
            if (e.path().extension() == ".so") files.push_back(e.path().string());
        if (ec) {
            if (report_missing || ec != std::errc::no_such_file_or_directory)
                warn("plugin directory '" + dir + "': " + ec.message());
            return;
        }
        std::sort(files.begin(), files.end());
        std::string why;
        for (const auto& f : files)
            if (!load(f, why)) warn(why + " (going on without it)");
    }

private:
    blkcrypt::Registry& reg_;
    std::set<std::string> loaded_;
};

bool default_plugins_disabled() {
    const char* v = std::getenv("BLKCRYPT_NO_DEFAULT_PLUGINS");
    return v && *v && std::string_view(v) != "0";
}

}  // namespace

std::vector<std::string> take_plugin_options(std::vector<std::string> words) {
    std::vector<std::string> rest;
    for (std::size_t i = 0; i < words.size(); ++i) {
        const std::string& w = words[i];
        if (w == "--plugin") {
            if (i + 1 == words.size()) throw UsageError("--plugin needs a PATH");
            plugin_paths().push_back(words[++i]);
        } else if (w.rfind("--plugin=", 0) == 0) {
            plugin_paths().push_back(w.substr(9));
        } else {
            rest.push_back(w);
        }
    }
    return rest;
}

std::string default_plugin_dir() {
    if (default_plugins_disabled()) return {};
    const fs::path rel = BLKCRYPT_PLUGIN_DIR_FROM_BIN;
    if (rel.is_absolute()) return rel.string();
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return {};
    return (exe.parent_path() / rel).lexically_normal().string();
}

blkcrypt::Registry& registry() {
    static std::unique_ptr<blkcrypt::Registry> reg = [] {
        auto r = std::make_unique<blkcrypt::Registry>();
        if (auto d = blkcrypt::register_defaults(*r); !d) throw Failure(d.error().message);
        Loader loader(*r);
        if (const std::string dir = default_plugin_dir(); !dir.empty()) loader.load_dir(dir, false);
        if (const char* dirs = std::getenv("BLKCRYPT_PLUGIN_PATH")) {
            std::string_view rest(dirs);
            while (!rest.empty()) {
                const auto colon = rest.find(':');
                const std::string dir(rest.substr(0, colon));
                rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
                if (!dir.empty()) loader.load_dir(dir, true);
            }
        }
        // Asked for by name: not loading it is an error, not a warning.
        std::string why;
        for (const auto& p : plugin_paths())
            if (!loader.load(p, why)) throw Failure(why);
        return r;
    }();
    return *reg;
}

}  // namespace cli
