#!/bin/bash
# Records bitlkopen.sha256 and bitlkopen.tables.txt from the real kernel: the
# fixtures opened with `cryptsetup bitlkOpen --readonly` in ../shared/oracle,
# their dm tables (keys replaced by KEY) and the sha256 of each mapped device.
# Run once by hand (TCG: about 8 minutes); CI replays the files.
#   tests/bitlk/golden/record.sh [SHARED_DIR]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SHARED=${1:-$HERE/../../../../shared}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
tar xSJf "$SHARED/fixtures/bitlk-images.tar.xz" -C "$W"
D=$W/bitlk
bek=$(od -An -tx1 -v "$D/4381F759-C4F8-4DE0-BB61-FC33A831BDA5.BEK" | tr -d ' \n' | sed 's/../\\x&/g')
rp=$(awk '/^\[bitlk-aes-cbc-128\]/{on=1} on && /^RP=/{print substr($0,4); exit}' "$D/images.conf")
cat >"$W/g.sh" <<G
printf '$bek' > /tmp/sk.bek
run() {
  name=\$1; shift
  echo "=== \$name"
  if "\$@"; then
    dmsetup table \$name
    echo "size \$(blockdev --getsize64 /dev/mapper/\$name)"
    echo "sha256 \$(sha256sum < /dev/mapper/\$name | cut -d' ' -f1)"
    cryptsetup close \$name
  else echo "open failed rc=\$?"; fi
}
run cbc sh -c 'echo anaconda | cryptsetup bitlkOpen --readonly /dev/vda cbc'
run cbcrp sh -c 'echo $rp | cryptsetup bitlkOpen --readonly /dev/vda cbcrp'
run eleph sh -c 'echo anaconda | cryptsetup bitlkOpen --readonly /dev/vdb eleph'
run clear sh -c 'echo | cryptsetup bitlkOpen --readonly /dev/vdc clear'
run sk sh -c 'cryptsetup bitlkOpen --readonly --key-file /tmp/sk.bek /dev/vdd sk'
run xts sh -c 'echo anaconda | cryptsetup bitlkOpen --readonly /dev/vde xts'
run togo sh -c 'echo anaconda | cryptsetup bitlkOpen --readonly /dev/vdf togo'
G
"$SHARED/oracle/run-in-kernel.sh" -t 1200 "$W/g.sh" ro:"$D/bitlk-aes-cbc-128.img" ro:"$D/bitlk-aes-cbc-elephant-128.img" \
    ro:"$D/bitlk-aes-xts-128-clearkey-only.img" ro:"$D/bitlk-aes-xts-128-startup-key.img" \
    ro:"$D/bitlk-aes-xts-128.img" ro:"$D/bitlk-togo-aes-xts-128.img" >"$W/out.txt"
sed 's/ [0-9a-f]\{32,128\} / KEY /' "$W/out.txt" >"$HERE/bitlkopen.tables.txt"
awk 'BEGIN{m["cbc"]="bitlk-aes-cbc-128";m["cbcrp"]="bitlk-aes-cbc-128-recovery";m["eleph"]="bitlk-aes-cbc-elephant-128"
           m["sk"]="bitlk-aes-xts-128-startup-key";m["xts"]="bitlk-aes-xts-128";m["togo"]="bitlk-togo-aes-xts-128"}
     /^=== /{n=$2} /^sha256 /{print $2, m[n]}' "$W/out.txt" >"$HERE/bitlkopen.sha256"
