#!/bin/bash
# Records what the kernel's journal replay does with an image it left with
# committed journal sections that were never written back: the state a
# power-off leaves. One boot of ../shared/oracle (Debian 12: kernel 6.1,
# integritysetup 2.6.1) per run. For each case below:
#  1. integritysetup format (with the wipe) of a 4 MiB disk;
#  2. open in J mode with --journal-watermark 100 (sections are written back
#     only when the journal is full) and --journal-commit-time 3600000 (no
#     timed commit), then a few dd writes with conv=fsync, oflag=direct: each
#     fsync commits the journal (integrity_commit writes the sections with
#     FUA) without writing the data back;
#  3. with the mapping still open, the raw disk is copied with O_DIRECT to
#     two other disks: the "crashed" image (what a power-off here leaves:
#     the committed journal is on disk, the data area is old);
#  4. copy one is kept as it is (CASE.crashed.img.xz); copy two is opened in
#     mode R (no replay: the old data), then in J mode (the kernel replays the
#     journal at resume), read whole, closed, and hashed raw.
# Writes here: CASE.crashed.img.xz, CASE.info (sha256 of the mapping in mode
# R before replay, of the mapping after replay, of the raw disk after replay
# and close, the blocks written, the journal geometry).
# Usage: record.sh [ORACLE_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
oracle=${1:-$here/../../../../shared/oracle}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

# name | format options | writes: "SEEK_4K:SEED ..." one dd (and fsync) each
CASES=(
  # One journal section (the default journal of a 4 MiB disk is 64 sectors:
  # one 176-sector section), three commits into it... each commit pads the
  # section, so every fsync takes a new section: with one section the
  # second commit waits for the write-back of the first. Writes: 2 commits.
  "one-section|-I crc32c|3:1 17:2"
  # Five sections; seven commits: the fifth fills the journal, the writer
  # writes sections 0..4 back, commits six and seven land in sections 0 and 1
  # in the next commit sequence. Block 3 is written three times (commits 1,
  # 4 and 7): replay must apply them oldest first.
  "wrap|-I crc32c --journal-size 524288|3:11 40:12 5:13 3:14 100:15 6:16 3:17"
  # sha256 tags, 4 KiB blocks (entries with 8 last_bytes each, 32-byte tags).
  "sha256-4k|-I sha256 --sector-size 4096 --journal-size 524288|1:21 2:22 200:23 1:24"
)

g=$work/guest.sh
disks=()
{
  echo 'integritysetup --version'
  letters=(a b c d e f g h i j k l)
  i=0
  for c in "${CASES[@]}"; do
    IFS='|' read -r name fopts writes <<<"$c"
    w=/dev/vd${letters[$i]}; k=/dev/vd${letters[$((i+1))]}; r=/dev/vd${letters[$((i+2))]}; i=$((i+3))
    for d in work keep replay; do truncate -s 4194304 "$work/$name.$d"; disks+=("$work/$name.$d"); done
    oopts=$(echo "$fopts" | sed 's/--journal-size [0-9]*//; s/--sector-size [0-9]*//')
    cat <<GUEST
echo "=== case $name"
integritysetup format -q $fopts $w > /tmp/fmt 2>&1; echo "format rc=\$?"; cat /tmp/fmt
integritysetup open $oopts --journal-watermark 100 --journal-commit-time 3600000 $w jw 2>&1; echo "open rc=\$?"
dmsetup table jw | sed 's/ [0-9]*:[0-9]* / DEV /'
GUEST
    for wr in $writes; do
      seek=${wr%%:*}; seed=${wr##*:}
      # A 4 KiB block from the seed: 256 lines "SSS-LLLL-integr\n"
      # (16 bytes), so every 512-byte sector ends in bytes the journal's
      # commit id displaces. Reproducible on the host (see the test).
      cat <<GUEST
n=0; while [ \$n -lt 256 ]; do printf '%03d-%04d-integr\\n' $seed \$n; n=\$((n+1)); done > /tmp/blk
dd if=/tmp/blk of=/dev/mapper/jw bs=4096 seek=$seek count=1 conv=fsync oflag=direct 2>/dev/null; echo "write $seek seed=$seed rc=\$? sha256=\$(sha256sum < /tmp/blk | cut -c1-64)"
GUEST
    done
    cat <<GUEST
echo "mapping_written=\$(sha256sum < /dev/mapper/jw | cut -c1-64)"
dd if=$w of=$k bs=1M iflag=direct oflag=direct 2>/dev/null; echo "copy keep rc=\$?"
dd if=$w of=$r bs=1M iflag=direct oflag=direct 2>/dev/null; echo "copy replay rc=\$?"
echo "raw_crashed=\$(sha256sum < $k | cut -c1-64)"
integritysetup open $oopts --integrity-recovery-mode $r jr 2>&1; echo "open R rc=\$?"
echo "mapping_before_replay=\$(sha256sum < /dev/mapper/jr | cut -c1-64)"
integritysetup close jr
integritysetup open $oopts $r jr 2>&1; echo "open J rc=\$?"
echo "provided_sectors=\$(blockdev --getsz /dev/mapper/jr)"
echo "mapping_after_replay=\$(sha256sum < /dev/mapper/jr | cut -c1-64)"
integritysetup close jr; echo "close rc=\$?"
echo "raw_after_replay=\$(sha256sum < $r | cut -c1-64)"
integritysetup close jw
echo "dmesg:"; dmesg | grep -i integrity | sed 's/^\[[ 0-9.]*\] //' | sort -u
GUEST
  done
  echo 'echo "=== end"'
} > "$g"
"$oracle/build.sh" >&2
ORACLE_TIMEOUT=${ORACLE_TIMEOUT:-600} "$oracle/run-in-kernel.sh" "$g" "${disks[@]}" > "$work/out.txt"
if [ -n "${ORACLE_KEEP:-}" ]; then cp "$work/out.txt" "$ORACLE_KEEP"; fi
kernel=$(cat "$oracle/cache/build/KERNEL_VERSION" 2>/dev/null || echo '?')
for c in "${CASES[@]}"; do
  IFS='|' read -r name fopts writes <<<"$c"
  awk -v n="=== case $name" '$0==n{on=1;next} /^=== /{on=0} on' "$work/out.txt" > "$work/$name.txt"
  {
    echo "# Generated $(date -u '+%Y-%m-%d %H:%M UTC') by tests/golden/integrity-journal/record.sh; kernel $kernel"
    echo "format_options=$fopts"
    echo "writes=$writes"
    grep -E '^(format rc|open rc|open R rc|open J rc|close rc|copy keep rc|copy replay rc|provided_sectors|mapping_written|raw_crashed|mapping_before_replay|mapping_after_replay|raw_after_replay)=' "$work/$name.txt" || true
    grep -E '^write ' "$work/$name.txt" | sed 's/^write /write=/' || true
    echo "table=$(grep -E '^0 [0-9]+ integrity' "$work/$name.txt" | head -1 || true)"
    sed -n '/^dmesg:/,$p' "$work/$name.txt" | tail -n +2 | sed 's/^/dmesg=/'
  } > "$here/$name.info"
  xz -9e -T1 < "$work/$name.keep" > "$here/$name.crashed.img.xz"
done
