#!/bin/bash
# blkcrypt integrity dump against integritysetup 2.6.1: the superblocks that
# integritysetup formatted on the oracle's kernel (tests/golden/integrity/)
# print as the oracle's `integritysetup dump` printed them; those and crafted
# ones (every flag, version 1 and 2 with recalculation, odd interleave and
# block size bytes) print as the host's integritysetup prints them, where it
# is installed (dump needs no root); what integritysetup refuses is refused.
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
GOLD=$SRC/tests/golden/integrity
HOST=$(command -v integritysetup || true)
[[ -n $HOST ]] || echo "integritysetup not installed: live comparison skipped (oracle transcripts compared)"

n=0
for sb in "$GOLD"/*.sb; do
    name=$(basename "$sb" .sb)
    cp "$sb" "$TMP/$name"
    # The oracle dumped the guest's /dev/vdX: the path is the first line's.
    dev=$(sed -n '1s/^Info for integrity device \(.*\)\.$/\1/p' "$GOLD/$name.dump")
    [[ -n $dev ]] || fail "$name.dump lacks its first line"
    sed "1s|$dev|$TMP/$name|" "$GOLD/$name.dump" >"$TMP/want"
    "$BLKCRYPT" integrity dump "$TMP/$name" >"$TMP/got" || fail "integrity dump $name"
    cmp "$TMP/want" "$TMP/got" || { diff "$TMP/want" "$TMP/got" >&2; fail "$name: dump differs from the oracle's"; }
    n=$((n + 1))
done
[[ $n -ge 4 ]] || fail "only $n golden superblocks"

# set_bytes FILE OFFSET HEX...: writes bytes in place.
set_bytes() {
    python3 -c 'import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2])); f.write(bytes.fromhex(sys.argv[3]))' "$1" "$2" "$3"
}
base=$GOLD/crc32c-default.sb
craft() {  # NAME OFFSET HEX [OFFSET HEX...]
    local name=$1
    shift
    cp "$base" "$TMP/$name"
    while [[ $# -gt 0 ]]; do
        set_bytes "$TMP/$name" "$1" "$2"
        shift 2
    done
}
craft v2-recalc 8 02 24 07000000 32 3930000000000000       # have_journal_mac recalculating dirty_bitmap, sector 12345
craft v1-recalc 8 01 24 02000000 32 3930000000000000       # version 1: recalc_sector not printed
craft v5-every-flag 24 3f000000 32 6300000000000000        # inline (0x20) has no word in 2.6.1
craft v3-bitmap 8 03 24 04000000 29 0c
craft odd-bytes 9 ff 28 16                                 # interleave -1, 512 << 22
craft spb23 28 17                                          # 512 << 23 wraps to 0
craft spb40 28 28                                          # the shift count taken mod 32
craft big 10 ffff 12 ffffffff 16 ffffffffffffffff
for name in v2-recalc v1-recalc v5-every-flag v3-bitmap odd-bytes spb23 spb40 big; do
    "$BLKCRYPT" integrity dump "$TMP/$name" >"$TMP/got" || fail "integrity dump $name"
    if [[ -n $HOST ]]; then
        "$HOST" dump "$TMP/$name" >"$TMP/want" || fail "integritysetup dump $name"
        cmp "$TMP/want" "$TMP/got" || { diff "$TMP/want" "$TMP/got" >&2; fail "$name: dump differs from integritysetup's"; }
    fi
done
# Without integritysetup, the lines it was seen to print (2.6.1).
"$BLKCRYPT" integrity dump "$TMP/v2-recalc" | grep_q -x 'recalc_sector 12345' || fail "recalc_sector line"
"$BLKCRYPT" integrity dump "$TMP/v2-recalc" | grep_q -x 'flags have_journal_mac recalculating dirty_bitmap ' || fail "flags line"
"$BLKCRYPT" integrity dump "$TMP/v1-recalc" | grep_q recalc_sector && fail "recalc_sector printed for version 1"
"$BLKCRYPT" integrity dump "$TMP/spb40" | grep_q -x 'sector_size 131072' || fail "sector_size of byte 40"

# Refused as integritysetup refuses them (exit 1): versions 0 and 6, no
# magic, a file shorter than the superblock.
craft v6 8 06
craft v0 8 00
head -c 4096 /dev/zero >"$TMP/zero"
head -c 32 "$base" >"$TMP/short"
for name in v6 v0 zero short; do
    expect_exit 1 "$BLKCRYPT" integrity dump "$TMP/$name"
    expect_one_error_line
    grep_q "Device $TMP/$name is not a valid INTEGRITY device" <"$TMP/stderr" || fail "$name: $(cat "$TMP/stderr")"
    [[ ! -s $TMP/stdout ]] || fail "$name: printed a dump"
    if [[ -n $HOST ]]; then
        rc=0
        "$HOST" dump "$TMP/$name" >/dev/null 2>&1 || rc=$?
        [[ $rc == 1 ]] || fail "integritysetup dump $name exits $rc"
    fi
done
# The oracle's words for a device without a superblock, ours beginning with them.
want=$(sed "1s|/dev/vd[a-z]|$TMP/zero|; s/\.$//" "$GOLD/no-superblock.dump")
expect_exit 1 "$BLKCRYPT" integrity dump "$TMP/zero"
grep_q -F "blkcrypt: $want" <"$TMP/stderr" || fail "no superblock: want '$want', got $(cat "$TMP/stderr")"
grep_q "version 6" <<<"$("$BLKCRYPT" integrity dump "$TMP/v6" 2>&1 || true)" || fail "version 6 not named"

# Usage and inputs.
expect_exit 2 "$BLKCRYPT" integrity dump
expect_exit 2 "$BLKCRYPT" integrity dump "$TMP/zero" "$TMP/zero"
expect_exit 2 "$BLKCRYPT" integrity frobnicate "$TMP/zero"
expect_exit 4 "$BLKCRYPT" integrity dump "$TMP/absent"
expect_exit 2 "$BLKCRYPT" integrity dump -
ln -s "$TMP/v2-recalc" "$TMP/link"
"$BLKCRYPT" integrity dump "$TMP/link" | sed 1d | cmp - <("$BLKCRYPT" integrity dump "$TMP/v2-recalc" | sed 1d) ||
    fail "a symlink dumps as its target"
mkfifo "$TMP/fifo"
expect_exit 4 "$BLKCRYPT" integrity dump "$TMP/fifo"
expect_exit 0 "$BLKCRYPT" integrity --help
grep_q "integrity dump IMAGE" <"$TMP/stdout" || fail "help"
echo "integrity: OK ($n golden superblocks)"
