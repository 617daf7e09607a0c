#!/bin/bash
# blkcrypt verity with FEC (--fec-device) against veritysetup: the FEC
# parity, tree and summary of each case of tests/verity/fec/cases.tsv equal
# veritysetup's (recorded in golden.tsv; live too when veritysetup is
# installed), veritysetup verify accepts ours, and bad FEC options are refused.
source "$(dirname "$0")/lib.sh"
FEC="$(cd "$(dirname "$0")/../verity/fec" && pwd)"
source "$FEC/lib.sh"

have_veritysetup=0
command -v veritysetup >/dev/null && have_veritysetup=1
root_of() { awk '/^Root hash:/{print $3}' "$1"; }
sha() { sha256sum <"$1" | cut -d' ' -f1; }

paste <(grep -v '^#' "$FEC/cases.tsv") <(grep -v '^#' "$FEC/golden.tsv") |
    while IFS=$'\t' read -r name size iv layout opts gname groot gfec ghash; do
        [[ $name == "$gname" ]] || fail "cases.tsv and golden.tsv disagree at $name"
        # shellcheck disable=SC2086
        fec_case "$BLKCRYPT verity" "$TMP/ours" "$size" "$iv" "$layout" $opts || fail "$name: format exit $?"
        [[ $(root_of "$TMP/ours/summary") == "$groot" ]] || fail "$name: root hash differs from golden"
        [[ $(sha "$TMP/ours/fec") == "$gfec" ]] || fail "$name: FEC file differs from veritysetup's (golden)"
        [[ $(sha "$TMP/ours/hash") == "$ghash" ]] || fail "$name: hash file differs from veritysetup's (golden)"
        if [[ $opts != *--no-superblock* ]]; then
            # dump --fec-device prints veritysetup dump's FEC lines (dump/NAME.txt, make-dump-golden.sh).
            dopts=$(fec_dump_options "$opts")
            # shellcheck disable=SC2086
            (cd "$TMP/ours" && "$BLKCRYPT" verity dump hash --fec-device fec $dopts) >"$TMP/dump" ||
                fail "$name: dump --fec-device exit $?"
            diff "$FEC/dump/$name.txt" "$TMP/dump" >&2 || fail "$name: dump differs from veritysetup's (golden)"
            if ((have_veritysetup)); then
                # shellcheck disable=SC2086
                (cd "$TMP/ours" && veritysetup dump hash --fec-device fec $dopts) >"$TMP/vdump"
                diff "$TMP/vdump" "$TMP/dump" >&2 || fail "$name: dump differs from veritysetup's"
            fi
        fi
        ((have_veritysetup)) || continue
        # shellcheck disable=SC2086
        fec_case veritysetup "$TMP/theirs" "$size" "$iv" "$layout" $opts
        cmp "$TMP/ours/fec" "$TMP/theirs/fec" || fail "$name: FEC file differs from veritysetup's"
        sed -i "s|$TMP/ours/||" "$TMP/ours/summary"
        sed -i "s|$TMP/theirs/||" "$TMP/theirs/summary"
        diff "$TMP/ours/summary" "$TMP/theirs/summary" >&2 || fail "$name: summary differs from veritysetup's"
        # veritysetup checks our parity (its verify decodes every RS block).
        vopts=$(grep -oE -- '--(fec-roots|fec-offset|hash-offset|data-blocks|data-block-size|hash-block-size|salt) [^ ]+|--no-superblock' <<<"$opts" | tr '\n' ' ')
        [[ $opts == *--no-superblock* ]] || vopts=$(grep -oE -- '--(fec-roots|fec-offset|hash-offset) [^ ]+' <<<"$opts" | tr '\n' ' ')
        # shellcheck disable=SC2086
        veritysetup verify "$TMP/ours/data" "$TMP/ours/hash" "$groot" --fec-device "$TMP/ours/fec" $vopts </dev/null ||
            fail "$name: veritysetup verify --fec-device rejects ours"
    done
echo "FEC golden matrix: ok (veritysetup live: $have_veritysetup)"

