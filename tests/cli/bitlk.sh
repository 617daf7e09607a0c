#!/bin/bash
# blkcrypt bitlk over the BitLocker fixtures (../shared/fixtures/bitlk-images.tar.xz,
# made by Windows; skipped with a note where absent): dump equal to the
# host's `cryptsetup bitlkDump` byte for byte (with --dump-volume-key for the
# passphrase, the recovery password and the .BEK startup key; skipped where
# cryptsetup is not installed), wrong secrets exit 2 with cryptsetup's words,
# and decrypt equal to what the kernel maps with `cryptsetup bitlkOpen`
# (sha256 recorded once in tests/bitlk/golden/bitlkopen.sha256) with the
# filesystem UUID of images.conf; serve read by nbdcopy gives the same bytes.
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
FIX=${BLKCRYPT_SHARED_DIR:-$SRC/../shared}/fixtures/bitlk-images.tar.xz
[[ -f $FIX ]] || { echo "$FIX absent: BitLocker tests skipped"; exit 0; }
tar xSJf "$FIX" -C "$TMP"
D=$TMP/bitlk
GOLD=$SRC/tests/bitlk/golden/bitlkopen.sha256
BEK=$D/4381F759-C4F8-4DE0-BB61-FC33A831BDA5.BEK

# conf IMAGE KEY: a value from images.conf.
conf() {
    awk -v s="[$1]" -v k="$2" '$0==s{on=1;next} /^\[/{on=0} on && index($0,k"=")==1{print substr($0,length(k)+2)}' "$D/images.conf"
}
IMAGES=(bitlk-aes-cbc-128 bitlk-aes-xts-128 bitlk-aes-cbc-elephant-128 bitlk-togo-aes-xts-128
        bitlk-aes-xts-128-startup-key bitlk-aes-xts-128-clearkey-only)

cd "$D"
if command -v cryptsetup >/dev/null; then
    for i in "${IMAGES[@]}"; do
        cryptsetup bitlkDump "$i.img" >"$TMP/want" || fail "cryptsetup bitlkDump $i"
        "$BLKCRYPT" bitlk dump "$i.img" >"$TMP/got" || fail "bitlk dump $i"
        cmp "$TMP/want" "$TMP/got" || { diff "$TMP/want" "$TMP/got" >&2; fail "dump differs: $i"; }
        pw=$(conf "$i" PW) rp=$(conf "$i" RP)
        for secret in "$pw" "$rp"; do
            [[ -n $secret ]] || continue
            echo "$secret" | cryptsetup bitlkDump --dump-volume-key "$i.img" >"$TMP/want" || fail "cryptsetup key $i"
            echo "$secret" | "$BLKCRYPT" bitlk dump --dump-volume-key "$i.img" >"$TMP/got" || fail "bitlk key $i"
            cmp "$TMP/want" "$TMP/got" || { diff "$TMP/want" "$TMP/got" >&2; fail "key dump differs: $i"; }
        done
    done
    i=bitlk-aes-xts-128-startup-key
    cryptsetup bitlkDump --dump-volume-key --key-file "$BEK" "$i.img" >"$TMP/want"
    "$BLKCRYPT" bitlk dump --dump-volume-key --key-file "$BEK" "$i.img" >"$TMP/got"
    cmp "$TMP/want" "$TMP/got" || fail "startup key dump differs"
    grep_q "^MK bits: *	256\$" <"$TMP/got" || fail "no 256-bit key for the startup key"
    # Windows 11 writes the volume's GUID into the .BEK (an entry of type 0x19,
    # value 0x17, before the key); cryptsetup opens with it, and refuses a
    # GUID of another volume.
    python3 - "$BEK" "$TMP/win11.BEK" "$TMP/foreign.BEK" <<'PY'
import struct, sys, uuid
b = open(sys.argv[1], 'rb').read()
def with_guid(g):
    e = struct.pack('<HHHH', 24, 0x19, 0x17, 1) + g
    at = 0x70  # after the "ExternalKey" name, before the key datum
    out = bytearray(b[:at] + e + b[at:])
    struct.pack_into('<I', out, 0, len(out)); struct.pack_into('<I', out, 12, len(out))
    struct.pack_into('<H', out, 48, struct.unpack_from('<H', out, 48)[0] + len(e))
    return out
