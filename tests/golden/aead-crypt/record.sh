#!/bin/sh
# The kernel reads what blkcrypt's AEAD engine wrote: for four LUKS2
# --integrity images the kernel made (gcm-random 512, authenc xts+hmac-sha256
# plain64 4096, rfc4309 ccm-random 280-bit 512, aegis128-random 512),
# write_through.cpp writes 64 KiB at byte 135168 through IntegrityTarget and
# make_aead_crypt_device; then the kernel maps the recorded dm-integrity and
# crypt tables (dmsetup, no LUKS) and reads that range and the kernel's own
# range A back. kernel.log is the guest's output: each "new" hash must equal
# the pattern's (pattern.sha256), each "rangeA" the .info's range A. The
# kernel's "INTEGRITY AEAD ERROR" lines name only never-written sectors (88,
# 120, 392, 496: outside 16..87 and 264..391; --integrity-no-wipe images),
# none in the range written here.
# Usage: tests/golden/aead-crypt/record.sh  (from the source tree, after a build)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../../.." && pwd)
gold=$src/tests/golden/luks2-integrity
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
g++ -std=c++20 -O1 -I"$src/crypto/include" -I"$src/dmcrypt/include" -I"$src/integrity/include" \
  -I"$src/verity/include" "$here/write_through.cpp" "$src/build/crypto/libblkcrypt.so.0" \
  -Wl,-rpath,"$src/build/crypto" -o "$tmp/w"
{ echo 'set -u'; i=0
for n in gcm-random-512 xts-hmac-sha256-4096 ccm-random-280-512 aegis128-random-512; do
  xz -dc "$gold/$n.img.xz" > "$tmp/$n.img"
  "$tmp/w" "$tmp/$n.img" "$gold/$n.info" 135168 65536 7 > "$tmp/$n.pat"
  dev=/dev/vd$(printf "\\$(printf %o $((97 + i)))")
  td=$(sed -n 's/^table_dif=//p' "$gold/$n.info" | awk -v d="$dev" '{$4=d; print}')
  tc=$(sed -n 's/^table_crypt=//p' "$gold/$n.info" | awk -v d=/dev/mapper/dif$i '{$7=d; print}')
  echo "echo '$td' | dmsetup create dif$i || echo FAIL_dif $n"
  echo "echo '$tc' | dmsetup create c$i || echo FAIL_crypt $n"
  echo "echo \"$n new \$(dd if=/dev/mapper/c$i bs=512 skip=264 count=128 iflag=direct 2>/dev/null | sha256sum | cut -c1-64)\""
  echo "echo \"$n rangeA \$(dd if=/dev/mapper/c$i bs=512 skip=16 count=72 iflag=direct 2>/dev/null | sha256sum | cut -c1-64)\""
  i=$((i + 1))
done
echo 'dmesg | grep -E "INTEGRITY AEAD ERROR|Checksum failed" || true'; } > "$tmp/guest.sh"
sha256sum < "$tmp/gcm-random-512.pat" | cut -c1-64 > "$here/pattern.sha256"
"$src/../shared/oracle/run-in-kernel.sh" -t 120 "$tmp/guest.sh" "$tmp/gcm-random-512.img" \
  "$tmp/xts-hmac-sha256-4096.img" "$tmp/ccm-random-280-512.img" "$tmp/aegis128-random-512.img" > "$here/kernel.log"
