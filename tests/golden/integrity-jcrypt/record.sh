#!/bin/bash
# Records dm-integrity's encrypted journal (journal_crypt:) in the kernel.
# One boot of ../shared/oracle (Debian 12: kernel 6.1, integritysetup 2.6.1).
# The journal key is the 32 ASCII bytes of KEY below (written by the guest to
# /tmp/jk, also used by the tests). For each case (ALG = integritysetup's
# --journal-crypt name):
#  1. integritysetup format --no-wipe of a 4 MiB disk: the kernel's
#     init_journal leaves the journal of empty sections, encrypted, on disk
#     (CASE.fmt.sb.xz: its superblock area; journal_sha256 in CASE.info: the
#     journal's bytes, to compare with ours; the journal itself is
#     incompressible);
#  2. integritysetup format (with the wipe) of a second disk, open in J mode
#     with --journal-watermark 100 --journal-commit-time 3600000, a few dd
#     writes with conv=fsync (each commits the journal without writing the
#     data back), then, still open, the raw disk is copied twice (the crashed
#     image: CASE.crashed.img.xz); copy two is opened in mode R (no replay),
#     then in J mode (the kernel replays the encrypted journal), read whole,
#     closed, and hashed raw.
# Writes: CASE.fmt.sb.xz, CASE.crashed.img.xz, CASE.info.
# The journal is two sections (--journal-size 180224), to keep the images small.
# Usage: record.sh [ORACLE_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
oracle=${1:-$here/../../../../shared/oracle}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
KEY=0123456789abcdefFEDCBA9876543210

# name | --journal-crypt | format options | writes "SEEK_4K:SEED ..."
CASES=(
  "ctr-aes|ctr-aes|-I crc32c --journal-size 180224|3:1 40:2 3:3"
  "chacha20|chacha20|-I crc32c --journal-size 180224|3:4 17:5"
  "cbc-aes|cbc-aes|-I crc32c --journal-size 180224|3:6 17:7"
)

g=$work/guest.sh
disks=()
{
  echo 'integritysetup --version'
  echo "printf '%s' $KEY > /tmp/jk"
  letters=(a b c d e f g h i j k l m n o p q r s t)
  i=0
  for c in "${CASES[@]}"; do
    IFS='|' read -r name alg fopts writes <<<"$c"
    f=/dev/vd${letters[$i]}; w=/dev/vd${letters[$((i+1))]}; k=/dev/vd${letters[$((i+2))]}; r=/dev/vd${letters[$((i+3))]}; i=$((i+4))
    for d in fmt work keep replay; do truncate -s 4194304 "$work/$name.$d"; disks+=("$work/$name.$d"); done
    jc="--journal-crypt $alg --journal-crypt-key-file /tmp/jk --journal-crypt-key-size 32"
    oopts=$(echo "$fopts" | sed 's/--journal-size [0-9]*//; s/--sector-size [0-9]*//')
    cat <<GUEST
echo "=== case $name"
integritysetup format -q --no-wipe $fopts $jc $f > /tmp/fmt 2>&1; echo "format_nowipe rc=\$?"; cat /tmp/fmt
integritysetup format -q $fopts $jc $w > /tmp/fmt 2>&1; echo "format rc=\$?"; cat /tmp/fmt
integritysetup open $oopts $jc --journal-watermark 100 --journal-commit-time 3600000 $w jw 2>&1; echo "open rc=\$?"
dmsetup table jw | sed 's/ [0-9]*:[0-9]* / DEV /'
GUEST
    for wr in $writes; do
      seek=${wr%%:*}; seed=${wr##*:}
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
integritysetup open $oopts $jc --integrity-recovery-mode $r jr 2>&1; echo "open R rc=\$?"
echo "mapping_before_replay=\$(sha256sum < /dev/mapper/jr | cut -c1-64)"
integritysetup close jr
integritysetup open $oopts $jc $r jr 2>&1; echo "open J rc=\$?"
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
ORACLE_TIMEOUT=${ORACLE_TIMEOUT:-900} "$oracle/run-in-kernel.sh" "$g" "${disks[@]}" > "$work/out.txt"
if [ -n "${ORACLE_KEEP:-}" ]; then cp "$work/out.txt" "$ORACLE_KEEP"; fi
kernel=$(cat "$oracle/cache/build/KERNEL_VERSION" 2>/dev/null || echo '?')
for c in "${CASES[@]}"; do
  IFS='|' read -r name alg fopts writes <<<"$c"
  awk -v n="=== case $name" '$0==n{on=1;next} /^=== /{on=0} on' "$work/out.txt" > "$work/$name.txt"
  {
    echo "# Generated $(date -u '+%Y-%m-%d %H:%M UTC') by tests/golden/integrity-jcrypt/record.sh; kernel $kernel"
    echo "journal_crypt=$alg"
    echo "key=$KEY"
    echo "format_options=$fopts"
    echo "writes=$writes"
    grep -E '^(format_nowipe rc|format rc|open rc|open R rc|open J rc|close rc|copy keep rc|copy replay rc|provided_sectors|mapping_written|raw_crashed|mapping_before_replay|mapping_after_replay|raw_after_replay)=' "$work/$name.txt" || true
    grep -E '^write ' "$work/$name.txt" | sed 's/^write /write=/' || true
    echo "table=$(grep -E '^0 [0-9]+ integrity' "$work/$name.txt" | head -1 || true)"
    grep -vE '^(format_nowipe rc|format rc|open rc|open R rc|open J rc|close rc|copy keep rc|copy replay rc|provided_sectors|mapping_|raw_|write |0 [0-9]+ integrity|dmesg:)' "$work/$name.txt" | sed 's/^/msg=/' || true
    js=$(grep -oE 'journal_sectors:[0-9]+' "$work/$name.txt" | head -1 | cut -d: -f2)
    echo "journal_sha256=$(dd if="$work/$name.fmt" bs=512 skip=8 count="$js" 2>/dev/null | sha256sum | cut -c1-64)"
  } > "$here/$name.info"
  head -c 4096 "$work/$name.fmt" | xz -9e -T1 > "$here/$name.fmt.sb.xz"
  xz -9e -T1 < "$work/$name.keep" > "$here/$name.crashed.img.xz"
done
