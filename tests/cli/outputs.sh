#!/bin/bash
# The output policy (docs/outputs.md) on every kind of path, the signals that
# clean up, and pipes. Runs as root with device nodes of its own (mknod in
# $TMP), never the system's: a loop device for the block device cases, a
# small tmpfs for ENOSPC; each is skipped with a SKIP line when unavailable.
source "$(dirname "$0")/lib.sh"
[[ $(id -u) == 0 ]] || { echo "SKIP: outputs.sh needs root (mknod, chown, losetup)"; exit 0; }

LOOP=
cleanup() {
    [[ -n $LOOP ]] && losetup -d "$LOOP" 2>/dev/null
    mountpoint -q "$TMP/full" 2>/dev/null && umount "$TMP/full"
    rm -rf "$TMP"
}
trap cleanup EXIT

T=$TMP
no_temp_files() {  # DIR: no temporary file of ours left
    [[ -z $(find "$1" -maxdepth 1 -name '.*.blkcrypt-tmp.*' -print -quit) ]] ||
        fail "temporary file left in $1: $(find "$1" -maxdepth 1 -name '.*.blkcrypt-tmp.*')"
}
enc() { "$BLKCRYPT" crypt encrypt -c aes-xts-plain64 --key-file "$T/key" "$@"; }
dec() { "$BLKCRYPT" crypt decrypt -c aes-xts-plain64 --key-file "$T/key" "$@"; }
SALT=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff
UUID=12345678-1234-1234-1234-123456789abc
vformat() { "$BLKCRYPT" verity format --salt "$SALT" --uuid "$UUID" "$@"; }

random_file "$T/key" 64
random_file "$T/img" $((4 << 20))
enc "$T/img" "$T/ct" || fail "encrypt to a new file: exit $?"
vformat "$T/img" "$T/hash" --root-hash-file "$T/root" >/dev/null || fail "verity format: exit $?"
root=$(cat "$T/root")
[[ $root =~ ^[0-9a-f]{64}$ ]] || fail "root hash file holds '$root'"

# --- a character device is streamed to, never replaced
mknod "$T/null" c 1 3
enc "$T/img" "$T/null" || fail "encrypt to a char device: exit $?"
[[ -c $T/null ]] || fail "the char device OUT was replaced by a regular file"
"$BLKCRYPT" verity read "$T/img" "$T/hash" "$root" --out "$T/null" || fail "verity read --out chardev: exit $?"
[[ -c $T/null ]] || fail "verity read replaced the char device"
# ... unless the command cannot write it in order: refused, left alone
expect_exit 2 "$BLKCRYPT" verity format "$T/img" "$T/null"
expect_one_error_line
grep -q "character device" "$T/stderr" || fail "format to a char device: $(cat "$T/stderr")"
[[ -c $T/null ]] || fail "verity format replaced the char device"
expect_exit 2 "$BLKCRYPT" fsverity digest "$T/img" --out-merkle-tree "$T/null"
[[ -c $T/null ]] || fail "fsverity --out-merkle-tree replaced the char device"
expect_exit 2 "$BLKCRYPT" verity format "$T/img" -
expect_exit 2 vformat "$T/img" "$T/hash-x" --root-hash-file -
expect_exit 2 "$BLKCRYPT" fsverity digest "$T/img" --out-descriptor -
expect_exit 2 "$BLKCRYPT" verity read "$T/img" "$T/hash" "$root" --out - --json
[[ ! -e $T/hash-x ]] || fail "a refused --root-hash-file left HASH"
[[ ! -e $T/- ]] || fail "verity format created a file named '-'"
mkdir "$T/dir"
expect_exit 2 enc "$T/img" "$T/dir"
grep -q "is a directory" "$T/stderr" || fail "directory OUT: $(cat "$T/stderr")"

