#!/bin/bash
# Records LUKS2 containers with integrity made by the real cryptsetup 2.6.1
# (`luksFormat --integrity`) on Debian's kernel, in ../shared/oracle (qemu; no
# root or device-mapper on the host). One boot for all cases.
# For each case in CASES a sparse image is formatted with --integrity-no-wipe
# (so the image stays mostly zeros and every tag starts invalid), opened, and
# a deterministic pattern (pattern.bin, made below) is written to two ranges
# through the crypt mapping: A = bytes [8192, 45056) and B = 28672 bytes at
# 1 MiB + 4 KiB, in whole 4 KiB pages: the guest's busybox dd has no working
# O_DIRECT, so a write of part of a page reads the page first, which fails on a
# never-written sector.
# Then it records, per case:
#   CASE.img.xz   the image after close (CASE.hdr.xz: a detached header)
#   CASE.dump     `cryptsetup luksDump` text
#   CASE.info     options, the two tables (`dmsetup table --showkeys` of NAME
#                 and NAME_dif), sha256 of ranges A and B read back, and
#                 which probe sectors read and which fail (never written),
#                 with the kernel's dm-integrity messages.
# Usage: record.sh [ORACLE_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
oracle=${1:-$here/../../../../shared/oracle}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

A_OFF=8192; A_LEN=36864; B_LEN=28672
# name | image bytes | sector size | cipher | integrity | key bits | extra
# (extra: "detached" = header on its own disk, data offset 0;
#  "legacy" = --integrity-legacy-padding)
CASES=(
  "xts-hmac-sha256-512|6291456|512|aes-xts-plain64|hmac-sha256|512|"
  "xts-hmac-sha256-4096|6291456|4096|aes-xts-plain64|hmac-sha256|512|"
  "xts-random-hmac-sha256|6291456|4096|aes-xts-random|hmac-sha256|512|"
  "gcm-random-512|6291456|512|aes-gcm-random|aead|256|"
  "gcm-random-aes128-4096|6291456|4096|aes-gcm-random|aead|128|"
  "ccm-random-280-512|6291456|512|aes-ccm-random|aead|280|"
  "ccm-random-152-4096|6291456|4096|aes-ccm-random|aead|152|"
  "chacha20-poly1305|6291456|4096|chacha20-random|poly1305|256|"
  "aegis128-random-512|6291456|512|aegis128-random|aead|128|"
  "xts-hmac-sha512|6291456|4096|aes-xts-plain64|hmac-sha512|512|"
  "xts128-hmac-sha1-512|6291456|512|aes-xts-plain64|hmac-sha1|256|"
  "gcm-random-detached|4194304|4096|aes-gcm-random|aead|256|detached"
  "xts-hmac-sha256-legacy|6291456|4096|aes-xts-plain64|hmac-sha256|512|legacy"
)

