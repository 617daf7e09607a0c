#!/bin/bash
# The kernel's verdict on images blkcrypt formats and writes: for each case
# in CASES below, blkcrypt formats a sparse file (`integrity format -q`,
# computed tags, no wipe pass) and writes 6000 random bytes through the
# target (`integrity write`, a partial last block), on the host; the
# --no-wipe and journal MAC images are only formatted. Debian 12's
# kernel (6.1, integritysetup 2.6.1; ../shared/oracle, one boot) then opens
# each with integritysetup, reads the whole mapping and counts the
# "Checksum failed" lines dmesg gets.
# Writes here: CASE.img.xz (the image as blkcrypt left it, before the kernel
# saw it; CASE.data.xz the data device of --data-device cases),
# CASE.kernel (the open options, KEY and DATA standing for the key file and
# the data device; then the kernel's open rc, mapping size and sha256, dd rc,
# the checksum failures it logged), record.log (the whole guest output).
# tests/cli/integrity.sh reads each image with blkcrypt and wants the
# kernel's sha256, and no failure where the kernel had none.
# Usage: record.sh BLKCRYPT [ORACLE_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
blk=${1:?usage: record.sh path/to/blkcrypt [ORACLE_DIR]}
oracle=${2:-$here/../../../../shared/oracle}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
printf 0123456789abcdef0123456789ABCDEF > "$work/key"

# name | size | blkcrypt format options | integritysetup open options | data device size (empty: none) | write (yes/no)
KEY="--integrity-key-file KEY --integrity-key-size 32"
JMAC="--journal-integrity hmac-sha256 --journal-integrity-key-file KEY --journal-integrity-key-size 32"
CASES=(
  "crc32c|2097152|||"
  "crc32|2097152|-I crc32|-I crc32|"
  "sha256|2097152|-I sha256|-I sha256|"
  "hmac-sha256|2097152|-I hmac-sha256 $KEY|-I hmac-sha256 $KEY|"
  "sha1-4k|2097152|-I sha1 --sector-size 4096|-I sha1|"
  "tag8-crc32c|2097152|-t 8 --journal-size 262144||"
  "interleave256|2097152|--interleave-sectors 256||"
  "meta|1048576|--data-device DATA|--data-device DATA|2097152"
  "bitmap|2097152|-B|-B|"
  "direct|2097152|-D|-D|"
  "legacy-hmac|2097152|--integrity-legacy-hmac||"
  "sector4096|4194304|--sector-size 4096||"
  "no-wipe|2097152|--no-wipe||"
  "journal-mac|2097152|$JMAC|$JMAC|"
  "journal-mac-legacy|2097152|$JMAC --integrity-legacy-hmac|$JMAC|"
)

g=$work/guest.sh
disks=()
letters=(a b c d e f g h i j k l m n o p q r s t u v w x y z)
i=0
head -c 6000 /dev/urandom > "$work/pattern"
{
  echo 'printf 0123456789abcdef0123456789ABCDEF > /tmp/key'
  echo 'integritysetup --version'
  for c in "${CASES[@]}"; do
    IFS='|' read -r name size fopts oopts dsize <<<"$c"
    img=$work/$name.img
    truncate -s "$size" "$img"; disks+=("$img")
    dev=/dev/vd${letters[$i]}; i=$((i+1))
    hopts=${fopts//KEY/$work/key}
    gopts=${oopts//KEY//tmp/key}
    if [ -n "$dsize" ]; then
      truncate -s "$dsize" "$img.data"; disks+=("$img.data")
      ddev=/dev/vd${letters[$i]}; i=$((i+1))
      hopts=${hopts//DATA/$img.data}; gopts=${gopts//DATA/$ddev}
      wopts=${oopts//KEY/$work/key}; wopts=${wopts//DATA/$img.data}
    else
      wopts=${oopts//KEY/$work/key}
    fi
    # shellcheck disable=SC2086
    "$blk" integrity format -q $hopts "$img"
    # shellcheck disable=SC2086
    # (blkcrypt's target does not open images with a journal MAC: format only.)
    case "$name" in no-wipe|journal-mac*) ;; *) "$blk" integrity write $wopts "$work/pattern" "$img" ;; esac
    xz -9e -T1 < "$img" > "$work/$name.img.xz"
    [ -z "$dsize" ] || xz -9e -T1 < "$img.data" > "$work/$name.data.xz"
    cat <<GUEST
echo "=== case $name"
dmesg -c > /dev/null
integritysetup open $gopts $dev ic 2>&1; echo "open rc=\$?"
echo "size=\$(blockdev --getsize64 /dev/mapper/ic)"
rc=0; dd if=/dev/mapper/ic of=/tmp/all bs=4096 conv=noerror 2>/dev/null || rc=\$?
echo "dd rc=\$rc"
echo "sha256=\$(sha256sum < /tmp/all | cut -d' ' -f1)"
integritysetup close ic 2>&1; echo "close rc=\$?"
echo "checksum_failures=\$(dmesg | grep -c 'Checksum failed')"
dmesg | grep -o 'Checksum failed at sector 0x[0-9a-f]*' | sort -u | head -3
GUEST
  done
  echo 'echo "=== end"'
} > "$g"
"$oracle/build.sh" >&2
ORACLE_TIMEOUT=${ORACLE_TIMEOUT:-600} "$oracle/run-in-kernel.sh" "$g" "${disks[@]}" > "$work/out.txt"
kernel=$(cat "$oracle/cache/build/KERNEL_VERSION" 2>/dev/null || cat /var/tmp/blkcrypt-oracle/build/KERNEL_VERSION 2>/dev/null || echo '?')
{ echo "# Generated $(date -u '+%Y-%m-%d %H:%M UTC') by tests/golden/integrity-format/record.sh; kernel $kernel"; cat "$work/out.txt"; } > "$here/record.log"
for c in "${CASES[@]}"; do
  IFS='|' read -r name size fopts oopts dsize <<<"$c"
  { echo "options=$oopts"
    awk -v n="=== case $name" '$0==n{on=1;next} /^=== /{on=0} on' "$work/out.txt"; } > "$here/$name.kernel"
  cp "$work/$name.img.xz" "$here/"
  [ -z "$dsize" ] || cp "$work/$name.data.xz" "$here/"
done
ls -l "$here"
