#!/usr/bin/env bash
# Install a built tree to a temporary prefix and consume it from outside:
#   1. cmake --install BUILD --prefix TMP/prefix; the expected files are there
#   2. no installed header or package file refers to Crypto++ or OpenSSL
#   3. every installed header compiles on its own with only -I PREFIX/include
#   4. examples/ configures against the prefix (find_package), builds, and
#      all five programs run
#      (and open_container reads a LUKS2 container back, if cryptsetup is here)
#   5. one example builds with $(pkg-config --cflags --libs blkcrypt) and runs
#   6. the project's plugins are in LIBDIR/blkcrypt/plugins and the installed
#      CLI loads them without --plugin (not with BLKCRYPT_NO_DEFAULT_PLUGINS=1)
#   7. PREFIX/bin/blkcrypt --version runs (RPATH $ORIGIN/../lib)
#   8. the man pages (share/man/man8) and the bash completion
#      (share/bash-completion/completions) are installed and work
# Usage: test_install.sh BUILD_DIR SOURCE_DIR. Leaves nothing behind.
set -euo pipefail

build=$(cd "${1:?usage: $0 BUILD_DIR SOURCE_DIR}" && pwd)
src=$(cd "${2:?usage: $0 BUILD_DIR SOURCE_DIR}" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/blkcrypt-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
examples=(essiv_buffer dmcrypt_bio async_cryptd custom_template verity_verify)

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }

# Consumers are built with the compiler (and sanitizers) the library was.
cxx=$(cache CMAKE_CXX_COMPILER)
cxx=${cxx:-c++}
san=$(cache BLKCRYPT_SANITIZE)
sanflags=()
[[ -n $san ]] && sanflags=(-fsanitize="$san" -fno-omit-frame-pointer)
# Without -j the consumer builds would be serial; 2 at most on shared machines.
jobs=2

step "cmake --install $build --prefix <tmp>/prefix"
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log" || { cat "$tmp/install.log"; fail "install"; }

lib=$(find "$prefix" -name 'libblkcrypt.so' 2>/dev/null | head -n 1 || true)
[[ -n $lib ]] || fail "libblkcrypt.so not installed"
libdir=$(dirname "$lib")
[[ -L $lib ]] || fail "libblkcrypt.so is not the development symlink"
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ -n $soname && -e $libdir/$soname ]] || fail "SONAME link '$soname' missing in $libdir"
for f in "$prefix/bin/blkcrypt" "$libdir/cmake/blkcrypt/blkcryptConfig.cmake" \
         "$libdir/cmake/blkcrypt/blkcryptConfigVersion.cmake" \
         "$libdir/cmake/blkcrypt/blkcryptTargets.cmake" "$libdir/pkgconfig/blkcrypt.pc" \
         "$prefix/include/blkcrypt/registry.hpp" "$prefix/include/blkcrypt/internal/template.hpp" \
         "$prefix/include/blkcrypt/dm/crypt_target.hpp" "$prefix/include/blkcrypt/verity/tree.hpp"; do
    [[ -e $f ]] || fail "not installed: ${f#"$prefix"/}"
done
mapfile -t headers < <(cd "$prefix/include" && find . -type f \( -name '*.hpp' -o -name '*.h' \) | sed 's|^\./||' | sort)
echo "   ${#headers[@]} headers, $(basename "$(readlink -f "$lib")") ($soname)"

step "no Crypto++/OpenSSL in the installed interface"
# Includes (or mentions, e.g. in comments) of their headers, and their types.
if grep -rnE '(cryptopp|crypto\+\+|openssl)/[A-Za-z0-9_./]+\.h' "$prefix/include" ||
   grep -rnE 'CryptoPP::|\b(EVP|OSSL|BIO|BN|EC)_[A-Z0-9_]*(CTX|CIPHER|MD|PKEY|KEY|METHOD)\b' "$prefix/include"; then
    fail "an installed header refers to Crypto++/OpenSSL"
fi
# (comment lines aside: they may say that these are private)
if grep -rniE 'cryptopp|crypto\+\+|openssl|libcrypto' "$libdir/cmake/blkcrypt" "$libdir/pkgconfig/blkcrypt.pc" |
   grep -vE '^[^:]+:[0-9]+:[[:space:]]*#'; then
    fail "the CMake package or blkcrypt.pc needs Crypto++/OpenSSL"
fi

