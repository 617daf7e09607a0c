#!/bin/bash
# OUT '-' (stdout) under the output policy (docs/outputs.md), for every
# command with an OUT: refused with --json or --progress-json (both would go
# to stdout), and refused when stdout is redirected onto an input (1<>IMAGE,
# >>KEY), as a named OUT is; stdin is compared with a named OUT the same way.
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)

LOOP=
cleanup() {
    [[ -n $LOOP ]] && losetup -d "$LOOP" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

T=$TMP
random_file "$T/key" 64
random_file "$T/img" $((1 << 20))
C=(-c aes-xts-plain64 --key-file "$T/key")
"$BLKCRYPT" crypt encrypt "${C[@]}" "$T/img" "$T/enc" || fail "crypt encrypt: exit $?"
printf 'pass' >"$T/pass"
truncate -s 20M "$T/luks.img"
"$BLKCRYPT" luks format -q --key-file "$T/pass" --pbkdf pbkdf2 --pbkdf-force-iterations 1000 "$T/luks.img" ||
    fail "luks format: exit $?"
KA=$SRC/tests/loopaes/kernel/keys/k65.txt
for f in key img enc pass luks.img; do cp "$T/$f" "$T/$f.orig"; done
unchanged() {
    for f in key img enc pass luks.img; do cmp -s "$T/$f" "$T/$f.orig" || fail "$*: $f was changed"; done
}

# --- --json / --progress-json with OUT '-': exit 2, nothing on stdout -------
# stdout_taken OPTION ARGS...: blkcrypt ARGS exits 2 naming OPTION, and writes nothing.
stdout_taken() {
    local option=$1
    shift
    expect_exit 2 "$BLKCRYPT" "$@"
    expect_one_error_line
    grep -q -- "OUT '-' and $option both write to stdout" "$T/stderr" ||
        fail "$*: message '$(cat "$T/stderr")'"
    [[ ! -s $T/stdout ]] || fail "$*: $(wc -c <"$T/stdout") bytes on stdout"
}
stdout_taken --json crypt decrypt --json "${C[@]}" "$T/enc" -
stdout_taken --progress-json crypt decrypt --progress-json "${C[@]}" "$T/enc" -
stdout_taken --progress-json crypt encrypt --progress-json "${C[@]}" - - <"$T/img"
stdout_taken --json crypt encrypt --json "${C[@]}" "$T/img" -
stdout_taken --progress-json luks decrypt --progress-json --key-file "$T/pass" "$T/luks.img" -
stdout_taken --progress-json loopaes decrypt --progress-json --key-file "$KA" "$T/enc" -
stdout_taken --progress-json loopaes encrypt --progress-json --key-file "$KA" "$T/img" -
# Refused before the container is read or a passphrase asked for (so any IMAGE will do).
stdout_taken --progress-json tcrypt decrypt --progress-json "$T/img" - </dev/null
stdout_taken --progress-json fvault2 decrypt --progress-json "$T/img" - </dev/null
unchanged "--json with OUT -"
# Without them, OUT '-' still works: the plaintext and nothing else.
"$BLKCRYPT" crypt decrypt "${C[@]}" "$T/enc" - >"$T/out" || fail "crypt decrypt to stdout: exit $?"
cmp -s "$T/out" "$T/img" || fail "crypt decrypt to stdout differs"
"$BLKCRYPT" crypt decrypt --progress-json "${C[@]}" "$T/enc" "$T/out2" >"$T/progress" ||
    fail "crypt decrypt --progress-json to a file: exit $?"
grep -q '"device_bytes"' "$T/progress" || fail "no progress JSON on stdout with a named OUT"

# --- stdout onto an input: refused like the same file by name ---------------
# onto ROLE ARGS... (stdout already redirected by the caller).
onto() {
    local role=$1 rc=0
    shift
    "$BLKCRYPT" "$@" 2>"$T/stderr" || rc=$?
    [[ $rc == 2 ]] || fail "exit $rc, want 2: $* (stderr: $(cat "$T/stderr"))"
    grep -q "OUT '-' is $role; refusing to write an output over an input" "$T/stderr" ||
        fail "$*: message '$(cat "$T/stderr")', want OUT '-' is $role"
}
onto IMAGE luks decrypt --key-file "$T/pass" "$T/luks.img" - 1<>"$T/luks.img"
onto "the key file" crypt decrypt "${C[@]}" "$T/enc" - >>"$T/key"
onto IN crypt encrypt "${C[@]}" "$T/img" - 1<>"$T/img"
onto IN crypt decrypt "${C[@]}" "$T/enc" - 1<>"$T/enc"
onto IN crypt encrypt "${C[@]}" - - <"$T/img" 1<>"$T/img"
unchanged "stdout onto an input"
# A named OUT that is stdin (IN '-').
expect_exit 2 "$BLKCRYPT" crypt encrypt "${C[@]}" - "$T/img" <"$T/img"
grep -q "OUT '$T/img' is IN" "$T/stderr" || fail "named OUT = stdin: $(cat "$T/stderr")"
unchanged "named OUT = stdin"

# Two nodes of one block device (same st_rdev, different inodes).
if [[ $(id -u) == 0 && -c /dev/loop-control ]] && truncate -s 1M "$T/backing" &&
    LOOP=$(losetup -f --show "$T/backing" 2>/dev/null); then
    read -r maj min < <(stat -c '%t %T' "$LOOP")
    mknod "$T/blk" b $((16#$maj)) $((16#$min))
    cp "$T/enc" "$T/blk"
    onto IN crypt decrypt "${C[@]}" "$T/blk" - 1<>"$LOOP"
    cmp -s "$T/blk" "$T/enc" || fail "the block device was written"
    expect_exit 2 "$BLKCRYPT" crypt decrypt "${C[@]}" "$T/blk" "$LOOP"
    grep -q "OUT '$LOOP' is IN" "$T/stderr" || fail "named OUT, another node of IN: $(cat "$T/stderr")"
    cmp -s "$T/blk" "$T/enc" || fail "the block device was written"
else
    echo "SKIP: two nodes of one block device (needs root and a loop device)"
fi
echo PASS
