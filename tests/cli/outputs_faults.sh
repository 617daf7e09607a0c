#!/usr/bin/env bash
# The output policy (docs/outputs.md) at the moments no timing hits reliably,
# through tests/cli/fault_shim.cpp: a signal right after a temporary file is
# created, a crash between the renames of `verity format --root-hash-file`,
# a failed directory sync, and a signal during it. Then signals at random
# small delays into `crypt encrypt`.
source "$(dirname "$0")/lib.sh"
SHIM=${2:?usage: $0 path/to/blkcrypt path/to/fault_shim.so}
# In a sanitizer build the runtime must come first in the preload list (ASan
# refuses to start otherwise), so it goes ahead of the shim.
san=$(ldd "$BLKCRYPT" | awk '/lib[at]san\.so/ { print $3; exit }')
[[ -z $san ]] || SHIM="$san $SHIM"
no_temp_files() {  # DIR: no temporary file of ours left
    [[ -z $(find "$1" -maxdepth 1 -name '.*.blkcrypt-tmp.*' -print -quit) ]] ||
        fail "${2:-}: temporary file left: $(find "$1" -maxdepth 1 -name '.*.blkcrypt-tmp.*')"
}
enc() { "$BLKCRYPT" crypt encrypt -c aes-xts-plain64 --key-file "$TMP/key" "$@"; }
random_file "$TMP/key" 64
random_file "$TMP/img" $((1 << 20))

# --- a signal as the temporary file appears: it is removed, the exit is 128+sig
for sig in HUP TERM; do
    num=$(kill -l $sig)
    rc=0
    LD_PRELOAD=$SHIM BLKCRYPT_SHIM_SIGNAL_ON_TEMP=$num enc "$TMP/img" "$TMP/o.img" 2>"$TMP/err" || rc=$?
    [[ $rc == $((128 + num)) ]] || fail "SIG$sig on the temporary file: exit $rc ($(cat "$TMP/err"))"
    grep -qx "blkcrypt: interrupted by SIG$sig" "$TMP/err" || fail "SIG$sig: $(cat "$TMP/err")"
    no_temp_files "$TMP" "SIG$sig at creation"
    [[ ! -e $TMP/o.img ]] || fail "SIG$sig at creation left OUT"
done

# --- a failed directory sync after the rename is reported (the output is in place)
rc=0
LD_PRELOAD=$SHIM BLKCRYPT_SHIM_DIR_FSYNC_ERRNO=5 enc "$TMP/img" "$TMP/o.img" 2>"$TMP/err" || rc=$?
[[ $rc == 1 ]] || fail "failed directory sync: exit $rc, want 1 ($(cat "$TMP/err"))"
grep -q "o.img is in place, but syncing its directory .* failed (Input/output error)" "$TMP/err" ||
    fail "failed directory sync: $(cat "$TMP/err")"
[[ -s $TMP/o.img ]] || fail "failed directory sync: OUT is not in place"
no_temp_files "$TMP" "failed directory sync"
rm -f "$TMP/o.img"

# --- verity format --root-hash-file: HASH and the root-hash file together
random_file "$TMP/data" $((64 * 4096))
"$BLKCRYPT" verity format "$TMP/data" "$TMP/hash" --root-hash-file "$TMP/root" >/dev/null
cp "$TMP/hash" "$TMP/hash.old"
cp "$TMP/root" "$TMP/root.old"
# A signal during the directory sync after the first rename: held until both
# are renamed; the run then completes with exit 0 and both new outputs.
rc=0
LD_PRELOAD=$SHIM BLKCRYPT_SHIM_DIR_FSYNC_SIGNAL=15 "$BLKCRYPT" verity format "$TMP/data" "$TMP/hash" \
    --root-hash-file "$TMP/root" >"$TMP/out" 2>"$TMP/err" || rc=$?
[[ $rc == 0 ]] || fail "SIGTERM during the directory sync: exit $rc ($(cat "$TMP/err"))"
grep -q "SIGTERM arrived after the outputs were renamed into place" "$TMP/err" || fail "no note: $(cat "$TMP/err")"
grep -q "^Root hash:[[:space:]]*$(cat "$TMP/root")\$" "$TMP/out" || fail "the summary and the root-hash file differ"
"$BLKCRYPT" verity verify "$TMP/data" "$TMP/hash" --root-hash-file "$TMP/root" ||
    fail "after SIGTERM during the sync, HASH and the root-hash file disagree"
