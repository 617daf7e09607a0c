#!/usr/bin/env bash
# blkcrypt serve / crypt serve against the real NBD clients: nbdinfo, nbdcopy
# (libnbd-bin), qemu-img and qemu-io (qemu-utils), plus tests/cli/nbd_client.py
# for what they never send (unaligned requests, garbage, oversized requests).
source "$(dirname "$0")/lib.sh"
CLIENT="$(dirname "$0")/nbd_client.py"
for tool in nbdinfo nbdcopy qemu-img qemu-io python3; do
    command -v $tool >/dev/null || fail "$tool is missing (scripts/install-deps.sh installs it)"
done

SOCK=$TMP/s.sock
URI="nbd+unix:///?socket=$SOCK"
source "$(dirname "$0")/nbd_lib.sh"

random_file "$TMP/plain" $((8 << 20))
KEY=$(head -c 64 /dev/urandom | xxd -p -c 64)
TABLE="aes-xts-plain64 $KEY 0"
"$BLKCRYPT" crypt encrypt --table "$TABLE" "$TMP/plain" "$TMP/enc"
decrypt() { "$BLKCRYPT" crypt decrypt --table "$TABLE" "$TMP/enc" "$1"; }

# --- what the client sees -----------------------------------------------
start_server crypt serve --table "$TABLE" --socket "$SOCK" "$TMP/enc"
[[ $(stat -c %a "$SOCK") == 600 ]] || fail "socket mode $(stat -c %a "$SOCK"), want 600"
T nbdinfo --json "$URI" >"$TMP/info.json"
python3 - "$TMP/info.json" <<'PY' || fail "nbdinfo --json: $(cat "$TMP/info.json")"
import json, sys
e = json.load(open(sys.argv[1]))["exports"][0]
want = {"export-size": 8 << 20, "block_size_minimum": 512, "block_size_maximum": 4 << 20,
        "is_read_only": False, "can_flush": True, "can_fua": True, "can_multi_conn": True,
        "can_trim": False, "can_zero": True, "can_cache": True}
bad = {k: (e.get(k), v) for k, v in want.items() if e.get(k) != v}
assert not bad, bad
PY

# --- nbdcopy out (several connections, many requests) and qemu-img ----------
T nbdcopy --connections=4 --requests=64 "$URI" "$TMP/out"
cmp "$TMP/plain" "$TMP/out" || fail "nbdcopy out differs from the plaintext"
T qemu-img compare -f raw -F raw "$URI" "$TMP/plain" >/dev/null || fail "qemu-img compare"
T qemu-img info --output=json "$URI" | grep_q '"virtual-size": 8388608' || fail "qemu-img info size"
rm -f "$TMP/out"
T qemu-img convert -f raw -O raw "$URI" "$TMP/out"
cmp "$TMP/plain" "$TMP/out" || fail "qemu-img convert out differs"

# --- nbdcopy in, then decrypted by crypt decrypt ------------------------
random_file "$TMP/plain2" $((8 << 20))
T nbdcopy --connections=4 "$TMP/plain2" "$URI"
T qemu-img compare -f raw -F raw "$URI" "$TMP/plain2" >/dev/null || fail "compare after nbdcopy in"
stop_server TERM
decrypt "$TMP/dec"
cmp "$TMP/plain2" "$TMP/dec" || fail "nbdcopy in: the image does not decrypt to what was written"
grep -q "connection .* (unix): export ''.*; disconnect" "$TMP/log" || fail "no connection log line: $(cat "$TMP/log")"

# --- unaligned writes and reads, many in flight, against a model ---------
cp "$TMP/plain2" "$TMP/model"
start_server crypt serve --table "$TABLE" --socket "$SOCK" --threads 2 "$TMP/enc"
T python3 "$CLIENT" "$SOCK" rmw "$TMP/model" 1 256 || fail "unaligned requests through nbd_client.py"
# qemu-io: unaligned writes of patterns, then the whole image compared.
qemu_io_script "$TMP/model" "$TMP/qemu-io.cmds" 7 100
T qemu-io -f raw "$URI" <"$TMP/qemu-io.cmds" >"$TMP/qemu-io.out" 2>&1
! grep -qiE "fail|error|mismatch" "$TMP/qemu-io.out" || fail "qemu-io: $(grep -iE 'fail|error|mismatch' "$TMP/qemu-io.out" | head -3)"
T qemu-img compare -f raw -F raw "$URI" "$TMP/model" >/dev/null || fail "image differs from the model"

