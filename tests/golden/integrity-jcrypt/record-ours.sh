#!/bin/bash
# Records what the kernel makes of images blkcrypt wrote with an encrypted
# journal (the test "integrity jcrypt: export images for the kernel" writes
# them, see ours_images() in tests/unit/integrity_jcrypt_test.cpp): for
# ctr-aes, chacha20 and cbc-aes, the disk with J-mode writes committed
# (ALG-ours-open) and after our close (ALG-ours-closed). One boot of
# ../shared/oracle: each is opened by integritysetup with --journal-crypt
# (the kernel decrypts and replays our journal), read whole, closed.
# Writes here: ours.info (per image: open rc, read rc, the mapping's
# sha256, the raw disk's sha256 before, the kernel's dm-integrity errors).
# Usage: record-ours.sh BUILD_DIR [ORACLE_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(realpath "${1:?usage: record-ours.sh BUILD_DIR [ORACLE_DIR]}")
oracle=${2:-$here/../../../../shared/oracle}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
KEY=0123456789abcdefFEDCBA9876543210
BLKCRYPT_EXPORT=$work "$build/tests/blkcrypt_tests" "[.jcrypt-export]" >/dev/null
g=$work/guest.sh
disks=()
letters=(a b c d e f)
i=0
{
  echo "printf '%s' $KEY > /tmp/jk"
  for alg in ctr-aes chacha20 cbc-aes; do
    for what in open closed; do
      n=$alg-ours-$what; d=/dev/vd${letters[$i]}; i=$((i+1))
      disks+=("$work/$n.img")
      cat <<GUEST
echo "=== case $n"
echo "raw_before=\$(sha256sum < $d | cut -c1-64)"
dmesg -c > /dev/null
integritysetup open -I crc32c --journal-crypt $alg --journal-crypt-key-file /tmp/jk --journal-crypt-key-size 32 $d j 2>&1; echo "open rc=\$?"
sha256sum < /dev/mapper/j > /tmp/h 2>/tmp/e; echo "read rc=\$?"
echo "mapping=\$(cut -c1-64 < /tmp/h)"
integritysetup close j; echo "close rc=\$?"
dmesg | grep -E 'device-mapper: integrity|integrity: Error' | sed 's/^\[[ 0-9.]*\] //' | sort -u | sed 's/^/dmesg_error=/'
GUEST
    done
  done
  echo 'echo "=== end"'
} > "$g"
"$oracle/build.sh" >&2
ORACLE_TIMEOUT=${ORACLE_TIMEOUT:-600} "$oracle/run-in-kernel.sh" "$g" "${disks[@]}" > "$work/out.txt"
if [ -n "${ORACLE_KEEP:-}" ]; then cp "$work/out.txt" "$ORACLE_KEEP"; fi
kernel=$(cat "$oracle/cache/build/KERNEL_VERSION" 2>/dev/null || echo '?')
{
  echo "# Generated $(date -u '+%Y-%m-%d %H:%M UTC') by tests/golden/integrity-jcrypt/record-ours.sh; kernel $kernel"
  awk '/^=== case /{n=$3;next} /^=== /{n=""} n && /^(raw_before|open rc|read rc|close rc|mapping|dmesg_error)=/{print n "." $0}' "$work/out.txt"
} > "$here/ours.info"
