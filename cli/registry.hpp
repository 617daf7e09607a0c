// The registry every command uses: the built-in algorithms, then the plugins
// in the directories of BLKCRYPT_PLUGIN_PATH, then each --plugin PATH. A
// refused plugin is reported on stderr ("blkcrypt: plugin ... refused: why")
// and the command goes on without it.
#pragma once

#include <blkcrypt/registry.hpp>

#include <string>
#include <vector>

namespace cli {

// Removes every "--plugin PATH" / "--plugin=PATH" from words (main() calls
// this before dispatching, so the option works with every command) and
// remembers the paths.
std::vector<std::string> take_plugin_options(std::vector<std::string> words);

// Built on first use.
blkcrypt::Registry& registry();

}  // namespace cli