# --- bad clients leave the server serving others ------------------------
T python3 "$CLIENT" "$SOCK" garbage || fail "garbage client"
T python3 "$CLIENT" "$SOCK" oversize || fail "oversized requests"
T qemu-img compare -f raw -F raw "$URI" "$TMP/model" >/dev/null || fail "not serving after bad clients"
grep -q "protocol error" "$TMP/log" || fail "no protocol error logged"

# --- kill -9 after a flushed write: the data is on disk -----------------
T qemu-io -f raw -c "write -P 0x5a 1000 70000" -c flush "$URI" >/dev/null
kill -9 $SERVER_PID
wait $SERVER_PID 2>/dev/null || true
rm -f "$SOCK" "$TMP/pid"
decrypt "$TMP/dec"
python3 - "$TMP/model" <<'PY'
import sys
m = bytearray(open(sys.argv[1], "rb").read()); m[1000:71000] = b"\x5a" * 70000
open(sys.argv[1], "wb").write(m)
PY
cmp "$TMP/model" "$TMP/dec" || fail "flushed write lost by kill -9"

# --- nbdfuse: the view as a file, without root (needs /dev/fuse) --------
if [[ -c /dev/fuse ]] && command -v nbdfuse >/dev/null && command -v fusermount3 >/dev/null; then
    start_server crypt serve --table "$TABLE" --socket "$SOCK" "$TMP/enc"
    mkdir "$TMP/mnt"
    nbdfuse "$TMP/mnt/disk" "$URI" &
    FUSE_PID=$!
    for _ in $(seq 100); do [[ -e $TMP/mnt/disk ]] && break; sleep 0.1; done
    T cmp "$TMP/mnt/disk" "$TMP/model" || fail "nbdfuse read differs"
    head -c 8192 /dev/urandom >"$TMP/patch"
    # Whole sectors: libnbd refuses requests below the advertised minimum block size.
    T dd if="$TMP/patch" of="$TMP/mnt/disk" bs=4096 seek=3 conv=notrunc,fsync status=none || fail "dd to nbdfuse"
    T fusermount3 -u "$TMP/mnt"
    wait $FUSE_PID || fail "nbdfuse exit"
    stop_server TERM
    dd if="$TMP/patch" of="$TMP/model" bs=4096 seek=3 conv=notrunc status=none
    cmp "$TMP/model" <(decrypt -) || fail "nbdfuse write not in the image"
else
    echo "SKIP nbdfuse: no /dev/fuse, nbdfuse or fusermount3" >&2
fi

# --- read-only; plain serve on loopback TCP; refusals -------------------
start_server crypt serve --table "$TABLE" --socket "$SOCK" --read-only "$TMP/enc"
T nbdinfo --json "$URI" | grep_q '"is_read_only": true' || fail "read-only not advertised"
T qemu-io -f raw -c "write 0 512" "$URI" >"$TMP/qemu-io.out" 2>&1 || true
grep -qi "permitted\|read-only\|permission denied" "$TMP/qemu-io.out" || fail "write to a read-only export: $(cat "$TMP/qemu-io.out")"
stop_server INT
cmp "$TMP/model" <(decrypt -) || fail "read-only export changed the image"

PORT=$((20000 + RANDOM % 20000))
start_server serve --port $PORT --export-name disk "$TMP/plain"
T nbdinfo --json "nbd://127.0.0.1:$PORT/disk" | grep_q '"export-size": 8388608' || fail "TCP nbdinfo"
T nbdcopy "nbd://127.0.0.1:$PORT/disk" "$TMP/out2"
cmp "$TMP/plain" "$TMP/out2" || fail "plain serve over TCP differs"
T nbdinfo --list "nbd://127.0.0.1:$PORT" | grep_q 'export="disk"' || fail "nbdinfo --list"
stop_server TERM