open(sys.argv[2], 'wb').write(with_guid(uuid.UUID('5a95db04-6ebc-4ba9-99a3-15a87a3d07b2').bytes_le))
open(sys.argv[3], 'wb').write(with_guid(uuid.UUID('00000000-0000-0000-0000-000000000001').bytes_le))
PY
    cryptsetup bitlkDump --dump-volume-key --key-file "$TMP/win11.BEK" "$i.img" >"$TMP/want" || fail "cryptsetup win11 BEK"
    "$BLKCRYPT" bitlk dump --dump-volume-key --key-file "$TMP/win11.BEK" "$i.img" >"$TMP/got" || fail "bitlk win11 BEK"
    cmp "$TMP/want" "$TMP/got" || fail "startup key dump with a volume GUID entry differs"
    "$BLKCRYPT" bitlk test-passphrase --key-file "$TMP/win11.BEK" "$i.img" || fail "win11 BEK test-passphrase"
    expect_exit 1 cryptsetup bitlkDump --dump-volume-key --key-file "$TMP/foreign.BEK" "$i.img"
    expect_exit 1 "$BLKCRYPT" bitlk test-passphrase --key-file "$TMP/foreign.BEK" "$i.img"
    grep_q "BEK file GUID '00000000-0000-0000-0000-000000000001' does not match GUID of the volume." <"$TMP/stderr" ||
        fail "foreign volume GUID message: $(cat "$TMP/stderr")"
    bitlkdump_alias=$("$BLKCRYPT" bitlkDump bitlk-aes-xts-128.img)
    [[ $bitlkdump_alias == "$(cryptsetup bitlkDump bitlk-aes-xts-128.img)" ]] || fail "bitlkDump alias"
else
    echo "cryptsetup not installed: dump comparisons skipped"
fi

# Wrong secrets: exit 2 and cryptsetup's words; a foreign file exit 1.
expect_exit 2 sh -c "echo wrong | '$BLKCRYPT' bitlk dump --dump-volume-key bitlk-aes-xts-128.img"
grep_q -x "blkcrypt: No key available with this passphrase." <"$TMP/stderr" || fail "wrong passphrase message"
# A recovery-shaped password with a wrong group check digit.
expect_exit 2 sh -c "echo 235818-357951-253979-013365-241120-245575-342914-591911 | '$BLKCRYPT' bitlk test-passphrase bitlk-aes-xts-128.img"
# The .BEK of one volume does not open another.
expect_exit 2 "$BLKCRYPT" bitlk test-passphrase --key-file "$BEK" bitlk-aes-cbc-128.img
head -c 1048576 /dev/zero >"$TMP/zero.img"
expect_exit 1 "$BLKCRYPT" bitlk dump "$TMP/zero.img"
expect_one_error_line
grep_q "Invalid or unknown boot signature for BITLK device." <"$TMP/stderr" || fail "foreign file message"
# A tampered FVEK (one ciphertext byte of the FVEK entry) in the first
# metadata block: its CRC32 fails and the second copy opens the volume (with a
# warning) to the kernel's plaintext, where cryptsetup finds no key.
cp --sparse=always bitlk-aes-cbc-128.img "$TMP/tampered.img"
flip_byte "$TMP/tampered.img" $((35213312 + 112 + 576 + 40))
echo anaconda | "$BLKCRYPT" bitlk decrypt "$TMP/tampered.img" "$TMP/plain" 2>"$TMP/stderr"
grep_q -x "blkcrypt: warning: the first FVE metadata block is damaged; using copy 2 at offset 46256128" <"$TMP/stderr" ||
    fail "damaged first copy warning: $(cat "$TMP/stderr")"
[[ $(sha256sum <"$TMP/plain" | cut -d' ' -f1) == "$(awk '$2=="bitlk-aes-cbc-128"{print $1}' "$GOLD")" ]] ||
    fail "plaintext from the second metadata copy"