# --- refusals, as veritysetup refuses them
head -c $((100 * 4096)) /dev/urandom >"$TMP/d"
expect_exit 2 "$BLKCRYPT" verity format "$TMP/d" "$TMP/h" --fec-device "$TMP/f" --fec-roots 25
expect_exit 2 "$BLKCRYPT" verity format "$TMP/d" "$TMP/h" --fec-device "$TMP/f" --fec-roots 1
expect_exit 2 "$BLKCRYPT" verity format "$TMP/d" "$TMP/h" --fec-device "$TMP/f" --hash-block-size 1024
grep_q 'equal data and hash block sizes' <"$TMP/stderr" || fail "block size refusal: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" verity format "$TMP/d" "$TMP/h" --fec-device "$TMP/f" --fec-offset 100
expect_exit 2 "$BLKCRYPT" verity format "$TMP/d" "$TMP/h" --fec-roots 3
grep_q 'need --fec-device' <"$TMP/stderr" || fail "--fec-roots alone: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" verity format "$TMP/d" "$TMP/h" --fec-device "$TMP/h" --fec-offset 4096
grep_q 'overlaps the hash tree' <"$TMP/stderr" || fail "FEC over the tree: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" verity format "$TMP/d" "$TMP/h" --fec-device "$TMP/d"
grep_q 'DATA holds the parity only when HASH is DATA' <"$TMP/stderr" || fail "FEC into DATA: $(cat "$TMP/stderr")"
[[ ! -e $TMP/h && ! -e $TMP/f ]] || fail "a refused format left an output behind"
echo "FEC refusals: ok"

# --- verify --fec-device: corrupted blocks within reach are corrected (exit 0,
# as veritysetup verify), beyond it reported as corrupted (exit 2).
# 1000 blocks, 3 roots: 9 tree blocks, 1009 covered, 5 rounds; data block b is
# in round b % 5.
head -c $((1000 * 4096)) /dev/urandom >"$TMP/v"
"$BLKCRYPT" verity format "$TMP/v" "$TMP/vh" --fec-device "$TMP/vf" --fec-roots 3 >"$TMP/vs.txt"
root=$(root_of "$TMP/vs.txt")
check_both() {  # check_both WANT DATA HASH: our verify and (live) veritysetup's
    local want=$1
    expect_exit "$want" "$BLKCRYPT" verity verify "$2" "$3" "$root" --fec-device "$TMP/vf" --fec-roots 3
    if ((have_veritysetup)) && [[ ${4:-} != ours-only ]]; then
        local rc=0
        veritysetup verify "$2" "$3" "$root" --fec-device "$TMP/vf" --fec-roots 3 </dev/null 2>/dev/null || rc=$?
        [[ $rc == "$want" ]] || fail "veritysetup verify exits $rc, we $want ($2)"
    fi
}
cp "$TMP/v" "$TMP/c"
# Four flipped bytes, each sure to differ (a fixed 'XXXX' left one of random data unchanged now and then).
for i in 0 1 2 3; do flip_byte "$TMP/c" $((5 * 4096 + 100 + i)); done
check_both 0 "$TMP/c" "$TMP/vh"
grep_q '^blkcrypt: data block 5 is corrupted; corrected by FEC' <"$TMP/stderr" || fail "no correction named: $(cat "$TMP/stderr")"
grep_q '^blkcrypt: Found 4 repairable errors with FEC device.$' <"$TMP/stderr" || fail "error count: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" verity verify "$TMP/c" "$TMP/vh" "$root"  # without FEC: corrupted
cp "$TMP/vh" "$TMP/ch"
flip_byte "$TMP/ch" $((2 * 4096 + 7))
check_both 0 "$TMP/v" "$TMP/ch"
grep_q '^blkcrypt: hash block 2 is corrupted; corrected by FEC (1 bytes)' <"$TMP/stderr" || fail "hash correction: $(cat "$TMP/stderr")"
# Whole blocks: one per round is within 3 roots for veritysetup too.
cp "$TMP/v" "$TMP/c2"
for b in 300 301 302; do dd if=/dev/urandom of="$TMP/c2" bs=4096 seek=$b count=1 conv=notrunc status=none; done
check_both 0 "$TMP/c2" "$TMP/vh"
# Three whole blocks in one round: beyond veritysetup's blind decoding (1 error
# per codeword), within ours, which names them as erasures from the hashes, as the kernel does.
cp "$TMP/v" "$TMP/c3"
for b in 10 15 20; do dd if=/dev/zero of="$TMP/c3" bs=4096 seek=$b count=1 conv=notrunc status=none; done
check_both 0 "$TMP/c3" "$TMP/vh" ours-only
if ((have_veritysetup)); then
    rc=0
    veritysetup verify "$TMP/c3" "$TMP/vh" "$root" --fec-device "$TMP/vf" --fec-roots 3 </dev/null 2>/dev/null || rc=$?
    [[ $rc == 2 ]] || fail "veritysetup verify corrected 3 blocks of a round with 3 roots (exit $rc)"