# --- a FIFO is streamed to (a reader in the background)
mkfifo "$T/fifo"
cat "$T/fifo" >"$T/from-fifo" &
reader=$!
enc "$T/img" "$T/fifo" || fail "encrypt to a FIFO: exit $?"
wait "$reader"
[[ -p $T/fifo ]] || fail "the FIFO OUT was replaced"
cmp -s "$T/from-fifo" "$T/ct" || fail "what came through the FIFO differs from the file result"
cat "$T/fifo" >"$T/from-fifo" &
reader=$!
"$BLKCRYPT" fsverity digest "$T/img" --out-descriptor "$T/fifo" >/dev/null || fail "--out-descriptor FIFO: exit $?"
wait "$reader"
[[ -p $T/fifo && $(stat -c %s "$T/from-fifo") == 256 ]] || fail "--out-descriptor through a FIFO"
expect_exit 2 "$BLKCRYPT" verity format "$T/img" "$T/fifo"
grep -q "FIFO" "$T/stderr" || fail "format to a FIFO: $(cat "$T/stderr")"
[[ -p $T/fifo ]] || fail "verity format replaced the FIFO"

# --- a symlink is followed: its target is replaced, the link stays
random_file "$T/img2" $((1 << 20))
cp "$T/ct" "$T/target"
ln -s target "$T/link"
enc "$T/img2" "$T/link" || fail "encrypt to a symlink: exit $?"
[[ -L $T/link && $(readlink "$T/link") == target ]] || fail "the symlink was replaced"
enc "$T/img2" "$T/ct2" || fail "encrypt img2"
cmp -s "$T/target" "$T/ct2" || fail "the symlink's target was not written"
no_temp_files "$T"

# --- mode and owner of a replaced file are kept; new plaintext is 0600
cp "$T/ct" "$T/secret"
chmod 0600 "$T/secret"
chown nobody:nogroup "$T/secret"
dec "$T/ct" "$T/secret" || fail "decrypt over an existing file: exit $?"
[[ $(stat -c '%a %U' "$T/secret") == "600 nobody" ]] || fail "replaced file: $(stat -c '%a %U:%G' "$T/secret")"
cmp -s "$T/secret" "$T/img" || fail "decrypt over an existing file differs"
( umask 022; dec "$T/ct" "$T/newplain" ) || fail "decrypt to a new file"
[[ $(stat -c %a "$T/newplain") == 600 ]] || fail "new plaintext OUT is $(stat -c %a "$T/newplain"), want 600"
( umask 022; enc "$T/img" "$T/newct" ) || fail "encrypt to a new file"
[[ $(stat -c %a "$T/newct") == 644 ]] || fail "new ciphertext OUT is $(stat -c %a "$T/newct"), want 644"
"$BLKCRYPT" skcipher --alg "cbc(aes)" --key "$(xxd -p -c 99 -l 16 "$T/key")" --iv 000102030405060708090a0b0c0d0e0f \
    --decrypt --in "$T/key" --out "$T/skplain" || fail "skcipher --decrypt --out"
[[ $(stat -c %a "$T/skplain") == 600 ]] || fail "new skcipher plaintext is $(stat -c %a "$T/skplain")"

