#!/bin/bash
# blkcrypt integrity against integritysetup 2.6.1.
# dump: the superblocks that integritysetup formatted on the oracle's kernel
# (tests/golden/integrity/) print as the oracle's `integritysetup dump`
# printed them; those and crafted ones (every flag, version 1 and 2 with
# recalculation, odd interleave and block size bytes) print as the host's
# integritysetup prints them, where it is installed (dump needs no root);
# what integritysetup refuses is refused.
# format: for every recorded case, with the same options and sizes, the
# superblock equals the kernel's but for its random salt, and dumps as the
# oracle's and the host's integritysetup dump it; the confirmation is
# integritysetup's; a 16 GiB format stays sparse (time and allocation
# printed). read/write/verify: round trips through the target, a never-written
# block of a --no-wipe image fails naming its sector, a flipped byte is
# found; outputs that are no regular file are refused. The kernel's reads
# of images blkcrypt formatted and wrote (tests/golden/integrity-format/)
# equal blkcrypt's. serve and open: the checked device over NBD.
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

# --- format -------------------------------------------------------------------
printf 0123456789abcdef0123456789ABCDEF >"$TMP/key"  # record.sh's /tmp/key
formatted=0
for info in "$GOLD"/*.info; do
    name=$(basename "$info" .info)
    fopts=$(sed -n 's/^format_options=//p' "$info")
    size=$(sed -n 's/^size_bytes=//p' "$info")
    dsize=$(sed -n 's/^data_device_bytes=//p' "$info")
    # No format there, or a format identical to another case's (recalculate differs at open).
    [[ $name == no-superblock || $name == recalculate ]] && continue
    img=$TMP/fmt-$name
    rm -f "$img" "$img.data"
    truncate -s "$size" "$img"
    opts=${fopts//\/tmp\/key/$TMP/key}
    if [[ -n $dsize ]]; then
        truncate -s "$dsize" "$img.data"
        opts=${opts//\/dev\/vdb/$img.data}
    fi
    # shellcheck disable=SC2086
    "$BLKCRYPT" integrity format -q $opts "$img" >"$TMP/out" 2>&1 || fail "format $name: $(cat "$TMP/out")"
    [[ ! -s $TMP/out ]] || fail "format -q $name printed: $(cat "$TMP/out")"
    # The superblock area equals the kernel's, its salt aside (random in both).
    python3 - "$img" "$GOLD/$name.sb" <<'PY' || fail "$name: superblock differs from the kernel's"
import sys
ours = open(sys.argv[1], "rb").read(4096)
kern = open(sys.argv[2], "rb").read(4096)
salted = kern[24] & 0x10
if salted and ours[48:64] == bytes(16):
    sys.exit("no salt")
ours = ours[:48] + kern[48:64] + ours[64:] if salted else ours
sys.exit(0 if ours == kern else "differ")
PY
    dev=$(sed -n '1s/^Info for integrity device \(.*\)\.$/\1/p' "$GOLD/$name.dump")
    sed "1s|$dev|$img|" "$GOLD/$name.dump" >"$TMP/want"
    "$BLKCRYPT" integrity dump "$img" >"$TMP/got" || fail "dump of formatted $name"
    cmp -s "$TMP/want" "$TMP/got" || { diff "$TMP/want" "$TMP/got" >&2; fail "$name: formatted dump differs from the oracle's"; }
    if [[ -n $HOST ]]; then
        "$HOST" dump "$img" >"$TMP/want" || fail "integritysetup dump of formatted $name"
        cmp -s "$TMP/want" "$TMP/got" || fail "$name: formatted dump differs from integritysetup's"
    fi
    formatted=$((formatted + 1))
done
[[ $formatted -ge 10 ]] || fail "only $formatted formats compared"

# Without -q: integritysetup's line after the format.
truncate -s 16M "$TMP/plain"
"$BLKCRYPT" integrity format "$TMP/plain" </dev/null >"$TMP/out" 2>/dev/null || fail "format without -q"
grep_q -x "Formatted with tag size 4, internal integrity crc32c." <"$TMP/out" || fail "format line: $(cat "$TMP/out")"
"$BLKCRYPT" integrity format -I sha256 "$TMP/plain" </dev/null >"$TMP/out" 2>/dev/null || fail "format -I sha256"
grep_q -x "Formatted with tag size 32, internal integrity sha256." <"$TMP/out" || fail "format line: $(cat "$TMP/out")"

# The confirmation on a terminal, in integritysetup's words: anything but
# YES leaves the image as it was.
PTY=$(dirname "$0")/pty_session.py
truncate -s 16M "$TMP/ask"
expect_exit 1 python3 "$PTY" --timeout 60 --answer "capital letters): " no -- "$BLKCRYPT" integrity format "$TMP/ask"
tr -d '\r' <"$TMP/stdout" >"$TMP/said"
grep_q -x "This will overwrite data on $TMP/ask irrevocably." <"$TMP/said" || fail "question: $(cat "$TMP/said")"
grep_q -x "WARNING!" <"$TMP/said" || fail "warning: $(cat "$TMP/said")"
grep_q "Operation aborted" <"$TMP/said" || fail "abort: $(cat "$TMP/said")"
[[ $(du -k "$TMP/ask" | cut -f1) == 0 ]] || fail "an aborted format wrote"
if [[ -n $HOST ]]; then
    # The host's integritysetup asks the same before it needs device-mapper.
    python3 "$PTY" --timeout 60 --answer "capital letters): " no -- "$HOST" format "$TMP/ask" | tr -d '\r' >"$TMP/host" || true
    for line in "WARNING!" "========" "This will overwrite data on $TMP/ask irrevocably."; do
        grep_q -x -- "$line" <"$TMP/host" || fail "integritysetup did not say '$line': $(cat "$TMP/host")"
    done
fi
truncate -s 16M "$TMP/data-ask"
expect_exit 1 python3 "$PTY" --timeout 60 --answer "capital letters): " no -- \
    "$BLKCRYPT" integrity format --data-device "$TMP/data-ask" "$TMP/ask"
grep_q "This will overwrite data on $TMP/ask and $TMP/data-ask irrevocably." <"$TMP/stdout" || fail "data-device question"
expect_exit 0 python3 "$PTY" --timeout 60 --answer "capital letters): " YES -- "$BLKCRYPT" integrity format "$TMP/ask"
"$BLKCRYPT" integrity dump "$TMP/ask" >/dev/null || fail "format after YES"

# Refusals: a key without its size (integritysetup's words), journal
# protection, what is no device.
expect_exit 2 "$BLKCRYPT" integrity format -q -I hmac-sha256 --integrity-key-file "$TMP/key" "$TMP/plain"
grep_q "Both key file and key size options must be specified." <"$TMP/stderr" || fail "key size: $(cat "$TMP/stderr")"
expect_exit nonzero "$BLKCRYPT" integrity format -q -I hmac-sha256 "$TMP/plain"
expect_exit 2 "$BLKCRYPT" integrity format -q --journal-crypt aes "$TMP/plain"
grep_q "journal" <"$TMP/stderr" || fail "journal-crypt: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" integrity format -q --journal-integrity hmac-sha256 --journal-integrity-key-file "$TMP/key" "$TMP/plain"
grep_q "Both journal integrity key file and key size options must be specified." <"$TMP/stderr" ||
    fail "journal key size: $(cat "$TMP/stderr")"
"$BLKCRYPT" integrity format -q --journal-integrity hmac-sha256 --journal-integrity-key-file "$TMP/key" \
    --journal-integrity-key-size 32 "$TMP/plain" || fail "format with a journal MAC"
"$BLKCRYPT" integrity dump "$TMP/plain" | grep_q -x "flags have_journal_mac fix_padding fix_hmac " || fail "journal MAC flags"
[[ -z $HOST ]] || "$HOST" dump "$TMP/plain" | grep_q -x "flags have_journal_mac fix_padding fix_hmac " ||
    fail "integritysetup: journal MAC flags"
jmac=(--journal-integrity hmac-sha256 --journal-integrity-key-file "$TMP/key" --journal-integrity-key-size 32)
expect_exit 2 "$BLKCRYPT" integrity read "$TMP/plain" "$TMP/x.out"
grep_q -i "journal mac" <"$TMP/stderr" || fail "read of a journal MAC image without it: $(cat "$TMP/stderr")"
"$BLKCRYPT" integrity write "${jmac[@]}" "$TMP/key" "$TMP/plain" || fail "write with a journal MAC"
"$BLKCRYPT" integrity read "${jmac[@]}" "$TMP/plain" "$TMP/x.out" || fail "read with a journal MAC"
cmp -s -n 32 "$TMP/key" "$TMP/x.out" || fail "journal MAC round trip"
printf 0123456789abcdef0123456789ABCDEX >"$TMP/key3"
expect_exit nonzero "$BLKCRYPT" integrity read --journal-integrity hmac-sha256 --journal-integrity-key-file "$TMP/key3" \
    --journal-integrity-key-size 32 "$TMP/plain" "$TMP/x.out"
# Journal encryption (integritysetup's names and options): format writes
# the journal encrypted; read and write need the cipher and key.
expect_exit 2 "$BLKCRYPT" integrity format -q --journal-crypt ctr-aes --journal-crypt-key-file "$TMP/key" "$TMP/plain"
grep_q "Both journal encryption key file and key size options must be specified." <"$TMP/stderr" ||
    fail "journal crypt key size: $(cat "$TMP/stderr")"
jcrypt=(--journal-crypt chacha20 --journal-crypt-key-file "$TMP/key" --journal-crypt-key-size 32)
"$BLKCRYPT" integrity format -q "${jcrypt[@]}" "$TMP/plain" || fail "format with journal encryption"
expect_exit nonzero "$BLKCRYPT" integrity read "$TMP/plain" "$TMP/x.out"
"$BLKCRYPT" integrity write "${jcrypt[@]}" "$TMP/key" "$TMP/plain" || fail "write with journal encryption"
"$BLKCRYPT" integrity read "${jcrypt[@]}" "$TMP/plain" "$TMP/x.out" || fail "read with journal encryption"
cmp -s -n 32 "$TMP/key" "$TMP/x.out" || fail "journal encryption round trip"
expect_exit nonzero "$BLKCRYPT" integrity read --journal-crypt chacha20 --journal-crypt-key-file "$TMP/key3" \
    --journal-crypt-key-size 32 "$TMP/plain" "$TMP/x.out"
expect_exit 2 "$BLKCRYPT" integrity format -q -I no-such-hash "$TMP/plain"
expect_exit 2 "$BLKCRYPT" integrity format -q --sector-size 1000 "$TMP/plain"
# --journal-size takes integritysetup's units (k/KiB binary, KB decimal, s sectors).
for js in 131072 128k 128KiB 256s; do
    rm -f "$TMP/js" && truncate -s 16M "$TMP/js"
    "$BLKCRYPT" integrity format -q --journal-size "$js" "$TMP/js" || fail "--journal-size $js"
    "$BLKCRYPT" integrity dump "$TMP/js" | grep '^journal_sections' >"$TMP/js-$js" || fail "dump after --journal-size $js"
    cmp -s "$TMP/js-131072" "$TMP/js-$js" || fail "--journal-size $js is not 131072 bytes"
done
expect_exit 2 "$BLKCRYPT" integrity format -q --journal-size 128x "$TMP/js"
expect_exit 2 "$BLKCRYPT" integrity format -q --journal-size 128Ki "$TMP/js"
expect_exit 4 "$BLKCRYPT" integrity format -q "$TMP/fifo"
mkdir -p "$TMP/dir"
expect_exit 4 "$BLKCRYPT" integrity format -q "$TMP/dir"
expect_exit 4 "$BLKCRYPT" integrity format -q "$TMP/absent"
expect_exit 2 "$BLKCRYPT" integrity format -q --data-device "$TMP/plain" "$TMP/plain"
truncate -s 4096 "$TMP/tiny"
expect_exit 2 "$BLKCRYPT" integrity format -q "$TMP/tiny"

# A default 16 GiB format: sparse and quick (figures printed, not asserted
# beyond the allocation the issue sets: under 512 MiB).
rm -f "$TMP/big"
truncate -s 16G "$TMP/big"
start=$(date +%s.%N)
"$BLKCRYPT" integrity format -q "$TMP/big" || fail "16 GiB format"
end=$(date +%s.%N)
kib=$(du -k "$TMP/big" | cut -f1)
printf 'integrity: 16 GiB format: %.2f s, %d MiB allocated\n' "$(echo "$end - $start" | bc)" $((kib / 1024))
[[ $kib -lt $((512 * 1024)) ]] || fail "16 GiB format allocated $kib KiB"
rm -f "$TMP/big"

# --- read, write, verify ---------------------------------------------------------
# A formatted image reads as zeros, every block checked; what write puts
# through the target reads back; an image that held data before format
# reads as zeros all the same (the data area made zero: holes punched).
random_file "$TMP/old" $((24 << 20))
cp "$TMP/old" "$TMP/rw"
"$BLKCRYPT" integrity format -q --interleave-sectors 8192 "$TMP/rw" || fail "format over old data"
"$BLKCRYPT" integrity read "$TMP/rw" "$TMP/rw.out" || fail "read of a fresh format"
size=$(stat -c %s "$TMP/rw.out")
[[ $size -gt $((23 << 20)) ]] || fail "read gave $size bytes"
cmp -s "$TMP/rw.out" <(head -c "$size" /dev/zero) || fail "a fresh format does not read as zeros"
"$BLKCRYPT" integrity verify "$TMP/rw" || fail "verify of a fresh format"
random_file "$TMP/in" 5000001   # not a whole number of blocks
"$BLKCRYPT" integrity write "$TMP/in" "$TMP/rw" || fail "write"
"$BLKCRYPT" integrity read "$TMP/rw" "$TMP/rw.out" || fail "read after write"
cmp -s -n 5000001 "$TMP/in" "$TMP/rw.out" || fail "write/read round trip differs"
cmp -s <(tail -c +5000002 "$TMP/rw.out") <(head -c $((size - 5000001)) /dev/zero) || fail "past IN: not zeros"
"$BLKCRYPT" integrity verify "$TMP/rw" || fail "verify after write"
cat "$TMP/in" | "$BLKCRYPT" integrity write - "$TMP/rw" || fail "write from stdin"
"$BLKCRYPT" integrity read "$TMP/rw" - >"$TMP/stdout.out" || fail "read to stdout"
cmp -s -n 5000001 "$TMP/in" "$TMP/stdout.out" || fail "read to stdout differs"
# The host's integritysetup agrees the image is one (it reads the superblock).
[[ -z $HOST ]] || "$HOST" dump "$TMP/rw" >/dev/null || fail "integritysetup dump after write"

# A flipped data byte: verify names its sector (the kernel's words), read
# fails naming it and leaves no OUT; -R reads without checks.
sector_of() {  # the logical sector whose data byte is at IMAGE offset $2
    python3 - "$1" "$2" <<'PY'
import struct, sys
sb = open(sys.argv[1], "rb").read(64)
l2i, tag, sections, provided, flags, l2spb = sb[9], struct.unpack_from("<H", sb, 10)[0], \
    struct.unpack_from("<I", sb, 12)[0], struct.unpack_from("<Q", sb, 16)[0], struct.unpack_from("<I", sb, 24)[0], sb[28]
spb = 1 << l2spb
eps = (504 - (8 if flags & 1 else 0)) // ((8 + 8 * spb + tag + 7) // 8 * 8)
initial = 8 + (eps * 8 * spb + 8) * sections
pad = 4096 if flags & 8 else 131072
mrun = (tag * ((1 << l2i) >> l2spb) + pad - 1) // pad * pad // 512
off = int(sys.argv[2]) // 512 - initial
area, within = divmod(off, (1 << l2i) + mrun)
assert within >= mrun
print(area * (1 << l2i) + within - mrun)
PY
}
cp "$TMP/rw" "$TMP/bad"
at=$((12 << 20))
flip_byte "$TMP/bad" $at
want=$(sector_of "$TMP/bad" $at)
expect_exit 1 "$BLKCRYPT" integrity verify "$TMP/bad"
grep_q "Checksum failed at sector $(printf '0x%x' "$want")" <"$TMP/stderr" || fail "verify: want sector $want: $(cat "$TMP/stderr")"
grep_q "1 block(s)" <"$TMP/stderr" || fail "verify count: $(cat "$TMP/stderr")"
rm -f "$TMP/bad.out"
expect_exit 1 "$BLKCRYPT" integrity read "$TMP/bad" "$TMP/bad.out"
grep_q "Checksum failed at sector $(printf '0x%x' "$want")" <"$TMP/stderr" || fail "read: $(cat "$TMP/stderr")"
[[ ! -e $TMP/bad.out ]] || fail "a failed read left OUT"
"$BLKCRYPT" integrity read -R "$TMP/bad" "$TMP/bad.out" || fail "read -R"

# --no-wipe: the tags are what the file held (zeros), so the first block
# fails, naming sector 0, as the kernel's read of it does.
truncate -s 16M "$TMP/nowipe"
"$BLKCRYPT" integrity format -q --no-wipe "$TMP/nowipe" || fail "format --no-wipe"
expect_exit 1 "$BLKCRYPT" integrity read "$TMP/nowipe" "$TMP/nowipe.out"
grep_q "Checksum failed at sector 0x0\$" <"$TMP/stderr" || fail "no-wipe read: $(cat "$TMP/stderr")"
[[ ! -e $TMP/nowipe.out ]] || fail "a failed read left OUT"
[[ $(du -k "$TMP/nowipe" | cut -f1) -lt 1024 ]] || fail "--no-wipe wrote tags"

# Keyed and metadata-device images round-trip too.
truncate -s 16M "$TMP/hm"
keyopts=(-I hmac-sha256 --integrity-key-file "$TMP/key" --integrity-key-size 32)
"$BLKCRYPT" integrity format -q "${keyopts[@]}" "$TMP/hm" || fail "format hmac"
"$BLKCRYPT" integrity write "${keyopts[@]}" "$TMP/in" "$TMP/hm" || fail "write hmac"
"$BLKCRYPT" integrity read "${keyopts[@]}" "$TMP/hm" "$TMP/hm.out" || fail "read hmac"
cmp -s -n 5000001 "$TMP/in" "$TMP/hm.out" || fail "hmac round trip"
printf 0123456789abcdef0123456789ABCDEX >"$TMP/key2"
expect_exit 1 "$BLKCRYPT" integrity verify -I hmac-sha256 --integrity-key-file "$TMP/key2" --integrity-key-size 32 "$TMP/hm"
truncate -s 4M "$TMP/meta"
truncate -s 12M "$TMP/meta.data"
"$BLKCRYPT" integrity format -q --data-device "$TMP/meta.data" "$TMP/meta" || fail "format --data-device"
"$BLKCRYPT" integrity write --data-device "$TMP/meta.data" "$TMP/in" "$TMP/meta" || fail "write --data-device"
cmp -s -n 5000001 "$TMP/in" "$TMP/meta.data" || fail "the data device does not hold the data in place"
"$BLKCRYPT" integrity verify --data-device "$TMP/meta.data" "$TMP/meta" || fail "verify --data-device"

# Outputs and inputs: OUT is never an input, a directory, or a FIFO that
# cannot take it in order is refused; IN larger than the device is refused.
expect_exit 2 "$BLKCRYPT" integrity read "$TMP/rw" "$TMP/rw"
mkdir -p "$TMP/outdir"
expect_exit 2 "$BLKCRYPT" integrity read "$TMP/rw" "$TMP/outdir"
expect_exit 2 "$BLKCRYPT" integrity write "$TMP/rw" "$TMP/rw"
random_file "$TMP/huge" $((25 << 20))
expect_exit 1 "$BLKCRYPT" integrity write "$TMP/huge" "$TMP/rw"
grep_q "the device provides" <"$TMP/stderr" || fail "too large: $(cat "$TMP/stderr")"
expect_exit 4 "$BLKCRYPT" integrity read "$TMP/fifo" "$TMP/x.out"
expect_exit 4 "$BLKCRYPT" integrity read "$TMP/absent" "$TMP/x.out"
head -c 1M /dev/zero >"$TMP/notint"
expect_exit 1 "$BLKCRYPT" integrity read "$TMP/notint" "$TMP/x.out"
grep_q "is not a valid INTEGRITY device" <"$TMP/stderr" || fail "not integrity: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" integrity write -R "$TMP/in" "$TMP/rw"

# --- the kernel on blkcrypt's images ----------------------------------------------
# tests/golden/integrity-format/: images blkcrypt formatted and wrote, which
# the kernel then opened and read whole (record.sh there). Where the kernel
# logged no checksum failure, blkcrypt reads the same bytes; the --no-wipe
# image fails in both at the sector the kernel named first.
KGOLD=$SRC/tests/golden/integrity-format
kernel_cases=0
for k in "$KGOLD"/*.kernel; do
    name=$(basename "$k" .kernel)
    xz -dc "$KGOLD/$name.img.xz" >"$TMP/k.img"
    opts=$(sed -n 's/^options=//p' "$k")
    opts=${opts//KEY/$TMP/key}
    if [[ -e $KGOLD/$name.data.xz ]]; then
        xz -dc "$KGOLD/$name.data.xz" >"$TMP/k.data"
        opts=${opts//DATA/$TMP/k.data}
    fi
    want=$(sed -n 's/^sha256=//p' "$k")
    failures=$(sed -n 's/^checksum_failures=//p' "$k")
    grep_q -x "open rc=0" <"$k" || fail "$name: the kernel did not open it"
    if [[ $opts == *--journal-integrity* ]]; then
        # Formatted only: the kernel read zeros, the superblock MAC checked.
        size=$(sed -n 's/^size=//p' "$k")
        [[ $failures == 0 && $(head -c "$size" /dev/zero | sha256sum | cut -d' ' -f1) == "$want" ]] ||
            fail "$name: the kernel did not read zeros without failures"
        "$BLKCRYPT" integrity dump "$TMP/k.img" | grep_q "have_journal_mac" || fail "$name: no journal MAC flag"
    fi
    if [[ $failures == 0 ]]; then
        # shellcheck disable=SC2086
        "$BLKCRYPT" integrity read $opts "$TMP/k.img" "$TMP/k.out" || fail "$name: read of the kernel-checked image"
        [[ $(sha256sum <"$TMP/k.out" | cut -d' ' -f1) == "$want" ]] || fail "$name: not the bytes the kernel read"
        # shellcheck disable=SC2086
        "$BLKCRYPT" integrity verify $opts "$TMP/k.img" || fail "$name: verify"
    else
        first=$(grep -m1 -o 'Checksum failed at sector 0x[0-9a-f]*' "$k")
        # shellcheck disable=SC2086
        expect_exit 1 "$BLKCRYPT" integrity read $opts "$TMP/k.img" "$TMP/k.out"
        grep_q "$first\$" <"$TMP/stderr" || fail "$name: want '$first': $(cat "$TMP/stderr")"
    fi
    kernel_cases=$((kernel_cases + 1))
done
[[ $kernel_cases -ge 12 ]] || fail "only $kernel_cases kernel-read images"

# --- serve / open ----------------------------------------------------------------
source "$(dirname "$0")/nbd_lib.sh"
need nbdcopy
start_server integrity serve --socket "$SOCK" "$TMP/rw"
T nbdcopy "$URI" "$TMP/served" || fail "nbdcopy from integrity serve"
cmp -s "$TMP/served" "$TMP/rw.out" || fail "served data differs from read"
random_file "$TMP/in2" 65536
T nbdcopy "$TMP/in2" "$URI" || fail "nbdcopy to integrity serve"
stop_server
"$BLKCRYPT" integrity read "$TMP/rw" "$TMP/rw.out2" || fail "read after served write"
cmp -s -n 65536 "$TMP/in2" "$TMP/rw.out2" || fail "a served write did not land"
# integritysetup's open, and the detecting top-level open: NAME is the export.
start_server integrity open --socket "$SOCK" "$TMP/rw" vol
T nbdcopy "nbd+unix:///vol?socket=$SOCK" "$TMP/served" || fail "integrity open export vol"
stop_server
start_server open --socket "$SOCK" "$TMP/bad" vol
rc=0
T nbdcopy "nbd+unix:///vol?socket=$SOCK" "$TMP/served" 2>/dev/null || rc=$?
[[ $rc != 0 ]] || fail "a tampered block was served"
stop_server
grep_q "Checksum failed at sector" <"$TMP/log" || fail "serve log: $(cat "$TMP/log")"
echo "integrity: OK ($n golden superblocks, $formatted formats, $kernel_cases images the kernel read)"
