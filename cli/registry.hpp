// The registry every command uses: the built-in algorithms, then the plugins
// of the default directory (default_plugin_dir()), then those in the
// directories of BLKCRYPT_PLUGIN_PATH, then each --plugin PATH. A plugin
// refused from a directory is a warning on stderr and the command goes on
// without it; a refused --plugin PATH ends the command (Failure, exit 1).
// A file named twice (directory and --plugin) is loaded once.
#pragma once

#include <blkcrypt/registry.hpp>

#include <string>
#include <vector>

namespace cli {

// Removes every "--plugin PATH" / "--plugin=PATH" from words (main() calls
// this before dispatching, so the option works with every command) and
// remembers the paths.
std::vector<std::string> take_plugin_options(std::vector<std::string> words);

// Where an installed blkcrypt finds its plugins: <prefix>/<libdir>/blkcrypt/plugins,
// found from the executable's own path (bin/../lib/blkcrypt/plugins), as the
// kernel finds its modules. Empty when BLKCRYPT_NO_DEFAULT_PLUGINS is set
// (to anything but "0"). A directory that does not exist is skipped quietly.
std::string default_plugin_dir();

// Built on first use.
blkcrypt::Registry& registry();

}  // namespace cli
