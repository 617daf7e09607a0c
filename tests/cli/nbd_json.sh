#!/usr/bin/env bash
# serve --json: the events on stdout (docs/json.md), one object per line,
# parsed with python3: listening (socket, TCP port), connection open and
# close with peer and export, request errors (EIO for a flipped verity
# block), shutdown and stopped.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nbd_lib.sh"
need nbdinfo qemu-io python3
# json_server ARGS...: blkcrypt ARGS --json with stdout to $TMP/events; waits
# for the "listening" event itself (no pid file).
json_server() {
    : >"$TMP/events"
    "$BLKCRYPT" "$@" --json >"$TMP/events" 2>>"$TMP/log" &
    SERVER_PID=$!
    for _ in $(seq 100); do
        grep_q '"event": "listening"' <"$TMP/events" && return 0
        kill -0 $SERVER_PID 2>/dev/null || fail "server died: $(cat "$TMP/log")"
        sleep 0.1
    done
    fail "no listening event: $(cat "$TMP/events")"
}
json_stop() {
    local rc=0
    kill -TERM $SERVER_PID
    wait $SERVER_PID || rc=$?
    [[ $rc == 0 ]] || fail "server exit $rc: $(tail -3 "$TMP/log")"
}
# check PYTHON: runs the python code with `ev`, the list of events, bound.
check() {
    python3 -c '
import json, sys
lines = open(sys.argv[1]).read().splitlines()
ev = [json.loads(l) for l in lines]   # every line one object
assert all(isinstance(e, dict) and "event" in e for e in ev), lines
by = lambda name: [e for e in ev if e["event"] == name]
exec(sys.argv[2])
' "$TMP/events" "$1" || fail "events: $(cat "$TMP/events") server log: $(cat "$TMP/log") qemu-io: $(cat "$TMP/qio" 2>/dev/null)"
}

random_file "$TMP/plain" $((1 << 20))
"$BLKCRYPT" verity format "$TMP/plain" "$TMP/vhash" --root-hash-file "$TMP/root" >/dev/null
cp "$TMP/plain" "$TMP/tampered"
printf '\xff' | dd of="$TMP/tampered" bs=1 seek=$((5 * 4096 + 7)) conv=notrunc status=none

# --- verity serve on a Unix socket: a bad block is a request_error ---------
json_server verity serve --socket "$SOCK" --export-name v "$TMP/tampered" "$TMP/vhash" "$(cat "$TMP/root")"
T qemu-io -f raw -r -c "read 0 4096" -c "read $((5 * 4096)) 4096" "nbd+unix:///v?socket=$SOCK" >"$TMP/qio" 2>&1 || true
json_stop
check '
l = by("listening")
assert len(l) == 1 and ev[0] is l[0], "listening comes first"
l = l[0]
assert l["socket"] == sys.argv[1].rsplit("/", 1)[0] + "/s.sock" and "port" not in l, l
assert l["size"] == 1 << 20 and l["read_only"] is True and l["export"] == "v" and l["tls"] == "off", l
assert isinstance(l["pid"], int) and l["what"].startswith("verity"), l
o, c = by("connection_open"), by("connection_close")
assert len(o) == 1 and len(c) == 1 and o[0]["connection"] == c[0]["connection"] == 1, (o, c)
assert o[0]["peer"] == "unix" and c[0]["peer"] == "unix", (o, c)
assert ev.index(o[0]) < ev.index(c[0])
assert c[0]["export"] == "v" and c[0]["transmission"] and c[0]["errors"] >= 1 and c[0]["end"] == "disconnect", c
errs = by("request_error")
assert errs and all(e["command"] == "read" and e["error"] == "EIO" and e["connection"] == 1 for e in errs), errs
assert all(5 * 4096 <= e["offset"] < 6 * 4096 for e in errs), errs   # the flipped block only
assert c[0]["errors"] == len(errs), (c, errs)
# The signal may reach the server before it has seen the client leave, so
# connection_close can come before or after shutdown; stopped comes last.
s = by("shutdown")
assert len(s) == 1 and s[0]["signal"] == "SIGTERM" and ev.index(s[0]) > ev.index(o[0]), ev
assert ev[-1]["event"] == "stopped" and len(by("stopped")) == 1, ev
assert ev[-1]["flushed"] is True
'

# --- plain serve over TCP: the port, a TCP peer, errors of other kinds -----
json_server serve --port 0 --read-only "$TMP/plain"
port=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["port"])' "$TMP/events")
T nbdinfo "nbd://127.0.0.1:$port" >/dev/null
T nbdinfo "nbd://127.0.0.1:$port" >/dev/null
json_stop
check '
l = by("listening")[0]
assert l["address"] == "127.0.0.1" and l["port"] > 0 and "socket" not in l and l["read_only"] is True, l
o = by("connection_open")
assert len(o) >= 2 and all(e["peer"].startswith("127.0.0.1:") for e in o), o
assert len(o) == len(by("connection_close")) == len({e["peer"] for e in o}), o
assert not by("request_error"), ev
'

# --- the raw client: oversized, out-of-range and unknown requests ----------
json_server serve --socket "$SOCK" "$TMP/plain"
T python3 "$(dirname "$0")/nbd_client.py" "$SOCK" oversize || fail "nbd_client.py oversize"
json_stop
check '
got = sorted((e["command"], e["offset"], e["length"], e["error"]) for e in by("request_error"))
size = 1 << 20
want = sorted([("read", 0, 64 << 20, "EINVAL"), ("write", 0, 5 << 20, "EINVAL"), ("read", size - 100, 200, "EINVAL"),
               ("read", 2**64 - 512, 1024, "EINVAL"), ("write", size, 512, "ENOSPC"), ("command 77", 0, 0, "EINVAL")])
assert got == want, (got, want)
c = by("connection_close")[0]
assert c["errors"] == 6 and c["end"] == "protocol error: bad request magic", c
'

# --- crypt serve takes --json too; without it stdout stays empty ------------
KEY=$(head -c 64 /dev/urandom | xxd -p -c 64)
json_server crypt serve --table "aes-xts-plain64 $KEY 0" --socket "$SOCK" "$TMP/plain"
json_stop
check 'assert [e["event"] for e in ev] == ["listening", "shutdown", "stopped"], ev'
start_server serve --socket "$SOCK" "$TMP/plain" >"$TMP/quiet"
T nbdinfo "$URI" >/dev/null
json_stop
[[ ! -s $TMP/quiet ]] || fail "events without --json: $(cat "$TMP/quiet")"
echo "nbd_json: ok"
