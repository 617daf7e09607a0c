#!/bin/bash
# Discards and journal_mac: table lines against the kernel (one boot of
# ../shared/oracle, Debian 12's 6.1 and integritysetup 2.6.1).
# Three 4 MiB crc32c images, each formatted by blkcrypt and holding 100000
# random bytes written by it (PATTERN below, from /dev/urandom, kept):
#  kernel-discard: the kernel opens it with --allow-discards and discards
#    64 KiB at 1 MiB (blkdiscard); the image as the kernel left it is kept;
#  ours-discard: blkcrypt discarded the same range through integrity serve
#    --allow-discards (qemu-io); the kernel reads it whole with and without
#    --allow-discards (sha256, dmesg's checksum failures);
#  journal-mac: formatted with a journal MAC; the kernel opens it through a
#    dmsetup table line with journal_mac:hmac(sha256):KEYHEX, reads it, and
#    prints `dmsetup table` and `dmsetup table --showkeys`.
# Writes: *.img.xz, pattern.xz, kernel.txt (the guest's output).
# Usage: record.sh BLKCRYPT [ORACLE_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
blk=${1:?usage: record.sh path/to/blkcrypt [ORACLE_DIR]}
oracle=${2:-/work/shared/oracle}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 0123456789abcdef0123456789ABCDEF >"$work/key"
khex=$(od -An -tx1 "$work/key" | tr -d ' \n')
head -c 100000 /dev/urandom >"$work/pattern"
jmac=(--journal-integrity hmac-sha256 --journal-integrity-key-file "$work/key" --journal-integrity-key-size 32)
for name in kernel-discard ours-discard journal-mac; do
    truncate -s 4M "$work/$name.img"
    opts=()
    [[ $name != journal-mac ]] || opts=("${jmac[@]}")
    "$blk" integrity format -q "${opts[@]}" "$work/$name.img"
    "$blk" integrity write "${opts[@]}" "$work/pattern" "$work/$name.img"
done
sock=$work/s.sock
"$blk" integrity serve --allow-discards --socket "$sock" "$work/ours-discard.img" 2>/dev/null &
pid=$!
for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.1; done
qemu-io -f raw "nbd+unix:///?socket=$sock" -c "discard 1M 64k" >/dev/null
kill -TERM $pid
wait $pid
xz -9e -T1 <"$work/ours-discard.img" >"$here/ours-discard.img.xz"
xz -9e -T1 <"$work/journal-mac.img" >"$here/journal-mac.img.xz"
xz -9e -T1 <"$work/pattern" >"$here/pattern.xz"
cat >"$work/guest.sh" <<GUEST
integritysetup --version
echo "=== kernel-discard"
integritysetup open --allow-discards /dev/vda ic; echo "open rc=\$?"
(blkdiscard -o 1048576 -l 65536 /dev/mapper/ic || busybox blkdiscard -o 1048576 -l 65536 /dev/mapper/ic) 2>&1; echo "blkdiscard rc=\$?"
dmsetup table ic
integritysetup close ic; echo "close rc=\$?"
echo "=== ours-discard"
for opt in --allow-discards ""; do
  dmesg -c >/dev/null
  integritysetup open \$opt /dev/vdb ic; echo "open \$opt rc=\$?"
  echo "sha256=\$(dd if=/dev/mapper/ic bs=65536 2>/dev/null | sha256sum | cut -d' ' -f1)"
  dd if=/dev/mapper/ic of=/dev/null bs=512 skip=2048 count=1 2>/dev/null; echo "dd one rc=\$?"
  echo "checksum_failures=\$(dmesg | grep -c 'Checksum failed')"
  dmesg | grep 'Checksum failed' | head -1
  integritysetup close ic
done
echo "=== journal-mac"
printf 0123456789abcdef0123456789ABCDEF >/tmp/key
size=\$(integritysetup dump /dev/vdc | sed -n 's/^provided_data_sectors //p')
dmsetup create ic --table "0 \$size integrity /dev/vdc 0 4 J 2 internal_hash:crc32c journal_mac:hmac(sha256):$khex"; echo "create rc=\$?"
echo "sha256=\$(dd if=/dev/mapper/ic bs=65536 2>/dev/null | sha256sum | cut -d' ' -f1)"
echo "table: \$(dmsetup table ic)"
echo "showkeys: \$(dmsetup table --showkeys ic)"
dmsetup remove ic
GUEST
"$oracle/run-in-kernel.sh" -t 600 "$work/guest.sh" "$work/kernel-discard.img" "$work/ours-discard.img" \
    "$work/journal-mac.img" | tee "$here/kernel.txt"
xz -9e -T1 <"$work/kernel-discard.img" >"$here/kernel-discard.img.xz"
