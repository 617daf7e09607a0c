#!/bin/bash
# Records the real kernel's view of every TrueCrypt/VeraCrypt fixture image:
# `cryptsetup tcryptDump --dump-volume-key` and `cryptsetup tcryptOpen` plus
# the sha256 and size of the mapped device, run once in ../shared/oracle.
# Usage: [PARTS="plain key open"] make-golden.sh [FIXTURES_TAR] [ORACLE_DIR]
# PARTS picks the sections per case: plain (tcryptDump), key (tcryptDump
# --dump-volume-key), open (tcryptOpen, the table, size and sha256 of the
# mapped device). CASES (an extended regex) runs only the cases whose name
# matches. Writes oracle-<parts>[-<cases>].txt here; split.py turns the
# transcripts into the replayed files.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tarball=${1:-$here/../../../../shared/fixtures/tcrypt-images.tar.xz}
oracle=${2:-$here/../../../../shared/oracle}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
tar xSJf "$tarball" -C "$work"
d=$work/tcrypt
parts=${PARTS:-plain key open}
kf() { od -An -to1 -v "$1" | tr -d ' \n' | sed 's/\([0-7]\{3\}\)/\\\1/g'; }
# name|image|password|options ; disks are attached in image order.
# The cases: name, image, password, cryptsetup options (cases.tsv).
cases=()
while IFS=$'\t' read -r name img pw opts; do
  [[ -z $name || $name == \#* ]] && continue
  [[ -z ${CASES:-} ]] || [[ $name =~ $CASES ]] || continue
  cases+=("$name|$img|$pw|$opts")
done < "$here/cases.tsv"
images=(); disks=()
dev_of() { local i; for i in "${!images[@]}"; do [ "${images[$i]}" = "$1" ] && { printf '/dev/vd%b' "\\$(printf '%03o' $((97 + i)))"; return; }; done; }
for c in "${cases[@]}"; do
  IFS='|' read -r _ img _ _ <<<"$c"
  [ -n "$(dev_of "$img")" ] || { images+=("$img"); disks+=("ro:$d/$img"); }
done
g=$work/guest.sh
{
  echo "printf '$(kf "$d/keyfile1")' > /tmp/keyfile1"
  echo "printf '$(kf "$d/keyfile2")' > /tmp/keyfile2"
  echo 'cryptsetup --version'
  for c in "${cases[@]}"; do
    IFS='|' read -r name img pw opts <<<"$c"
    dev=$(dev_of "$img")
    echo "echo '=== $name $img $opts'"
    if [[ " $parts " == *" plain "* ]]; then
    echo "echo '--- plain'"
    echo "printf '%s\\n' '$pw' | cryptsetup tcryptDump -q $opts $dev 2>&1; echo \"rc=\$?\""
    fi
    if [[ " $parts " == *" key "* ]]; then
    echo "echo '--- dump'"
    echo "printf '%s\\n' '$pw' | cryptsetup tcryptDump -q --dump-volume-key $opts $dev 2>&1; echo \"rc=\$?\""
    fi
    [[ " $parts " == *" open "* ]] || continue
    echo "echo '--- open'"
    echo "printf '%s\\n' '$pw' | cryptsetup tcryptOpen -q --readonly $opts $dev tc 2>&1; echo \"rc=\$?\""
    echo "dmsetup table --showkeys 2>&1 | sed 's/ [0-9]*:[0-9]* / DEV /'"
    echo "if [ -b /dev/mapper/tc ]; then echo \"size=\$(blockdev --getsize64 /dev/mapper/tc)\"; sha256sum /dev/mapper/tc | cut -d' ' -f1 | sed 's/^/sha256=/'; fi"
    echo "cryptsetup close tc 2>/dev/null; true"
  done
  echo "echo '=== end'"
} > "$g"
"$oracle/build.sh" >&2
ORACLE_TIMEOUT=${ORACLE_TIMEOUT:-5400} "$oracle/run-in-kernel.sh" "$g" "${disks[@]}" > "$work/out.txt"
{
  echo "# Generated $(date -u '+%Y-%m-%d %H:%M UTC') by tests/tcrypt/kernel/make-golden.sh"
  echo "# Kernel: $(cat "$oracle/cache/build/KERNEL_VERSION" 2>/dev/null || echo '?')"
  cat "$work/out.txt"
} > "$here/oracle-${parts// /-}${CASES:+-$(printf %s "$CASES" | tr -c 'a-z0-9' '-' | sed 's/^-*//; s/-*$//')}.txt"