step "every header compiles standalone (-I<prefix>/include only)"
mkdir "$tmp/hdr"
i=0
for h in "${headers[@]}"; do
    i=$((i + 1))
    printf '#include <%s>\n' "$h" > "$tmp/hdr/h$i.cpp"
    printf '%s\n' "$h" > "$tmp/hdr/h$i.name"
done
compile_header() {
    if ! "$cxx" -std=c++20 -fsyntax-only -Wall -Wextra -I"$prefix/include" "$1.cpp" 2> "$1.err"; then
        echo "header does not compile on its own: $(cat "$1.name")"
        cat "$1.err"
        return 1
    fi
    [[ -s $1.err ]] && { echo "warnings in $(cat "$1.name"):"; cat "$1.err"; }
    return 0
}
export -f compile_header
export cxx prefix
printf '%s\n' "$tmp"/hdr/h*.cpp | sed 's/\.cpp$//' |
    xargs -P "$jobs" -I{} bash -c 'compile_header "$@"' _ {} || fail "standalone header compilation"

step "examples/ via find_package(blkcrypt) with CMAKE_PREFIX_PATH=<prefix>"
cmake -S "$src/examples" -B "$tmp/examples" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_FLAGS="${sanflags[*]}" -DCMAKE_EXE_LINKER_FLAGS="${sanflags[*]}" \
      -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON > "$tmp/examples.log" 2>&1 ||
    { cat "$tmp/examples.log"; fail "configuring examples/"; }
