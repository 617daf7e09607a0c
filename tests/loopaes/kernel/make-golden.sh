#!/bin/bash
# Records the real kernel's loop-AES mappings, run once in ../shared/oracle:
# for every case of cases.tsv, `cryptsetup loopaesOpen` on a file-backed loop
# device, the dm table it loads (dmsetup table --showkeys), the known
# plaintext of gen-plain.sh written through the mapping, the sha256 of the
# whole resulting image and of its data area (after --offset), and the
# sha256 read back through the mapping. Error cases record cryptsetup's
# message and exit code. Writes oracle.txt; the images of IMAGES (names) go
# to images/NAME.img.gz, so CI decrypts real kernel ciphertext.
# Usage: make-golden.sh [ORACLE_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
oracle=${1:-$here/../../../../shared/oracle}
images=${IMAGES:-k1 k64-off k65-off-skip}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
sectors=72  # plaintext size; the image is --offset sectors more
slot=128    # sectors per case on the output disk
"$here/gen-plain.sh" "$sectors" > "$work/plain.img"
kf() { od -An -to1 -v "$1" | tr -d ' \n' | sed 's/\([0-7]\{3\}\)/\\\1/g'; }
g=$work/guest.sh
n=0
{
  echo 'modprobe loop 2>/dev/null; [ -b /dev/loop0 ] || mknod /dev/loop0 b 7 0'
  for f in "$here"/keys/*; do echo "printf '$(kf "$f")' > /tmp/$(basename "$f")"; done
  echo 'cryptsetup --version'
  while IFS=$'\t' read -r name key opts; do
    [[ -z $name || $name == \#* ]] && continue
    off=0
    [[ $opts =~ --offset\ ([0-9]+) ]] && off=${BASH_REMATCH[1]}
    echo "echo '=== $name $key $opts'"
    echo "dd if=/dev/zero of=/tmp/img bs=512 count=$((off + sectors)) 2>/dev/null; losetup /dev/loop0 /tmp/img"
    echo "cryptsetup loopaesOpen -q $opts --key-file /tmp/$key /dev/loop0 la > /tmp/msg 2>&1; echo \"rc=\$?\"; sed 's/^/msg: /' /tmp/msg"
    echo "if [ -b /dev/mapper/la ]; then"
    echo "  dmsetup table --showkeys la | sed 's/ 7:0 / DEV /; s/^/table=/'"
    echo "  dd if=/dev/vdb of=/dev/mapper/la bs=512 count=$sectors conv=fsync 2>/dev/null"
    echo "  echo \"readback=\$(sha256sum /dev/mapper/la | cut -d' ' -f1)\""
    echo "  cryptsetup close la"
    echo "  echo \"image=\$(sha256sum /tmp/img | cut -d' ' -f1)\""
    echo "  echo \"data=\$(dd if=/tmp/img bs=512 skip=$off 2>/dev/null | sha256sum | cut -d' ' -f1)\""
    echo "  dd if=/tmp/img of=/dev/vda bs=512 seek=$((n * slot)) conv=notrunc 2>/dev/null"
    echo "fi"
    echo "losetup -d /dev/loop0"
    echo "$n $name $((off + sectors))" >> "$work/slots"
    n=$((n + 1))
  done < "$here/cases.tsv"
  echo "sync; echo '=== end'"
} > "$g"
truncate -s $((n * slot * 512)) "$work/out.img"
"$oracle/build.sh" >&2
ORACLE_TIMEOUT=${ORACLE_TIMEOUT:-3600} "$oracle/run-in-kernel.sh" "$g" "$work/out.img" "ro:$work/plain.img" > "$work/out.txt"
{
  echo "# Generated $(date -u '+%Y-%m-%d %H:%M UTC') by tests/loopaes/kernel/make-golden.sh"
  echo "# Kernel: $(cat "$oracle/cache/build/KERNEL_VERSION" 2>/dev/null || echo '?')"
  cat "$work/out.txt"
} > "$here/oracle.txt"
mkdir -p "$here/images"
while read -r i name size; do
  [[ " $images " == *" $name "* ]] || continue
  dd if="$work/out.img" bs=512 skip=$((i * slot)) count="$size" 2>/dev/null | gzip -9n > "$here/images/$name.img.gz"
done < "$work/slots"
