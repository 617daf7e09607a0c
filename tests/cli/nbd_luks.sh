#!/usr/bin/env bash
# blkcrypt luks serve on containers cryptsetup made (run live; skipped with a
# note where cryptsetup or python3-cryptography is missing): the view equals
# `luks decrypt`; what nbdcopy and qemu-io write through the server decrypts,
# with the volume key `cryptsetup luksDump --dump-volume-key` prints and
# python3-cryptography, to exactly that; the header bytes never change; a
# kill -9 during unflushed writes keeps the header and every flushed block.
source "$(dirname "$0")/lib.sh"
command -v cryptsetup >/dev/null || { echo "cryptsetup not installed: luks serve tests skipped"; exit 0; }
python3 -c 'import cryptography' 2>/dev/null || { echo "python3-cryptography missing: luks serve tests skipped"; exit 0; }
source "$(dirname "$0")/nbd_lib.sh"

printf 'serve passphrase' >"$TMP/pass"
FAST=(--pbkdf-force-iterations 1000)
IMG=$TMP/img
truncate -s 10M "$IMG"
cryptsetup luksFormat -q --type luks1 --cipher aes-xts-plain64 --key-size 512 "${FAST[@]}" \
    --key-file "$TMP/pass" "$IMG" || fail "cryptsetup luksFormat"
