#!/usr/bin/env bash
# blkcrypt serve --dm-table: dmsetup table files of linear, zero, error,
# crypt and verity lines, stacked (verity on crypt, as Android and ChromeOS
# stack them), read by nbdcopy and qemu-io and compared with what
# `crypt decrypt` and `verity read` give; error segments give EIO; writes
# land where the table maps them; bad tables are refused with the line.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nbd_lib.sh"

random_file "$TMP/plain" $((8 << 20))
KEY=$(head -c 64 /dev/urandom | xxd -p -c 64)
"$BLKCRYPT" crypt encrypt --table "aes-xts-plain64 $KEY 0" "$TMP/plain" "$TMP/enc"
# sectors FILE SKIP COUNT: COUNT 512-byte sectors of FILE from SKIP.
sectors() { dd if="$1" bs=512 skip="$2" count="$3" status=none; }

# --- verity on crypt: two tables, the lower one named ---------------------
"$BLKCRYPT" verity format "$TMP/plain" "$TMP/hash" --root-hash-file "$TMP/root" >/dev/null
ROOT=$(cat "$TMP/root")
"$BLKCRYPT" verity table "$TMP/plain" "$TMP/hash" "$ROOT" | tail -1 >"$TMP/vline"
echo "0 16384 crypt aes-xts-plain64 $KEY 0 $TMP/enc 0" >"$TMP/crypt.tbl"
sed "s|verity 1 $TMP/plain |verity 1 /dev/mapper/dec |" "$TMP/vline" >"$TMP/verity.tbl"
grep_q "/dev/mapper/dec $TMP/hash" <"$TMP/verity.tbl" || fail "verity table: $(cat "$TMP/verity.tbl")"
start_server serve --socket "$SOCK" --dm-table "dec=$TMP/crypt.tbl" --dm-table "$TMP/verity.tbl"
T nbdinfo --json "$URI" >"$TMP/info.json"
python3 - "$TMP/info.json" <<'PY' || fail "nbdinfo --json of verity on crypt: $(cat "$TMP/info.json")"
import json, sys
e = json.load(open(sys.argv[1]))["exports"][0]
want = {"export-size": 8 << 20, "block_size_minimum": 4096, "is_read_only": True}
bad = {k: (e.get(k), v) for k, v in want.items() if e.get(k) != v}
assert not bad, bad
PY
T nbdcopy --connections=4 --requests=64 "$URI" "$TMP/out"
stop_server TERM
"$BLKCRYPT" crypt decrypt --table "aes-xts-plain64 $KEY 0" "$TMP/enc" "$TMP/dec"
"$BLKCRYPT" verity read --out "$TMP/vread" "$TMP/dec" "$TMP/hash" "$ROOT"
cmp "$TMP/vread" "$TMP/out" || fail "verity on crypt differs from crypt decrypt + verity read"
grep_q "serving dm table verity.tbl\|serving dm table $TMP/verity.tbl" <"$TMP/log" || fail "log: $(cat "$TMP/log")"

# A ciphertext byte flipped: that block decrypts to garbage and fails
# verification (EIO), the rest of the stack stays readable.
cp "$TMP/enc" "$TMP/enc.good"
flip_byte "$TMP/enc" $((5 * 4096 + 100))
start_server serve --socket "$SOCK" --dm-table "dec=$TMP/crypt.tbl" --dm-table "$TMP/verity.tbl"
T qemu-io -f raw -r -c "read 0 4096" -c "read $((6 * 4096)) 8192" "$URI" >"$TMP/qemu-io.out" 2>&1
! grep -qi "error" "$TMP/qemu-io.out" || fail "verity on crypt: good blocks unreadable: $(cat "$TMP/qemu-io.out")"
T qemu-io -f raw -r -c "read $((5 * 4096)) 4096" "$URI" >"$TMP/qemu-io.out" 2>&1 || true
grep -qi "Input/output error" "$TMP/qemu-io.out" || fail "verity on crypt: a bad block read: $(cat "$TMP/qemu-io.out")"
stop_server TERM
grep -qi "corrupt" "$TMP/log" || fail "corruption not logged"
mv "$TMP/enc.good" "$TMP/enc"

