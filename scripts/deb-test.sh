#!/usr/bin/env bash
# CI: the Debian package from a built tree. `cpack -G DEB` in BUILD_DIR, then
# with the build tree renamed away (nothing installed may lean on it): apt-get
# install ./blkcrypt_VERSION_ARCH.deb (its Depends from dpkg-shlibdeps must
# resolve), blkcrypt selftest, man blkcrypt, the Python import and a read,
# examples/c_read compiled with cc -std=c11 via pkg-config and run against the
# CLI's decrypt, then the package removed again (and nothing of it left).
# Needs root (apt-get) and a build of the project in BUILD_DIR (default build).
# Usage: scripts/deb-test.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build=$(cd "${1:-${BUILD_DIR:-build}}" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/blkcrypt-deb.XXXXXX")
moved=$build.deb-test-moved
restore() {
    [[ -d $moved && ! -e $build ]] && mv "$moved" "$build"
    if dpkg-query -W -f='${Status}' blkcrypt 2>/dev/null | grep -q '^install ok installed$'; then
        apt-get purge -y blkcrypt >/dev/null 2>&1 || true
    fi
    rm -rf "$tmp"
}
trap restore EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
start=$SECONDS

dpkg-query -W -f='${Status}' blkcrypt 2>/dev/null | grep -q '^install ok installed$' &&
    fail "a blkcrypt package is already installed; remove it first"
(cd "$build" && cpack -G DEB -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1) || { cat "$tmp/cpack.log"; fail "cpack -G DEB"; }
deb=$(find "$tmp/pkg" -maxdepth 1 -name 'blkcrypt_*.deb' | head -n 1)
[[ -n $deb ]] || fail "cpack made no blkcrypt_*.deb: $(ls "$tmp/pkg")"
version=$(sed -n 's/^project(blkcrypt VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[[ $(basename "$deb") == "blkcrypt_${version}_$(dpkg --print-architecture).deb" ]] || fail "package named $(basename "$deb")"
echo "== $(basename "$deb"): $(dpkg-deb -f "$deb" Depends)"
dpkg-deb -f "$deb" Depends | grep -q 'libc6' || fail "no Depends from dpkg-shlibdeps"
if grep -q '^BLKCRYPT_WITH_NBD_CLIENT:BOOL=ON' "$build/CMakeCache.txt"; then
    dpkg-deb -f "$deb" Depends | grep -q 'libnbd' || fail "built with the NBD client (dlopen'd libnbd) but no libnbd in Depends"
    nbd_client=1
fi
dpkg-deb -c "$deb" >"$tmp/contents"
for f in ./usr/bin/blkcrypt ./usr/lib/libblkcrypt.so.0 ./usr/lib/libblkcrypt-c.so.1 ./usr/include/blkcrypt/blkcrypt.h \
         ./usr/lib/pkgconfig/blkcrypt.pc ./usr/lib/cmake/blkcrypt/blkcryptConfig.cmake ./usr/share/man/man8/blkcrypt.8 \
         ./usr/share/bash-completion/completions/blkcrypt ./usr/lib/python3/dist-packages/blkcrypt/__init__.py; do
    grep -q " $f" "$tmp/contents" || fail "not in the package: $f"
done

# A clean system as far as the package can tell: no build tree.
mv "$build" "$moved"
cp "$deb" "$tmp/x.deb"
apt-get install -y "$tmp/x.deb" >"$tmp/apt.log" 2>&1 || { cat "$tmp/apt.log"; fail "apt-get install ./x.deb"; }
cd "$tmp"
env -u LD_LIBRARY_PATH -u PYTHONPATH /usr/bin/blkcrypt selftest >"$tmp/selftest.log" || { tail "$tmp/selftest.log"; fail "blkcrypt selftest"; }
tail -n 1 "$tmp/selftest.log"
MANWIDTH=80 man blkcrypt >/dev/null 2>"$tmp/man.err" && [[ ! -s $tmp/man.err ]] || fail "man blkcrypt: $(cat "$tmp/man.err")"
env -u PYTHONPATH PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c 'import blkcrypt; print("python: blkcrypt", blkcrypt.__version__, blkcrypt.__file__)' ||
    fail "python3 -c 'import blkcrypt'"
pc=$(pkg-config --cflags --libs blkcrypt) || fail "pkg-config blkcrypt"
# shellcheck disable=SC2086  # the flags are meant to split
cc -std=c11 -Wall -Wextra -Werror "$src/examples/c_read.c" $pc -o "$tmp/c_read" || fail "cc c_read.c via pkg-config"
if command -v cryptsetup >/dev/null; then
    truncate -s 20M c.img
    printf 'deb test' >key
    cryptsetup luksFormat --batch-mode --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --key-file key c.img >/dev/null
    head -c 1M /dev/urandom >plain
    /usr/bin/blkcrypt luks encrypt --key-file key plain c.img
    /usr/bin/blkcrypt luks decrypt --key-file key c.img c.plain
    "$tmp/c_read" c.img key 1000 500000 >c.out || fail "c_read"
    cmp -i 1000:0 -n 500000 c.plain c.out || fail "c_read's bytes differ from the CLI's decrypt"
    env -u PYTHONPATH PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c '
import blkcrypt, sys
with blkcrypt.open("c.img", key_file="key") as f:
    sys.exit(0 if f.read() == open("c.plain", "rb").read() else 1)' || fail "python read of c.img"
    echo "c_read and python read the installed library's plaintext"
    # libnbd is loaded by SONAME at the first URI: the package's Depends must bring it.
    if [[ ${nbd_client:-} ]] && command -v nbdkit >/dev/null; then
        nbdkit --exit-with-parent -r -U "$tmp/nbd.sock" -P "$tmp/nbd.pid" file c.img &
        for _ in $(seq 50); do [[ -S $tmp/nbd.sock ]] && break; sleep 0.1; done
        env -u PYTHONPATH PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c '
import blkcrypt, sys
with blkcrypt.open(sys.argv[1], key_file="key") as f:
    sys.exit(0 if f.read() == open("c.plain", "rb").read() else 1)' "nbd+unix:///?socket=$tmp/nbd.sock" ||
            fail "python read of c.img over NBD"
        kill "$(cat "$tmp/nbd.pid")" 2>/dev/null || true
        echo "python read the same plaintext over NBD (libnbd from the package's Depends)"
    fi
fi
cd "$src"
apt-get purge -y blkcrypt >"$tmp/remove.log" 2>&1 || { cat "$tmp/remove.log"; fail "apt-get purge blkcrypt"; }
[[ ! -e /usr/bin/blkcrypt && ! -e /usr/lib/libblkcrypt-c.so.1 && ! -e /usr/lib/python3/dist-packages/blkcrypt/__init__.py ]] ||
    fail "files left after apt-get purge"
echo "deb test passed in $((SECONDS - start)) s"