cryptsetup luksDump -q --dump-volume-key --key-file "$TMP/pass" "$IMG" >"$TMP/dump"
VK=$(sed -n '/^MK dump:/,$p' "$TMP/dump" | sed 's/^MK dump://' | tr -d ' \t\n')
PAYLOAD=$(awk '/^Payload offset:/ {print $3}' "$TMP/dump")  # sectors
[[ ${#VK} == 128 && $PAYLOAD -gt 0 ]] || fail "luksDump: key '${VK}' payload '$PAYLOAD'"
DATA_BYTES=$(( (10 << 20) - PAYLOAD * 512 ))
head_bytes() { head -c $((PAYLOAD * 512)) "$IMG"; }
head_bytes >"$TMP/header.orig"

# ref_decrypt OUT: the payload decrypted by python3-cryptography (XTS,
# plain64 IVs counting 512-byte sectors from the payload's start).
ref_decrypt() {
    python3 - "$IMG" "$VK" "$PAYLOAD" "$1" <<'PY'
import sys
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
img, key, payload = open(sys.argv[1], "rb").read(), bytes.fromhex(sys.argv[2]), int(sys.argv[3])
data = img[payload * 512:]
out = bytearray()
for s in range(len(data) // 512):
    d = Cipher(algorithms.AES(key), modes.XTS(s.to_bytes(16, "little"))).decryptor()
    out += d.update(data[s * 512:(s + 1) * 512]) + d.finalize()
open(sys.argv[4], "wb").write(out)
PY
}
header_intact() { cmp -s "$TMP/header.orig" <(head_bytes) || fail "$1: the LUKS header changed"; }

# --- the view equals luks decrypt --------------------------------------
random_file "$TMP/plain" $DATA_BYTES
"$BLKCRYPT" luks encrypt --key-file "$TMP/pass" "$TMP/plain" "$IMG"
start_server luks serve --key-file "$TMP/pass" --socket "$SOCK" "$IMG"
T nbdinfo --json "$URI" | grep_q "\"export-size\": $DATA_BYTES" || fail "luks serve: size"
T nbdcopy --connections=4 --requests=64 "$URI" "$TMP/out"
"$BLKCRYPT" luks decrypt --key-file "$TMP/pass" "$IMG" "$TMP/dec"
cmp "$TMP/dec" "$TMP/out" || fail "nbdcopy of luks serve differs from luks decrypt"
cmp "$TMP/plain" "$TMP/out" || fail "luks serve: not the plaintext"

# --- writes through the server: nbdcopy in, then unaligned qemu-io --------
random_file "$TMP/model" $DATA_BYTES
T nbdcopy --connections=4 "$TMP/model" "$URI"
qemu_io_script "$TMP/model" "$TMP/qemu-io.cmds" 15 60
T qemu-io -f raw "$URI" <"$TMP/qemu-io.cmds" >"$TMP/qemu-io.out" 2>&1
! grep -qiE "fail|error|mismatch" "$TMP/qemu-io.out" || fail "qemu-io: $(grep -iE 'fail|error|mismatch' "$TMP/qemu-io.out" | head -3)"
stop_server TERM
header_intact "after nbdcopy in and qemu-io writes"
ref_decrypt "$TMP/ref"
cmp "$TMP/model" "$TMP/ref" || fail "python3-cryptography does not find what was written through luks serve"

# --- passphrase on stdin, --volume-key-file, --key-slot, --read-only -----
printf '%s' "$VK" | xxd -r -p >"$TMP/vk"
start_server luks serve --volume-key-file "$TMP/vk" --socket "$SOCK" --read-only "$IMG"
T nbdinfo --json "$URI" | grep_q '"is_read_only": true' || fail "luks serve --read-only not advertised"
T qemu-img compare -f raw -F raw "$URI" "$TMP/model" >/dev/null || fail "--volume-key-file view differs"
T qemu-io -f raw -c "write 0 512" "$URI" >"$TMP/qemu-io.out" 2>&1 || true
grep -qi "permitted\|read-only\|permission denied" "$TMP/qemu-io.out" || fail "write to read-only: $(cat "$TMP/qemu-io.out")"
stop_server INT
SERVER_INPUT=$TMP/pass start_server luks serve --socket "$SOCK" --key-slot 0 "$IMG"
T qemu-img compare -f raw -F raw "$URI" "$TMP/model" >/dev/null || fail "passphrase on stdin: view differs"
stop_server TERM
expect_exit 2 "$BLKCRYPT" luks serve --key-file "$TMP/pass" --key-slot 1 --socket "$SOCK" "$IMG"
grep -q "No key available" "$TMP/stderr" || fail "wrong keyslot: $(cat "$TMP/stderr")"
printf 'wrong' >"$TMP/wrong"
expect_exit 2 "$BLKCRYPT" luks serve --key-file "$TMP/wrong" --socket "$SOCK" "$IMG"
[[ ! -e $SOCK ]] || fail "a refused passphrase left a socket"
expect_exit 2 "$BLKCRYPT" luks decrypt --socket "$SOCK" --key-file "$TMP/pass" "$IMG" "$TMP/x"
expect_exit 2 "$BLKCRYPT" luks serve --key-file "$TMP/pass" "$IMG"

# --- kill -9 during unflushed writes: header and flushed blocks intact ----
start_server luks serve --key-file "$TMP/pass" --socket "$SOCK" "$IMG"
T qemu-io -f raw -c "write -P 0x5a 4096 1048576" -c flush "$URI" >/dev/null
python3 - "$TMP/model" <<'PY'
import sys
m = bytearray(open(sys.argv[1], "rb").read()); m[4096:4096 + 1048576] = b"\x5a" * 1048576
open(sys.argv[1], "wb").write(m)
PY
for i in $(seq 400); do echo "write -P $((i % 250 + 1)) $(( (2 << 20) + (i * 7919) % (6 << 20) )) 3000"; done >"$TMP/unflushed.cmds"
qemu-io -f raw "$URI" <"$TMP/unflushed.cmds" >/dev/null 2>&1 &
WRITER=$!
sleep 0.3
kill_server
wait $WRITER 2>/dev/null || true
header_intact "after kill -9 during writes"
"$BLKCRYPT" luks decrypt --key-file "$TMP/pass" "$IMG" "$TMP/dec"
cmp <(head -c $((2 << 20)) "$TMP/model") <(head -c $((2 << 20)) "$TMP/dec") ||
    fail "kill -9 during unflushed writes lost flushed blocks"

# --- LUKS2, 4096-byte sectors, a detached header ---------------------------
rm -f "$IMG" && truncate -s 8M "$IMG"
cryptsetup luksFormat -q --type luks2 --pbkdf pbkdf2 "${FAST[@]}" --sector-size 4096 --header "$TMP/hdr" \
    --key-file "$TMP/pass" "$IMG" || fail "cryptsetup luksFormat luks2"
random_file "$TMP/plain" $((8 << 20))
start_server luks serve --header "$TMP/hdr" --key-file "$TMP/pass" --socket "$SOCK" "$IMG"
T nbdinfo --json "$URI" | grep_q '"block_size_minimum": 4096' || fail "LUKS2 4096: minimum block size"
T nbdcopy "$TMP/plain" "$URI"
stop_server TERM
"$BLKCRYPT" luks decrypt --header "$TMP/hdr" --key-file "$TMP/pass" "$IMG" "$TMP/dec"
cmp "$TMP/plain" "$TMP/dec" || fail "LUKS2 detached: luks decrypt does not find what nbdcopy wrote"
echo "nbd_luks: ok"
