#!/usr/bin/env bash
# README command (2): install dependencies, build, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
# The full suite whatever an earlier configure (demo.sh) cached.
./scripts/build.sh -DBLKCRYPT_BUILD_TESTS=ON -DBLKCRYPT_BUILD_BENCH=ON
cd "${BUILD_DIR:-build}"
# A suite that finds no test is a failure, not a pass.
ctest --output-on-failure --no-tests=error -j"$(nproc)"
