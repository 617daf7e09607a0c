#!/bin/bash
# blkcrypt integrity and luks --integrity on the paths a user may give that
# are no plain image: device nodes, FIFOs, symlinks, "-", the input as the
# output, directories, out-of-range numbers, an image truncated since its
# format; SIGINT/SIGTERM half-way through read, write and format; the modes
# of outputs that hold data; key bytes never in a message; a dm table's
# journal_mac: key; discards; commit_time (docs/integrity.md, "Odd paths").
source "$(dirname "$0")/lib.sh"
umask 022
IMG=$TMP/img
truncate -s 16M "$IMG"
"$BLKCRYPT" integrity format -q "$IMG" || fail "format"
random_file "$TMP/in" 100000

# --- device nodes ---------------------------------------------------------------
"$BLKCRYPT" integrity read "$IMG" /dev/null || fail "read to /dev/null"
expect_exit 1 "$BLKCRYPT" integrity read "$IMG" /dev/full
expect_one_error_line
grep_q "/dev/full: No space left on device" <"$TMP/stderr" || fail "/dev/full: $(cat "$TMP/stderr")"
for dev in /dev/zero /dev/null /dev/full; do
    for action in dump verify "format -q"; do
        # shellcheck disable=SC2086
        expect_exit 4 "$BLKCRYPT" integrity $action "$dev"
        expect_one_error_line
        grep_q "IMAGE must be a regular file or a block device" <"$TMP/stderr" || fail "$action $dev: $(cat "$TMP/stderr")"
    done
    expect_exit 4 "$BLKCRYPT" integrity read "$dev" "$TMP/x.out"
    [[ ! -e $TMP/x.out ]] || fail "read of $dev left OUT"
    expect_exit 4 "$BLKCRYPT" integrity write "$TMP/in" "$dev"
done
cp "$IMG" "$TMP/before"
"$BLKCRYPT" integrity write /dev/null "$IMG" || fail "write of an empty IN"
cmp -s "$IMG" "$TMP/before" || fail "an empty IN changed the image"
# An endless IN fills the device, then fails naming what was written.
expect_exit 1 "$BLKCRYPT" integrity write /dev/zero "$IMG"
expect_one_error_line
grep_q "larger than the device" <"$TMP/stderr" || fail "endless IN: $(cat "$TMP/stderr")"
"$BLKCRYPT" integrity verify "$IMG" || fail "verify after an endless IN"

# --- FIFOs, symlinks, "-", the input as the output, directories -----------------------
mkfifo "$TMP/fifo"
cat "$TMP/fifo" >"$TMP/fifo.out" &
"$BLKCRYPT" integrity read "$IMG" "$TMP/fifo" || fail "read to a FIFO"
wait
"$BLKCRYPT" integrity read "$IMG" - >"$TMP/stdout.out" || fail "read to stdout"
cmp -s "$TMP/fifo.out" "$TMP/stdout.out" || fail "FIFO and stdout differ"
cat "$TMP/in" >"$TMP/fifo" &
"$BLKCRYPT" integrity write "$TMP/fifo" "$IMG" || fail "write from a FIFO"
wait
"$BLKCRYPT" integrity read "$IMG" "$TMP/x.out" && cmp -s -n 100000 "$TMP/x.out" "$TMP/in" || fail "FIFO IN did not land"
rm "$TMP/x.out"
expect_exit 4 "$BLKCRYPT" integrity read "$TMP/fifo" "$TMP/x.out"
expect_exit 4 "$BLKCRYPT" integrity format -q "$TMP/fifo"
ln -s "$IMG" "$TMP/link"
cmp -s <("$BLKCRYPT" integrity read "$TMP/link" -) <("$BLKCRYPT" integrity read "$IMG" -) || fail "read through a symlink"
"$BLKCRYPT" integrity verify "$TMP/link" || fail "verify through a symlink"
expect_exit 2 "$BLKCRYPT" integrity read "$IMG" "$TMP/link"
grep_q "refusing to write an output over an input" <"$TMP/stderr" || fail "OUT as IMAGE: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" integrity read "$TMP/link" "$IMG"
expect_exit 2 "$BLKCRYPT" integrity write "$TMP/link" "$IMG"
for action in "format -q" verify dump; do
    # shellcheck disable=SC2086
    expect_exit 2 "$BLKCRYPT" integrity $action -
    grep_q "IMAGE cannot be stdin" <"$TMP/stderr" || fail "$action -: $(cat "$TMP/stderr")"