fi
# Four in one round: beyond 3 roots for everybody.
dd if=/dev/zero of="$TMP/c3" bs=4096 seek=25 count=1 conv=notrunc status=none
check_both 2 "$TMP/c3" "$TMP/vh"
grep_q '^blkcrypt: Errors cannot be repaired with FEC device.$' <"$TMP/stderr" || fail "uncorrectable: $(cat "$TMP/stderr")"
grep_q '^blkcrypt: data block 25 is corrupted$' <"$TMP/stderr" || fail "uncorrectable block not named: $(cat "$TMP/stderr")"
# --repair writes the corrected blocks back: the files are whole again.
expect_exit 0 "$BLKCRYPT" verity verify "$TMP/c2" "$TMP/ch" "$root" --fec-device "$TMP/vf" --fec-roots 3 --repair
cmp "$TMP/c2" "$TMP/v" || fail "--repair did not restore DATA"
cmp "$TMP/ch" "$TMP/vh" || fail "--repair did not restore HASH"
expect_exit 0 "$BLKCRYPT" verity verify "$TMP/c2" "$TMP/ch" "$root"
expect_exit 2 "$BLKCRYPT" verity verify "$TMP/v" "$TMP/vh" "$root" --repair
grep_q 'need --fec-device' <"$TMP/stderr" || fail "--repair without FEC: $(cat "$TMP/stderr")"
echo "FEC verify: ok"

# --- table and the read path: the kernel's FEC table options, and reads that
# return the corrected data (three whole blocks of one round, with 3 roots).
"$BLKCRYPT" verity table "$TMP/v" "$TMP/vh" "$root" --fec-device "$TMP/vf" --fec-roots 3 >"$TMP/table"
grep -q "^0 8000 verity 1 $TMP/v $TMP/vh 4096 4096 1000 1 sha256 $root [0-9a-f]* 8 use_fec_from_device $TMP/vf fec_start 0 fec_blocks 1009 fec_roots 3\$" \
    "$TMP/table" || fail "FEC table line: $(cat "$TMP/table")"
cp "$TMP/v" "$TMP/c4"
for b in 10 15 20; do dd if=/dev/zero of="$TMP/c4" bs=4096 seek=$b count=1 conv=notrunc status=none; done
"$BLKCRYPT" verity read "$TMP/c4" "$TMP/vh" "$root" --fec-device "$TMP/vf" --fec-roots 3 --out "$TMP/r" --json >"$TMP/rj" ||
    fail "read with FEC: exit $?"
cmp "$TMP/r" "$TMP/v" || fail "read with FEC returned other data"
grep_q '"status": "V".*"fec_corrected": 3' <"$TMP/rj" || fail "read stats: $(cat "$TMP/rj")"
sed "s|$TMP/v |$TMP/c4 |" "$TMP/table" >"$TMP/table4"
"$BLKCRYPT" verity read --table "$(cat "$TMP/table4")" --out "$TMP/r2" || fail "read --table with FEC: exit $?"
cmp "$TMP/r2" "$TMP/v" || fail "read --table with FEC returned other data"
dd if=/dev/zero of="$TMP/c4" bs=4096 seek=25 count=1 conv=notrunc status=none  # a 4th: beyond 3 roots
expect_exit 1 "$BLKCRYPT" verity read --table "$(cat "$TMP/table4")" --out "$TMP/r3"
grep_q '^blkcrypt: data block 10 is corrupted$' <"$TMP/stderr" || fail "uncorrectable read: $(cat "$TMP/stderr")"
[[ ! -e $TMP/r3 ]] || fail "a failed read left its output"
expect_exit 2 "$BLKCRYPT" verity table "$TMP/v" "$TMP/vh" "$root" --fec-device "$TMP/vf" --fec-offset 512
grep_q 'fec_start in blocks' <"$TMP/stderr" || fail "unaligned fec_start: $(cat "$TMP/stderr")"
echo "FEC table and read: ok"

