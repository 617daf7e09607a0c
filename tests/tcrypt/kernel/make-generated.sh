#!/bin/bash
# Proves tests/tcrypt/make_volume.py against the real peer, once, in
# ../shared/oracle: the volumes of generated.tsv are generated here, then
# in one guest run `cryptsetup tcryptDump --dump-volume-key` and
# `cryptsetup tcryptOpen` (the table, size and sha256 of the mapped device)
# read them. Writes oracle-generated.txt; split.py --generated turns it into
# generated.golden (replayed by tests/cli/tcrypt.sh without the oracle).
# LIST=legacy reads legacy.tsv instead (the TrueCrypt legacy CBC volumes)
# and writes oracle-legacy.txt.
# Usage: [LIST=NAME] make-generated.sh [ORACLE_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
oracle=${1:-$here/../../../../shared/oracle}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
disks=() n=0
g=$work/guest.sh
echo 'cryptsetup --version' >"$g"
# generated.tsv: name, generator arguments, password, cryptsetup options.
while IFS=$'\t' read -r name gen pw opts; do
  [[ -z $name || $name == \#* ]] && continue
  read -r -a ga <<<"$gen"
  sha=$(python3 "$here/../make_volume.py" "$work/$name.img" --password "$pw" "${ga[@]}" | tail -1)
  disks+=("ro:$work/$name.img")
  dev=/dev/vd$(printf "\\$(printf '%03o' $((97 + n)))"); n=$((n + 1))
  {
    echo "echo '=== $name generator-sha256=$sha $opts'"
    echo "echo '--- plain'"
    echo "printf '%s\\n' '$pw' | cryptsetup tcryptDump -q $opts $dev 2>&1; echo \"rc=\$?\""
    echo "echo '--- dump'"
    echo "printf '%s\\n' '$pw' | cryptsetup tcryptDump -q --dump-volume-key $opts $dev 2>&1; echo \"rc=\$?\""
    echo "echo '--- open'"
    echo "printf '%s\\n' '$pw' | cryptsetup tcryptOpen -q --readonly $opts $dev tc 2>&1; echo \"rc=\$?\""
    echo "dmsetup table --showkeys 2>&1 | sed 's/ [0-9]*:[0-9]* / DEV /'"
    echo "if [ -b /dev/mapper/tc ]; then echo \"size=\$(blockdev --getsize64 /dev/mapper/tc)\"; sha256sum /dev/mapper/tc | cut -d' ' -f1 | sed 's/^/sha256=/'; fi"
    echo "cryptsetup close tc 2>/dev/null; true"
  } >>"$g"
done <"$here/${LIST:-generated}.tsv"
echo "echo '=== end'" >>"$g"
"$oracle/build.sh" >&2
ORACLE_TIMEOUT=${ORACLE_TIMEOUT:-3600} "$oracle/run-in-kernel.sh" "$g" "${disks[@]}" >"$work/out.txt"
{
  echo "# Generated $(date -u '+%Y-%m-%d %H:%M UTC') by tests/tcrypt/kernel/make-generated.sh"
  echo "# Kernel: $(cat "$oracle/cache/build/KERNEL_VERSION" 2>/dev/null || echo '?')"
  cat "$work/out.txt"
} >"$here/oracle-${LIST:-generated}.txt"
