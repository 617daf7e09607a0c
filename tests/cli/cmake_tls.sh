#!/bin/bash
# Configuring TLS (GnuTLS): found, it is on by default; hidden from
# pkg-config, the default is off, and BLKCRYPT_WITH_TLS=ON fails naming the
# way out. The NBD layer compiles without it (the --tls refusal's stub).
# usage: cmake_tls.sh CMAKE SOURCE_DIR CXX_COMPILER
# lib.sh for TMP and fail (its BLKCRYPT, $1, is unused here).
source "$(dirname "$0")/lib.sh"
CMAKE=$1 SRC=$2 CXX=$3
common=(-S "$SRC" -DCMAKE_CXX_COMPILER="$CXX" -DBLKCRYPT_BUILD_TESTS=OFF -DBLKCRYPT_BUILD_BENCH=OFF)
cached() { sed -n "s/^$1:BOOL=//p" "$2/CMakeCache.txt"; }
"$CMAKE" "${common[@]}" -B "$TMP/found" >"$TMP/found.log" 2>&1 || fail "configure: $(tail -n 5 "$TMP/found.log")"
[[ $(cached BLKCRYPT_WITH_TLS "$TMP/found") == ON ]] || fail "GnuTLS installed but BLKCRYPT_WITH_TLS is not ON by default"
# Every .pc file but gnutls's: as if libgnutls28-dev were not installed.
mkdir "$TMP/pc"
IFS=: read -ra dirs <<<"$(pkg-config --variable pc_path pkg-config)"
for d in "${dirs[@]}"; do
    for f in "$d"/*.pc; do
        [[ -e $f && $(basename "$f") != gnutls.pc && ! -e $TMP/pc/$(basename "$f") ]] && ln -s "$f" "$TMP/pc/"
    done
done
export PKG_CONFIG_LIBDIR=$TMP/pc PKG_CONFIG_PATH=
if "$CMAKE" "${common[@]}" -B "$TMP/on" -DBLKCRYPT_WITH_TLS=ON >"$TMP/on.log" 2>&1; then
    fail "configured with BLKCRYPT_WITH_TLS=ON and no GnuTLS"
fi
grep -q 'BLKCRYPT_WITH_TLS is ON but GnuTLS' "$TMP/on.log" || fail "no clear message: $(tail -n 5 "$TMP/on.log")"
grep -q -- '-DBLKCRYPT_WITH_TLS=OFF' "$TMP/on.log" || fail "the message does not name the way out"
"$CMAKE" "${common[@]}" -B "$TMP/off" >"$TMP/off.log" 2>&1 ||
    fail "no GnuTLS: the default does not configure: $(tail -n 5 "$TMP/off.log")"
[[ $(cached BLKCRYPT_WITH_TLS "$TMP/off") == OFF ]] || fail "no GnuTLS but BLKCRYPT_WITH_TLS is not OFF"
"$CMAKE" --build "$TMP/off" --target blkcrypt_nbd >"$TMP/build.log" 2>&1 ||
    fail "the NBD layer does not compile without TLS: $(grep -m 5 error "$TMP/build.log")"
echo "cmake_tls: on when found, off without GnuTLS, ON without it refused"