# --- no output may be an input
cp "$T/key" "$T/key.orig"
expect_exit 2 enc "$T/img" "$T/key"
expect_one_error_line
grep -q "key file" "$T/stderr" || fail "OUT = key file: $(cat "$T/stderr")"
cmp -s "$T/key" "$T/key.orig" || fail "OUT = key file destroyed the key"
ln -s img "$T/img-link"
expect_exit 2 enc "$T/img" "$T/img-link"
ln "$T/img" "$T/img-hard"  # another name of the same inode
expect_exit 2 dec --in-place "$T/img" "$T/img-hard"
grep -q "is IN" "$T/stderr" || fail "OUT = IN by inode: $(cat "$T/stderr")"
rm "$T/img-hard"
expect_exit 2 "$BLKCRYPT" crypt encrypt -c aes-xts-plain64 --key-file - - "$T/x" <"$T/key"
grep -q "both be stdin" "$T/stderr" || fail "IN and key file both stdin: $(cat "$T/stderr")"
cp "$T/hash" "$T/hash.orig"
cp "$T/img" "$T/img.orig"
expect_exit 2 vformat "$T/img" "$T/hash" --root-hash-file "$T/img"
grep -q "is DATA" "$T/stderr" || fail "--root-hash-file DATA: $(cat "$T/stderr")"
expect_exit 2 vformat "$T/img" "$T/hash" --root-hash-file "$T/hash"
grep -q "is HASH" "$T/stderr" || fail "--root-hash-file HASH: $(cat "$T/stderr")"
expect_exit 2 vformat "$T/img" "$T/newhash" --root-hash-file "$T/newhash"
[[ ! -e $T/newhash ]] || fail "--root-hash-file = a new HASH created it"
expect_exit 2 "$BLKCRYPT" verity read "$T/img" "$T/hash" "$root" --out "$T/hash"
expect_one_error_line
expect_exit 2 "$BLKCRYPT" verity read "$T/img" "$T/hash" --root-hash-file "$T/root" --out "$T/root"
expect_exit 2 "$BLKCRYPT" fsverity digest "$T/img" --out-descriptor "$T/img-link"
cmp -s "$T/hash" "$T/hash.orig" && cmp -s "$T/img" "$T/img.orig" || fail "a refused output changed an input"

# --- outputs appear together: a failing --root-hash-file keeps the old HASH, and the root is printed
mknod "$T/devfull" c 1 7
random_file "$T/img3" $((1 << 20))
expect_exit 1 vformat "$T/img3" "$T/hash" --root-hash-file "$T/devfull"
grep -q "$T/devfull: No space left on device" "$T/stderr" || fail "root file on /dev/full: $(cat "$T/stderr")"
grep -q "root hash: [0-9a-f]\{64\}" "$T/stderr" || fail "the root hash was not printed: $(cat "$T/stderr")"
cmp -s "$T/hash" "$T/hash.orig" || fail "HASH was replaced although --root-hash-file failed"
vformat "$T/img3" "$T/hash3" --root-hash-file "$T/root3" >/dev/null
grep -q "root hash: $(cat "$T/root3")" "$T/stderr" || fail "the printed root hash is not the tree's"
expect_exit 1 "$BLKCRYPT" fsverity digest "$T/img" --out-merkle-tree "$T/tree" --out-descriptor "$T/devfull"
[[ ! -e $T/tree ]] || fail "--out-merkle-tree appeared although --out-descriptor failed"
no_temp_files "$T"
# ENOSPC on a stream names the path, not "I/O error"
expect_exit 1 enc "$T/img" "$T/devfull"
expect_one_error_line
grep -q "$T/devfull: No space left on device" "$T/stderr" || fail "crypt OUT /dev/full: $(cat "$T/stderr")"

# --- a stale temporary file of an interrupted run is reported
touch "$T/.ct.blkcrypt-tmp.AbC123"
expect_exit 0 enc "$T/img" "$T/ct"
[[ $(grep -c "warning: $T/.ct.blkcrypt-tmp.AbC123 is left from an interrupted run" "$T/stderr") == 1 ]] ||
    fail "no stale-file warning: $(cat "$T/stderr")"
rm "$T/.ct.blkcrypt-tmp.AbC123"

