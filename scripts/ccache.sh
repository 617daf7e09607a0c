# Sourced by build.sh and fuzz.sh: sets `launcher` to the cmake arguments that
# compile through ccache, where it is installed. ccache only speeds builds up;
# the objects are the same without it.
# Paths under the clone are hashed relative to it, and the working directory
# not at all, so a second clone (CI's, in a folder of its own) and a build
# folder of another name at the same depth (build-noossl beside build) reuse
# the objects one build made: without this no CI run ever hit the cache.
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
  export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
fi
