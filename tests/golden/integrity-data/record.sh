#!/bin/bash
# Records dm-integrity images written by the real kernel (Debian 12: kernel
# 6.1, integritysetup 2.6.1) in ../shared/oracle, in one boot (qemu; no root
# or device-mapper needed on the host). For each case in CASES below, a file
# is formatted WITH the wipe (every tag valid), opened, a text pattern written
# with dd to a few 4 KiB pages (the first two, three across sector 256 — an
# interleave-area boundary in the interleave case — and the last), closed,
# opened again and read whole by the kernel. Then two copies of crc32c and one
# of sector4096 get one flipped byte (data, tag) and are read again, keeping
# what dmesg says ("Checksum failed at sector").
# Writes here: CASE.img.xz (the image after the kernel closed it; CASE.meta.xz
# for the metadata device), CASE.sha256 (sha256 of the whole mapping as the
# kernel read it, and its size), CASE.table (dmsetup table, devices as DEV),
# tamper.log (the tamper cases), record.log (the whole guest output).
# Usage: record.sh [ORACLE_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
oracle=${1:-$here/../../../../shared/oracle}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

# name | size | format options | open options | metadata device size (empty: none)
# The hmac key is /tmp/key in the guest (32 bytes, below).
KEYOPT="--integrity-key-file /tmp/key --integrity-key-size 32"
CASES=(
  "crc32c|2097152|||"
  "crc32|2097152|-I crc32|-I crc32|"
  "sha1-4k|2097152|-I sha1 --sector-size 4096|-I sha1|"
  "sha256|2097152|-I sha256|-I sha256|"
  "hmac-sha256|2097152|-I hmac-sha256 $KEYOPT|-I hmac-sha256 $KEYOPT|"
  "sector4096|4194304|--sector-size 4096||"
  "interleave256|2097152|--interleave-sectors 256||"
  "meta|2097152|--data-device DATADEV|--data-device DATADEV|1048576"
  "bitmap|2097152|-B|-B|"
  "direct|2097152|-D|-D|"
)

