#!/bin/bash
# Records bitlkopen.sha256 and bitlkopen.tables.txt from the real kernel: each
# volume of cases.txt made by ../make_image.py (--seed NAME), opened with
# `cryptsetup bitlkOpen --readonly` in ../shared/oracle, its dm table (keys
# replaced by KEY) and the sha256 of the mapped device. Run once by hand (TCG);
# tests/cli/bitlk_gen.sh replays the files.
#   tests/bitlk/gen-golden/record.sh [SHARED_DIR]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SHARED=${1:-$HERE/../../../../shared}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
disks=()
n=0
echo 'run() { name=$1; dev=$2; secret=$3; echo "=== $name"
  if printf "%s\n" "$secret" | cryptsetup bitlkOpen --readonly "$dev" "$name"; then
    dmsetup table "$name"; echo "size $(blockdev --getsize64 /dev/mapper/$name)"
    echo "sha256 $(sha256sum < /dev/mapper/$name | cut -d" " -f1)"; cryptsetup close "$name"
  else echo "open failed rc=$?"; fi; }' >"$W/g.sh"
while read -r name open args; do
    [[ -z $name || $name == \#* ]] && continue
    # shellcheck disable=SC2086
    python3 "$HERE/../make_image.py" --seed "$name" --info "$W/$name.info" $args "$W/$name.img" "$W/$name.plain" >/dev/null
    secret=$open
    [[ $open == rp ]] && secret=$(sed -n 's/^RP=//p' "$W/$name.info")
    dev=/dev/vd$(printf "\\x$(printf %x $((97 + n)))")
    echo "run $name $dev '$secret'" >>"$W/g.sh"
    disks+=("ro:$W/$name.img")
    n=$((n + 1))
done <"$HERE/cases.txt"
"$SHARED/oracle/run-in-kernel.sh" -t 3000 "$W/g.sh" "${disks[@]}" >"$W/out.txt"
sed 's/ [0-9a-f]\{32,128\} / KEY /' "$W/out.txt" >"$HERE/bitlkopen.tables.txt"
awk '/^=== /{n=$2} /^sha256 /{print $2, n}' "$W/out.txt" >"$HERE/bitlkopen.sha256"
