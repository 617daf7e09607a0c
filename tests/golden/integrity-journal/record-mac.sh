#!/bin/bash
# Records the journal MAC (integritysetup --journal-integrity, the kernel's
# journal_mac:) in one boot of ../shared/oracle: for each case a 4 MiB disk
# is formatted (with the wipe) with hmac-sha256 over the journal (key 0x00..0x1f), its
# first 64 KiB kept (superblock with its MAC under fix_hmac, the clean
# journal with a MAC in every metadata sector); then it is opened in J mode
# (watermark 100, long commit time), two blocks are written with fsync, and
# the disk is copied while the mapping is open (committed sections with
# their MACs, the data area old) and the copy opened again (the kernel
# checks the MACs and replays).
# Writes here: mac-CASE.head.gz, mac-CASE.crashed.img.xz, mac-CASE.info.
# Usage: record-mac.sh [ORACLE_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
oracle=${1:-$here/../../../../shared/oracle}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# name | extra format/open options
CASES=(
  "fixhmac|"
  "legacy|--integrity-legacy-hmac"
)
g=$work/guest.sh
disks=()
letters=(a b c d e f)
{
  echo 'i=0; : > /tmp/jkey; while [ $i -lt 32 ]; do printf "\\$(printf %03o $i)" >> /tmp/jkey; i=$((i+1)); done'
  echo 'echo "key_sha256=$(sha256sum < /tmp/jkey | cut -c1-64)"'
  i=0
  for c in "${CASES[@]}"; do
    IFS='|' read -r name extra <<<"$c"
    w=/dev/vd${letters[$i]}; k=/dev/vd${letters[$((i+1))]}; i=$((i+2))
    for d in work keep; do truncate -s 4194304 "$work/$name.$d"; disks+=("$work/$name.$d"); done
    jopts="--journal-integrity hmac-sha256 --journal-integrity-key-file /tmp/jkey --journal-integrity-key-size 32 $extra"
    cat <<GUEST
echo "=== case $name"
integritysetup format -q $jopts $w > /tmp/fmt 2>&1; echo "format rc=\$?"; cat /tmp/fmt
echo "--- head"
dd if=$w bs=4096 count=16 2>/dev/null | od -An -v -tx1
echo "--- end head"
integritysetup open $jopts --journal-watermark 100 --journal-commit-time 3600000 $w jw 2>&1; echo "open rc=\$?"
dmsetup table jw | sed 's/ [0-9]*:[0-9]* / DEV /; s/journal_mac:hmac(sha256):[0-9a-f]*/journal_mac:hmac(sha256):KEY/'
n=0; while [ \$n -lt 256 ]; do printf 'mac-%04d-journal\\n' \$n; n=\$((n+1)); done > /tmp/blk
dd if=/tmp/blk of=/dev/mapper/jw bs=4096 seek=2 count=1 conv=fsync oflag=direct 2>/dev/null; echo "write1 rc=\$?"
dd if=/tmp/blk of=/dev/mapper/jw bs=512 seek=100 count=3 conv=fsync oflag=direct 2>/dev/null; echo "write2 rc=\$?"
echo "mapping_written=\$(sha256sum < /dev/mapper/jw | cut -c1-64)"
dd if=$w of=$k bs=1M iflag=direct oflag=direct 2>/dev/null; echo "copy rc=\$?"
integritysetup close jw
echo "raw_crashed=\$(sha256sum < $k | cut -c1-64)"
dmesg -c > /dev/null
integritysetup open $jopts $k jr 2>&1; echo "open again rc=\$?"
echo "mapping_after_replay=\$(sha256sum < /dev/mapper/jr | cut -c1-64)"
integritysetup close jr
dmesg | grep -E 'device-mapper: integrity' | sed 's/^\[[ 0-9.]*\] //' | sort -u | sed 's/^/dmesg_error=/'
GUEST
  done
  echo 'echo "=== end"'
} > "$g"
"$oracle/build.sh" >&2
ORACLE_TIMEOUT=${ORACLE_TIMEOUT:-600} "$oracle/run-in-kernel.sh" "$g" "${disks[@]}" > "$work/out.txt"
if [ -n "${ORACLE_KEEP:-}" ]; then cp "$work/out.txt" "$ORACLE_KEEP"; fi
kernel=$(cat "$oracle/cache/build/KERNEL_VERSION" 2>/dev/null || echo '?')
for c in "${CASES[@]}"; do
  IFS='|' read -r name extra <<<"$c"
  awk -v n="=== case $name" '$0==n{on=1;next} /^=== /{on=0} on' "$work/out.txt" > "$work/$name.txt"
  {
    echo "# Generated $(date -u '+%Y-%m-%d %H:%M UTC') by tests/golden/integrity-journal/record-mac.sh; kernel $kernel"
    echo "format_options=--journal-integrity hmac-sha256 (key bytes 0..31) $extra"
    grep -E '^key_sha256=' "$work/out.txt" | head -1
    grep -E '^(format rc|open rc|write1 rc|write2 rc|copy rc|open again rc|mapping_written|raw_crashed|mapping_after_replay|dmesg_error)=' "$work/$name.txt" || true
    echo "table=$(grep -E '^0 [0-9]+ integrity' "$work/$name.txt" | head -1 || true)"
  } > "$here/mac-$name.info"
  awk '/^--- head$/{on=1;next} /^--- end head$/{on=0} on' "$work/$name.txt" | tr -d ' \n\r' | xxd -r -p | gzip -9n > "$here/mac-$name.head.gz"
  xz -9e -T1 < "$work/$name.keep" > "$here/mac-$name.crashed.img.xz"
done