found=$(sed -n 's/^blkcrypt_DIR:[A-Z]*=//p' "$tmp/examples/CMakeCache.txt")
[[ $found == "$prefix"/* ]] || fail "find_package(blkcrypt) found '$found', not the test prefix"
cmake --build "$tmp/examples" -j "$jobs" >> "$tmp/examples.log" 2>&1 ||
    { cat "$tmp/examples.log"; fail "building examples/"; }
for e in "${examples[@]}"; do
    echo "-- $e"
    "$tmp/examples/$e" || fail "example $e exited $?"
done

step "examples/open_container over a LUKS2 container the installed CLI fills"
if command -v cryptsetup >/dev/null; then
    truncate -s 20M "$tmp/c.img"
    printf 'open sesame' > "$tmp/key"
    cryptsetup luksFormat --batch-mode --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
        --key-file "$tmp/key" "$tmp/c.img" || fail "cryptsetup luksFormat"
    head -c 4M /dev/urandom > "$tmp/c.plain"
    env -u LD_LIBRARY_PATH "$prefix/bin/blkcrypt" luks encrypt --key-file "$tmp/key" "$tmp/c.plain" "$tmp/c.img" ||
        fail "blkcrypt luks encrypt"
    "$tmp/examples/open_container" "$tmp/c.img" "$tmp/key" 12345 100000 > "$tmp/c.out" 2> "$tmp/c.err" ||
        { cat "$tmp/c.err"; fail "open_container"; }
    grep -qx "$tmp/c.img: LUKS2" "$tmp/c.err" || fail "open_container did not name the format: $(cat "$tmp/c.err")"
    [[ $(stat -c %s "$tmp/c.out") == 100000 ]] || fail "open_container wrote $(stat -c %s "$tmp/c.out") bytes"
    cmp -i 12345:0 -n 100000 "$tmp/c.plain" "$tmp/c.out" || fail "open_container's plaintext differs"
    printf 'wrong' > "$tmp/badkey"
    if "$tmp/examples/open_container" "$tmp/c.img" "$tmp/badkey" 0 512 > "$tmp/c.out" 2>/dev/null; then
        fail "open_container opened with a wrong passphrase"
    fi
else
    echo "   cryptsetup not installed: open_container not run"
fi

step "the docs/plugins.md plugin (sector32be.so) through the installed CLI"
# aes-xts-sector32be: each 512-byte sector is AES-XTS with tweak = BE32(sector) || 0.
head -c 2048 /dev/urandom > "$tmp/plain"
key=$(head -c 64 /dev/urandom | od -An -tx1 | tr -d ' \n')
env -u LD_LIBRARY_PATH "$prefix/bin/blkcrypt" --plugin "$tmp/examples/sector32be.so" crypt encrypt \
    --table "aes-xts-sector32be $key 3" "$tmp/plain" "$tmp/ct" || fail "crypt with the sector32be plugin"
python3 - "$key" "$tmp/plain" "$tmp/ct" <<'PY' || fail "sector32be ciphertext differs from python3-cryptography"
import sys
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
key, plain, ct = bytes.fromhex(sys.argv[1]), open(sys.argv[2], "rb").read(), open(sys.argv[3], "rb").read()
want = b""
for s in range(len(plain) // 512):
    enc = Cipher(algorithms.AES(key), modes.XTS((s + 3).to_bytes(4, "big") + bytes(12))).encryptor()
    want += enc.update(plain[s * 512:(s + 1) * 512]) + enc.finalize()
sys.exit(0 if want == ct else 1)
PY

step "pkg-config: g++ essiv_buffer.cpp \$(pkg-config --cflags --libs blkcrypt)"
export PKG_CONFIG_PATH=$libdir/pkgconfig
pc=$(pkg-config --cflags --libs blkcrypt) || fail "pkg-config blkcrypt"
echo "   $pc"
[[ $(pkg-config --variable=prefix blkcrypt) == "$prefix" ]] || fail "blkcrypt.pc has the wrong prefix"
# shellcheck disable=SC2086  # the flags are meant to split
"$cxx" -std=c++20 "${sanflags[@]}" "$src/examples/essiv_buffer.cpp" $pc -o "$tmp/essiv_pc" ||
    fail "building with pkg-config flags"
LD_LIBRARY_PATH=$libdir "$tmp/essiv_pc" || fail "the pkg-config build exited $?"

step "plugins in <libdir>/blkcrypt/plugins load by default in the installed CLI"
for f in sm3.so offset64.so; do
    [[ -f $libdir/blkcrypt/plugins/$f ]] || fail "not installed: ${libdir#"$prefix"/}/blkcrypt/plugins/$f"
done
printf 'abc' > "$tmp/abc"
sm3=$(env -u LD_LIBRARY_PATH -u BLKCRYPT_PLUGIN_PATH "$prefix/bin/blkcrypt" hash --alg sm3 "$tmp/abc" | cut -d' ' -f1) ||
    fail "hash --alg sm3 without --plugin"
# GB/T 32905-2016, example 1
[[ $sm3 == 66c7f0f462eeedd9d1f2d46bdc10e4e24167c4875cf2f7a2297da02b8f4ba8e0 ]] || fail "sm3 of 'abc': $sm3"
if BLKCRYPT_NO_DEFAULT_PLUGINS=1 env -u LD_LIBRARY_PATH "$prefix/bin/blkcrypt" hash --alg sm3 "$tmp/abc" >/dev/null 2>&1; then
    fail "BLKCRYPT_NO_DEFAULT_PLUGINS=1 still loads the default plugins"
fi

step "<prefix>/bin/blkcrypt --version"
# shellcheck disable=SC2016  # a literal $ORIGIN
readelf -d "$prefix/bin/blkcrypt" | grep -qE 'R(UN)?PATH.*\$ORIGIN' || fail "the CLI has no \$ORIGIN RPATH"
version=$(env -u LD_LIBRARY_PATH "$prefix/bin/blkcrypt" --version) || fail "blkcrypt --version"
echo "   $version"
step "man pages and bash completion"
man8=$prefix/share/man/man8
mapfile -t commands < <(env -u LD_LIBRARY_PATH "$prefix/bin/blkcrypt" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z]*\) .*/\1/p')
[[ ${#commands[@]} -gt 0 ]] || fail "no commands in blkcrypt --help"
for page in blkcrypt "${commands[@]/#/blkcrypt-}"; do
    [[ -s $man8/$page.8 ]] || fail "not installed: share/man/man8/$page.8"
    # man finds it by name in the prefix, and renders it without a warning.
    found=$(man -M "$prefix/share/man" -w "$page") || fail "man -M <prefix>/share/man -w $page"
    [[ $found == "$man8/$page.8" ]] || fail "man found $found for $page"
    MANWIDTH=80 man -M "$prefix/share/man" -Tutf8 "$page" > /dev/null 2> "$tmp/man.err" || fail "man $page"
    [[ ! -s $tmp/man.err ]] || fail "man $page warns: $(cat "$tmp/man.err")"
done
comp=$prefix/share/bash-completion/completions/blkcrypt
[[ -s $comp ]] || fail "not installed: share/bash-completion/completions/blkcrypt"
# shellcheck disable=SC2016  # expanded by the inner bash
got=$(bash -c 'source "$1"; COMP_WORDS=(blkcrypt verity format --ha); COMP_CWORD=3; _blkcrypt; echo "${COMPREPLY[*]}"' _ "$comp")
[[ " $got " == *" --hash "* ]] || fail "installed completion: 'blkcrypt verity format --ha' gave '$got'"
echo "   ${#commands[@]} command pages + blkcrypt(8), completion"
echo "install test passed"
