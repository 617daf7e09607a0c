#!/usr/bin/env bash
# Times blkcrypt crypt encrypt (aes-xts-plain64, 512-bit key, raw image) against
# qemu-img convert to a LUKS image with the same cipher, on the same random
# input, one after the other in one run.
#   SIZE_MIB   input size (default 1024)
#   BLKCRYPT   the binary (default build/cli/blkcrypt)
#   WORKDIR    where the files go (default a temporary directory)
# Both outputs are written to the same file system; page cache effects are
# similar for both (the input is read once beforehand to warm the cache).
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MIB=${SIZE_MIB:-1024}
BLKCRYPT=${BLKCRYPT:-build/cli/blkcrypt}
[[ -x $BLKCRYPT ]] || { echo "no $BLKCRYPT: build first (scripts/build.sh) or set BLKCRYPT" >&2; exit 1; }

if ! command -v qemu-img >/dev/null; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    echo "installing qemu-utils" >&2
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends qemu-utils >/dev/null
fi

WORK=${WORKDIR:-$(mktemp -d)}
cleanup() { [[ -n ${WORKDIR:-} ]] || rm -rf "$WORK"; }
trap cleanup EXIT

echo "input: ${SIZE_MIB} MiB of random data in $WORK; $(nproc) CPUs, load: $(cut -d' ' -f1-3 /proc/loadavg)"
head -c $((SIZE_MIB * 1024 * 1024)) /dev/urandom >"$WORK/raw.img"
head -c 64 /dev/urandom >"$WORK/key"
cat "$WORK/raw.img" >/dev/null  # warm the page cache for both runs

# seconds NAME CMD...: runs CMD, prints the wall-clock seconds.
seconds() {
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'
}

t_blk=$(seconds "$BLKCRYPT" crypt encrypt --cipher aes-xts-plain64 --key-file "$WORK/key" --key-size 512 \
    "$WORK/raw.img" "$WORK/blkcrypt.img")
rm -f "$WORK/blkcrypt.img"
# iter-time=10 ms keeps the key derivation (PBKDF) out of the measurement.
t_qemu=$(seconds qemu-img convert -f raw -O luks --object secret,id=s0,data=pass \
    -o key-secret=s0,cipher-alg=aes-256,cipher-mode=xts,ivgen-alg=plain64,iter-time=10 \
    "$WORK/raw.img" "$WORK/qemu.luks")
rm -f "$WORK/qemu.luks"

mbs() { awk -v n="$SIZE_MIB" -v t="$1" 'BEGIN { printf "%.1f", n * 1.048576 / t }'; }
printf '%-28s %8.2f s  %8s MB/s\n' "blkcrypt crypt encrypt" "$t_blk" "$(mbs "$t_blk")"
printf '%-28s %8.2f s  %8s MB/s\n' "qemu-img convert -O luks" "$t_qemu" "$(mbs "$t_qemu")"
printf 'ratio qemu-img / blkcrypt time: %.2f (above 1: blkcrypt is faster)\n' "$(awk -v a="$t_qemu" -v b="$t_blk" 'BEGIN { print a / b }')"