# --- verify --repair-to/--repair-hash-to: corrected copies through the output
# policy; the inputs are left as they are.
cp "$TMP/v" "$TMP/rd"
cp "$TMP/vh" "$TMP/rh"
for b in 300 301; do dd if=/dev/urandom of="$TMP/rd" bs=4096 seek=$b count=1 conv=notrunc status=none; done
flip_byte "$TMP/rh" $((2 * 4096 + 7))
sha256sum "$TMP/rd" "$TMP/rh" >"$TMP/inputs.sum"
fix() { expect_exit "$1" "$BLKCRYPT" verity verify "$TMP/rd" "$TMP/rh" "$root" --fec-device "$TMP/vf" --fec-roots 3 "${@:2}"; }
# A hash block was corrected too: a DATA copy alone would not verify against HASH.
fix 2 --repair-to "$TMP/rd.out"
grep_q '1 hash block(s) were corrected too: give --repair-hash-to FILE as well (nothing written)' <"$TMP/stderr" ||
    fail "data copy alone: $(cat "$TMP/stderr")"
fix 2 --repair-hash-to "$TMP/rh.out"
grep_q '2 data block(s) were corrected too: give --repair-to FILE as well' <"$TMP/stderr" ||
    fail "hash copy alone: $(cat "$TMP/stderr")"
[[ ! -e $TMP/rd.out && ! -e $TMP/rh.out ]] || fail "a refused repair left a copy"
echo old >"$TMP/rh.out"
chmod 640 "$TMP/rh.out"
fix 0 --repair-to "$TMP/rd.out" --repair-hash-to "$TMP/rh.out"
grep_q "^blkcrypt: wrote $TMP/rd.out: a copy of $TMP/rd with 2 corrected block(s)\$" <"$TMP/stderr" ||
    fail "data copy message: $(cat "$TMP/stderr")"
grep_q "^blkcrypt: wrote $TMP/rh.out: a copy of $TMP/rh with 1 corrected block(s)\$" <"$TMP/stderr" ||
    fail "hash copy message: $(cat "$TMP/stderr")"
cmp "$TMP/rd.out" "$TMP/v" || fail "--repair-to: the copy is not the original DATA"
cmp "$TMP/rh.out" "$TMP/vh" || fail "--repair-hash-to: the copy is not the original HASH"
sha256sum --quiet -c "$TMP/inputs.sum" || fail "--repair-to changed an input"
[[ $(stat -c %a "$TMP/rh.out") == 640 ]] || fail "a replaced copy lost its mode"
expect_exit 0 "$BLKCRYPT" verity verify "$TMP/rd.out" "$TMP/rh.out" "$root"
if ((have_veritysetup)); then
    veritysetup verify "$TMP/rd.out" "$TMP/rh.out" "$root" </dev/null || fail "veritysetup verify rejects the repaired copies"
fi
# Nothing to correct: the copies are plain copies.
fix_ok() { expect_exit 0 "$BLKCRYPT" verity verify "$TMP/v" "$TMP/vh" "$root" --fec-device "$TMP/vf" --fec-roots 3 "$@"; }
fix_ok --repair-to "$TMP/same.out"
cmp "$TMP/same.out" "$TMP/v" || fail "--repair-to of an intact DATA differs"
# The output policy: never over an input (also through a symlink), never a
# FIFO, a character device or a directory, not together with --repair.
ln -s "$TMP/rd" "$TMP/rd.link"
mkfifo "$TMP/fifo"
for bad in "$TMP/rd" "$TMP/rd.link" "$TMP/rh" "$TMP/vf" "$TMP/fifo" /dev/null "$TMP"; do
    fix 2 --repair-to "$bad" --repair-hash-to "$TMP/x.out"
    expect_one_error_line
