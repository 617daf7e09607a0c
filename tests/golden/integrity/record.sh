#!/bin/bash
# Records dm-integrity superblocks made by the real integritysetup (cryptsetup
# 2.6.1) on Debian's kernel, in ../shared/oracle (qemu; no root or
# device-mapper needed on the host). For each case in CASES below, a sparse
# file of the given size is formatted with `integritysetup format --no-wipe`,
# dumped with `integritysetup dump`, opened, and the mapping's size taken with
# `blockdev --getsz` (the kernel's provided_data_sectors).
# Writes here: CASE.sb (the 4 KiB superblock area right after format),
# CASE.head.gz (the first 64 KiB then: the superblock and the start of the
# journal, for journal work), CASE.dump (dump text; CASE.open.dump: while
# open), CASE.info (device sizes, provided sectors, the kernel's table).
# Usage: record.sh [ORACLE_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
oracle=${1:-$here/../../../../shared/oracle}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

# (integritysetup 2.6.1's format keeps fix_padding despite
# --integrity-legacy-padding: the legacy cases come out as version 4, or 2 with
# a metadata device, which has no padding.)
# name | size in bytes | format options ("-": no format) | open options |
# data device size (empty: none) | "open-dump": dump again while open
CASES=(
  "crc32c-default|16777216|||"
  "sha256-odd|21000192|-I sha256|-I sha256|"
  "hmac-sha256|16777216|-I hmac-sha256 --integrity-key-file /tmp/key --integrity-key-size 32|-I hmac-sha256 --integrity-key-file /tmp/key --integrity-key-size 32|"
  "sector4096|33554432|--sector-size 4096||"
  "bitmap|16777216|-B|-B|"
  "nojournal|16777216|-D|-D|"
  "interleave4096|16777216|--interleave-sectors 4096||"
  "meta-device|4194304|--data-device /dev/vdb|--data-device /dev/vdb|12582912"
  "journal-size|16777216|--journal-size 1048576 -t 8 -I crc32|-I crc32|"
  "legacy-flags|16777216|--integrity-legacy-padding --integrity-legacy-hmac||"
  "legacy-bitmap|16777216|-B --integrity-legacy-padding --integrity-legacy-hmac|-B|"
  "legacy-meta|4194304|--data-device /dev/vdb --integrity-legacy-hmac|--data-device /dev/vdb|8388608"
  "recalculate|16777216||--integrity-recalculate||open-dump"
  "no-superblock|1048576|-||"
)

g=$work/guest.sh
disks=()
{
  echo 'printf 0123456789abcdef0123456789ABCDEF > /tmp/key'
  echo 'integritysetup --version'
  letters=(a b c d e f g h i j k l m n o p q r s t)
  i=0
  for c in "${CASES[@]}"; do
    IFS='|' read -r name size fopts oopts dsize extra <<<"$c"
    dev=/dev/vd${letters[$i]}; i=$((i+1))
    truncate -s "$size" "$work/$name.img"; disks+=("$work/$name.img")
    if [ -n "$dsize" ]; then
      ddev=/dev/vd${letters[$i]}; i=$((i+1))
      truncate -s "$dsize" "$work/$name.data"; disks+=("$work/$name.data")
      fopts=${fopts//\/dev\/vdb/$ddev}; oopts=${oopts//\/dev\/vdb/$ddev}
    fi
    if [ "$fopts" = - ]; then
      cat <<GUEST
echo "=== case $name"
echo "--- dump"
integritysetup dump $dev 2>&1; echo "dump rc=\$?"
GUEST
      continue
    fi
    cat <<GUEST
echo "=== case $name"
integritysetup format -q --no-wipe $fopts $dev > /tmp/fmt 2>&1; echo "format rc=\$?" ; cat /tmp/fmt
echo "--- dump"
integritysetup dump $dev 2>&1; echo "dump rc=\$?"
echo "--- head"
dd if=$dev bs=4096 count=16 2>/dev/null | od -An -v -tx1
echo "--- end head"
echo "--- open"
integritysetup open $oopts $dev ic 2>&1; echo "open rc=\$?"
echo "backing_sectors=\$(blockdev --getsz $dev)"
echo "provided_sectors=\$(blockdev --getsz /dev/mapper/ic)"
dmsetup table ic 2>&1 | sed 's/ [0-9]*:[0-9]* / DEV /g'
GUEST
    if [ "$extra" = open-dump ]; then
      cat <<GUEST
echo "--- open dump"
integritysetup dump $dev 2>&1; echo "open dump rc=\$?"
echo "--- end open dump"
GUEST
    fi
    cat <<GUEST
integritysetup close ic 2>&1
GUEST
  done
  echo 'echo "=== end"'
} > "$g"
"$oracle/build.sh" >&2
ORACLE_TIMEOUT=${ORACLE_TIMEOUT:-1500} "$oracle/run-in-kernel.sh" "$g" "${disks[@]}" > "$work/out.txt"
if [ -n "${ORACLE_KEEP:-}" ]; then cp "$work/out.txt" "$ORACLE_KEEP"; fi
kernel=$(cat "$oracle/cache/build/KERNEL_VERSION" 2>/dev/null || cat /var/tmp/blkcrypt-oracle/build/KERNEL_VERSION 2>/dev/null || echo '?')
# Split the guest output by case.
for c in "${CASES[@]}"; do
  IFS='|' read -r name size fopts oopts dsize extra <<<"$c"
  awk -v n="=== case $name" '$0==n{on=1;next} /^=== /{on=0} on' "$work/out.txt" > "$work/$name.txt"
  awk '/^--- dump$/{on=1;next} /^dump rc=/{on=0} on' "$work/$name.txt" > "$here/$name.dump"
  {
    echo "# Generated $(date -u '+%Y-%m-%d %H:%M UTC') by tests/golden/integrity/record.sh; kernel $kernel"
    echo "format_options=$fopts"
    echo "size_bytes=$size"
    [ -n "$dsize" ] && echo "data_device_bytes=$dsize"
    grep -E '^(format rc|dump rc|open rc|open dump rc|backing_sectors|provided_sectors)=' "$work/$name.txt" || true
    echo "table=$(grep -E '^0 [0-9]+ integrity' "$work/$name.txt" || true)"
  } > "$here/$name.info"
  if [ "$extra" = open-dump ]; then
    awk '/^--- open dump$/{on=1;next} /^open dump rc=/{on=0} on' "$work/$name.txt" > "$here/$name.open.dump"
  fi
  [ "$fopts" = - ] && continue
  # The head as it was right after format (before open, which may rewrite
  # the superblock or the journal in bitmap mode).
  awk '/^--- head$/{on=1;next} /^--- end head$/{on=0} on' "$work/$name.txt" | tr -d ' \n\r' | xxd -r -p > "$work/$name.head"
  head -c 4096 "$work/$name.head" > "$here/$name.sb"   # the superblock area, for the unit tests
  gzip -9n < "$work/$name.head" > "$here/$name.head.gz"
done