# --- several segments: linear, zero, crypt; read and written -------------
cp "$TMP/plain" "$TMP/lin"
cat >"$TMP/multi.tbl" <<TBL
# a comment, then a blank line

0 2048 linear $TMP/lin 100
2048 1024 zero
3072 4096 crypt aes-xts-plain64 $KEY 0 $TMP/enc 0
TBL
start_server serve --socket "$SOCK" --dm-table "$TMP/multi.tbl"
T nbdinfo --json "$URI" | grep_q "\"export-size\": $((7168 * 512))" || fail "multi-segment size"
T nbdcopy "$URI" "$TMP/out"
{ sectors "$TMP/lin" 100 2048; head -c $((1024 * 512)) /dev/zero; sectors "$TMP/dec" 0 4096; } >"$TMP/want"
cmp "$TMP/want" "$TMP/out" || fail "linear + zero + crypt: nbdcopy differs"
# Writes across every boundary: linear and crypt keep them, zero drops them.
T qemu-io -f raw -c "write -P 0x33 $((2048 * 512 - 1000)) 3000" -c "write -P 0x44 $((3072 * 512 - 700)) 5000" \
    -c flush "$URI" >"$TMP/qemu-io.out" 2>&1
! grep -qi "error" "$TMP/qemu-io.out" || fail "writes across segments: $(cat "$TMP/qemu-io.out")"
T qemu-io -f raw -c "read -P 0x33 $((2048 * 512 - 1000)) 1000" -c "read -P 0 $((2048 * 512)) 2000" \
    -c "read -P 0x44 $((3072 * 512)) 4300" "$URI" >"$TMP/qemu-io.out" 2>&1
! grep -qiE "error|fail" "$TMP/qemu-io.out" || fail "read back across segments: $(cat "$TMP/qemu-io.out")"
stop_server TERM
python3 - "$TMP/plain" "$TMP/dec" "$TMP/lin.want" "$TMP/dec.want" <<'PY'
import sys
lin = bytearray(open(sys.argv[1], "rb").read()); dec = bytearray(open(sys.argv[2], "rb").read())
o = 100 * 512 + 2048 * 512 - 1000
lin[o:o + 1000] = b"\x33" * 1000
dec[0:4300] = b"\x44" * 4300
open(sys.argv[3], "wb").write(lin); open(sys.argv[4], "wb").write(dec)
PY
cmp "$TMP/lin.want" "$TMP/lin" || fail "linear write not where the table maps it"
"$BLKCRYPT" crypt decrypt --table "aes-xts-plain64 $KEY 0" "$TMP/enc" "$TMP/dec2"
cmp "$TMP/dec.want" "$TMP/dec2" || fail "crypt segment write not in the ciphertext"

# --- an error segment: EIO there only --------------------------------------
printf '0 2048 linear %s 0\n2048 64 error\n2112 2048 linear %s 4096\n' "$TMP/plain" "$TMP/plain" >"$TMP/err.tbl"
start_server serve --socket "$SOCK" --read-only --dm-table "$TMP/err.tbl"
T qemu-io -f raw -r -c "read 0 65536" -c "read $((2112 * 512)) 65536" "$URI" >"$TMP/qemu-io.out" 2>&1
! grep -qi "error" "$TMP/qemu-io.out" || fail "around an error segment: $(cat "$TMP/qemu-io.out")"
for range in "$((2048 * 512)) 512" "$((2048 * 512 - 512)) 4096" "$((2100 * 512)) 16384"; do
    T qemu-io -f raw -r -c "read $range" "$URI" >"$TMP/qemu-io.out" 2>&1 || true
    grep -qi "Input/output error" "$TMP/qemu-io.out" || fail "error segment read $range: $(cat "$TMP/qemu-io.out")"
done
stop_server TERM