done
grep_q "is a directory" <"$TMP/stderr" || fail "directory copy: $(cat "$TMP/stderr")"
fix 2 --repair-to "$TMP/x.out" --repair-hash-to "$TMP/x.out"
grep_q 'name the same file' <"$TMP/stderr" || fail "one file for both copies: $(cat "$TMP/stderr")"
fix 2 --repair-to "$TMP/x.out" --repair
grep_q 'choose one' <"$TMP/stderr" || fail "--repair with --repair-to: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" verity verify "$TMP/v" "$TMP/vh" "$root" --repair-to "$TMP/x.out"
grep_q 'need --fec-device' <"$TMP/stderr" || fail "--repair-to without FEC: $(cat "$TMP/stderr")"
for action in table read; do  # verify's options only
    expect_exit 2 "$BLKCRYPT" verity $action "$TMP/v" "$TMP/vh" "$root" --fec-device "$TMP/vf" --repair-to "$TMP/x.out"
    grep_q 'does not apply to' <"$TMP/stderr" || fail "$action --repair-to: $(cat "$TMP/stderr")"
done
[[ ! -e $TMP/x.out ]] || fail "a refused repair wrote x.out"
sha256sum --quiet -c "$TMP/inputs.sum" || fail "a refused repair changed an input"
# HASH is DATA, FEC in it too: one copy holds the corrected data and hash blocks.
cp "$TMP/v" "$TMP/one"
"$BLKCRYPT" verity format "$TMP/one" "$TMP/one" --hash-offset 4096000 --fec-device "$TMP/one" --fec-offset 4300800 \
    >"$TMP/one.txt"
oroot=$(root_of "$TMP/one.txt")
cp "$TMP/one" "$TMP/onec"
dd if=/dev/urandom of="$TMP/onec" bs=4096 seek=17 count=1 conv=notrunc status=none
flip_byte "$TMP/onec" $((4096000 + 4096 + 9))
one() { expect_exit "$1" "$BLKCRYPT" verity verify "$TMP/onec" "$TMP/onec" "$oroot" --hash-offset 4096000 \
    --fec-device "$TMP/onec" --fec-offset 4300800 "${@:2}"; }
one 2 --repair-to "$TMP/one.out" --repair-hash-to "$TMP/x.out"
grep_q 'HASH is DATA' <"$TMP/stderr" || fail "--repair-hash-to with HASH = DATA: $(cat "$TMP/stderr")"
one 0 --repair-to "$TMP/one.out"
grep_q "a copy of $TMP/onec with 2 corrected block(s)" <"$TMP/stderr" || fail "one-file copy: $(cat "$TMP/stderr")"
cmp "$TMP/one.out" "$TMP/one" || fail "--repair-to of DATA = HASH = FEC is not the original"
if ((have_veritysetup)); then
    veritysetup verify "$TMP/one.out" "$TMP/one.out" "$oroot" --hash-offset 4096000 </dev/null ||
        fail "veritysetup verify rejects the repaired one-file copy"
fi
echo "FEC repair to copies: ok"

