#!/usr/bin/env bash
# blkcrypt tcrypt serve on the TrueCrypt/VeraCrypt fixture images: what
# nbdcopy, qemu-img and nbdinfo read over NBD is exactly what the kernel
# mapped with `cryptsetup tcryptOpen` (size and sha256 recorded once in
# tests/tcrypt/kernel/golden.tsv): xts, cbc-tcw, a cipher chain, a hidden
# volume through its backup header, system encryption. --read-only refuses
# writes; qemu-io writes through a read-write server decrypt, with the volume
# key cryptsetup's tcryptDump printed and python3-cryptography, to exactly
# what was written, and no header byte changes. A wrong secret exits 2.
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
FIX=${BLKCRYPT_SHARED_DIR:-$SRC/../shared}/fixtures/tcrypt-images.tar.xz
GOLD=$SRC/tests/tcrypt/kernel
[[ -f $FIX ]] || { echo "no $FIX (../shared/fixtures absent): tcrypt serve tests skipped"; exit 0; }
source "$(dirname "$0")/nbd_lib.sh"
tar xSJf "$FIX" -C "$TMP"
D=$TMP/tcrypt

# golden NAME FIELD: a field of the case's golden.tsv line (2 image, 3
# password, 4 options, 5 size, 6 sha256).
golden() { awk -F'\t' -v n="$1" -v f="$2" '$1==n{print $f}' "$GOLD/golden.tsv"; }

# --- read-only: the served bytes are the kernel's -------------------------
for name in vc1 tc1 tc4tfs tc4aes-hidden-backup sys; do
    img=$D/$(golden $name 2) size=$(golden $name 5) sha=$(golden $name 6)
    [[ -n $sha ]] || fail "$name: no golden line"
    read -r -a o <<<"$(golden $name 4)"
    printf '%s\n' "$(golden $name 3)" >"$TMP/pw"
    start_server tcrypt serve --passphrase-file "$TMP/pw" "${o[@]}" --read-only --socket "$SOCK" "$img"
    T nbdinfo --json "$URI" >"$TMP/info"
    grep_q "\"export-size\": $size," <"$TMP/info" || fail "$name: export size, want $size: $(cat "$TMP/info")"
    grep_q '"is_read_only": true' <"$TMP/info" || fail "$name: --read-only not advertised"
    rm -f "$TMP/served"
    if [[ $name == sys ]]; then
        T qemu-img convert -f raw -O raw "$URI" "$TMP/served"
    else
        T nbdcopy "$URI" "$TMP/served"
    fi
    [[ $(sha256sum <"$TMP/served" | cut -d' ' -f1) == "$sha" ]] || fail "$name: served plaintext differs from the kernel's"
    T qemu-io -f raw -c "write 0 512" "$URI" >"$TMP/qemu-io.out" 2>&1 || true
    grep -qi "permitted\|read-only\|permission denied" "$TMP/qemu-io.out" || fail "$name: write to read-only: $(cat "$TMP/qemu-io.out")"
    stop_server TERM
done

# --- read-write: qemu-io writes land encrypted as cryptsetup would ---------
python3 -c 'import cryptography' 2>/dev/null || { echo "python3-cryptography missing: tcrypt serve write test skipped"; exit 0; }
cp "$D/$(golden vc1 2)" "$TMP/rw"
ORIG=$TMP/rw.orig
cp "$TMP/rw" "$ORIG"
SIZE=$(golden vc1 5)
# The volume key and payload offset cryptsetup tcryptDump printed.
VK=$(sed -n '/^MK dump:/,$p' "$GOLD/vc1.dump" | sed 's/^MK dump://' | tr -d ' \t\n')
PAYLOAD=$(awk '/^Payload offset:/ {print $3}' "$GOLD/vc1.dump")
[[ ${#VK} == 128 && $PAYLOAD == 256 ]] || fail "vc1.dump: key '$VK' payload '$PAYLOAD'"
printf 'aaaaaaaaaaaa\n' >"$TMP/pw"
start_server tcrypt serve --passphrase-file "$TMP/pw" -h sha256 --socket "$SOCK" "$TMP/rw"
T nbdinfo --json "$URI" | grep_q '"is_read_only": false' || fail "tcrypt serve is not read-write"
T nbdcopy "$URI" "$TMP/model"
cp "$TMP/model" "$TMP/before"
qemu_io_script "$TMP/model" "$TMP/qemu-io.cmds" 16 40
T qemu-io -f raw "$URI" <"$TMP/qemu-io.cmds" >"$TMP/qemu-io.out" 2>&1
! grep -qiE "fail|error|mismatch" "$TMP/qemu-io.out" || fail "qemu-io: $(grep -iE 'fail|error|mismatch' "$TMP/qemu-io.out" | head -3)"
stop_server TERM
! cmp -s "$TMP/model" "$TMP/before" || fail "the qemu-io script changed nothing"
# Outside the data area (headers, backup headers) not one byte changed.
cmp -n $((PAYLOAD * 512)) "$ORIG" "$TMP/rw" || fail "the volume header changed"
cmp -i $(((PAYLOAD * 512) + SIZE)) "$ORIG" "$TMP/rw" || fail "bytes after the data area changed"
# python3-cryptography: AES-XTS, the tweak the sector's number on the device.
python3 - "$TMP/rw" "$VK" "$PAYLOAD" "$SIZE" "$TMP/ref" <<'PY'
import sys
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
img, key = open(sys.argv[1], "rb").read(), bytes.fromhex(sys.argv[2])
first, size = int(sys.argv[3]), int(sys.argv[4])
out = bytearray()
for s in range(first, first + size // 512):
    d = Cipher(algorithms.AES(key), modes.XTS(s.to_bytes(16, "little"))).decryptor()
    out += d.update(img[s * 512:(s + 1) * 512]) + d.finalize()
open(sys.argv[5], "wb").write(out)
PY
cmp "$TMP/model" "$TMP/ref" || fail "python3-cryptography does not find what was written through tcrypt serve"

# --- a wrong secret: exit 2, nothing served --------------------------------
printf 'wrong\n' >"$TMP/pw"
expect_exit 2 "$BLKCRYPT" tcrypt serve --passphrase-file "$TMP/pw" -h sha256 --socket "$SOCK" "$TMP/rw"
grep_q 'No device header detected with this passphrase.' <"$TMP/stderr" || fail "wrong secret: $(cat "$TMP/stderr")"
[[ ! -e $SOCK ]] || fail "socket made for a wrong secret"
echo "tcrypt serve: all passed"
