#!/bin/bash
# System encryption of a partition against the real peer, once, in
# ../shared/oracle: the disks of system.tsv are generated here
# (tests/tcrypt/make_volume.py --system-disk: partition 2 encrypted, not at
# the disk's start) and in ONE guest run, where the kernel sees their
# partitions, `cryptsetup tcryptOpen --tcrypt-system` maps the whole disk
# (/dev/vdX) and the partition (/dev/vdX2; cryptsetup reads the header from
# the disk through sysfs), and tcryptDump --dump-volume-key reads the
# partition. The fixture's full-disk image (sys_vc_1_mbr_full-sha256-xts-aes)
# is mapped through its partition 1 too, and a copy of partition 2 with the
# disk's first 63 sectors as --header shows what cryptsetup makes of a
# partition image. Writes oracle-system.txt; split.py --system checks it
# against the generator and writes system.golden and SYS.dump.
# Usage: make-system.sh [ORACLE_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
oracle=${1:-$here/../../../../shared/oracle}
fix=$here/../../../../shared/fixtures/tcrypt-images.tar.xz
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
g=$work/guest.sh
echo 'cryptsetup --version' >"$g"
# case NAME DEVICE PASSWORD 'OPTIONS' [dump]: open (and dump) one device.
case_() {
  {
    echo "echo '=== $1 ${5:-} $4 $2'"
    if [[ ${6:-} == dump ]]; then
      echo "echo '--- dump'"
      echo "printf '%s\\n' '$3' | cryptsetup tcryptDump -q --dump-volume-key $4 $2 2>&1; echo \"rc=\$?\""
    fi
    echo "echo '--- open'"
    echo "printf '%s\\n' '$3' | cryptsetup tcryptOpen -v -q --readonly $4 $2 tc 2>&1; echo \"rc=\$?\""
    echo "dmsetup table --showkeys 2>&1 | sed 's/ [0-9]*:[0-9]* / DEV /'"
    echo "if [ -b /dev/mapper/tc ]; then echo \"size=\$(blockdev --getsize64 /dev/mapper/tc)\"; sha256sum /dev/mapper/tc | cut -d' ' -f1 | sed 's/^/sha256=/'; fi"
    echo "cryptsetup close tc 2>/dev/null; true"
  } >>"$g"
}
disks=() n=0
while IFS=$'\t' read -r name gen pw opts; do
  [[ -z $name || $name == \#* ]] && continue
  read -r -a ga <<<"$gen"
  sha=$(python3 "$here/../make_volume.py" "$work/$name.img" --password "$pw" "${ga[@]}" | tail -1)
  disks+=("ro:$work/$name.img")
  dev=/dev/vd$(printf "\\$(printf '%03o' $((97 + n)))"); n=$((n + 1))
  echo "for p in ${dev}1 ${dev}2; do echo \"partition \$p start=\$(cat /sys/class/block/\${p#/dev/}/start) size=\$(cat /sys/class/block/\${p#/dev/}/size)\"; done" >>"$g"
  case_ "$name-disk" "$dev" "$pw" "$opts --tcrypt-system" "generator-sha256=$sha"
  case_ "$name-part" "${dev}2" "$pw" "$opts --tcrypt-system" "generator-sha256=$sha" dump
  if [[ $name == sys-mbr ]]; then
    # The partition as an image of its own, its header in the disk's first
    # 63 sectors or in the whole disk (cryptsetup's --header).
    first=$(od -An -t u4 -j 470 -N 4 "$work/$name.img" | tr -d ' ')
    count=$(od -An -t u4 -j 474 -N 4 "$work/$name.img" | tr -d ' ')
    dd if="$work/$name.img" of="$work/part.img" bs=512 skip="$first" count="$count" status=none
    dd if="$work/$name.img" of="$work/track.img" bs=512 count=63 status=none
    disks+=("ro:$work/part.img" "ro:$work/track.img")
    pdev=/dev/vd$(printf "\\$(printf '%03o' $((97 + n)))"); tdev=/dev/vd$(printf "\\$(printf '%03o' $((98 + n)))"); n=$((n + 2))
    case_ "$name-image-track" "$pdev" "$pw" "$opts --tcrypt-system --header $tdev" "generator-sha256=$sha"
    case_ "$name-image-disk" "$pdev" "$pw" "$opts --tcrypt-system --header $dev" "generator-sha256=$sha"
  fi
done <"$here/system.tsv"
tar xSJf "$fix" -C "$work" tcrypt/sys_vc_1_mbr_full-sha256-xts-aes
disks+=("ro:$work/tcrypt/sys_vc_1_mbr_full-sha256-xts-aes")
dev=/dev/vd$(printf "\\$(printf '%03o' $((97 + n)))")
echo "echo \"partition ${dev}1 start=\$(cat /sys/class/block/${dev#/dev/}1/start) size=\$(cat /sys/class/block/${dev#/dev/}1/size)\"" >>"$g"
case_ sys-fixture-part1 "${dev}1" aaaaaaaaaaaa "-h sha256 --tcrypt-system" "" dump
echo "echo '=== end'" >>"$g"
[[ -z ${DRY:-} ]] || { cat "$g"; exit 0; }  # DRY=1: print the guest script only
"$oracle/build.sh" >&2
ORACLE_TIMEOUT=${ORACLE_TIMEOUT:-3600} "$oracle/run-in-kernel.sh" "$g" "${disks[@]}" >"$work/out.txt"
{
  echo "# Generated $(date -u '+%Y-%m-%d %H:%M UTC') by tests/tcrypt/kernel/make-system.sh"
  echo "# Kernel: $(cat "$oracle/cache/build/KERNEL_VERSION" 2>/dev/null || cat /var/tmp/blkcrypt-oracle/build/KERNEL_VERSION 2>/dev/null || echo '?')"
  cat "$work/out.txt"
} >"$here/oracle-system.txt"
