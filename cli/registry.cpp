#include "registry.hpp"

#include "common.hpp"

#include <blkcrypt/plugin.hpp>

#include <cstdlib>
#include <iostream>
#include <memory>

namespace cli {

namespace {
std::vector<std::string>& plugin_paths() {
    static std::vector<std::string> paths;
    return paths;
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

blkcrypt::Registry& registry() {
    static std::unique_ptr<blkcrypt::Registry> reg = [] {
        auto r = std::make_unique<blkcrypt::Registry>();
        blkcrypt::register_defaults(*r);
        auto warn = [](const std::string& msg) { std::cerr << "blkcrypt: " << msg << "\n"; };
        if (const char* dirs = std::getenv("BLKCRYPT_PLUGIN_PATH"))
            for (const auto& e : blkcrypt::load_plugin_dirs(*r, dirs)) warn(e.message);
        for (const auto& p : plugin_paths())
            if (auto info = blkcrypt::load_plugin(*r, p); !info) warn(info.error().message);
        return r;
    }();
    return *reg;
}

}  // namespace cli
