#!/usr/bin/env bash
# The NBD server's timeouts and its socket path (docs/nbd.md): connections idle
# in the handshake are closed at --handshake-timeout, so 64 of them no longer
# lock nbdinfo out; a client that never reads its replies is dropped at
# --send-timeout, and a SIGTERM does not wait longer for it; a stale socket
# left by kill -9 is reused, and nothing else at the path is removed. Short
# timeouts keep it fast; the bounds checked are generous.
source "$(dirname "$0")/lib.sh"
NBD_CLIENTS="nbdinfo python3"
source "$(dirname "$0")/nbd_lib.sh"
random_file "$TMP/img" $((16 << 20))
size_is_16m() { [[ $(T nbdinfo --size "$URI" 2>/dev/null) == $((16 << 20)) ]]; }
# log_has PATTERN: the server logs a connection's end after closing it, so the
# client can finish first; give the line up to 5 s to arrive.
log_has() {
    for _ in $(seq 50); do grep -q "$1" "$TMP/log" && return 0; sleep 0.1; done
    return 1
}

# --- 64 silent connections: closed at the handshake timeout, then nbdinfo is served
start_server serve --socket "$SOCK" --handshake-timeout 1 --send-timeout 2 "$TMP/img"
python3 "$CLIENT" "$SOCK" idle 64 30 >"$TMP/idle.out" 2>&1 &
idle_pid=$!
for _ in $(seq 300); do grep -q held "$TMP/idle.out" && break; sleep 0.1; done
grep -q held "$TMP/idle.out" || fail "the idle client did not connect: $(cat "$TMP/idle.out")"
served=0
for _ in $(seq 60); do
    if size_is_16m; then served=1; break; fi
    sleep 0.5
done
((served)) || fail "nbdinfo was never served while 64 connections sat in the handshake"
wait $idle_pid || fail "the server did not close the idle connections: $(cat "$TMP/idle.out")"
log_has "no handshake within 1000 ms" || fail "no handshake timeout in the log: $(tail -3 "$TMP/log")"

# --- a client that never reads its replies: dropped at the send timeout
T python3 "$CLIENT" "$SOCK" stall 8 20 >"$TMP/stall.out" 2>&1 ||
    fail "a stalled reader was not dropped within 20 s (--send-timeout 2): $(cat "$TMP/stall.out")"
log_has "a reply could not be sent" || fail "stalled reader: $(tail -3 "$TMP/log")"
size_is_16m || fail "nbdinfo after the stalled reader"
# ... and a SIGTERM while one stalls waits for it no longer than that.
python3 "$CLIENT" "$SOCK" stall 8 60 >"$TMP/stall2.out" 2>&1 &
stall_pid=$!
for _ in $(seq 300); do grep -q sent "$TMP/stall2.out" && break; sleep 0.1; done
start=$SECONDS
stop_server TERM
((SECONDS - start <= 15)) || fail "SIGTERM waited $((SECONDS - start)) s for a stalled reader (--send-timeout 2)"
wait $stall_pid || true

# --- a stale socket after kill -9 is removed and the path reused
start_server serve --socket "$SOCK" "$TMP/img"
kill -9 $SERVER_PID
wait $SERVER_PID 2>/dev/null || true
[[ -S $SOCK ]] || fail "kill -9 left no socket to test with"
rm -f "$TMP/pid"
start_server serve --socket "$SOCK" "$TMP/img"
size_is_16m || fail "nbdinfo on the reused socket path"
# A live server's socket is not touched: the second server is refused, the first serves on.
expect_exit 1 "$BLKCRYPT" serve --socket "$SOCK" "$TMP/img"
grep -q "Address already in use (a server listens on it)" "$TMP/stderr" || fail "live socket: $(cat "$TMP/stderr")"
size_is_16m || fail "the first server stopped serving"
stop_server TERM
# Anything but a socket is left alone: a regular file, a symlink to a stale socket.
echo keep >"$TMP/file"
expect_exit 1 "$BLKCRYPT" serve --socket "$TMP/file" "$TMP/img"
grep -q "Address already in use (the path is not a socket)" "$TMP/stderr" || fail "regular file: $(cat "$TMP/stderr")"
[[ $(cat "$TMP/file") == keep ]] || fail "the regular file at --socket was changed"
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$TMP/stale"
ln -s "$TMP/stale" "$TMP/link"
expect_exit 1 "$BLKCRYPT" serve --socket "$TMP/link" "$TMP/img"
[[ -L $TMP/link && -S $TMP/stale ]] || fail "a symlink at --socket, or its target, was removed"
echo "nbd timeouts: ok"