done
expect_exit 2 "$BLKCRYPT" integrity write "$TMP/in" -
mkdir "$TMP/dir"
expect_exit 4 "$BLKCRYPT" integrity read "$TMP/dir" "$TMP/x.out"
expect_exit 4 "$BLKCRYPT" integrity write "$TMP/in" "$TMP/dir"
expect_exit 2 "$BLKCRYPT" integrity read "$IMG" "$TMP/dir"
expect_exit 1 "$BLKCRYPT" integrity write "$TMP/dir" "$IMG"
expect_one_error_line

# --- numbers --------------------------------------------------------------------
truncate -s 16M "$TMP/n"
for opt in "--sector-size -512" "--sector-size 99999999999999999999" "--sector-size 1000" "--tag-size -1" \
    "--tag-size 0" "--tag-size 425" "--interleave-sectors -1" "--interleave-sectors 0" \
    "--interleave-sectors 4294967296" "--journal-size -1" "--journal-size 99999999999999999999" \
    "--journal-size 18446744073709551615" "--journal-size 1T" "--buffer-sectors 0" "--bitmap-sectors-per-bit 0" \
    "--bitmap-sectors-per-bit -1"; do
    # shellcheck disable=SC2086
    expect_exit 2 "$BLKCRYPT" integrity format -q $opt "$TMP/n"
    expect_one_error_line
    [[ $(du -k "$TMP/n" | cut -f1) == 0 ]] || fail "$opt: the refused format wrote"
done
# The kernel clamps an interleave below 8 sectors to 8; huge ones leave no room.
"$BLKCRYPT" integrity format -q --interleave-sectors 4 "$TMP/n" || fail "--interleave-sectors 4"
"$BLKCRYPT" integrity dump "$TMP/n" | grep_q -x "log2_interleave_sectors 3" || fail "interleave not clamped to 8"
expect_exit 2 "$BLKCRYPT" integrity format -q --interleave-sectors 2147483648 "$TMP/n"
grep_q "too small" <"$TMP/stderr" || fail "huge interleave: $(cat "$TMP/stderr")"

# --- an image truncated since its format ------------------------------------------
# integritysetup open maps the superblock's size; the kernel refuses the
# table on a shorter device. Before the check, blkcrypt read a shorter device.
cp "$IMG" "$TMP/short"
truncate -s 8M "$TMP/short"
for action in verify "read" write; do
    case $action in
    read) args=("$TMP/short" "$TMP/short.out") ;;
    write) args=("$TMP/in" "$TMP/short") ;;
    *) args=("$TMP/short") ;;
    esac
    expect_exit 1 "$BLKCRYPT" integrity $action "${args[@]}"
    expect_one_error_line
    grep_q "Not enough provided sectors for requested mapping size" <"$TMP/stderr" ||
        fail "$action of a truncated image: $(cat "$TMP/stderr")"
done
[[ ! -e $TMP/short.out ]] || fail "read of a truncated image left OUT"
[[ $(stat -c %s "$TMP/short") == $((8 << 20)) ]] || fail "write grew the truncated image"

# --- modes and secrets -----------------------------------------------------------
"$BLKCRYPT" integrity read "$IMG" "$TMP/mode.out" || fail "read"
[[ $(stat -c %a "$TMP/mode.out") == 600 ]] || fail "integrity read OUT is $(stat -c %a "$TMP/mode.out"), not 600"
printf 'S3cretKeyBytes__S3cretKeyBytes__' >"$TMP/key"
printf 'WrongKeyBytes___WrongKeyBytes___' >"$TMP/wrong"
keyed=(-I hmac-sha256 --integrity-key-size 32)
truncate -s 16M "$TMP/hm"
"$BLKCRYPT" integrity format -q "${keyed[@]}" --integrity-key-file "$TMP/key" "$TMP/hm" || fail "format hmac"
expect_exit 1 "$BLKCRYPT" integrity read "${keyed[@]}" --integrity-key-file "$TMP/wrong" "$TMP/hm" "$TMP/hm.out"
expect_one_error_line
hexkey=$(od -An -tx1 "$TMP/wrong" | tr -d ' \n')
grep -qiE "WrongKey|${hexkey:0:16}" "$TMP/stderr" && fail "the key is in a message: $(cat "$TMP/stderr")"
[[ ! -e $TMP/hm.out ]] || fail "a failed read left OUT"

