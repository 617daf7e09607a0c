#!/bin/bash
# Configuring: with BLKCRYPT_WITH_OPENSSL=ON (the default) and no OpenSSL the
# configure step fails naming the option; with it OFF the project configures
# without looking for OpenSSL at all.
# usage: cmake_openssl.sh CMAKE SOURCE_DIR CXX_COMPILER
set -euo pipefail
CMAKE=$1 SRC=$2 CXX=$3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() {
    echo "FAIL: $*" >&2
    exit 1
}
common=(-S "$SRC" -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_DISABLE_FIND_PACKAGE_OpenSSL=ON)  # as if not installed
if "$CMAKE" "${common[@]}" -B "$TMP/on" -DBLKCRYPT_BUILD_TESTS=OFF -DBLKCRYPT_BUILD_BENCH=OFF >"$TMP/on.log" 2>&1; then
    fail "configured with BLKCRYPT_WITH_OPENSSL=ON and no OpenSSL"
fi
grep -q 'BLKCRYPT_WITH_OPENSSL is ON but OpenSSL 3' "$TMP/on.log" || fail "no clear message: $(tail -n 5 "$TMP/on.log")"
grep -q -- '-DBLKCRYPT_WITH_OPENSSL=OFF' "$TMP/on.log" || fail "the message does not name the way out"
# Tests and benches too: no target of the project may name OpenSSL::Crypto.
"$CMAKE" "${common[@]}" -B "$TMP/off" -DBLKCRYPT_WITH_OPENSSL=OFF -DBLKCRYPT_BUILD_TESTS=ON \
    -DBLKCRYPT_BUILD_BENCH=ON >"$TMP/off.log" 2>&1 ||
    fail "BLKCRYPT_WITH_OPENSSL=OFF does not configure without OpenSSL: $(tail -n 5 "$TMP/off.log")"
echo "cmake_openssl: ON without OpenSSL refused, OFF configures"
