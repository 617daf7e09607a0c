#!/bin/sh
# Records what cryptsetup 2.6.1's legacy LUKS1 reencryption leaves behind when
# run as a plain user on an image file: it backs up the header (.org), writes
# the new header (.new) and the log, marks the image LUKS\xde\xad, then fails
# for lack of device-mapper. Run as root on a host with cryptsetup-bin; it
# drops to nobody for the reencrypt itself.
#   sh record.sh BLKCRYPT_BINARY
set -eu
BLKCRYPT=$(realpath "$1")
OUT=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
chmod 777 "$W"
cd "$W"
UUID=5d2f4a1e-8a7b-4c3d-9e0f-123456789abc
printf 'legacy-pass' > pw
# Small: a 128-bit key (64 KiB keyslot areas), payload right after the
# keyslots (sector 1032), 64 KiB of data.
truncate -s 593920 img
cryptsetup luksFormat -q --type luks1 -c aes-cbc-essiv:sha256 -s 128 --align-payload 8 --iter-time 1 \
    --uuid "$UUID" --key-file pw img
# The plaintext: a deterministic, non-repeating pattern.
python3 -c 'import hashlib,sys; sys.stdout.buffer.write(b"".join(hashlib.sha256(i.to_bytes(4,"little")).digest() for i in range(2048)))' > plain
"$BLKCRYPT" luks encrypt --key-file pw plain img
sha256sum plain | cut -d' ' -f1 > "$OUT/plain.sha256"
chmod 666 img pw
# As nobody: the legacy path stops at "Activation of temporary devices failed."
if setpriv --reuid=65534 --regid=65534 --clear-groups cryptsetup reencrypt -q --iter-time 1 --key-file pw img; then
    echo "cryptsetup reencrypt unexpectedly succeeded" >&2; exit 1
fi
head -c 6 img | od -An -tx1 | grep -q '4c 55 4b 53 de ad'
# Only keyslot 0 is in use: zero the other seven keyslot areas (random bytes
# nobody reads) in the image and both headers so that they compress.
python3 - "LUKS-$UUID.org" "LUKS-$UUID.new" img <<'PY'
import sys
for name in sys.argv[1:]:
    with open(name, "r+b") as f:
        f.seek(8 * 512 + 128 * 512)
        f.write(bytes(7 * 128 * 512))
PY
cp "LUKS-$UUID.log" "$OUT/"
xz -9 -c img > "$OUT/img.xz"
xz -9 -c "LUKS-$UUID.org" > "$OUT/LUKS-$UUID.org.xz"
xz -9 -c "LUKS-$UUID.new" > "$OUT/LUKS-$UUID.new.xz"
cryptsetup --version > "$OUT/cryptsetup-version.txt" 2>&1 || true
