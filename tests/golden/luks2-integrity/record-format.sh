#!/bin/bash
# The kernel opens LUKS2 --integrity containers `blkcrypt luks format
# --integrity` made (../shared/oracle, one boot): cryptsetup opens each with
# its passphrase; the mapping's size must equal what `blkcrypt luks table`
# gives, the whole device must read as zeros after our wipe (the AEAD of
# zeros with valid tags, written without the kernel) with no dm-integrity or
# dm-crypt line in dmesg, and with --integrity-no-wipe sector 0 must fail as
# on a cryptsetup-made image. Writes format.log here; exits 1 on a mismatch.
# Usage: record-format.sh BLKCRYPT [ORACLE_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
blk=${1:?usage: record-format.sh path/to/blkcrypt [ORACLE_DIR]}
oracle=${2:-$here/../../../../shared/oracle}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# name | cipher | integrity | sector size | key bits (empty: default) | extra
CASES=(
  "gcm-random-512|aes-gcm-random|aead|512||"
  "xts-hmac-sha256-4096|aes-xts-plain64|hmac-sha256|4096||"
  "xts-random-hmac-sha512|aes-xts-random|hmac-sha512|4096||"
  "xts-hmac-sha1-512|aes-xts-plain64|hmac-sha1|512|256|"
  "ccm-random-280|aes-ccm-random|aead|512|280|"
  "chacha20-poly1305|chacha20-random|poly1305|4096||"
  "aegis128-random|aegis128-random|aead|512|128|"
  "gcm-no-wipe|aes-gcm-random|aead|4096||--integrity-no-wipe"
)
printf 'blkcrypt format' >"$work/pass"
letters=(a b c d e f g h i j k l m n o p q r s t)
disks=("ro:$work/pass.disk"); i=1
cp "$work/pass" "$work/pass.disk"; truncate -s 512 "$work/pass.disk"
g=$work/guest.sh
{
  echo 'cryptsetup --version'
  echo 'head -c 15 /dev/vda > /tmp/pass'
  for c in "${CASES[@]}"; do
    IFS='|' read -r name cipher integ ss bits extra <<<"$c"
    truncate -s 24M "$work/$name.img"
    ks=(); [[ -n $bits ]] && ks=(--key-size "$bits")
    "$blk" luks format -q --type luks2 --cipher "$cipher" "${ks[@]}" --integrity "$integ" --sector-size "$ss" \
      --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --key-file "$work/pass" $extra "$work/$name.img"
    sectors=$("$blk" luks table --key-file "$work/pass" "$work/$name.img" | awk 'NR==2 {print $3}')
    echo "=== case $name" >>"$work/host.txt"
    echo "blkcrypt sectors=$sectors" >>"$work/host.txt"
    dev=/dev/vd${letters[$i]}; i=$((i+1)); disks+=("$work/$name.img")
    cat <<GUEST
echo "=== case $name"
dmesg -c >/dev/null
cryptsetup open --key-file /tmp/pass $dev lc 2>&1; echo "open rc=\$?"
echo "kernel sectors=\$(blockdev --getsz /dev/mapper/lc)"
echo "sha256=\$(dd if=/dev/mapper/lc bs=1M iflag=direct 2>/dev/null | sha256sum | cut -c1-64)"
echo "zeros =\$(head -c \$(blockdev --getsize64 /dev/mapper/lc) /dev/zero | sha256sum | cut -c1-64)"
dd if=/dev/mapper/lc of=/dev/null bs=$ss count=1 iflag=direct 2>/dev/null; echo "sector0 rc=\$?"
cryptsetup close lc; echo "close rc=\$?"
dmesg | grep -iE 'integrity|crypt' | sed 's/^\[[ 0-9.]*\] /dmesg: /'
GUEST
  done
  echo 'echo "=== end"'
} >"$g"
"$oracle/build.sh" >&2
ORACLE_TIMEOUT=${ORACLE_TIMEOUT:-900} "$oracle/run-in-kernel.sh" "$g" "${disks[@]}" >"$work/out.txt"
{
  echo "# Generated $(date -u '+%Y-%m-%d %H:%M UTC') by tests/golden/luks2-integrity/record-format.sh"
  echo "# host: the sectors blkcrypt's table gives"; cat "$work/host.txt"
  echo "# guest: the kernel on the images"; cat "$work/out.txt"
} >"$here/format.log"
python3 - "$work/host.txt" "$work/out.txt" <<'PY'
import sys
def cases(path):
    d, c = {}, None
    for l in open(path):
        l = l.rstrip('\n')
        if l.startswith('=== case '): c = l.split()[2]; d[c] = []
        elif c: d[c].append(l)
    return d
h, k = cases(sys.argv[1]), cases(sys.argv[2])
bad = 0
for name, lines in k.items():
    if name not in h: continue
    kv = dict(l.split('=', 1) for l in lines if '=' in l and not l.startswith('dmesg'))
    ours = dict(l.split('=', 1) for l in h[name])
    dm = [l for l in lines if l.startswith('dmesg:')]
    ok = kv.get('open rc') == '0' and kv.get('kernel sectors') == ours['blkcrypt sectors']
    if name.endswith('no-wipe'):
        ok = ok and kv.get('sector0 rc') != '0'
    else:
        ok = ok and kv.get('sha256') == kv.get('zeros ') and kv.get('sector0 rc') == '0' and not dm
    print(name, 'ok' if ok else 'MISMATCH', len(dm), 'dmesg lines')
    bad += not ok
sys.exit(1 if bad else 0)
PY
