#!/bin/bash
# The other direction: LUKS2 --integrity containers that blkcrypt wrote,
# opened by the kernel (../shared/oracle, one boot). For each case below, the
# recorded image (cryptsetup's, record.sh) is served by `blkcrypt luks serve`
# and two ranges are written through it with nbdcopy: X = 8 KiB of random
# bytes at 0 (over never-written sectors, up to the range A the kernel wrote: their tags become valid) and Y =
# 32 KiB at 3 MiB. In the guest, cryptsetup opens each image with its volume
# key and reads X, Y and the range A the kernel itself wrote; the log keeps
# the sha256 the kernel read beside the one written, and every dm-integrity
# or dm-crypt line of dmesg (none expected).
# Usage: record-ours.sh BLKCRYPT [ORACLE_DIR]   (writes ours.log here)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
blk=${1:?usage: record-ours.sh path/to/blkcrypt [ORACLE_DIR]}
oracle=${2:-$here/../../../../shared/oracle}
work=$(mktemp -d)
pid=
trap '[[ -z $pid ]] || kill $pid 2>/dev/null; rm -rf "$work"' EXIT
CASES=(xts-hmac-sha256-512 xts-random-hmac-sha256 gcm-random-512 ccm-random-152-4096 ccm-random-280-512
       chacha20-poly1305 aegis128-random-512 xts-hmac-sha512 xts128-hmac-sha1-512 gcm-random-detached
       xts-hmac-sha256-legacy)
