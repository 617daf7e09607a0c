# What the NBD server tests share (sourced after lib.sh): the socket and its
# URI, the clients they need, starting the server, stopping it, and a
# timeout for clients.
SOCK=${SOCK:-$TMP/s.sock}
URI=${URI:-nbd+unix:///?socket=$SOCK}
# need TOOL...: fails naming the first missing one.
need() {
    for tool in "$@"; do
        command -v "$tool" >/dev/null || fail "$tool is missing (scripts/install-deps.sh installs it)"
    done
}
SERVER_PID=
# A failing check exits the script with the server still running; it holds
# the test's output open, so ctest would wait for its timeout: kill it first.
trap 'if [[ -n $SERVER_PID ]]; then kill -9 $SERVER_PID 2>/dev/null || true; fi; rm -rf "$TMP"' EXIT
# start_server ARGS...: blkcrypt ARGS --pid-file, waits until it listens (up
# to 30 s: an unlock's KDF on a loaded machine). Its stdout is the caller's;
# its stdin the file SERVER_INPUT names (a passphrase to read), else
# /dev/null as for any background command.
start_server() {
    rm -f "$TMP/pid"
    "$BLKCRYPT" "$@" --pid-file "$TMP/pid" 2>>"$TMP/log" <"${SERVER_INPUT:-/dev/null}" &
    SERVER_PID=$!
    for _ in $(seq 300); do
        [[ -s $TMP/pid ]] && return 0
        kill -0 $SERVER_PID 2>/dev/null || fail "server died: $(cat "$TMP/log")"
        sleep 0.1
    done
    fail "server did not start"
}
# stop_server [SIGNAL]: the server must exit 0 on SIGTERM/SIGINT.
stop_server() {
    local rc=0
    kill -"${1:-TERM}" $SERVER_PID
    wait $SERVER_PID || rc=$?
    [[ $rc == 0 ]] || fail "server exit $rc on SIG${1:-TERM}: $(tail -3 "$TMP/log")"
    [[ ! -e $SOCK ]] || fail "socket left behind"
    [[ ! -e $TMP/pid ]] || fail "pid file left behind"
}
T() { timeout 120 "$@"; }
# kill_server: kill -9, as a crash; the socket and pid file stay behind.
kill_server() {
    kill -9 $SERVER_PID
    wait $SERVER_PID 2>/dev/null || true
    rm -f "$SOCK" "$TMP/pid"
}
# qemu_io_script MODEL CMDS SEED COUNT: COUNT unaligned pattern writes for
# qemu-io into CMDS, each followed by a one-byte read checked against the
# model, then a flush; MODEL is updated to what the image then holds.
qemu_io_script() {
    python3 - "$@" <<'PY'
import random, sys
m = bytearray(open(sys.argv[1], "rb").read())
r = random.Random(int(sys.argv[3]))
with open(sys.argv[2], "w") as f:
    for i in range(int(sys.argv[4])):
        n = r.randint(1, 9000); off = r.randint(0, len(m) - n); p = r.randint(1, 255)
        m[off:off + n] = bytes([p]) * n
        f.write("write -P %d %d %d\n" % (p, off, n))
        n = r.randint(1, 9000); off = r.randint(0, len(m) - n)
        f.write("read -P %d %d 1\n" % (m[off], off))  # one byte, checked against the model
    f.write("flush\n")
open(sys.argv[1], "wb").write(m)
PY
}
CLIENT="$(dirname "${BASH_SOURCE[0]}")/nbd_client.py"
# Every NBD test uses these clients; a test that serves only to nbdcopy (and
# skips without it) names its own in NBD_CLIENTS.
# shellcheck disable=SC2086
need ${NBD_CLIENTS:-nbdinfo nbdcopy qemu-img qemu-io python3}