rm -f "$TMP/plain"
if command -v cryptsetup >/dev/null; then
    expect_exit 2 sh -c "echo anaconda | cryptsetup bitlkDump --dump-volume-key '$TMP/tampered.img'"
fi
# The same byte in all three copies: the passphrase still opens the VMK, and
# the damage is named.
flip_byte "$TMP/tampered.img" $((46256128 + 112 + 576 + 40))
flip_byte "$TMP/tampered.img" $((57909248 + 112 + 576 + 40))
expect_exit 1 sh -c "echo anaconda | '$BLKCRYPT' bitlk decrypt '$TMP/tampered.img' '$TMP/never'"
grep_q "the BITLK metadata is damaged" <"$TMP/stderr" || fail "tampered FVEK message: $(cat "$TMP/stderr")"
[[ ! -e $TMP/never ]] || fail "OUT written for a tampered volume"
rm -f "$TMP/tampered.img"
head -c 4096 bitlk-aes-xts-128.img >"$TMP/short.img"
expect_exit 1 "$BLKCRYPT" bitlk dump "$TMP/short.img"
expect_one_error_line

# decrypt: the kernel's bitlkOpen readback, and the filesystem UUID.
for i in "${IMAGES[@]}"; do
    pw=$(conf "$i" PW)
    if [[ $i == *startup-key ]]; then
        "$BLKCRYPT" bitlk decrypt --key-file "$BEK" "$i.img" "$TMP/plain" || fail "decrypt $i"
    else
        echo "$pw" | "$BLKCRYPT" bitlk decrypt "$i.img" "$TMP/plain" || fail "decrypt $i"
    fi
    want=$(awk -v n="$i" '$2==n{print $1}' "$GOLD")
    got=$(sha256sum <"$TMP/plain" | cut -d' ' -f1)
    if [[ -n $want ]]; then
        [[ $got == "$want" ]] || fail "$i: plaintext sha256 $got, the kernel's $want"
    fi
    if command -v blkid >/dev/null; then
        uuid=$(blkid -p -o value -s UUID "$TMP/plain" || true)
        [[ $uuid == "$(conf "$i" UUID)" ]] || fail "$i: filesystem UUID '$uuid', want $(conf "$i" UUID)"
    fi
    rm -f "$TMP/plain"
done
# The recovery password gives the same plaintext as the passphrase.
echo "$(conf bitlk-aes-cbc-128 RP)" | "$BLKCRYPT" bitlk decrypt bitlk-aes-cbc-128.img "$TMP/plain"
[[ $(sha256sum <"$TMP/plain" | cut -d' ' -f1) == "$(awk '$2=="bitlk-aes-cbc-128"{print $1}' "$GOLD")" ]] ||
    fail "recovery password plaintext"

# serve: nbdcopy reads the same plaintext over NBD (read-only export).
if command -v nbdcopy >/dev/null; then
    SOCK=$TMP/s.sock
    echo anaconda | "$BLKCRYPT" bitlk serve --socket "$SOCK" --pid-file "$TMP/pid" bitlk-togo-aes-xts-128.img 2>"$TMP/log" &
    SERVER=$!
    for _ in $(seq 100); do [[ -s $TMP/pid ]] && break; kill -0 $SERVER 2>/dev/null || fail "serve died: $(cat "$TMP/log")"; sleep 0.1; done
    [[ -s $TMP/pid ]] || fail "serve did not start"
    timeout 120 nbdcopy "nbd+unix:///?socket=$SOCK" "$TMP/served" || fail "nbdcopy: $(cat "$TMP/log")"
    kill -TERM $SERVER
    wait $SERVER || fail "serve exit on SIGTERM: $(cat "$TMP/log")"
    [[ $(sha256sum <"$TMP/served" | cut -d' ' -f1) == "$(awk '$2=="bitlk-togo-aes-xts-128"{print $1}' "$GOLD")" ]] ||
        fail "served plaintext differs from the kernel's"
else
    echo "nbdcopy not installed: bitlk serve test skipped"
fi
echo "bitlk: all passed"
