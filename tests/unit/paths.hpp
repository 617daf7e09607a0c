// Where the tests find the source tree and the plugins built beside them.
// Only paths.cpp is compiled with these absolute paths (tests/CMakeLists.txt):
// in every test file's flags they made each clone's objects its own, and a
// second clone (CI's) could reuse none of them from ccache.
#pragma once

namespace testutil {

extern const char* const kSourceDir;      // the project's source tree
extern const char* const kPluginDir;      // build/plugins
extern const char* const kTestPluginDir;  // build/test-plugins (the broken ones)

}  // namespace testutil