# --- pipes: verity read --out - and crypt stdin -> stdout
"$BLKCRYPT" verity read "$T/img" "$T/hash" "$root" --out - --threads 3 >"$T/read-out" || fail "verity read --out -"
cmp -s "$T/read-out" "$T/img" || fail "verity read --out - differs from DATA"
[[ ! -e ./- && ! -e $T/- ]] || fail "verity read --out - created a file named '-'"
cat "$T/img" | enc - - | cat >"$T/ct-pipe" || fail "encrypt through a pipe"
cmp -s "$T/ct-pipe" "$T/ct" || fail "stdin->stdout ciphertext differs from the file result"
cat "$T/ct" | dec - - | cmp -s - "$T/img" || fail "decrypt through a pipe differs"
cat "$T/img" | enc - - --threads 2 | dec - - | cmp -s - "$T/img" || fail "pipe round trip differs"
enc --size 2048 - - <"$T/img" | cmp -s - <(head -c $((2048 * 512)) "$T/ct") || fail "--size on a stream"
enc --offset 8 "$T/img" "$T/ct-off"
cat "$T/img" | enc --offset 8 - - | cmp -s - "$T/ct-off" || fail "--offset to a stream"
cat "$T/ct-off" | dec --offset 8 - - | cmp -s - "$T/img" || fail "--offset from a stream"
head -c 1000 "$T/img" >"$T/odd"
expect_exit 1 enc - "$T/odd-out" <"$T/odd"
grep -q "partial sector" "$T/stderr" || fail "partial final sector: $(cat "$T/stderr")"
[[ ! -e $T/odd-out ]] || fail "a failed stream encryption left OUT"
expect_exit 1 enc --size 16384 - - <"$T/img"
grep -q "ended after" "$T/stderr" || fail "short stream for --size: $(cat "$T/stderr")"
# A character device as IN is a stream too (here: zeros, with --size).
mknod "$T/zero" c 1 5
enc --size 2048 "$T/zero" "$T/ct-zero" || fail "IN = char device: exit $?"
head -c $((1 << 20)) /dev/zero >"$T/zeros"
enc "$T/zeros" "$T/ct-zeros"
cmp -s "$T/ct-zero" "$T/ct-zeros" || fail "char device IN differs from the file result"

# --- signals: every terminating signal removes the temporary file, exits 128+sig
mkdir "$T/sig"
mkfifo "$T/sig-in"
for sig in HUP INT QUIT PIPE TERM; do
    exec 7<>"$T/sig-in"  # a writer that never writes: the run blocks reading IN
    set -m  # job control: background jobs keep SIGINT/SIGQUIT
    "$BLKCRYPT" crypt encrypt -c aes-xts-plain64 --key-file "$T/key" "$T/sig-in" "$T/sig/out" 2>"$T/sig.err" &
    pid=$!
    set +m
    for _ in $(seq 100); do
        [[ -n $(find "$T/sig" -name '.out.blkcrypt-tmp.*' -print -quit) ]] && break
        sleep 0.05
    done
    [[ -n $(find "$T/sig" -name '.out.blkcrypt-tmp.*' -print -quit) ]] || fail "$sig: no temporary file appeared"
    kill -"$sig" "$pid"
    rc=0
    wait "$pid" || rc=$?
    exec 7>&-
    want=$((128 + $(kill -l "$sig")))
    [[ $rc == "$want" ]] || fail "SIG$sig: exit $rc, want $want"
    grep -qx "blkcrypt: interrupted by SIG$sig" "$T/sig.err" || fail "SIG$sig: stderr $(cat "$T/sig.err")"
    no_temp_files "$T/sig"
    [[ ! -e $T/sig/out ]] || fail "SIG$sig left OUT"
done
# A reader that goes away: SIGPIPE from a real write to stdout.
random_file "$T/big" $((64 << 20))
set +e +o pipefail
enc "$T/big" - 2>"$T/sig.err" | head -c 1000 >/dev/null
rc=${PIPESTATUS[0]}
set -e -o pipefail
[[ $rc == 141 ]] || fail "closed stdout pipe: exit $rc, want 141"
grep -qx "blkcrypt: interrupted by SIGPIPE" "$T/sig.err" || fail "closed pipe: stderr $(cat "$T/sig.err")"
set +e +o pipefail
"$BLKCRYPT" verity read "$T/img" "$T/hash" "$root" --out - 2>"$T/sig.err" | head -c 10 >/dev/null
rc=${PIPESTATUS[0]}
set -e -o pipefail
[[ $rc == 141 ]] || fail "verity read into a closed pipe: exit $rc, want 141 ($(cat "$T/sig.err"))"

