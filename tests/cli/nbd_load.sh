#!/usr/bin/env bash
# A load test on loopback, bounded in count and time: 4 connections (two on
# the Unix socket, two on loopback TCP) x 64 requests in flight, thousands of
# unaligned random reads, writes and flushes through crypt serve, checked
# against a model (tests/cli/nbd_load.py); then the image decrypts to the
# model (nothing lost) and peak resident memory stayed under 64 MiB.
# LOAD_OPS (requests per connection, default 2500) makes it longer.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nbd_lib.sh"

random_file "$TMP/model" $((16 << 20))
KEY=$(head -c 64 /dev/urandom | xxd -p -c 64)
TABLE="aes-xts-plain64 $KEY 0"
"$BLKCRYPT" crypt encrypt --table "$TABLE" "$TMP/model" "$TMP/enc"
start_server crypt serve --table "$TABLE" --socket "$SOCK" --port 0 --threads 2 "$TMP/enc"
PORT=$(sed -n 's/.* and 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$TMP/log" | tail -1)
[[ -n $PORT ]] || fail "no TCP port in the log: $(cat "$TMP/log")"
rss() { awk '/VmRSS/ {print $2}' /proc/$SERVER_PID/status; }
before=$(rss)
start=$SECONDS
timeout 60 python3 "$(dirname "$0")/nbd_load.py" "$TMP/model" "${LOAD_OPS:-2500}" 64 \
    "$SOCK" "127.0.0.1:$PORT" "$SOCK" "127.0.0.1:$PORT" >"$TMP/load.out" 2>&1 || fail "load: $(cat "$TMP/load.out")"
cat "$TMP/load.out"
echo "load: $((SECONDS - start)) s"
hwm=$(awk '/VmHWM/ {print $2}' /proc/$SERVER_PID/status)
after=$(rss)
kill -0 $SERVER_PID || fail "the server died under load"
T qemu-img compare -f raw -F raw "$URI" "$TMP/model" >/dev/null || fail "after the load the view differs from the model"
stop_server TERM
conns=$(grep -c "connection .*; disconnect" "$TMP/log" || true)
(( conns >= 5 )) || fail "$conns connection log lines, want one per connection: $(cat "$TMP/log")"
"$BLKCRYPT" crypt decrypt --table "$TABLE" "$TMP/enc" "$TMP/dec"
cmp "$TMP/model" "$TMP/dec" || fail "the image does not decrypt to the model after the load"
echo "server memory: ${before} KiB before, ${after} KiB after, peak ${hwm} KiB"
if ldd "$BLKCRYPT" | grep_q -E 'libasan|libtsan'; then
    echo "SKIP memory bound under a sanitizer" >&2
else
    (( hwm < 64 * 1024 )) || fail "peak resident memory ${hwm} KiB under load"
fi
echo "nbd_load: ok"
