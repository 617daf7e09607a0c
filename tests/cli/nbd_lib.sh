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
# start_server ARGS...: blkcrypt ARGS --socket SOCK --pid-file, waits until it listens.
start_server() {
    rm -f "$TMP/pid"
    "$BLKCRYPT" "$@" --pid-file "$TMP/pid" 2>>"$TMP/log" &
    SERVER_PID=$!
    for _ in $(seq 100); do
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