# The pattern: SHA-256 in counter mode, so no block repeats or is all one byte.
python3 - "$work/pattern.bin" <<'PY'
import hashlib, sys
with open(sys.argv[1], 'wb') as f:
    for i in range(65536 // 32):
        f.write(hashlib.sha256(b'blkcrypt luks2-integrity pattern %d' % i).digest())
PY

g=$work/guest.sh
disks=("ro:$work/pattern.bin")   # /dev/vda
letters=(a b c d e f g h i j k l m n o p q r s t)
i=1
{
  echo 'printf blkcrypt-luks2-integrity > /tmp/pass'
  echo 'cryptsetup --version'
  for c in "${CASES[@]}"; do
    IFS='|' read -r name size ss cipher integ bits extra <<<"$c"
    dev=/dev/vd${letters[$i]}; i=$((i+1))
    truncate -s "$size" "$work/$name.img"; disks+=("$work/$name.img")
    hopt=; hdev=$dev; xopt=
    if [ "$extra" = detached ]; then
      hdev=/dev/vd${letters[$i]}; i=$((i+1))
      truncate -s 1048576 "$work/$name.hdr"; disks+=("$work/$name.hdr")
      hopt="--header $hdev"
    fi
    [ "$extra" = legacy ] && xopt=--integrity-legacy-padding
    b_off=$((1048576 + 4096))
    cat <<GUEST
echo "=== case $name"
dmesg -c > /dev/null
cryptsetup luksFormat -q --type luks2 $hopt --cipher $cipher --key-size $bits --integrity $integ --sector-size $ss \
  --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --hash sha256 --luks2-metadata-size 16k --luks2-keyslots-size 512k \
  --integrity-no-wipe $xopt --key-file /tmp/pass $dev > /tmp/fmt 2>&1; echo "format rc=\$?"; cat /tmp/fmt
echo "--- dump"
cryptsetup luksDump $hdev 2>&1; echo "dump rc=\$?"
cryptsetup open --disable-keyring $hopt --key-file /tmp/pass $dev lc 2>&1; echo "open rc=\$?"
echo "provided_bytes=\$(blockdev --getsize64 /dev/mapper/lc)"
echo "dif_bytes=\$(blockdev --getsize64 /dev/mapper/lc_dif)"
echo "table_crypt=\$(dmsetup table --showkeys lc)"
echo "table_dif=\$(dmsetup table --showkeys lc_dif)"
echo "devices: vd=\$(cat /sys/block/${dev#/dev/}/dev) lc_dif=\$(dmsetup info -c --noheadings -o major,minor lc_dif)"
dd if=/dev/vda of=/dev/mapper/lc bs=4096 skip=0 seek=$((A_OFF/4096)) count=$((A_LEN/4096)) conv=fsync 2>/dev/null; echo "write A rc=\$?"
dd if=/dev/vda of=/dev/mapper/lc bs=4096 skip=$((A_LEN/4096)) seek=$((b_off/4096)) count=$((B_LEN/4096)) conv=fsync 2>/dev/null; echo "write B rc=\$?"
echo "range A $A_OFF $A_LEN \$(dd if=/dev/mapper/lc bs=512 skip=$((A_OFF/512)) count=$((A_LEN/512)) iflag=direct 2>/dev/null | sha256sum | cut -c1-64)"
echo "range B $b_off $B_LEN \$(dd if=/dev/mapper/lc bs=512 skip=$((b_off/512)) count=$((B_LEN/512)) iflag=direct 2>/dev/null | sha256sum | cut -c1-64)"
last=\$((\$(blockdev --getsize64 /dev/mapper/lc) - $ss))
for off in 0 $((A_OFF-ss)) $A_OFF $((A_OFF+A_LEN-ss)) $((A_OFF+A_LEN)) 524288 $((b_off-ss)) $b_off $((b_off+B_LEN-ss)) $((b_off+B_LEN)) \$last; do
  if dd if=/dev/mapper/lc bs=$ss skip=\$((off/$ss)) count=1 iflag=direct of=/tmp/blk 2>/dev/null && [ "\$(stat -c %s /tmp/blk)" = $ss ]; then
    echo "probe \$off ok \$(sha256sum < /tmp/blk | cut -c1-64)"
  else echo "probe \$off fail"; fi
done
cryptsetup close lc 2>&1; echo "close rc=\$?"
echo "--- dmesg"
dmesg | grep -iE 'integrity|crypt' | sed 's/^\[[ 0-9.]*\] //'
echo "--- end dmesg"
GUEST
  done
  echo 'echo "=== end"'
} > "$g"
"$oracle/build.sh" >&2
ORACLE_TIMEOUT=${ORACLE_TIMEOUT:-1500} "$oracle/run-in-kernel.sh" "$g" "${disks[@]}" > "$work/out.txt"
if [ -n "${ORACLE_KEEP:-}" ]; then cp "$work/out.txt" "$ORACLE_KEEP"; fi
kernel=$(cat "$oracle/cache/build/KERNEL_VERSION" 2>/dev/null || cat /var/tmp/blkcrypt-oracle/build/KERNEL_VERSION 2>/dev/null || echo '?')
cryptsetup_version=$(grep -m1 '^cryptsetup ' "$work/out.txt" || echo '?')
for c in "${CASES[@]}"; do
  IFS='|' read -r name size ss cipher integ bits extra <<<"$c"
  awk -v n="=== case $name" '$0==n{on=1;next} /^=== /{on=0} on' "$work/out.txt" > "$work/$name.txt"
  awk '/^--- dump$/{on=1;next} /^dump rc=/{on=0} on' "$work/$name.txt" > "$here/$name.dump"
  {
    echo "# Generated $(date -u '+%Y-%m-%d %H:%M UTC') by tests/golden/luks2-integrity/record.sh; kernel $kernel; $cryptsetup_version"
    echo "passphrase=blkcrypt-luks2-integrity"
    echo "size_bytes=$size"
    echo "sector_size=$ss"
    echo "cipher=$cipher"
    echo "integrity=$integ"
    echo "key_bits=$bits"
    echo "extra=$extra"
    # everything but the dump text; dmesg lines prefixed
    awk '/^--- dump$/{d=1;next} /^dump rc=/{d=0} /^--- dmesg$/{m=1;next} /^--- end dmesg$/{m=0;next}
         d{next} m{print "dmesg: " $0; next} {print}' "$work/$name.txt"
  } > "$here/$name.info"
  hfile=$work/$name.img; [ "$extra" = detached ] && hfile=$work/$name.hdr
  if [ "$bits" != 128 ]; then
    # The keyslot area is 4000 AF stripes of the key: random, up to 512 KB
    # that xz cannot shrink. Zero it (the JSON still lists the keyslot, and
    # luksDump does not read the area); tests unlock these with the volume key
    # (volume_key= below, from the crypt table). The 128-bit cases keep it, for
    # the passphrase path.
    dd if=/dev/zero of="$hfile" bs=4096 seek=8 count=128 conv=notrunc status=none
    echo "keyslot_area=zeroed" >> "$here/$name.info"
  else
    # keyslot 0 holds 16 x 4000 = 64000 bytes at 32 KiB; the rest of the area
    # is random filler cryptsetup wrote at format
    dd if=/dev/zero of="$hfile" bs=4096 seek=24 count=112 conv=notrunc status=none
    echo "keyslot_area=kept (keyslot 0's 64000 bytes; the rest zeroed)" >> "$here/$name.info"
  fi
  echo "volume_key=$(sed -n 's/^table_crypt=[0-9]* [0-9]* crypt [^ ]* \([0-9a-f]*\) .*/\1/p' "$here/$name.info")" >> "$here/$name.info"
  xz -9e -T1 < "$work/$name.img" > "$here/$name.img.xz"
  [ "$extra" = detached ] && xz -9e -T1 < "$work/$name.hdr" > "$here/$name.hdr.xz"
done
# Check the kernel read back what was written.
python3 - "$here" "$work/pattern.bin" <<'PY'
import hashlib, sys, glob, os
pat = open(sys.argv[2], 'rb').read()
want = {'A': hashlib.sha256(pat[:36864]).hexdigest(), 'B': hashlib.sha256(pat[36864:65536]).hexdigest()}
bad = 0
for info in sorted(glob.glob(os.path.join(sys.argv[1], '*.info'))):
    for line in open(info):
        w = line.split()
        if len(w) == 5 and w[0] == 'range' and w[4] != want[w[1]]:
            print(f'{info}: range {w[1]} read back {w[4]}, wrote {want[w[1]]}'); bad += 1
sys.exit(1 if bad else 0)
PY
echo "recorded $(ls "$here"/*.img.xz | wc -l) images" >&2