# --- SIGINT and SIGTERM half-way ---------------------------------------------------
set -m  # job control: background jobs keep SIGINT
BIG=$TMP/big
truncate -s 256M "$BIG"
"$BLKCRYPT" integrity format -q "$BIG" || fail "format 256M"
random_file "$TMP/old" $((250 << 20))
"$BLKCRYPT" integrity write "$TMP/old" "$BIG" || fail "write old"
cp "$BIG" "$TMP/big.orig"
random_file "$TMP/new" $((250 << 20))
# every 512-byte sector of $1 (the first 250 MiB) is $2's or $3's
old_or_new() {
    python3 - "$@" <<'PY'
import sys
got, old, new = (open(p, "rb") for p in sys.argv[1:4])
both = [0, 0]
for pos in range(0, 250 << 20, 1 << 20):
    g, o, n = got.read(1 << 20), old.read(1 << 20), new.read(1 << 20)
    for k in range(0, len(g), 512):
        if g[k:k + 512] == o[k:k + 512]: both[0] += 1
        elif g[k:k + 512] == n[k:k + 512]: both[1] += 1
        else: sys.exit("sector %d is neither old nor new" % ((pos + k) // 512))
print("old %d new %d" % tuple(both))
PY
}
for sig in INT TERM; do
    want=$((128 + $(kill -l $sig)))
    # read: no OUT, no temporary file.
    cp "$TMP/big.orig" "$BIG"
    # The kill lands once the temporary output holds data, so mid-run even
    # when the read is fast; a run that still finishes first is tried again.
    landed=
    for _ in 1 2 3; do
        "$BLKCRYPT" integrity read "$BIG" "$TMP/r.out" 2>"$TMP/stderr" &
        pid=$!
        for _ in $(seq 500); do
            [[ -n $(find "$TMP" -maxdepth 1 -name '.r.out.blkcrypt-tmp.*' -size +0) ]] && break
            sleep 0.01
        done
        kill -$sig $pid 2>/dev/null || true
        rc=0 && wait $pid || rc=$?
        [[ $rc == 0 ]] && { rm -f "$TMP/r.out"; continue; }
        landed=1
        [[ $rc == "$want" ]] || fail "read on SIG$sig: exit $rc"
        [[ -z $(find "$TMP" -maxdepth 1 -name '*r.out*') ]] || fail "read on SIG$sig left $(ls -a "$TMP")"
        break
    done
    [[ $landed ]] || fail "read on SIG$sig: three runs finished before the signal landed"
    rm -f "$TMP/r.out"
    # write in place: every sector old or new, no tag mismatch (J and B;
    # D mode writes data and tag apart, and the kernel documents that a
    # crash there may leave them mismatched).
    for mode in "" -B; do
        cp "$TMP/big.orig" "$BIG"
        # shellcheck disable=SC2086
        "$BLKCRYPT" integrity write $mode "$TMP/new" "$BIG" &
        pid=$!
        sleep 0.3
        kill -$sig $pid 2>/dev/null || true
        rc=0 && wait $pid || rc=$?
        [[ $rc == "$want" || $rc == 0 ]] || fail "write $mode on SIG$sig: exit $rc"
        # shellcheck disable=SC2086
        # shellcheck disable=SC2086
        "$BLKCRYPT" integrity read $mode "$BIG" "$TMP/got" || fail "write $mode interrupted by SIG$sig: no read"
        old_or_new "$TMP/got" "$TMP/old" "$TMP/new" >/dev/null || fail "write $mode interrupted by SIG$sig"
        # shellcheck disable=SC2086
        "$BLKCRYPT" integrity verify $mode "$BIG" || fail "verify after write $mode interrupted by SIG$sig"
    done
    # An image that shrinks while read: the read fails saying so, no OUT
    # (unless it finished first, on a fast machine).
    if [[ $sig == INT ]]; then
        cp "$TMP/big.orig" "$BIG"
        "$BLKCRYPT" integrity read "$BIG" "$TMP/shrunk.out" 2>"$TMP/stderr" &
        pid=$!
        for _ in $(seq 500); do  # shrink it once the read is under way
            [[ -n $(find "$TMP" -maxdepth 1 -name '.shrunk.out.blkcrypt-tmp.*' -size +0) ]] && break
            sleep 0.01
        done
        truncate -s 8M "$BIG"
        rc=0 && wait $pid || rc=$?
        if [[ $rc != 0 ]]; then
            [[ $rc == 1 ]] || fail "read of a shrinking image: exit $rc"
            expect_one_error_line
            grep_q "the file changed size while open" <"$TMP/stderr" || fail "shrinking image: $(cat "$TMP/stderr")"
            [[ ! -e $TMP/shrunk.out ]] || fail "read of a shrinking image left OUT"
        fi
        rm -f "$TMP/shrunk.out"
    fi
    # A refused IN leaves an image killed mid-write as it was: IN is
    # checked before IMAGE's writable open, which would replay the journal.
    cp "$TMP/big.orig" "$BIG"
    "$BLKCRYPT" integrity write "$TMP/new" "$BIG" &
    pid=$!
    sleep 0.3
    kill -KILL $pid 2>/dev/null || true
    wait $pid || true
    cp "$BIG" "$TMP/killed"
    expect_exit 1 "$BLKCRYPT" integrity write "$TMP/dir" "$BIG"
    cmp -s "$BIG" "$TMP/killed" || fail "a refused IN (a directory) changed the image"
    # format over an image: no superblock is left half-way.
    cp "$TMP/big.orig" "$BIG"
    "$BLKCRYPT" integrity format -q --threads 1 "$BIG" &
    pid=$!
    sleep 0.02
    kill -$sig $pid 2>/dev/null || true
    rc=0 && wait $pid || rc=$?
    if [[ $rc == "$want" ]]; then
        # The superblock is written last: none, or a format that verifies
        # (the signal landed after it, on a slow build such as ASan's).
        if "$BLKCRYPT" integrity dump "$BIG" >/dev/null 2>"$TMP/stderr"; then
            "$BLKCRYPT" integrity verify "$BIG" || fail "format on SIG$sig left a superblock over an unfinished format"
        else
            grep_q "not a valid INTEGRITY device" <"$TMP/stderr" || fail "format on SIG$sig: $(cat "$TMP/stderr")"
        fi
    else
        [[ $rc == 0 ]] || fail "format: exit $rc"
        "$BLKCRYPT" integrity verify "$BIG" || fail "format ended before SIG$sig, but does not verify"
    fi
done

# luks format --integrity: the header is written back only after the data
# is laid out, so an interrupted format leaves no LUKS header over sectors
# that fail to read. (Before, it left one.)
printf pass >"$TMP/pass"
lfmt=(luks format -q --integrity hmac-sha256 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --key-file "$TMP/pass")
for sig in INT TERM; do
    rm -f "$TMP/lk" && truncate -s 512M "$TMP/lk"
    "$BLKCRYPT" "${lfmt[@]}" "$TMP/lk" 2>"$TMP/stderr" &
    pid=$!
    for _ in $(seq 2000); do
        kill -0 $pid 2>/dev/null || break
        [[ $(du -k "$TMP/lk" | cut -f1) -lt 65536 ]] || break  # in the wipe, past the header
        sleep 0.005
    done
    kill -$sig $pid 2>/dev/null || true
    rc=0 && wait $pid || rc=$?
    [[ $rc == $((128 + $(kill -l $sig))) ]] || fail "luks format --integrity on SIG$sig: exit $rc"
    expect_exit 1 "$BLKCRYPT" luks dump "$TMP/lk"
    grep_q "not a valid LUKS device" <"$TMP/stderr" || fail "luks format on SIG$sig left a header"
    if command -v cryptsetup >/dev/null; then
        cryptsetup isLuks "$TMP/lk" && fail "cryptsetup sees a LUKS header after SIG$sig"
    fi
done
rm -f "$TMP/lk" && truncate -s 64M "$TMP/lk"
"$BLKCRYPT" "${lfmt[@]}" "$TMP/lk" || fail "luks format --integrity"
[[ -z $(command -v cryptsetup) ]] || cryptsetup isLuks "$TMP/lk" || fail "cryptsetup: not LUKS after a format"
"$BLKCRYPT" luks decrypt --key-file "$TMP/pass" "$TMP/lk" "$TMP/lk.out" || fail "luks decrypt"
[[ $(stat -c %a "$TMP/lk.out") == 600 ]] || fail "luks decrypt OUT is $(stat -c %a "$TMP/lk.out")"
cmp -s "$TMP/lk.out" <(head -c "$(stat -c %s "$TMP/lk.out")" /dev/zero) || fail "a fresh container is not zeros"
for opt in "--start -1" "--start 18446744073709551615" "--size 0" "--size -8" "--size 18446744073709551615"; do
    # shellcheck disable=SC2086
    expect_exit 2 "$BLKCRYPT" luks decrypt --key-file "$TMP/pass" $opt "$TMP/lk" "$TMP/x.out"
    expect_one_error_line
    # shellcheck disable=SC2086
    expect_exit 2 "$BLKCRYPT" luks encrypt --key-file "$TMP/pass" $opt "$TMP/in" "$TMP/lk"
done
expect_exit 2 "$BLKCRYPT" luks decrypt --key-file "$TMP/pass" "$TMP/lk" "$TMP/lk"
expect_exit 2 "$BLKCRYPT" "${lfmt[@]}" /dev/null
expect_exit 2 "$BLKCRYPT" luks decrypt --key-file "$TMP/pass" --start 999999999 "$TMP/lk" "$TMP/x.out"
[[ ! -e $TMP/x.out ]] || fail "refused decrypt left OUT"

# --- a dm table's journal_mac: key --------------------------------------------------
# integritysetup loads journal_mac:hmac(sha256):KEYHEX; the table is served
# as integrity read exposes the device (before: refused as unsupported).
truncate -s 16M "$TMP/jm"
printf 0123456789abcdef0123456789ABCDEF >"$TMP/jkey"
jmac=(--journal-integrity hmac-sha256 --journal-integrity-key-file "$TMP/jkey" --journal-integrity-key-size 32)
"$BLKCRYPT" integrity format -q "${jmac[@]}" "$TMP/jm" || fail "format with a journal MAC"
"$BLKCRYPT" integrity write "${jmac[@]}" "$TMP/in" "$TMP/jm" || fail "write with a journal MAC"
"$BLKCRYPT" integrity read "${jmac[@]}" "$TMP/jm" "$TMP/jm.out" || fail "read with a journal MAC"
sectors=$(($(stat -c %s "$TMP/jm.out") / 512))
khex=$(od -An -tx1 "$TMP/jkey" | tr -d ' \n')
echo "0 $sectors integrity $TMP/jm 0 4 J 2 internal_hash:crc32c journal_mac:hmac(sha256):$khex" >"$TMP/jm.tbl"
source "$(dirname "$0")/nbd_lib.sh"
need nbdcopy
start_server serve --socket "$SOCK" --dm-table "$TMP/jm.tbl"
T nbdcopy "$URI" "$TMP/jm.served" || fail "nbdcopy of the journal_mac table"
random_file "$TMP/in3" 65536
T nbdcopy "$TMP/in3" "$URI" || fail "nbdcopy to the journal_mac table"
stop_server
cmp -s "$TMP/jm.served" "$TMP/jm.out" || fail "the journal_mac table serves other bytes"
"$BLKCRYPT" integrity read "${jmac[@]}" "$TMP/jm" "$TMP/jm.out2" || fail "read after a served write"
cmp -s -n 65536 "$TMP/jm.out2" "$TMP/in3" || fail "a served write did not land"
# The wrong key: the superblock MAC fails; the key is in no message.
printf 0123456789abcdef0123456789ABCDEX | od -An -tx1 | tr -d ' \n' >"$TMP/bad.hex"
echo "0 $sectors integrity $TMP/jm 0 4 J 2 internal_hash:crc32c journal_mac:hmac(sha256):$(cat "$TMP/bad.hex")" >"$TMP/bad.tbl"
expect_exit nonzero timeout 60 "$BLKCRYPT" serve --socket "$SOCK" --dm-table "$TMP/bad.tbl"
grep -qi "$(cut -c1-16 "$TMP/bad.hex")" "$TMP/stderr" && fail "the journal MAC key is in a message"
# --- discards (allow_discards) ------------------------------------------------------
# A TRIM through integrity serve is the kernel's discard: the journal's
# blocks written back first (J), the bitmap marked (B), every tag of the
# range the filler 0xF6, the data punched out. It then reads as zeros with
# --allow-discards and fails the tag check without (128 blocks from sector
# 0x800 = 1 MiB). Without --allow-discards no TRIM is offered: the image
# stays as it was.
need qemu-io
for mode in "" -B -D; do
    rm -f "$TMP/dc" && truncate -s 16M "$TMP/dc"
    # shellcheck disable=SC2086
    "$BLKCRYPT" integrity format -q $mode "$TMP/dc" || fail "format $mode"
    # shellcheck disable=SC2086
    "$BLKCRYPT" integrity write $mode "$TMP/in" "$TMP/dc" || fail "write $mode"
    # shellcheck disable=SC2086
    start_server integrity serve $mode --allow-discards --socket "$SOCK" "$TMP/dc"
    T qemu-io -f raw "$URI" -c "write -P 0x55 1M 128k" -c "discard 1M 64k" -c "read -P 0 1M 64k" \
        -c "read -P 0x55 1114112 64k" >"$TMP/qemu.out" || fail "qemu-io $mode"
    stop_server
    grep -q "Pattern verification failed" "$TMP/qemu.out" && fail "discard $mode: $(cat "$TMP/qemu.out")"
    # shellcheck disable=SC2086
    "$BLKCRYPT" integrity read $mode --allow-discards "$TMP/dc" "$TMP/dc.out" || fail "read --allow-discards $mode"
    python3 - "$TMP/dc.out" "$TMP/in" <<'PY' || fail "discard $mode: not what the kernel reads"
import sys
d, i = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
assert d[:100000] == i, "before the writes"
assert d[1 << 20:(1 << 20) + 65536] == bytes(65536), "the discarded range is not zeros"
assert d[(1 << 20) + 65536:(1 << 20) + 131072] == b"\x55" * 65536, "the write after it"
PY
    # shellcheck disable=SC2086
    expect_exit 1 "$BLKCRYPT" integrity verify $mode --max-errors 1 "$TMP/dc"
    grep_q "Checksum failed at sector 0x800\$" <"$TMP/stderr" || fail "discard $mode: $(cat "$TMP/stderr")"
    grep_q "128 block(s)" <"$TMP/stderr" || fail "discard $mode: $(cat "$TMP/stderr")"
done
# The kernel on both sides (tests/golden/integrity-discard, record.sh):
# the image blkcrypt discarded reads in the kernel with --allow-discards
# without a failure, to the bytes blkcrypt reads; without it, both fail
# first at sector 0x800. The image the kernel discarded reads in blkcrypt
# as in the kernel: zeros there, 128 bad tags from 0x800 without
# --allow-discards.
DGOLD=$(dirname "$0")/../golden/integrity-discard
kern=$DGOLD/kernel.txt
xz -dc "$DGOLD/pattern.xz" >"$TMP/pattern"
xz -dc "$DGOLD/ours-discard.img.xz" >"$TMP/ours.img"
want=$(sed -n '/^=== ours-discard/,/^=== journal-mac/p' "$kern" | sed -n 's/^sha256=//p' | head -1)
grep_q -x "checksum_failures=0" < <(sed -n '/^open --allow-discards/,/^open  rc/p' "$kern") ||
    fail "the kernel logged failures reading our discarded image"
"$BLKCRYPT" integrity read --allow-discards "$TMP/ours.img" "$TMP/ours.out" || fail "read of our discarded image"
[[ $(sha256sum <"$TMP/ours.out" | cut -d' ' -f1) == "$want" ]] || fail "our discarded image: not the kernel's bytes"
first=$(grep -m1 -o 'Checksum failed at sector 0x[0-9a-f]*' "$kern")
expect_exit 1 "$BLKCRYPT" integrity read "$TMP/ours.img" "$TMP/ours.out"
grep_q "$first\$" <"$TMP/stderr" || fail "want '$first' as the kernel: $(cat "$TMP/stderr")"
xz -dc "$DGOLD/kernel-discard.img.xz" >"$TMP/kd.img"
"$BLKCRYPT" integrity read --allow-discards "$TMP/kd.img" "$TMP/kd.out" || fail "read of the kernel's discarded image"
python3 - "$TMP/kd.out" "$TMP/pattern" <<'PY' || fail "the kernel's discard reads otherwise in blkcrypt"
import sys
d, p = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
assert d[:len(p)] == p and d[1 << 20:(1 << 20) + 65536] == bytes(65536)
PY
expect_exit 1 "$BLKCRYPT" integrity verify --max-errors 1 "$TMP/kd.img"
grep_q "Checksum failed at sector 0x800\$" <"$TMP/stderr" && grep_q "128 block(s)" <"$TMP/stderr" ||
    fail "the kernel's discard: $(cat "$TMP/stderr")"
# journal_mac: in a table line, as the kernel read it (same sha256).
xz -dc "$DGOLD/journal-mac.img.xz" >"$TMP/jmk.img"
want=$(sed -n '/^=== journal-mac/,$p' "$kern" | sed -n 's/^sha256=//p')
line=$(sed -n 's/^showkeys: //p' "$kern")
echo "${line/ 254:32 / $TMP/jmk.img }" >"$TMP/jmk.tbl"
start_server serve --read-only --socket "$SOCK" --dm-table "$TMP/jmk.tbl"
T nbdcopy "$URI" "$TMP/jmk.out" || fail "nbdcopy of the kernel's journal_mac table"
stop_server
[[ $(sha256sum <"$TMP/jmk.out" | cut -d' ' -f1) == "$want" ]] || fail "journal_mac table: not the kernel's bytes"

# commit_time: J-mode writes a client has not flushed are committed every
# --journal-commit-time ms, as the kernel's autocommit timer commits them:
# a crash (kill -9) after it keeps them; with 0 (no timer) they are lost,
# the image then holding the old data, still without a tag mismatch.
for ct in 200 0; do
    rm -f "$TMP/ct" && truncate -s 16M "$TMP/ct"
    "$BLKCRYPT" integrity format -q "$TMP/ct" || fail "format"
    start_server integrity serve --journal-commit-time $ct --socket "$SOCK" "$TMP/ct"
    T qemu-io -t writeback -f raw "$URI" -c "write -P 0x55 0 64k" -c "sleep 4000" >/dev/null 2>&1 &
    qpid=$!
    sleep 1.5
    kill_server
    wait $qpid || true
    "$BLKCRYPT" integrity read "$TMP/ct" "$TMP/ct.out" || fail "read after a crash, commit time $ct"
    python3 - "$TMP/ct.out" $ct <<'PY' || fail "commit time $ct"
import sys
d = open(sys.argv[1], "rb").read(65536)
want = b"\x55" * 65536 if sys.argv[2] != "0" else bytes(65536)
sys.exit(0 if d == want else "the first 64 KiB are not what a commit every %s ms leaves" % sys.argv[2])
PY
done

cp "$TMP/dc" "$TMP/dc.before"
start_server integrity serve -D --socket "$SOCK" "$TMP/dc"
T qemu-io -f raw "$URI" -c "discard 4M 64k" >/dev/null 2>&1 || true
stop_server
cmp -s "$TMP/dc" "$TMP/dc.before" || fail "a TRIM without --allow-discards changed the image"
echo "integrity_odd: OK"