# --- TRIM only when the table allows discards: a hole in the ciphertext ---
cp "$TMP/enc" "$TMP/enc.trim"
start_server crypt serve --table "$TABLE 1 allow_discards" --socket "$SOCK" "$TMP/enc.trim"
T nbdinfo --json "$URI" | grep_q '"can_trim": true' || fail "allow_discards: TRIM not offered"
T qemu-io -f raw -c "discard 1M 1M" "$URI" >"$TMP/qemu-io.out" 2>&1 || fail "discard: $(cat "$TMP/qemu-io.out")"
stop_server TERM
cmp <(dd if="$TMP/enc.trim" bs=1M skip=1 count=1 status=none) <(head -c 1M /dev/zero) ||
    fail "TRIM did not reach the ciphertext"
cmp <(dd if="$TMP/enc.trim" bs=1M count=1 status=none) <(dd if="$TMP/enc" bs=1M count=1 status=none) ||
    fail "TRIM changed what it was not asked to"

# --- verity serve: verified reads, EIO for a flipped block only -----------
"$BLKCRYPT" verity format "$TMP/plain" "$TMP/vhash" --root-hash-file "$TMP/root" >/dev/null
ROOT=$(cat "$TMP/root")
start_server verity serve --socket "$SOCK" "$TMP/plain" "$TMP/vhash" "$ROOT"
T nbdinfo --json "$URI" | grep_q '"is_read_only": true' || fail "verity view not read-only"
T nbdcopy "$URI" "$TMP/vout"
cmp "$TMP/plain" "$TMP/vout" || fail "verity serve data differs"
stop_server TERM
cp "$TMP/plain" "$TMP/tampered"
printf '\xff' | dd of="$TMP/tampered" bs=1 seek=$((5 * 4096 + 7)) conv=notrunc status=none
start_server verity serve --socket "$SOCK" "$TMP/tampered" "$TMP/vhash" "$ROOT"
T qemu-io -f raw -r -c "read 0 4096" -c "read $((6 * 4096)) 4096" "$URI" >"$TMP/qemu-io.out" 2>&1
! grep -qi "error" "$TMP/qemu-io.out" || fail "verity: untampered blocks unreadable: $(cat "$TMP/qemu-io.out")"
T qemu-io -f raw -r -c "read $((5 * 4096)) 4096" "$URI" >"$TMP/qemu-io.out" 2>&1 || true
grep -qi "Input/output error" "$TMP/qemu-io.out" || fail "verity: tampered block read: $(cat "$TMP/qemu-io.out")"
stop_server TERM
grep -qi "corrupt" "$TMP/log" || fail "corruption not logged: $(tail -3 "$TMP/log")"

# --- memory: 4 connections x 64 requests of 256 KiB stay under 64 MiB ----
truncate -s 1G "$TMP/sparse"
start_server serve --socket "$SOCK" --read-only "$TMP/sparse"
T nbdcopy --connections=4 --requests=64 --request-size=$((256 << 10)) "$URI" null:
hwm=$(awk '/VmHWM/ {print $2}' /proc/$SERVER_PID/status)
# A sanitizer's shadow memory and quarantine are not the server's.
if ldd "$BLKCRYPT" | grep_q -E 'libasan|libtsan'; then
    echo "SKIP memory bound under a sanitizer (peak ${hwm} KiB)" >&2
else
    (( hwm < 64 * 1024 )) || fail "peak resident memory ${hwm} KiB with 4 x 64 requests in flight"
fi
stop_server TERM

expect_exit 2 "$BLKCRYPT" serve --port $PORT --bind 0.0.0.0 "$TMP/plain"
grep -q "loopback" "$TMP/stderr" || fail "non-loopback bind: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" serve "$TMP/plain"
expect_exit 2 "$BLKCRYPT" crypt encrypt --table "$TABLE" --socket "$SOCK" "$TMP/plain" "$TMP/x"
touch "$TMP/exists"
expect_exit 1 "$BLKCRYPT" serve --socket "$TMP/exists" "$TMP/plain"
echo "nbd: ok"
