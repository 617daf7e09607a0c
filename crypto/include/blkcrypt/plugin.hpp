// Plugins: shared objects that add algorithms, templates and their test
// vectors to a Registry at run time.
//
// A plugin exports one C function, found with dlsym:
//
//   extern "C" const blkcrypt_plugin* blkcrypt_plugin_entry(void);
//
// returning a static descriptor. The loader checks abi_version against
// BLKCRYPT_PLUGIN_ABI_VERSION, then calls init(host) with a PluginHost*: the
// plugin hands over its algorithms, templates and vectors, and the loader
// registers them all or nothing. A plugin is refused, with a message, when
// the entry point is missing, the ABI version differs, a driver or template
// name is already registered, anything it registers fails its self-test, or
// init fails. A refused plugin leaves nothing registered; the process goes on.
//
// The shared object stays loaded while anything built from it is alive:
// registered algorithms, template instances, and transforms in use, even
// after unload_plugin(). See docs/plugins.md for a complete example.
#pragma once

#include <blkcrypt/status.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#define BLKCRYPT_PLUGIN_ABI_VERSION 1u
#define BLKCRYPT_PLUGIN_ENTRY_SYMBOL "blkcrypt_plugin_entry"

extern "C" {
struct blkcrypt_plugin {
    uint32_t abi_version;     // BLKCRYPT_PLUGIN_ABI_VERSION of the headers it was built with
    const char* name;         // short and unique, e.g. "plain32be"
    const char* description;  // one line
    int (*init)(void* host);  // host is a blkcrypt::PluginHost*; 0 on success
};
typedef const struct blkcrypt_plugin* (*blkcrypt_plugin_entry_fn)(void);
}

namespace blkcrypt {

class Registry;
class Alg;
class Template;

// What a plugin's init() talks to.
class PluginHost {
public:
    virtual ~PluginHost() = default;
    virtual void add_alg(std::shared_ptr<Alg> alg) = 0;
    virtual void add_template(std::shared_ptr<Template> tmpl) = 0;
    // Known-answer vectors in the crypto/vectors/*.vec format, for generic
    // names that have none yet. Registration self-tests use them.
    virtual void add_vectors(std::string_view text, std::string_view source) = 0;
    // Makes init() fail with this reason (init should then return non-zero).
    virtual void fail(std::string_view why) = 0;
    // The registry being extended (to look up spawns while creating algorithms).
    virtual Registry& registry() = 0;
};

struct PluginInfo {
    std::string name, description, path;
    std::vector<std::string> drivers;    // algorithm driver names it registered
    std::vector<std::string> templates;  // template names it registered
};

// Loads the shared object at `path` into reg.
Result<PluginInfo> load_plugin(Registry& reg, const std::string& path);
// Loads every "*.so" in each directory of a colon-separated list (the form of
// BLKCRYPT_PLUGIN_PATH). Returns the refusals; the others stay loaded.
std::vector<Error> load_plugin_dirs(Registry& reg, std::string_view dirs);
// Unregisters the plugin's algorithms and templates (and the instances built
// from them). Transforms still in use keep working and keep the object loaded.
Result<void> unload_plugin(Registry& reg, std::string_view name);
std::vector<PluginInfo> loaded_plugins(Registry& reg);

}  // namespace blkcrypt
