#include "paths.hpp"

namespace testutil {

const char* const kSourceDir = BLKCRYPT_SOURCE_DIR;
const char* const kPluginDir = BLKCRYPT_PLUGIN_DIR;
const char* const kTestPluginDir = BLKCRYPT_TEST_PLUGIN_DIR;

}  // namespace testutil
