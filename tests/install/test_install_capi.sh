#!/usr/bin/env bash
# The C API and the Python package as installed: cmake --install to a
# temporary prefix, then
#   1. libblkcrypt-c.so.1 is there with its SONAME, and exports only blk_*
#      symbols, each in a version node BLKCRYPT_1.MINOR (1.0 for the first set)
#   2. examples/c_read.c compiles with cc -std=c11 $(pkg-config --cflags --libs
#      blkcrypt) and its bytes equal the installed CLI's decrypt of a LUKS2
#      image; a wrong passphrase exits 2
#   3. find_package(blkcrypt) gives blkcrypt::blkcrypt_c to a C project
#   4. the installed Python package (BLKCRYPT_PYTHON_DIR) imports and reads
#      the same bytes, loading the installed library
# Usage: test_install_capi.sh BUILD_DIR SOURCE_DIR. Leaves nothing behind.
set -euo pipefail
build=$(cd "${1:?usage: $0 BUILD_DIR SOURCE_DIR}" && pwd)
src=$(cd "${2:?usage: $0 BUILD_DIR SOURCE_DIR}" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/blkcrypt-capi-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
san=$(cache BLKCRYPT_SANITIZE)
sanflags=()
[[ -n $san ]] && sanflags=(-fsanitize="$san" -fno-omit-frame-pointer)

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "install"; }
lib=$(find "$prefix" -name 'libblkcrypt-c.so.1' | head -n 1)
[[ -n $lib ]] || fail "libblkcrypt-c.so.1 not installed"
libdir=$(dirname "$lib")
[[ -L $libdir/libblkcrypt-c.so ]] || fail "no libblkcrypt-c.so development link"
[[ $(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p') == libblkcrypt-c.so.1 ]] || fail "SONAME"
[[ -f $prefix/include/blkcrypt/blkcrypt.h ]] || fail "blkcrypt.h not installed"
# Defined dynamic symbols: blk_* only, each in a BLKCRYPT_1.MINOR node
# (capi/blkcrypt.map), and the nodes themselves.
readelf --dyn-syms -W "$lib" | awk '$7 != "UND" && $4 != "SECTION" && NR > 3 && $8 != "" {print $8}' >"$tmp/syms"
grep -vE '^BLKCRYPT_1\.[0-9]+$' "$tmp/syms" | grep -vE '^blk_[a-z0-9_]+@@BLKCRYPT_1\.[0-9]+$' &&
    fail "exported beyond blk_*@@BLKCRYPT_1.MINOR (above)"
# The first set stays in 1.0: a symbol moved to another node breaks callers.
grep -qx 'blk_open@@BLKCRYPT_1.0' "$tmp/syms" || fail "blk_open is not in BLKCRYPT_1.0"
grep -qx 'blk_open_detached@@BLKCRYPT_1.1' "$tmp/syms" || fail "blk_open_detached is not in BLKCRYPT_1.1"
# Every function the header declares, and nothing else.
sed -n 's/^BLK_API .*[ *]\(blk_[a-z0-9_]*\)(.*/\1/p' "$prefix/include/blkcrypt/blkcrypt.h" | sort >"$tmp/declared"
sed 's/@@.*//' "$tmp/syms" | grep '^blk_' | sort >"$tmp/exported"
diff "$tmp/declared" "$tmp/exported" || fail "the exported blk_ functions are not the header's (above)"
n=$(wc -l <"$tmp/exported")
echo "== $n symbols, all blk_*@@BLKCRYPT_1.MINOR"

export PKG_CONFIG_PATH=$libdir/pkgconfig
pc=$(pkg-config --cflags --libs blkcrypt) || fail "pkg-config blkcrypt"
# shellcheck disable=SC2086  # the flags are meant to split
cc -std=c11 -Wall -Wextra -Wpedantic -Werror "${sanflags[@]}" "$src/examples/c_read.c" $pc -o "$tmp/c_read" ||
    fail "cc -std=c11 c_read.c \$(pkg-config --cflags --libs blkcrypt)"
cli() { env -u LD_LIBRARY_PATH "$prefix/bin/blkcrypt" "$@"; }
if command -v cryptsetup >/dev/null; then
    truncate -s 20M "$tmp/c.img"
    printf 'open sesame' >"$tmp/key"
    cryptsetup luksFormat --batch-mode --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
        --key-file "$tmp/key" "$tmp/c.img" >/dev/null || fail "cryptsetup luksFormat"
    head -c 2M /dev/urandom >"$tmp/plain"
    cli luks encrypt --key-file "$tmp/key" "$tmp/plain" "$tmp/c.img" || fail "luks encrypt"
    cli luks decrypt --key-file "$tmp/key" "$tmp/c.img" "$tmp/c.plain" || fail "luks decrypt"
    LD_LIBRARY_PATH=$libdir "$tmp/c_read" "$tmp/c.img" "$tmp/key" 4095 1500000 >"$tmp/c.out" 2>"$tmp/c.err" ||
        { cat "$tmp/c.err"; fail "c_read"; }
    grep -qx "$tmp/c.img: LUKS2" "$tmp/c.err" || fail "c_read did not name the format: $(cat "$tmp/c.err")"
    cmp -i 4095:0 -n 1500000 "$tmp/c.plain" "$tmp/c.out" || fail "c_read's bytes differ from the CLI's decrypt"
    [[ $(stat -c %s "$tmp/c.out") == 1500000 ]] || fail "c_read wrote $(stat -c %s "$tmp/c.out") bytes"
    printf 'wrong' >"$tmp/bad"
    rc=0
    LD_LIBRARY_PATH=$libdir "$tmp/c_read" "$tmp/c.img" "$tmp/bad" 0 10 >/dev/null 2>"$tmp/c.err" || rc=$?
    [[ $rc == 2 ]] || fail "c_read with a wrong passphrase exited $rc: $(cat "$tmp/c.err")"
    grep -q 'wrong secret' "$tmp/c.err" || fail "c_read's wrong-passphrase message: $(cat "$tmp/c.err")"
    echo "== c_read (cc -std=c11, pkg-config) equals the CLI's decrypt"
fi

# A C project through the CMake package.
mkdir "$tmp/cproj"
cp "$src/examples/c_read.c" "$tmp/cproj/"
cat >"$tmp/cproj/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(c_consumer LANGUAGES C CXX)
find_package(blkcrypt REQUIRED)
add_executable(c_read c_read.c)
set_target_properties(c_read PROPERTIES C_STANDARD 11)
target_link_libraries(c_read PRIVATE blkcrypt::blkcrypt_c)
CM
cmake -S "$tmp/cproj" -B "$tmp/cproj/b" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_FLAGS="${sanflags[*]}" \
      -DCMAKE_EXE_LINKER_FLAGS="${sanflags[*]}" >"$tmp/cproj.log" 2>&1 &&
    cmake --build "$tmp/cproj/b" >>"$tmp/cproj.log" 2>&1 || { cat "$tmp/cproj.log"; fail "find_package C consumer"; }
echo "== find_package(blkcrypt): blkcrypt::blkcrypt_c"

pydir=$prefix/$(cache BLKCRYPT_PYTHON_DIR)
[[ -f $pydir/blkcrypt/__init__.py && -f $pydir/blkcrypt/_libpath.py ]] || fail "the Python package is not in $pydir"
grep -q "$prefix" "$pydir/blkcrypt/_libpath.py" || fail "_libpath.py does not name the installed library"
python=$(command -v /usr/bin/python3 || command -v python3)
if [[ -z $san && -f $tmp/c.img ]]; then
    PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$pydir "$python" - "$tmp/c.img" "$tmp/key" "$tmp/c.plain" "$lib" <<'PY' ||
import os, sys, blkcrypt
img, key, plain, lib = sys.argv[1:]
assert os.path.realpath(blkcrypt._lib._name) == os.path.realpath(lib), blkcrypt._lib._name
with blkcrypt.open(img, key_file=key) as f:
    assert f.read() == open(plain, "rb").read()
PY
        fail "the installed Python package"
    echo "== the installed Python package reads the same plaintext"
fi
echo "capi install test passed"
