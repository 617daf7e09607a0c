#!/bin/bash
# The other direction: images blkcrypt wrote, read by the kernel. The unit
# test "[.integrity-record]" takes each kernel-made image here (CASE.img.xz),
# writes a pattern into it through blkcrypt's dm-integrity target (in the
# image's own mode: J and D write data and tags directly with the journal left
# clean, B keeps the dirty bitmap as the kernel does) and notes the sha256
# blkcrypt then reads. One boot of ../shared/oracle then opens each with
# integritysetup, reads the whole mapping, and reports its sha256 and the
# number of dm-integrity errors in dmesg.
# Writes here: record-blkcrypt.log ("result NAME kernel_sha256=... errors=N"
# per case, blkcrypt's own sha256 beside it, then the guest output).
# Usage: record-blkcrypt.sh [BLKCRYPT_TESTS_BINARY [ORACLE_DIR]]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tests_bin=${1:-$here/../../../build/tests/blkcrypt_tests}
oracle=${2:-$here/../../../../shared/oracle}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

BLKCRYPT_INTEGRITY_OUT=$work "$tests_bin" "[.integrity-record]" >&2

KEYOPT="--integrity-key-file /tmp/key --integrity-key-size 32"
# name | open options | with a metadata device (the .meta file is integritysetup's DEVICE)
CASES=(
  "crc32c||" "crc32|-I crc32|" "sha1-4k|-I sha1|" "sha256|-I sha256|"
  "hmac-sha256|-I hmac-sha256 $KEYOPT|" "sector4096||" "interleave256||"
  "meta|--data-device DATADEV|meta" "bitmap|-B|" "direct|-D|"
)
letters=(a b c d e f g h i j k l m n o p q r s t u v w x y z)
disks=(); i=0
{
  echo 'printf 0123456789abcdef0123456789ABCDEF > /tmp/key'
  for c in "${CASES[@]}"; do
    IFS='|' read -r name oopts meta <<<"$c"
    disks+=("$work/$name.img"); img=/dev/vd${letters[$i]}; i=$((i+1)); dev=$img
    if [ -n "$meta" ]; then
      disks+=("$work/$name.meta"); dev=/dev/vd${letters[$i]}; i=$((i+1))
      oopts=${oopts//DATADEV/$img}
    fi
    cat <<GUEST
echo "=== case $name"
dmesg -c > /dev/null
integritysetup open $oopts $dev ic 2>&1; echo "open rc=\$?"
s=\$(dd if=/dev/mapper/ic bs=65536 2>/tmp/dd.err | sha256sum | cut -d' ' -f1); cat /tmp/dd.err | grep -v records
integritysetup close ic 2>&1; echo "close rc=\$?"
dmesg | grep -i 'integrity' | grep -iv 'loading\|module' > /tmp/dm.txt
cat /tmp/dm.txt
echo "result $name kernel_sha256=\$s errors=\$(grep -ci 'fail\|error\|mismatch' /tmp/dm.txt)"
GUEST
  done
  echo 'echo "=== end"'
} > "$work/guest.sh"
"$oracle/build.sh" >&2
ORACLE_TIMEOUT=${ORACLE_TIMEOUT:-600} "$oracle/run-in-kernel.sh" "$work/guest.sh" "${disks[@]}" > "$work/out.txt"
kernel=$(cat "$oracle/cache/build/KERNEL_VERSION" 2>/dev/null || echo '?')
{
  echo "# Generated $(date -u '+%Y-%m-%d %H:%M UTC') by tests/golden/integrity-data/record-blkcrypt.sh; kernel $kernel"
  echo "# blkcrypt's own reads:"
  sed 's/^/# blkcrypt /' "$work/ours.txt"
  cat "$work/out.txt"
} > "$here/record-blkcrypt.log"
grep '^result' "$here/record-blkcrypt.log"
