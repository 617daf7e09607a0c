#!/bin/bash
# Records what the kernel makes of images blkcrypt's J-mode writer left when
# killed (the test "integrity journal: export images for the kernel" writes
# them; see exported_images() in tests/unit/integrity_journal_test.cpp):
# ours-committed (the last write's journal commit on disk, its data not yet
# written back), ours-torn (killed inside the commit), ours-bad-id (a commit
# id of no sequence). One boot of ../shared/oracle: each image is opened by
# integritysetup (J mode, crc32c), read whole, closed; the raw disk hashed.
# Writes here: NAME.img.xz and NAME.info (raw_before, open rc, read rc,
# mapping_after_replay, raw_after_replay, the kernel's dm-integrity errors).
# Usage: record-ours.sh BUILD_DIR [ORACLE_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(realpath "${1:?usage: record-ours.sh BUILD_DIR [ORACLE_DIR]}")
oracle=${2:-$here/../../../../shared/oracle}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
BLKCRYPT_EXPORT=$work "$build/tests/blkcrypt_tests" "[.journal-export]" >/dev/null
names=(ours-committed ours-torn ours-bad-id)
g=$work/guest.sh
disks=()
letters=(a b c)
{
  for i in 0 1 2; do
    n=${names[$i]}; d=/dev/vd${letters[$i]}
    cp "$work/$n.img" "$work/$n.disk"; disks+=("$work/$n.disk")
    cat <<GUEST
echo "=== case $n"
echo "raw_before=\$(sha256sum < $d | cut -c1-64)"
dmesg -c > /dev/null
integritysetup open -I crc32c $d j 2>&1; echo "open rc=\$?"
sha256sum < /dev/mapper/j > /tmp/h 2>/tmp/e; echo "read rc=\$?"
echo "mapping_after_replay=\$(cut -c1-64 < /tmp/h)"
integritysetup close j; echo "close rc=\$?"
echo "raw_after_replay=\$(sha256sum < $d | cut -c1-64)"
dmesg | grep -E 'device-mapper: integrity|integrity: Error' | sed 's/^\[[ 0-9.]*\] //' | sort -u | sed 's/^/dmesg_error=/'
GUEST
  done
  echo 'echo "=== end"'
} > "$g"
"$oracle/build.sh" >&2
ORACLE_TIMEOUT=${ORACLE_TIMEOUT:-600} "$oracle/run-in-kernel.sh" "$g" "${disks[@]}" > "$work/out.txt"
if [ -n "${ORACLE_KEEP:-}" ]; then cp "$work/out.txt" "$ORACLE_KEEP"; fi
kernel=$(cat "$oracle/cache/build/KERNEL_VERSION" 2>/dev/null || echo '?')
for n in "${names[@]}"; do
  {
    echo "# Generated $(date -u '+%Y-%m-%d %H:%M UTC') by tests/golden/integrity-journal/record-ours.sh; kernel $kernel"
    awk -v c="=== case $n" '$0==c{on=1;next} /^=== /{on=0} on' "$work/out.txt" |
      grep -E '^(raw_before|open rc|read rc|close rc|mapping_after_replay|raw_after_replay|dmesg_error)='
  } > "$here/$n.info"
  xz -9e -T1 < "$work/$n.img" > "$here/$n.img.xz"
done