info() { sed -n "s/^$2=//p" "$here/$1.info"; }
letters=(a b c d e f g h i j k l m n o p q r s t u v w x y z)
disks=(); i=0
g=$work/guest.sh
{
  echo 'cryptsetup --version'
  echo 'KEYS=$(ls /dev/vd* | tail -1)'
  for name in "${CASES[@]}"; do
    xz -dc "$here/$name.img.xz" >"$work/$name.img"
    hopt=(); hfile=
    if [[ -f $here/$name.hdr.xz ]]; then
      xz -dc "$here/$name.hdr.xz" >"$work/$name.hdr"; hopt=(--header "$work/$name.hdr")
    fi
    info "$name" volume_key | xxd -r -p >"$work/$name.vk"
    head -c 8192 /dev/urandom >"$work/$name.x"
    head -c 32768 /dev/urandom >"$work/$name.y"
    sock=$work/$name.sock
    "$blk" luks serve --socket "$sock" --pid-file "$work/pid" --volume-key-file "$work/$name.vk" "${hopt[@]}" \
      "$work/$name.img" 2>"$work/$name.serve.log" &
    pid=$!
    for _ in $(seq 300); do [[ -s $work/pid ]] && break; sleep 0.1; done
    nbdcopy "$work/$name.x" "nbd+unix:///?socket=$sock"
    "$blk" luks decrypt --volume-key-file "$work/$name.vk" "${hopt[@]}" --start 0 --size 16 "$work/$name.img" "$work/$name.chk" 2>/dev/null || true
    kill $pid; wait $pid || true; pid=; rm -f "$work/pid"
    cmp -s "$work/$name.x" "$work/$name.chk" || { echo "$name: blkcrypt reads back other bytes" >&2; exit 1; }
    # Y at 3 MiB with qemu-io (nbdcopy writes from offset 0 only), a second serve.
    ydone=no
    if command -v qemu-io >/dev/null; then
      "$blk" luks serve --socket "$sock" --pid-file "$work/pid" --volume-key-file "$work/$name.vk" "${hopt[@]}" \
        "$work/$name.img" 2>>"$work/$name.serve.log" &
      pid=$!
      for _ in $(seq 300); do [[ -s $work/pid ]] && break; sleep 0.1; done
      printf 'write -s %s 3145728 32768\nflush\n' "$work/$name.y" >"$work/$name.qio"
      qemu-io -f raw "nbd+unix:///?socket=$sock" < "$work/$name.qio" >/dev/null && ydone=yes
      kill $pid; wait $pid || true; pid=; rm -f "$work/pid"
    fi
    dev=/dev/vd${letters[$i]}; i=$((i+1)); disks+=("$work/$name.img")
    hdev=
    if [[ -f $work/$name.hdr ]]; then hdev=/dev/vd${letters[$i]}; i=$((i+1)); disks+=("$work/$name.hdr"); fi
    # The volume keys share one disk (the last), 512 bytes each.
    slot=$(( $(stat -c %s "$work/keys" 2>/dev/null || echo 0) / 512 ))
    cat "$work/$name.vk" >>"$work/keys"; truncate -s $(( (slot + 1) * 512 )) "$work/keys"
    ks=$(( $(info "$name" volume_key | wc -c) / 2 ))
    aoff=8192
    cat <<GUEST
echo "=== case $name"
dmesg -c >/dev/null
dd if=\$KEYS bs=512 skip=$slot count=1 2>/dev/null | head -c $ks > /tmp/vk
cryptsetup open --disable-keyring ${hdev:+--header $hdev} --volume-key-file /tmp/vk $dev lc 2>&1; echo "open rc=\$?"
echo "read X \$(dd if=/dev/mapper/lc bs=4096 count=2 iflag=direct 2>/dev/null | sha256sum | cut -c1-64)"
echo "read Y \$(dd if=/dev/mapper/lc bs=4096 skip=768 count=8 iflag=direct 2>/dev/null | sha256sum | cut -c1-64)"
echo "read A \$(dd if=/dev/mapper/lc bs=4096 skip=2 count=9 iflag=direct 2>/dev/null | sha256sum | cut -c1-64)"
cryptsetup close lc; echo "close rc=\$?"
dmesg | grep -iE 'integrity|crypt' | sed 's/^\[[ 0-9.]*\] /dmesg: /'
GUEST
    {
      echo "=== case $name"
      echo "wrote X $(sha256sum <"$work/$name.x" | cut -c1-64)"
      [[ $ydone == yes ]] && echo "wrote Y $(sha256sum <"$work/$name.y" | cut -c1-64)"
      echo "wrote A $(grep '^range A' "$here/$name.info" | awk '{print $5}')"
    } >>"$work/host.txt"
  done
  echo 'echo "=== end"'
} >"$g"
"$oracle/build.sh" >&2
ORACLE_TIMEOUT=${ORACLE_TIMEOUT:-900} "$oracle/run-in-kernel.sh" "$g" "${disks[@]}" "ro:$work/keys" >"$work/out.txt"
{
  echo "# Generated $(date -u '+%Y-%m-%d %H:%M UTC') by tests/golden/luks2-integrity/record-ours.sh"
  echo "# host: what blkcrypt wrote through luks serve (A: the kernel's own range from record.sh)"
  cat "$work/host.txt"
  echo "# guest: what the kernel read"
  cat "$work/out.txt"
} >"$here/ours.log"
# Verdict: every sum the kernel read equals the one written, no dmesg line.
python3 - "$work/host.txt" "$work/out.txt" <<'PY'
import sys, re
def parse(path, word):
    d, case = {}, None
    for line in open(path):
        if line.startswith('=== case '): case = line.split()[2]
        m = re.match(rf'{word} (\w) ([0-9a-f]{{64}})', line)
        if m: d[(case, m.group(1))] = m.group(2)
    return d
w, r = parse(sys.argv[1], 'wrote'), parse(sys.argv[2], 'read')
bad = [k for k in w if r.get(k) != w[k]]
dm = [l for l in open(sys.argv[2]) if l.startswith('dmesg:')]
for k in bad: print('differs:', k, w[k], r.get(k))
for l in dm: print(l, end='')
print(f'{len(w) - len(bad)}/{len(w)} ranges equal, {len(dm)} dmesg lines')
sys.exit(1 if bad or dm else 0)
PY
