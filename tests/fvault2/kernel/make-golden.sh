#!/bin/bash
# Records the real kernel's view of the FileVault 2 fixture image, once, in
# ../shared/oracle: `cryptsetup fvault2Dump` (plain, --dump-volume-key, a
# wrong password) and `cryptsetup open --type fvault2 --readonly`, then the
# dm table, the size and the sha256 of the mapped device.
# Usage: make-golden.sh [FIXTURES_TAR] [ORACLE_DIR]; writes oracle.txt here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tarball=${1:-$here/../../../../shared/fixtures/fvault2-images.tar.xz}
oracle=${2:-$here/../../../../shared/oracle}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
tar xSJf "$tarball" -C "$work"
g=$work/guest.sh
cat > "$g" <<'GUEST'
cryptsetup --version
echo '--- plain'
cryptsetup fvault2Dump /dev/vda 2>&1; echo "rc=$?"
echo '--- key'
printf '%s\n' heslo123 | cryptsetup fvault2Dump -q --dump-volume-key /dev/vda 2>&1; echo "rc=$?"
echo '--- wrong'
printf '%s\n' heslo124 | cryptsetup fvault2Dump -q --dump-volume-key /dev/vda 2>&1; echo "rc=$?"
echo '--- open'
printf '%s\n' heslo124 | cryptsetup open --type fvault2 --readonly /dev/vda fv 2>&1; echo "wrong rc=$?"
printf '%s\n' heslo123 | cryptsetup open --type fvault2 --readonly /dev/vda fv 2>&1; echo "rc=$?"
dmsetup table --showkeys 2>&1 | sed 's/ [0-9]*:[0-9]* / DEV /'
if [ -b /dev/mapper/fv ]; then
  echo "size=$(blockdev --getsize64 /dev/mapper/fv)"
  sha256sum /dev/mapper/fv | cut -d' ' -f1 | sed 's/^/sha256=/'
  dd if=/dev/mapper/fv bs=512 skip=2 count=1 2>/dev/null | od -An -tx1 | head -2 | sed 's/^/hfs+ header: /'
fi
cryptsetup close fv 2>/dev/null; true
echo '=== end'
GUEST
"$oracle/build.sh" >&2
ORACLE_TIMEOUT=${ORACLE_TIMEOUT:-1500} "$oracle/run-in-kernel.sh" "$g" "ro:$work/fvault2-images/small" > "$work/out.txt"
{
  echo "# Generated $(date -u '+%Y-%m-%d %H:%M UTC') by tests/fvault2/kernel/make-golden.sh"
  echo "# Kernel: $(cat "$oracle/cache/build/KERNEL_VERSION" 2>/dev/null || echo '?')"
  cat "$work/out.txt"
} > "$here/oracle.txt"