# --- TRIM: plain serve and tables whose every line discards ---------------
cp "$TMP/plain" "$TMP/trim"
start_server serve --socket "$SOCK" "$TMP/trim"
T nbdinfo --json "$URI" | grep_q '"can_trim": true' || fail "plain serve: no TRIM"
T qemu-io -f raw -c "discard 1M 1M" "$URI" >"$TMP/qemu-io.out" 2>&1 || fail "discard: $(cat "$TMP/qemu-io.out")"
stop_server TERM
cmp <(sectors "$TMP/trim" 2048 2048) <(head -c 1M /dev/zero) || fail "plain serve TRIM: no hole"
cmp <(sectors "$TMP/trim" 0 2048) <(sectors "$TMP/plain" 0 2048) || fail "plain serve TRIM: too much"
cp "$TMP/plain" "$TMP/trim" && cp "$TMP/enc" "$TMP/enc.trim"
printf '0 2048 linear %s 0\n2048 2048 crypt aes-xts-plain64 %s 0 %s 0 1 allow_discards\n' \
    "$TMP/trim" "$KEY" "$TMP/enc.trim" >"$TMP/trim.tbl"
start_server serve --socket "$SOCK" --dm-table "$TMP/trim.tbl"
T nbdinfo --json "$URI" | grep_q '"can_trim": true' || fail "linear + crypt allow_discards: no TRIM"
T qemu-io -f raw -c "discard 512K 1M" "$URI" >"$TMP/qemu-io.out" 2>&1 || fail "discard: $(cat "$TMP/qemu-io.out")"
stop_server TERM
cmp <(sectors "$TMP/trim" 1024 1024) <(head -c 512K /dev/zero) || fail "table TRIM: no hole in the linear file"
cmp <(sectors "$TMP/enc.trim" 0 1024) <(head -c 512K /dev/zero) || fail "table TRIM: no hole in the ciphertext"
cmp <(sectors "$TMP/enc.trim" 1024 1024) <(sectors "$TMP/enc" 1024 1024) || fail "table TRIM: too much"
start_server serve --socket "$SOCK" --dm-table "$TMP/multi.tbl"
T nbdinfo --json "$URI" | grep_q '"can_trim": false' || fail "a table with zero and crypt without allow_discards offers TRIM"
stop_server TERM

# --- refusals: the file and line, never the key ----------------------------
bad_table() {  # WANT_TEXT LINES...
    local want=$1
    shift
    printf '%s\n' "$@" >"$TMP/bad.tbl"
    expect_exit 2 "$BLKCRYPT" serve --socket "$SOCK" --dm-table "$TMP/bad.tbl"
    grep -q "$want" "$TMP/stderr" || fail "bad table '$*': $(cat "$TMP/stderr")"
    ! grep -q "${KEY:0:16}" "$TMP/stderr" || fail "the key is in an error message"
    [[ ! -e $SOCK ]] || fail "a refused table left a socket"
}
bad_table "line 2: gap in the table" "0 8 zero" "16 8 zero"
bad_table "line 2: overlap" "0 8 zero" "4 8 zero"
bad_table "line 1: zero-length" "0 0 zero"
bad_table "unknown target type 'striped'" "0 8 striped 1 8 $TMP/plain 0"
bad_table "linear: expected" "0 8 linear $TMP/plain"
bad_table "line 1: crypt: " "0 8 crypt aes-xts-plain64 ${KEY}zz 0 $TMP/enc 0"
bad_table "too small" "0 99999 linear $TMP/plain 0"
bad_table "too small" "0 16392 crypt aes-xts-plain64 $KEY 0 $TMP/enc 0"
bad_table "no lines" "# nothing"
bad_table "aligned" "0 1 zero" "1 16 crypt aes-xts-plain64 $KEY 0 $TMP/enc 0 1 sector_size:4096"
expect_exit 2 "$BLKCRYPT" serve --socket "$SOCK" --dm-table "$TMP/multi.tbl" --dm-table "top=$TMP/multi.tbl"
grep -q "only the last table may be unnamed" "$TMP/stderr" || fail "unnamed lower table: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" serve --socket "$SOCK" --dm-table "$TMP/multi.tbl" "$TMP/plain"
expect_exit 1 "$BLKCRYPT" serve --socket "$SOCK" --dm-table "$TMP/verity.tbl"  # no /dev/mapper/dec defined
echo "nbd_dmtable: ok"
