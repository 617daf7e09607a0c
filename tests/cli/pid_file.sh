#!/bin/bash
# serve --pid-file is an output (docs/outputs.md, docs/nbd.md): refused when
# it names an input (IMAGE, key file, TLS credentials, the socket), a symlink
# or anything but a regular file; created whole, 0644 whatever the umask; and
# removed at exit only while it is still the file the server wrote. Also the
# serve messages: --socket '', an image smaller than one block, --bind ::1.
source "$(dirname "$0")/lib.sh"

LOOP=
SERVER_PID=
cleanup() {
    [[ -n $SERVER_PID ]] && kill -9 "$SERVER_PID" 2>/dev/null
    [[ -n $LOOP ]] && losetup -d "$LOOP" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

T=$TMP
SOCK=$T/s.sock
random_file "$T/img" $((1 << 20))
cp "$T/img" "$T/img.orig"
random_file "$T/key" 64
cp "$T/key" "$T/key.orig"

# refused PATTERN ARGS...: blkcrypt ARGS exits 2 before it listens, with one
# error line matching PATTERN (a server that starts would run into the timeout).
refused() {
    local pattern=$1
    shift
    expect_exit 2 timeout 30 "$BLKCRYPT" "$@"
    expect_one_error_line
    grep -q -- "$pattern" "$T/stderr" || fail "$*: message '$(cat "$T/stderr")', want '$pattern'"
    [[ ! -e $SOCK ]] || fail "$*: the socket was left behind"
    [[ -z $(find "$T" -maxdepth 1 -name '.*.blkcrypt-tmp.*' -print -quit) ]] || fail "$*: a temporary file was left"
}
unchanged() {  # FILE ORIGINAL
    cmp -s "$1" "$2" || fail "$1 was changed"
}

# --- the pid file is never an input -----------------------------------------
refused "the pid file '$T/img' is IMAGE" serve --socket "$SOCK" --pid-file "$T/img" "$T/img"
unchanged "$T/img" "$T/img.orig"
ln "$T/img" "$T/hardlink"
refused "the pid file '$T/hardlink' is IMAGE" serve --socket "$SOCK" --pid-file "$T/hardlink" "$T/img"
unchanged "$T/img" "$T/img.orig"
refused "the pid file '$T/key' is --key-file" crypt serve -c aes-xts-plain64 --key-file "$T/key" \
    --socket "$SOCK" --pid-file "$T/key" "$T/img"
unchanged "$T/key" "$T/key.orig"
refused "is --key-file" crypt serve -c aes-xts-plain64 --key-file "$T/key" \
    --socket "$SOCK" --pid-file "$T/./key" "$T/img"
unchanged "$T/key" "$T/key.orig"
printf 'pass' >"$T/pass"
truncate -s 20M "$T/luks.img"
"$BLKCRYPT" luks format -q --key-file "$T/pass" --pbkdf pbkdf2 --pbkdf-force-iterations 1000 "$T/luks.img" ||
    fail "luks format: exit $?"
refused "the pid file '$T/pass' is --key-file" luks serve --key-file "$T/pass" --socket "$SOCK" \
    --pid-file "$T/pass" "$T/luks.img"
[[ $(cat "$T/pass") == pass ]] || fail "luks serve changed the key file"
# The socket: one message naming both options (not "the pid file is a socket").
refused "--pid-file and --socket both name '$SOCK'" serve --socket "$SOCK" --pid-file "$SOCK" "$T/img"
refused "--pid-file and --socket both name" serve --socket "$SOCK" --pid-file "$T/../$(basename "$T")/s.sock" "$T/img"
# TLS credentials (only in a build with TLS).
printf 'user:%s\n' 00112233445566778899aabbccddeeff >"$T/psk"
chmod 600 "$T/psk"
cp "$T/psk" "$T/psk.orig"
expect_exit 2 timeout 30 "$BLKCRYPT" serve --socket "$SOCK" --tls-psk "$T/psk" --pid-file "$T/psk" "$T/img"
if grep -q "built without TLS" "$T/stderr"; then
    echo "SKIP: --pid-file against --tls-psk (built without TLS)"
else
    grep -q "the pid file '$T/psk' is --tls-psk" "$T/stderr" || fail "--tls-psk as pid file: $(cat "$T/stderr")"
fi
unchanged "$T/psk" "$T/psk.orig"

# --- never a symlink's target, never a non-regular file ----------------------
ln -s img "$T/plink"
refused "the pid file '$T/plink' is a symlink" serve --socket "$SOCK" --pid-file "$T/plink" "$T/img"
[[ -L $T/plink ]] || fail "the symlink was removed"
unchanged "$T/img" "$T/img.orig"
ln -s nowhere "$T/dangling"
refused "the pid file '$T/dangling' is a symlink" serve --socket "$SOCK" --pid-file "$T/dangling" "$T/img"
[[ -L $T/dangling && ! -e $T/nowhere ]] || fail "a dangling symlink was followed"
mkfifo "$T/fifo"
refused "the pid file '$T/fifo' is a FIFO" serve --socket "$SOCK" --pid-file "$T/fifo" "$T/img"
[[ -p $T/fifo ]] || fail "the FIFO was replaced"
mkdir "$T/dir"
refused "the pid file '$T/dir' is a directory" serve --socket "$SOCK" --pid-file "$T/dir" "$T/img"
refused "the pid file cannot be stdout" serve --socket "$SOCK" --pid-file - "$T/img"
refused "--pid-file: empty file name" serve --socket "$SOCK" --pid-file '' "$T/img"
if [[ $(id -u) == 0 ]]; then
    mknod "$T/null" c 1 3
    refused "the pid file '$T/null' is a character device" serve --socket "$SOCK" --pid-file "$T/null" "$T/img"
    [[ -c $T/null ]] || fail "the character device node was replaced"
    if [[ -c /dev/loop-control ]] && truncate -s 1M "$T/backing" && LOOP=$(losetup -f --show "$T/backing" 2>/dev/null); then
        read -r maj min < <(stat -c '%t %T' "$LOOP")
        mknod "$T/blk" b $((16#$maj)) $((16#$min))
        random_file "$T/backing.orig" $((1 << 20))
        dd if="$T/backing.orig" of="$T/blk" bs=1M conv=fsync status=none
        refused "the pid file '$T/blk' is a block device" serve --socket "$SOCK" --pid-file "$T/blk" "$T/img"
        [[ -b $T/blk ]] || fail "the block device node was removed"
        cmp -s "$T/blk" "$T/backing.orig" || fail "the block device was written"
    else
        echo "SKIP: --pid-file on a block device (no loop device)"
    fi
else
    echo "SKIP: --pid-file on device nodes (needs root for mknod)"
fi

# --- a good pid file: whole, 0644, removed at exit ---------------------------
# start PIDFILE ARGS...: a server on $SOCK; waits for the pid file.
start() {
    local pidfile=$1
    shift
    "$BLKCRYPT" serve --socket "$SOCK" --pid-file "$pidfile" "$@" 2>>"$T/log" &
    SERVER_PID=$!
    for _ in $(seq 100); do
        [[ $(cat "$pidfile" 2>/dev/null) == "$SERVER_PID" ]] && return 0
        kill -0 $SERVER_PID 2>/dev/null || fail "server died: $(cat "$T/log")"
        sleep 0.1
    done
    fail "server did not start, or the pid file does not hold its pid: $(cat "$pidfile" 2>/dev/null)"
}
stop() {
    local rc=0
    kill -TERM $SERVER_PID
    wait $SERVER_PID || rc=$?
    SERVER_PID=
    [[ $rc == 0 ]] || fail "server exit $rc: $(tail -3 "$T/log")"
}
for mask in 022 000 077; do
    (
        umask $mask
        start "$T/pid" "$T/img"
        mode=$(stat -c %a "$T/pid")
        want=$(printf '%o' $((8#644 & ~8#$mask)))
        [[ $mode == "$want" ]] || fail "umask $mask: pid file mode $mode, want $want"
        stop
    ) || exit 1
    [[ ! -e $T/pid ]] || fail "the pid file is left after exit"
done
# An existing (stale) pid file is replaced, and removed at exit.
echo 99999 >"$T/pid"
start "$T/pid" "$T/img"
stop
[[ ! -e $T/pid ]] || fail "the replaced pid file is left after exit"
# Replaced by someone else while the server runs: that file is not ours to remove.
start "$T/pid" "$T/img"
echo other >"$T/other"
mv "$T/other" "$T/pid"
stop
[[ $(cat "$T/pid" 2>/dev/null) == other ]] || fail "the server removed a pid file it did not write"
rm -f "$T/pid"
unchanged "$T/img" "$T/img.orig"

# --- serve messages ----------------------------------------------------------
refused "^blkcrypt: --socket: empty path$" serve --socket '' "$T/img"
: >"$T/empty"
refused "^blkcrypt: $T/empty: smaller than one block$" serve --socket "$SOCK" "$T/empty"
# --bind ::1: the address in brackets, [::1]:PORT (skipped without IPv6).
: >"$T/log"
"$BLKCRYPT" serve --port 0 --bind ::1 "$T/img" 2>"$T/log" &
SERVER_PID=$!
for _ in $(seq 100); do
    grep -q "serving" "$T/log" && break
    kill -0 $SERVER_PID 2>/dev/null || break
    sleep 0.1
done
if grep -q "serving" "$T/log"; then
    grep -qE 'on \[::1\]:[0-9]+$' "$T/log" || fail "--bind ::1 is printed as: $(cat "$T/log")"
    stop
else
    wait $SERVER_PID 2>/dev/null || true
    echo "SKIP: --bind ::1 (no IPv6 loopback here: $(cat "$T/log"))"
fi
echo PASS