# --- a full file system: the error names the final path and the real errno
mkdir "$T/full"
if mount -t tmpfs -o size=1m tmpfs "$T/full" 2>/dev/null; then
    expect_exit 1 enc "$T/img" "$T/full/ct"
    expect_one_error_line
    grep -q "$T/full/ct: No space left on device" "$T/stderr" || fail "ENOSPC: $(cat "$T/stderr")"
    grep -q "blkcrypt-tmp" "$T/stderr" && fail "ENOSPC names the temporary file"
    [[ ! -e $T/full/ct ]] || fail "ENOSPC left OUT"
    no_temp_files "$T/full"
    expect_exit 1 "$BLKCRYPT" verity read "$T/img" "$T/hash" "$root" --out "$T/full/copy"
    grep -q "$T/full/copy: No space left on device" "$T/stderr" || fail "verity read ENOSPC: $(cat "$T/stderr")"
    no_temp_files "$T/full"
    umount "$T/full"
    mount -t tmpfs -o ro,size=1m tmpfs "$T/full"
    expect_exit 1 enc "$T/img" "$T/full/ct"
    grep -q "$T/full/ct: .*Read-only file system" "$T/stderr" || fail "EROFS: $(cat "$T/stderr")"
    umount "$T/full"
else
    echo "SKIP: cannot mount a tmpfs: ENOSPC cases not run"
fi

# --- a block device is written in place (loop device, private node)
if [[ -c /dev/loop-control ]] && truncate -s 8M "$T/backing" && LOOP=$(losetup -f --show "$T/backing" 2>/dev/null); then
    read -r maj min < <(stat -c '%t %T' "$LOOP")
    mknod "$T/blk" b $((16#$maj)) $((16#$min))
    vformat "$T/img" "$T/blk" >"$T/summary" || fail "verity format to a block device: exit $?"
    [[ -b $T/blk ]] || fail "verity format replaced the block device"
    grep -q "Root hash:.*$root" "$T/summary" || fail "format to a device: other root hash"
    cmp -s <(head -c "$(stat -c %s "$T/hash")" "$T/blk") "$T/hash" || fail "the device does not hold the tree"
    enc "$T/img" "$T/blk" || fail "crypt encrypt to a block device (no --in-place): exit $?"
    [[ -b $T/blk ]] || fail "crypt replaced the block device"
    dec --size 8192 "$T/blk" "$T/from-blk" || fail "decrypt from the block device"
    cmp -s "$T/from-blk" "$T/img" || fail "block device round trip differs"
    random_file "$T/img16" $((16 << 20))
    expect_exit 1 enc "$T/img16" "$T/blk"
    grep -q "the device holds 8388608 bytes" "$T/stderr" || fail "too small a device: $(cat "$T/stderr")"
    # Of unknown size (a stream), the end of the device is ENOSPC, named.
    expect_exit 1 enc - "$T/blk" <"$T/img16"
    grep -q "$T/blk: No space left on device" "$T/stderr" || fail "stream past the device end: $(cat "$T/stderr")"
    [[ -b $T/blk ]] || fail "the block device was replaced"
    expect_exit 1 vformat "$T/img" "$T/blk" --hash-offset 8388608
    grep -q "the device holds" "$T/stderr" || fail "format into too small a device: $(cat "$T/stderr")"
    # HASH = DATA on a device: the tree goes past the data, inside the device.
    dd if="$T/img" of="$T/blk" bs=1M conv=notrunc status=none
    vformat "$T/blk" "$T/blk" --data-blocks 1024 --hash-offset $((4 << 20)) >/dev/null ||
        fail "format with HASH = DATA on a device: exit $?"
    [[ -b $T/blk ]] || fail "HASH = DATA replaced the device"
    "$BLKCRYPT" verity verify "$T/blk" "$T/blk" "$root" --hash-offset $((4 << 20)) ||
        fail "the in-device tree does not verify"
    expect_exit 1 vformat "$T/blk" "$T/blk" --data-blocks 1024 --hash-offset $((8 << 20))
    grep -q "the device holds" "$T/stderr" || fail "HASH = DATA past the device: $(cat "$T/stderr")"
else
    echo "SKIP: no loop device: block-device output cases not run"
fi

no_temp_files "$T"
echo "outputs.sh: all passed"
