#!/bin/bash
# Regenerates golden.tsv: the real kernel's dm-verity FEC (Debian 6.1 in the
# qemu oracle, /work/shared/oracle) reads a device whose FEC data blkcrypt
# made, with the damage of each case of cases.tsv, in one guest run.
#   data: openssl enc -aes-128-ctr -nosalt -K 000102030405060708090a0b0c0d0e0f
#         -iv 000000000000000000000000000000f1 < /dev/zero | head -c 4096000
#   blkcrypt verity format DATA HASH --fec-device FEC --fec-roots 3 --salt 0f
#         --uuid 00000000-1111-4222-8333-444444444444
#   the table: blkcrypt verity table ... --fec-device FEC --fec-roots 3
# For every case the guest restores the pristine data and hash, applies the
# damage (dd, fsync), loads the table with dmsetup and reads the whole device
# with `dd bs=4096 iflag=direct conv=noerror,sync`: each block is its own
# read, a block the kernel fails (EIO) comes back as zeros. golden.tsv keeps
# the number of failed reads and the sha256 of what was read.
# Usage: make-kernel-golden.sh BLKCRYPT   (ORACLE=DIR, default /work/shared/oracle)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ORACLE=${ORACLE:-/work/shared/oracle}
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
head -c 4096000 /dev/zero | openssl enc -aes-128-ctr -nosalt -K 000102030405060708090a0b0c0d0e0f \
    -iv 000000000000000000000000000000f1 >"$w/data"
"$B" verity format "$w/data" "$w/hash" --fec-device "$w/fec" --fec-roots 3 --salt 0f \
    --uuid 00000000-1111-4222-8333-444444444444 >"$w/summary"
root=$(awk '/^Root hash:/{print $3}' "$w/summary")
table=$("$B" verity table "$w/data" "$w/hash" "$root" --fec-device "$w/fec" --fec-roots 3 |
    sed "s|$w/data|/dev/vda|; s|$w/hash|/dev/vdb|; s|$w/fec|/dev/vdc|")
{
    echo "set -u"
    echo "dd if=/dev/vda of=/tmp/data0 bs=1M 2>/dev/null; dd if=/dev/vdb of=/tmp/hash0 bs=4096 2>/dev/null"
    echo "TABLE='$table'"
    cat <<'GUEST'
damage() {  # damage SPEC...
  for s in "$@"; do
    [ "$s" = - ] && continue
    dev=/dev/vda; case $s in h:*) dev=/dev/vdb ;; esac
    blk=$(echo "$s" | cut -d: -f2); what=$(echo "$s" | cut -d: -f3)
    if [ "$what" = zero ]; then
      dd if=/dev/zero of=$dev bs=4096 seek=$blk count=1 conv=notrunc,fsync 2>/dev/null
    else
      off=${what#X@}
      printf XXXX | dd of=$dev bs=1 seek=$((blk * 4096 + off)) conv=notrunc,fsync 2>/dev/null
    fi
  done
}
run_case() {  # run_case NAME SPEC...
  name=$1; shift
  dd if=/tmp/data0 of=/dev/vda bs=1M conv=fsync 2>/dev/null
  dd if=/tmp/hash0 of=/dev/vdb bs=4096 conv=fsync 2>/dev/null
  damage "$@"
  echo 3 > /proc/sys/vm/drop_caches
  dmsetup create fecv --readonly --table "$TABLE" || { echo "$name	LOAD-FAILED"; return; }
  dd if=/dev/mapper/fecv of=/tmp/out bs=4096 iflag=direct conv=noerror,sync 2>/tmp/err
  errs=$(grep -c 'rror' /tmp/err)
  sum=$(sha256sum /tmp/out | cut -d' ' -f1)
  st=$(dmsetup status fecv | cut -d' ' -f4-)
  dmsetup remove fecv
  echo "$name	$errs	$sum	$st"
}
GUEST
    grep -v '^#' "$here/cases.tsv" | while IFS=$'\t' read -r name spec; do echo "run_case $name $spec"; done
    echo "uname -r"
} >"$w/guest.sh"
# The guest writes the damage to its disks: the sums are of the images as made.
sums="data sha256 $(sha256sum <"$w/data" | cut -d' ' -f1) hash sha256 $(sha256sum <"$w/hash" | cut -d' ' -f1) fec sha256 $(sha256sum <"$w/fec" | cut -d' ' -f1)"
"$ORACLE/build.sh" >&2
ORACLE_QUIET=1 "$ORACLE/run-in-kernel.sh" -t 900 "$w/guest.sh" "$w/data" "$w/hash" "$w/fec" >"$w/out"
cat "$w/out" >&2
{
    echo "# made by make-kernel-golden.sh on $(date -u +%Y-%m-%d), kernel $(tail -1 "$w/out"), blkcrypt $(git -C "$here" rev-parse --short HEAD)"
    echo "# $sums"
    echo "# table $table"
    echo "# name	failed_reads	sha256_read	dmsetup_status_tail"
    grep -P '^[a-z-]+\t' "$w/out"
} >"$here/golden.tsv"
echo "wrote $here/golden.tsv" >&2
