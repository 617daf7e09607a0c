#!/bin/sh
# Records an image cryptsetup 2.6.1's legacy LUKS1 reencryption left half
# done, in the kernel (root, dm-crypt): the image sits behind a device whose
# sectors after the first 1 MiB block of data are a dm "error" target, so
# cryptsetup converts that block, fails to read the next ("IO error during
# reencryption."), writes the real offset to its log and stops, leaving the
# LUKS\xde\xad mark and LUKS-<uuid>.log/.org/.new. Run on the host:
#   sh record.sh BLKCRYPT_BINARY
set -eu
BLKCRYPT=$(realpath "$1")
OUT=$(cd "$(dirname "$0")" && pwd)
ORACLE=/work/shared/oracle
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$W"
UUID=7e3a5b2c-1d4f-4a6b-8c9d-0e1f2a3b4c5d
PAYLOAD=1032                      # sectors: right after the 64 KiB keyslots
SIZE=$((PAYLOAD * 512 + 1048576 + 4096))
printf 'midway-pass' > pw
truncate -s $SIZE img
cryptsetup luksFormat -q --type luks1 -c aes-cbc-essiv:sha256 -s 128 --align-payload 8 --iter-time 1 \
    --uuid "$UUID" --key-file pw img
# Keyslots 1..7 are unused: zero their random areas so that the files compress.
python3 - img <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(8 * 512 + 128 * 512); f.write(bytes(7 * 128 * 512))
PY
python3 -c 'import hashlib,sys; sys.stdout.buffer.write(b"".join(hashlib.sha256(b"m" + i.to_bytes(4,"little")).digest() for i in range((1048576 + 4096) // 32)))' > plain
"$BLKCRYPT" luks encrypt --key-file pw plain img
sha256sum plain | cut -d' ' -f1 > "$OUT/plain.sha256"
truncate -s 2M files
cat > guest.sh <<GUEST
set -e
N=\$(blockdev --getsz /dev/vda)
GOOD=$((PAYLOAD + 2048))
printf '0 %s linear /dev/vda 0\n%s %s error\n' \$GOOD \$GOOD \$((N - GOOD)) | dmsetup create data
cd /tmp
printf 'midway-pass' > pw
if cryptsetup reencrypt -q --iter-time 1 --block-size 1 --key-file pw /dev/mapper/data; then echo "UNEXPECTED SUCCESS"; fi
ls -l
dd if=LUKS-$UUID.log of=/dev/vdb bs=512 conv=notrunc 2>/dev/null
dd if=LUKS-$UUID.org of=/dev/vdb bs=4096 seek=1 conv=notrunc 2>/dev/null
dd if=LUKS-$UUID.new of=/dev/vdb bs=4096 seek=130 conv=notrunc 2>/dev/null
sync
GUEST
"$ORACLE/run-in-kernel.sh" -t 120 guest.sh img files
HDR=$((PAYLOAD * 512))
dd if=files of="LUKS-$UUID.log" bs=512 count=1 2>/dev/null
dd if=files of="LUKS-$UUID.org" bs=4096 skip=1 count=$((HDR / 4096)) 2>/dev/null
dd if=files of="LUKS-$UUID.new" bs=4096 skip=130 count=$((HDR / 4096)) 2>/dev/null
python3 - "LUKS-$UUID.new" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(8 * 512 + 128 * 512); f.write(bytes(7 * 128 * 512))
PY
head -c 6 img | od -An -tx1 | grep -q '4c 55 4b 53 de ad'
grep -a '^offset = 1048576$' "LUKS-$UUID.log"
cp "LUKS-$UUID.log" "$OUT/"
xz -9 -c img > "$OUT/img.xz"
xz -9 -c "LUKS-$UUID.org" > "$OUT/LUKS-$UUID.org.xz"
xz -9 -c "LUKS-$UUID.new" > "$OUT/LUKS-$UUID.new.xz"