# --- dump --fec-device beyond the matrix: FEC covers the hash file to its
# end (256 data + 256 hash-file blocks, 2 roots: 3 rounds, 6 parity blocks),
# or to --fec-offset on it; the FEC device must exist.
head -c $((256 * 4096)) /dev/urandom >"$TMP/dd"
"$BLKCRYPT" verity format "$TMP/dd" "$TMP/dh" --fec-device "$TMP/df" --salt 00 >/dev/null
cp "$TMP/dh" "$TMP/dh.big" && truncate -s 1M "$TMP/dh.big"
dump_both() {  # dump_both WANT_FEC_BLOCKS ARGS...: ours, and veritysetup's live
    local want=$1
    shift
    (cd "$TMP" && "$BLKCRYPT" verity dump "$@") >"$TMP/dump" || fail "dump $*: exit $?"
    grep_q "^FEC blocks:     	$want\$" <"$TMP/dump" || fail "dump $*: $(cat "$TMP/dump")"
    if ((have_veritysetup)); then
        (cd "$TMP" && veritysetup dump "$@") >"$TMP/vdump"
        diff "$TMP/vdump" "$TMP/dump" >&2 || fail "dump $* differs from veritysetup's"
    fi
}
dump_both 4 dh --fec-device df
grep_q '^FEC device size: 	16384 \[bytes\]$' <"$TMP/dump" || fail "FEC device size: $(cat "$TMP/dump")"
dump_both 6 dh.big --fec-device df
dump_both 6 dh --fec-device df --fec-roots 3 --fec-offset 4096
grep_q 'FEC device size' <"$TMP/dump" && fail "FEC device size printed for a non-zero offset"
dump_both 4 dh.big --fec-device dh.big --fec-offset 16384
grep_q '^Hash device size: 	32768 \[bytes\]$' <"$TMP/dump" || fail "FEC in HASH: $(cat "$TMP/dump")"
dump_both 6 dh.big --fec-device dh.big --fec-offset 1048576
"$BLKCRYPT" verity dump "$TMP/dh" >"$TMP/dump"
grep_q '^FEC' <"$TMP/dump" && fail "dump without --fec-device printed FEC lines"
"$BLKCRYPT" verity dump "$TMP/dh" --fec-device "$TMP/df" --fec-roots 3 --json >"$TMP/dump"
grep_q '"fec_roots": 3, "fec_blocks": 6,' <"$TMP/dump" || fail "dump --json FEC fields: $(cat "$TMP/dump")"
expect_exit 4 "$BLKCRYPT" verity dump "$TMP/dh" --fec-device "$TMP/missing"  # as veritysetup dump
grep_q "Device $TMP/missing does not exist or access denied." <"$TMP/stderr" ||
    fail "dump with a missing FEC device: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" verity dump "$TMP/dh" --fec-roots 3
grep_q 'need --fec-device' <"$TMP/stderr" || fail "dump --fec-roots alone: $(cat "$TMP/stderr")"
"$BLKCRYPT" verity format "$TMP/dd" "$TMP/dh1k" --hash-block-size 1024 >/dev/null
expect_exit 2 "$BLKCRYPT" verity dump "$TMP/dh1k" --fec-device "$TMP/df"
grep_q 'equal data and hash block sizes' <"$TMP/stderr" || fail "dump, unequal block sizes: $(cat "$TMP/stderr")"
echo "FEC dump: ok"

# --- format --fec-device shows a second progress bar while encoding, named
# after the FEC device and counting the covered bytes (1000 data + 9 tree blocks).
"$BLKCRYPT" verity format "$TMP/v" "$TMP/ph" --fec-device "$TMP/pf" --progress-json >"$TMP/pj"
grep_q "^{\"device\":\"$TMP/v\",\"device_bytes\":\"4096000\",\"device_size\":\"4096000\"," <"$TMP/pj" ||
    fail "tree progress: $(cat "$TMP/pj")"
grep_q "^{\"device\":\"$TMP/pf\",\"device_bytes\":\"4132864\",\"device_size\":\"4132864\"," <"$TMP/pj" ||
    fail "no FEC progress: $(cat "$TMP/pj")"
"$BLKCRYPT" verity format "$TMP/v" "$TMP/ph" --fec-device "$TMP/pf" --progress >/dev/null 2>"$TMP/pt"
# Two final lines (a final line shows the time taken, never an ETA).
[[ $(tr '\r' '\n' <"$TMP/pt" | grep -c '100.0% .* time [0-9]') == 2 ]] || fail "text progress: two bars wanted: $(cat "$TMP/pt")"
"$BLKCRYPT" verity format "$TMP/v" "$TMP/ph" --fec-device "$TMP/pf" >/dev/null 2>"$TMP/pt"
[[ ! -s $TMP/pt ]] || fail "progress without a terminal or --progress: $(cat "$TMP/pt")"
echo "FEC progress: ok"
