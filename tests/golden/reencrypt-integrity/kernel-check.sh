#!/bin/bash
# The real kernel opens what `blkcrypt reencrypt` leaves of a LUKS2
# --integrity container (cryptsetup 2.6.1 cannot reencrypt these, so there is
# no peer to compare with; the kernel is the reader that matters). Three
# images, each formatted, filled and re-keyed by blkcrypt: aes-xts-plain64 +
# hmac-sha256 (4 KiB sectors); aes-gcm-random 256-bit (4 KiB sectors);
# aes-xts-plain64 + hmac-sha256 (512-byte sectors) SIGKILLed mid-run, then
# `blkcrypt repair` and `reencrypt --resume-only`. One boot of
# ../shared/oracle (Debian's 6.1 kernel, cryptsetup 2.6.1 in the guest):
# `cryptsetup open` of each, the whole mapping hashed, and the kernel's
# dm-integrity / AEAD errors counted. Passes when every mapping hashes as
# `blkcrypt luks decrypt` does and the kernel logged no error. Run by hand
# (TCG boot, ~25 s); nothing is recorded.
# Usage: kernel-check.sh BLKCRYPT [ORACLE_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=$(realpath "${1:?usage: kernel-check.sh BLKCRYPT [ORACLE_DIR]}")
oracle=${2:-$here/../../../../shared/oracle}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
printf pw >pw
head -c $((2 * 1024 * 1024)) /dev/urandom >plain
mk() {
    rm -f "$1"; truncate -s 6M "$1"
    "$B" luks format -q --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --luks2-metadata-size 16k \
        --luks2-keyslots-size 1m --offset 4096 --key-file pw "${@:2}" "$1"
    "$B" luks encrypt --key-file pw plain "$1" 2>/dev/null
}
mk k1.img --integrity hmac-sha256 --sector-size 4096
"$B" reencrypt --key-file pw k1.img
mk k2.img --cipher aes-gcm-random --integrity aead --key-size 256 --sector-size 4096
"$B" reencrypt --key-file pw --hotzone-size 256k k2.img
mk k3.img --integrity hmac-sha256 --sector-size 512
"$B" reencrypt --key-file pw --hotzone-size 128k k3.img 2>/dev/null & pid=$!
sleep 0.3; kill -KILL $pid 2>/dev/null || true; wait $pid 2>/dev/null || true
k3=finished
if cryptsetup luksDump k3.img | grep -q in-reencryption; then k3=crashed; "$B" repair --key-file pw k3.img; fi
if cryptsetup luksDump k3.img | grep -q online-reencrypt; then
    [[ $k3 == crashed ]] || k3=mid-way
    "$B" reencrypt --resume-only --key-file pw k3.img
fi
echo "k3 was $k3 when killed"
want=""
for i in 1 2 3; do
    "$B" luks decrypt --key-file pw k$i.img k$i.out
    want+="vd$(echo _abc | cut -c$((i + 1))) $(sha256sum <k$i.out | cut -c1-64)"$'\n'
done
cat >guest.sh <<'GUEST'
printf pw > /tmp/pw
for d in vda vdb vdc; do
  cryptsetup open --key-file /tmp/pw /dev/$d k$d || { echo "$d open failed"; continue; }
  echo "$d $(sha256sum < /dev/mapper/k$d | cut -c1-64)"
  cryptsetup close k$d
done
echo "errors $(dmesg | grep -ci 'integrity.*error\|checksum failed\|AEAD ERROR')"
GUEST
got=$("$oracle/run-in-kernel.sh" -t 600 guest.sh k1.img k2.img k3.img)
echo "$got"
[[ $got == "${want}errors 0" ]] || { echo "FAIL: the kernel read other bytes or logged errors; want:"; echo "$want"; exit 1; }
echo "kernel-check: the kernel opens all three re-keyed images to blkcrypt's plaintext, no integrity error"