cmp -s "$TMP/hash" "$TMP/hash.old" && fail "after SIGTERM during the sync, HASH is the old one"
no_temp_files "$TMP" "SIGTERM during the directory sync"
# A crash (SIGKILL) between the renames: the root-hash file is renamed first,
# so the new root hash is on disk, and the complete new tree waits in HASH's
# temporary file, which the next run names.
cp "$TMP/hash" "$TMP/hash.old"
cp "$TMP/root" "$TMP/root.old"
rc=0
LD_PRELOAD=$SHIM BLKCRYPT_SHIM_KILL_AFTER_RENAME=1 "$BLKCRYPT" verity format "$TMP/data" "$TMP/hash" \
    --root-hash-file "$TMP/root" >/dev/null 2>"$TMP/err" || rc=$?
[[ $rc == 137 ]] || fail "crash between the renames: exit $rc ($(cat "$TMP/err"))"
cmp -s "$TMP/root" "$TMP/root.old" && fail "crash between the renames: the new root hash is printed nowhere"
cmp -s "$TMP/hash" "$TMP/hash.old" || fail "crash between the renames: HASH changed before the root-hash file"
tree=$(find "$TMP" -maxdepth 1 -name '.hash.blkcrypt-tmp.*' -print -quit)
[[ -n $tree ]] || fail "crash between the renames: the new tree is gone"
"$BLKCRYPT" verity verify "$TMP/data" "$tree" --root-hash-file "$TMP/root" ||
    fail "crash between the renames: the new tree and the new root hash disagree"
"$BLKCRYPT" verity format "$TMP/data" "$TMP/hash" --root-hash-file "$TMP/root" >/dev/null 2>"$TMP/err"
grep -q "warning: $tree is left from an interrupted run" "$TMP/err" || fail "the next run does not name it: $(cat "$TMP/err")"
rm -f "$tree"
# Without the shim, both outputs replaced in one run agree.
"$BLKCRYPT" verity verify "$TMP/data" "$TMP/hash" --root-hash-file "$TMP/root" || fail "plain rerun"

# --- a signal that reaches a backgrounded command before it execs runs the
# script's EXIT trap in that child (bash); lib.sh's trap then leaves $TMP alone.
for i in $(seq 20); do
    "$BLKCRYPT" --version >/dev/null 2>&1 &
    kill -HUP $! 2>/dev/null || true
    wait $! 2>/dev/null || true
    [[ -d $TMP ]] || fail "run $i: a SIGHUP to a backgrounded command removed \$TMP (lib.sh's EXIT trap ran in the child)"
done

# --- SIGHUP at random small delays into crypt encrypt: never a leftover
mkdir "$TMP/loop"
enc "$TMP/img" "$TMP/ref.img"
exe=$(readlink -f "$BLKCRYPT")
for i in $(seq 40); do
    delay=$(printf '0.%03d' $((RANDOM % 120)))
    # Not through enc: a backgrounded function is a subshell, and the signal would end it, not blkcrypt.
    "$BLKCRYPT" crypt encrypt -c aes-xts-plain64 --key-file "$TMP/key" "$TMP/img" "$TMP/loop/o.img" 2>"$TMP/err" &
    pid=$!
    # The delay counts from blkcrypt's start, not from bash's fork (a loaded machine can hold the child there).
    while [[ $(readlink /proc/$pid/exe 2>/dev/null) != "$exe" ]] && kill -0 $pid 2>/dev/null; do :; done
    sleep "$delay"
    kill -HUP $pid 2>/dev/null || true
    rc=0
    wait $pid || rc=$?
    # Done (0, the signal came after the commit) or interrupted (129, as docs/exit-status.md says).
    [[ $rc == 0 || $rc == 129 ]] || fail "run $i (SIGHUP after ${delay}s): exit $rc ($(cat "$TMP/err"))"
    no_temp_files "$TMP/loop" "run $i (SIGHUP after ${delay}s)"
    # A signal after the commit may still end the run: OUT is then whole.
    if [[ -e $TMP/loop/o.img ]]; then cmp -s "$TMP/loop/o.img" "$TMP/ref.img" || fail "run $i: a partial OUT"; fi
    rm -f "$TMP/loop/o.img"
done
echo "outputs faults: ok"