g=$work/guest.sh
disks=()
letters=(a b c d e f g h i j k l m n o p q r s t u v w x y z)
i=0
{
  echo 'printf 0123456789abcdef0123456789ABCDEF > /tmp/key'
  echo 'integritysetup --version'
  # flip DEV BYTE_OFFSET: xor one byte with 0x5a
  cat <<'GUEST'
flip() {
  v=$(dd if=$1 bs=1 skip=$2 count=1 2>/dev/null | od -An -tu1 | tr -d ' ')
  n=$(( v ^ 90 ))
  printf "\\$(printf %o $n)" | dd of=$1 bs=1 seek=$2 count=1 conv=notrunc 2>/dev/null
  echo "flipped byte $2 of $1: $v -> $n"
}
GUEST
  for c in "${CASES[@]}"; do
    IFS='|' read -r name size fopts oopts msize <<<"$c"
    # With a metadata device, the image is the data device and .meta the
    # metadata device integritysetup formats (integritysetup's DEVICE).
    truncate -s "$size" "$work/$name.img"; disks+=("$work/$name.img")
    img=/dev/vd${letters[$i]}; i=$((i+1))
    dev=$img
    if [ -n "$msize" ]; then
      truncate -s "$msize" "$work/$name.meta"; disks+=("$work/$name.meta")
      dev=/dev/vd${letters[$i]}; i=$((i+1))
      fopts=${fopts//DATADEV/$img}; oopts=${oopts//DATADEV/$img}
    fi
    cat <<GUEST
echo "=== case $name"
integritysetup format -q $fopts $dev 2>&1; echo "format rc=\$?"
integritysetup open $oopts $dev ic 2>&1; echo "open rc=\$?"
dmsetup table ic 2>&1 | sed -E 's/meta_device:[0-9]+:[0-9]+/meta_device:DEV/; s/ [0-9]+:[0-9]+ / DEV /g' | sed 's/^/table: /'
pages=\$(( \$(blockdev --getsize64 /dev/mapper/ic) / 4096 ))
yes "blkcrypt integrity golden $name, written by the kernel through dd" | head -c 65536 > /tmp/pat
dd if=/tmp/pat of=/dev/mapper/ic bs=4096 seek=0 count=2 2>&1 | grep -v records
dd if=/tmp/pat of=/dev/mapper/ic bs=4096 skip=4 seek=30 count=3 2>&1 | grep -v records
dd if=/tmp/pat of=/dev/mapper/ic bs=4096 skip=8 seek=\$((pages - 1)) count=1 2>&1 | grep -v records
sync
integritysetup close ic 2>&1; echo "close rc=\$?"
integritysetup open $oopts $dev ic 2>&1; echo "reopen rc=\$?"
echo "size=\$(blockdev --getsize64 /dev/mapper/ic)"
echo "sha256=\$(dd if=/dev/mapper/ic bs=65536 2>/dev/null | sha256sum | cut -d' ' -f1)"
integritysetup close ic 2>&1; echo "close rc=\$?"
GUEST
  done
  # Tamper cases: copies (made in the guest, after the kernel wrote them).
  for t in "tamper-data|crc32c|2097152|$((512 * (440 + 5) + 100))" \
           "tamper-tag|crc32c|2097152|$((512 * 184 + 4 * 9 + 1))" \
           "tamper-4k|sector4096|4194304|$((512 * (432 + 16) + 7))"; do
    IFS='|' read -r name src size off <<<"$t"
    truncate -s "$size" "$work/$name.img"; disks+=("$work/$name.img")
    dev=/dev/vd${letters[$i]}; i=$((i+1))
    # the source is the first disk of its case
    j=0; for c in "${CASES[@]}"; do IFS='|' read -r n _ _ _ m <<<"$c"; [ "$n" = "$src" ] && break; j=$((j+1)); [ -n "$m" ] && j=$((j+1)); done
    srcdev=/dev/vd${letters[$j]}
    cat <<GUEST
echo "=== tamper $name"
dd if=$srcdev of=$dev bs=65536 2>/dev/null
flip $dev $off
dmesg -c > /dev/null
integritysetup open $dev it 2>&1; echo "open rc=\$?"
dd if=/dev/mapper/it of=/dev/null bs=4096 conv=noerror 2>&1 | grep -v records
integritysetup close it 2>&1
dmesg | grep -o 'Checksum failed at sector 0x[0-9a-f]*' | sort -u
GUEST
  done
  echo 'echo "=== end"'
} > "$g"
"$oracle/build.sh" >&2
ORACLE_TIMEOUT=${ORACLE_TIMEOUT:-600} "$oracle/run-in-kernel.sh" "$g" "${disks[@]}" > "$work/out.txt"
kernel=$(cat "$oracle/cache/build/KERNEL_VERSION" 2>/dev/null || cat /var/tmp/blkcrypt-oracle/build/KERNEL_VERSION 2>/dev/null || echo '?')
{ echo "# Generated $(date -u '+%Y-%m-%d %H:%M UTC') by tests/golden/integrity-data/record.sh; kernel $kernel"; cat "$work/out.txt"; } > "$here/record.log"
for c in "${CASES[@]}"; do
  IFS='|' read -r name size fopts oopts msize <<<"$c"
  awk -v n="=== case $name" '$0==n{on=1;next} /^=== /{on=0} on' "$work/out.txt" > "$work/$name.txt"
  grep -E '^(size|sha256)=' "$work/$name.txt" > "$here/$name.sha256"
  sed -n 's/^table: //p' "$work/$name.txt" | head -1 > "$here/$name.table"
  xz -9e -T1 < "$work/$name.img" > "$here/$name.img.xz"
  [ -n "$msize" ] && xz -9e -T1 < "$work/$name.meta" > "$here/$name.meta.xz"
done
awk '/^=== tamper /{on=1} /^=== end/{on=0} on' "$work/out.txt" > "$here/tamper.log"
ls -l "$here"
