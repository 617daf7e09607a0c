#!/bin/bash
# Records aegis128-af_alg.txt: AEGIS-128 encryptions by the real kernel
# (../shared/oracle, Debian's 6.1 under qemu), through AF_ALG. The guest has
# no python, so af_alg_aegis128.c is built static here and handed to the
# guest on a read-only disk. Every aegis128 driver the guest kernel has
# (aegis128-generic, and aegis128-aesni when the virtual CPU has AES-NI) must
# give the same bytes; the guest's /proc/crypto entries are kept as comments.
# Usage: make-aegis128-golden.sh [ORACLE_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
oracle=${1:-$here/../../../../shared/oracle}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
gcc -static -O2 -Wall -Wextra -o "$work/prog" "$here/af_alg_aegis128.c"
cp "$work/prog" "$work/disk.img"
truncate -s %512 "$work/disk.img"
size=$(stat -c %s "$work/prog")
cat > "$work/guest.sh" <<GUEST
head -c $size /dev/vda > /tmp/prog
chmod +x /tmp/prog
modprobe algif_aead 2>/dev/null
drivers=aegis128-generic
grep -q '^driver *: aegis128-aesni' /proc/crypto && drivers="\$drivers aegis128-aesni"
/tmp/prog aegis128 \$drivers > /tmp/out || exit 1
echo "# kernel \$(uname -r), drivers: aegis128 \$drivers"
cat /tmp/out
GUEST
{
  echo "# AEGIS-128 by the Linux kernel through AF_ALG (aead \"aegis128\"), recorded by"
  echo "# make-aegis128-golden.sh; ctext is the ciphertext followed by the tag."
  "$oracle/run-in-kernel.sh" -t 600 "$work/guest.sh" "ro:$work/disk.img"
} > "$here/aegis128-af_alg.txt.new"
mv "$here/aegis128-af_alg.txt.new" "$here/aegis128-af_alg.txt"
echo "wrote $here/aegis128-af_alg.txt" >&2
