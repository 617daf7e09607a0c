#!/bin/bash
# blkcrypt verity against veritysetup: the golden matrix (live when
# veritysetup is installed), cross-verification both ways, in-file trees,
# tampering, the read path, and bad input.
source "$(dirname "$0")/lib.sh"
CASES="$(cd "$(dirname "$0")/../verity/veritysetup" && pwd)"
UUID=00000000-1111-4222-8333-444444444444

make_data() {  # make_data PATH BYTES IV: make-golden.sh's deterministic data
    head -c "$2" /dev/zero | openssl enc -aes-128-ctr -nosalt -K 000102030405060708090a0b0c0d0e0f -iv "$3" >"$1"
}
root_of() { awk '/^Root hash:/{print $3}' "$1"; }

have_veritysetup=0
command -v veritysetup >/dev/null && have_veritysetup=1

# --- the golden matrix: our tree and summary equal veritysetup's (live), or
# the recorded golden values otherwise.
paste <(grep -v '^#' "$CASES/cases.tsv") <(grep -v '^#' "$CASES/golden.tsv") |
    while IFS=$'\t' read -r name size iv opts gname groot gsha gbytes; do
        [[ $name == "$gname" ]] || fail "cases.tsv and golden.tsv disagree at $name"
        make_data "$TMP/d" "$size" "$iv"
        rm -f "$TMP/ours"
        # shellcheck disable=SC2086
        "$BLKCRYPT" verity format "$TMP/d" "$TMP/ours" --uuid $UUID $opts >"$TMP/ours.txt" ||
            fail "$name: format exit $?"
        [[ $(root_of "$TMP/ours.txt") == "$groot" ]] || fail "$name: root hash differs from golden"
        [[ $(sha256sum <"$TMP/ours" | cut -d' ' -f1) == "$gsha" ]] || fail "$name: hash image differs from golden"
        if ((have_veritysetup)); then
            rm -f "$TMP/theirs"
            # shellcheck disable=SC2086
            veritysetup format "$TMP/d" "$TMP/theirs" --uuid $UUID $opts </dev/null >"$TMP/theirs.txt"
            cmp -s "$TMP/ours" "$TMP/theirs" || fail "$name: hash image differs from veritysetup's"
            sed -i 's/ours$/X/' "$TMP/ours.txt"
            sed -i 's/theirs$/X/' "$TMP/theirs.txt"
            diff "$TMP/ours.txt" "$TMP/theirs.txt" >&2 || fail "$name: summary differs from veritysetup's"
            # Each accepts the other's tree.
            root=$(root_of "$TMP/ours.txt")
            # verify needs the format options without a superblock, else only its offset.
            if [[ $opts == *--no-superblock* ]]; then vopts=$opts
            else vopts=$(grep -o -- '--hash-offset [0-9]*' <<<"$opts" || true); fi
            # shellcheck disable=SC2086
            veritysetup verify "$TMP/d" "$TMP/ours" "$root" $vopts </dev/null ||
                fail "$name: veritysetup verify rejects our tree"
            # shellcheck disable=SC2086
            "$BLKCRYPT" verity verify "$TMP/d" "$TMP/theirs" "$root" $vopts || fail "$name: we reject veritysetup's tree"
        fi
    done
echo "golden matrix: ok (veritysetup live: $have_veritysetup)"

# --- defaults: random 32-byte salt and UUID, dump, table, root hash file
random_file "$TMP/data" $((300 * 4096))
"$BLKCRYPT" verity format "$TMP/data" "$TMP/hash" --root-hash-file "$TMP/root.txt" >"$TMP/f.txt"
root=$(root_of "$TMP/f.txt")
[[ $(cat "$TMP/root.txt") == "$root" ]] || fail "--root-hash-file does not hold the root hash"
[[ $(awk '/^Salt:/{print length($2)}' "$TMP/f.txt") == 64 ]] || fail "default salt is not 32 bytes"
grep -Eq '^UUID: +.[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$' "$TMP/f.txt" ||
    fail "default UUID is not a random (v4) UUID"
"$BLKCRYPT" verity dump "$TMP/hash" >"$TMP/dump.txt"
grep -v '^Root hash' "$TMP/f.txt" | diff - "$TMP/dump.txt" >&2 || fail "dump differs from the format summary"
if ((have_veritysetup)); then
    veritysetup dump "$TMP/hash" | diff - "$TMP/dump.txt" >&2 || fail "dump differs from veritysetup dump"
fi
"$BLKCRYPT" verity verify "$TMP/data" "$TMP/hash" --root-hash-file "$TMP/root.txt" || fail "verify --root-hash-file"
"$BLKCRYPT" verity format --json --salt 01 "$TMP/data" "$TMP/hash2" | grep_q '"root_hash": "[0-9a-f]\{64\}"' ||
    fail "format --json has no root_hash"
"$BLKCRYPT" verity table "$TMP/data" "$TMP/hash" "$root" --ignore-zero-blocks >"$TMP/table"
grep -q "^0 2400 verity 1 $TMP/data $TMP/hash 4096 4096 300 1 sha256 $root [0-9a-f]\{64\} 1 ignore_zero_blocks\$" \
    "$TMP/table" || fail "table line: $(cat "$TMP/table")"

# --- with a superblock, parameter options that agree are accepted, as veritysetup
# accepts them; a contradicting one is refused with both values (veritysetup
# ignores it: docs/verity.md)
salt=$(awk '/^Salt:/{print $2}' "$TMP/f.txt")
uuid=$(awk '/^UUID:/{print $2}' "$TMP/f.txt")
agree=(--hash SHA256 --data-block-size 4096 --hash-block-size 4096 --data-blocks 300 --format 1
       --salt "$salt" --uuid "$uuid")
"$BLKCRYPT" verity verify "${agree[@]}" "$TMP/data" "$TMP/hash" "$root" || fail "verify with agreeing options"
"$BLKCRYPT" verity table "${agree[@]}" "$TMP/data" "$TMP/hash" "$root" >"$TMP/t2" || fail "table with agreeing options"
"$BLKCRYPT" verity table "$TMP/data" "$TMP/hash" "$root" | cmp -s - "$TMP/t2" || fail "agreeing options changed the table"
"$BLKCRYPT" verity read "${agree[@]}" "$TMP/data" "$TMP/hash" "$root" --out "$TMP/read0" || fail "read with agreeing options"
cmp -s "$TMP/read0" "$TMP/data" || fail "read with agreeing options returned other data"
if have_driver sha256-openssl; then
    "$BLKCRYPT" verity verify --hash sha256-openssl "$TMP/data" "$TMP/hash" "$root" ||
        fail "a driver of the recorded hash is refused"
fi
if ((have_veritysetup)); then
    veritysetup verify "${agree[@]}" "$TMP/data" "$TMP/hash" "$root" || fail "veritysetup refuses the agreeing options"
fi
while IFS='|' read -r opt val recorded; do
    expect_exit 2 "$BLKCRYPT" verity verify "$opt" "$val" "$TMP/data" "$TMP/hash" "$root"
    grep -qF -e "$opt $val contradicts the superblock, which records $recorded" "$TMP/stderr" ||
        fail "$opt $val: $(cat "$TMP/stderr")"
    expect_exit 2 "$BLKCRYPT" verity read "$opt" "$val" "$TMP/data" "$TMP/hash" "$root" --out "$TMP/never"
    [[ ! -e $TMP/never ]] || fail "a refused read left its output"
    if ((have_veritysetup)); then
        veritysetup verify "$opt" "$val" "$TMP/data" "$TMP/hash" "$root" 2>/dev/null ||
            fail "veritysetup no longer ignores $opt $val: revisit docs/verity.md"
    fi
done <<EOF
--hash|sha1|sha256
--data-block-size|512|4096
--hash-block-size|1024|4096
--data-blocks|299|300
--format|0|1
--salt|00|$salt
--salt|-|$salt
--uuid|00000000-0000-4000-8000-000000000000|$uuid
EOF

# --- the read path serves the data, sync and async
"$BLKCRYPT" verity read --table "$(cat "$TMP/table")" --out "$TMP/read" || fail "read --table: exit $?"
cmp -s "$TMP/read" "$TMP/data" || fail "read --table returned other data"
"$BLKCRYPT" verity read "$TMP/data" "$TMP/hash" "$root" --async --threads 1 --out "$TMP/read2" || fail "read --async"
cmp -s "$TMP/read2" "$TMP/data" || fail "read --async returned other data"
"$BLKCRYPT" verity verify --async "$TMP/data" "$TMP/hash" "$root" || fail "verify --async"
"$BLKCRYPT" verity format --hash 'cryptd(sha256)' --salt 01 --uuid $UUID "$TMP/data" "$TMP/h3" >"$TMP/a.txt"
other=sha256-cryptopp  # without OpenSSL (BLKCRYPT_WITH_OPENSSL=OFF)
have_driver sha256-openssl && other=sha256-openssl
"$BLKCRYPT" verity format --hash $other --salt 01 --uuid $UUID "$TMP/data" "$TMP/h4" >"$TMP/b.txt"
[[ $(root_of "$TMP/a.txt") == $(root_of "$TMP/b.txt") ]] || fail "cryptd(sha256) and $other roots differ"

# --- the tree inside the data file, past the data (the data is never touched)
cp "$TMP/data" "$TMP/both"
"$BLKCRYPT" verity format "$TMP/both" "$TMP/both" --hash-offset $((300 * 4096)) --salt 02 >"$TMP/in.txt" ||
    fail "in-file format: exit $?"
cmp -s -n $((300 * 4096)) "$TMP/both" "$TMP/data" || fail "in-file format changed the data"
"$BLKCRYPT" verity verify "$TMP/both" "$TMP/both" "$(root_of "$TMP/in.txt")" --hash-offset $((300 * 4096)) ||
    fail "in-file verify"
if ((have_veritysetup)); then
    veritysetup verify "$TMP/both" "$TMP/both" "$(root_of "$TMP/in.txt")" --hash-offset $((300 * 4096)) ||
        fail "veritysetup rejects our in-file tree"
fi
expect_exit 2 "$BLKCRYPT" verity format "$TMP/both" "$TMP/both" --hash-offset 4096
grep -q "past the data" "$TMP/stderr" || fail "overlapping in-file tree: $(cat "$TMP/stderr")"

# --- tampering: a data byte and a hash byte, each named
cp "$TMP/data" "$TMP/bad"
flip_byte "$TMP/bad" $((77 * 4096 + 123))
# A corrupted block exits 2, as veritysetup verify does (docs/exit-status.md).
expect_exit 2 "$BLKCRYPT" verity verify "$TMP/bad" "$TMP/hash" "$root"
grep -q "data block 77 is corrupted" "$TMP/stderr" || fail "data flip: $(cat "$TMP/stderr")"
if ((have_veritysetup)); then
    vrc=0
    veritysetup verify "$TMP/bad" "$TMP/hash" "$root" 2>/dev/null || vrc=$?
    [[ $vrc == 2 ]] || fail "veritysetup exits $vrc on the tampered data, we exit 2"
fi
expect_exit 1 "$BLKCRYPT" verity read "$TMP/bad" "$TMP/hash" "$root" --out "$TMP/never"
[[ ! -e $TMP/never ]] || fail "a failed read left its output"
expect_exit 0 "$BLKCRYPT" verity read "$TMP/bad" "$TMP/hash" "$root" --ignore-corruption --out "$TMP/ign"
grep -q "data block 77 is corrupted" "$TMP/stderr" || fail "ignore_corruption did not log"
cp "$TMP/hash" "$TMP/badhash"
flip_byte "$TMP/badhash" $((4 * 4096 + 9))
expect_exit 2 "$BLKCRYPT" verity verify "$TMP/data" "$TMP/badhash" "$root"
grep -q "hash block 4 (tree level 0) is corrupted" "$TMP/stderr" || fail "hash flip: $(cat "$TMP/stderr")"
# The top-level block (block 1, under the superblock) is a hash block too: 2,
# as veritysetup; only an intact tree under another root hash exits 1.
cp "$TMP/hash" "$TMP/badtop"
flip_byte "$TMP/badtop" $((1 * 4096 + 9))
expect_exit 2 "$BLKCRYPT" verity verify "$TMP/data" "$TMP/badtop" "$root"
grep -q "hash block 1 (tree level 1) is corrupted" "$TMP/stderr" || fail "top flip: $(cat "$TMP/stderr")"
cp "$TMP/hash" "$TMP/badtail"
flip_byte "$TMP/badtail" $((2 * 4096 - 1))  # past the three digests: zero padding
expect_exit 2 "$BLKCRYPT" verity verify "$TMP/data" "$TMP/badtail" "$root"
if [[ ${root:0:1} == 0 ]]; then wrong_root=1${root:1}; else wrong_root=0${root:1}; fi
expect_exit 1 "$BLKCRYPT" verity verify "$TMP/data" "$TMP/hash" "$wrong_root"
grep -q "root hash does not match" "$TMP/stderr" || fail "wrong root: $(cat "$TMP/stderr")"
if ((have_veritysetup)); then
    for h in badtop badtail; do
        vrc=0
        veritysetup verify "$TMP/data" "$TMP/$h" "$root" 2>/dev/null || vrc=$?
        [[ $vrc == 2 ]] || fail "veritysetup exits $vrc on $h, we exit 2"
    done
    vrc=0
    veritysetup verify "$TMP/data" "$TMP/hash" "$wrong_root" 2>/dev/null || vrc=$?
    [[ $vrc == 1 ]] || fail "veritysetup exits $vrc on a wrong root hash, we exit 1"
fi

# --- bad input: clear one-line errors, non-zero exits
expect_exit 2 "$BLKCRYPT" verity verify "$TMP/data" "$TMP/hash" "${root:0:62}"
grep -q "root hash has 31 bytes" "$TMP/stderr" || fail "short root: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" verity verify "$TMP/data" "$TMP/hash" "zz${root:2}"
cp "$TMP/hash" "$TMP/sb"
printf 'X' | dd of="$TMP/sb" bs=1 seek=0 conv=notrunc status=none
expect_exit 1 "$BLKCRYPT" verity verify "$TMP/data" "$TMP/sb" "$root"
expect_one_error_line
grep -q "bad magic" "$TMP/stderr" || fail "bad magic: $(cat "$TMP/stderr")"
for field in "8:\x02:version" "12:\x05:hash type" "81:\xff:salt size" "65:\x11:data block size"; do
    IFS=: read -r off byte what <<<"$field"
    cp "$TMP/hash" "$TMP/sb"
    printf "$byte" | dd of="$TMP/sb" bs=1 seek="$off" conv=notrunc status=none
    expect_exit 1 "$BLKCRYPT" verity dump "$TMP/sb"
    grep -q "$what" "$TMP/stderr" || fail "superblock $what: $(cat "$TMP/stderr")"
done
head -c 8192 "$TMP/hash" >"$TMP/short"
expect_exit 1 "$BLKCRYPT" verity verify "$TMP/data" "$TMP/short" "$root"
grep -q "hash device has 8192 bytes" "$TMP/stderr" || fail "short hash: $(cat "$TMP/stderr")"
head -c 1000 "$TMP/data" >"$TMP/odd"
expect_exit 2 "$BLKCRYPT" verity format "$TMP/odd" "$TMP/h5"
grep -q "not a multiple of the data block size" "$TMP/stderr" || fail "odd size: $(cat "$TMP/stderr")"
[[ ! -e $TMP/h5 ]] || fail "a refused format left a hash file"
expect_exit 2 "$BLKCRYPT" verity format "$TMP/data" "$TMP/h5" --data-block-size 3000
expect_exit 2 "$BLKCRYPT" verity format "$TMP/data" "$TMP/h5" --hash nosuchhash
expect_exit 2 "$BLKCRYPT" verity format "$TMP/data" "$TMP/h5" --salt "$(head -c 257 /dev/zero | xxd -p -c 600)"
expect_exit 2 "$BLKCRYPT" verity format "$TMP/data" "$TMP/h5" --uuid not-a-uuid
expect_exit 2 "$BLKCRYPT" verity frobnicate
[[ ! -e $TMP/h5 ]] || fail "a refused format left a hash file"
# --- a missing DATA, HASH or FEC device, or one that is no regular file or
# block device: veritysetup's status 4 and words, as every container command.
mkfifo "$TMP/fifo"
missing_or_odd() {  # WANT_WORDS CMD...: exit 4 with "Device X WANT_WORDS" (and veritysetup's too)
    local words=$1
    shift
    expect_exit 4 "$BLKCRYPT" "$@"
    expect_one_error_line
    grep -q "^blkcrypt: Device .* $words" "$TMP/stderr" || fail "$*: $(cat "$TMP/stderr")"
}
for args in "verify $TMP/nonexist $TMP/hash $root" "verify $TMP/data $TMP/nonexist $root" \
    "dump $TMP/nonexist" "format $TMP/nonexist $TMP/h6" "table $TMP/nonexist $TMP/hash $root" \
    "read $TMP/data $TMP/nonexist $root --out $TMP/never" "verify $TMP/data $TMP/hash $root --fec-device $TMP/nonexist"; do
    # shellcheck disable=SC2086
    missing_or_odd "does not exist or access denied." verity $args
done
for odd in "$TMP" "$TMP/fifo" /dev/null; do
    for args in "verify $odd $TMP/hash $root" "verify $TMP/data $odd $root" "dump $odd" "format $odd $TMP/h6"; do
        # shellcheck disable=SC2086
        missing_or_odd "is not compatible" verity $args
    done
done
[[ ! -e $TMP/h6 && ! -e $TMP/never ]] || fail "a refused device left an output"
if ((have_veritysetup)); then
    # The peer's own statuses for the same inputs (timeout: it blocks on a FIFO).
    for args in "verify $TMP/nonexist $TMP/hash $root" "verify $TMP/data $TMP/nonexist $root" "dump $TMP" \
        "verify $TMP/data /dev/null $root" "format $TMP $TMP/h6"; do
        vrc=0
        # shellcheck disable=SC2086
        timeout 20 veritysetup $args </dev/null >/dev/null 2>&1 || vrc=$?
        [[ $vrc == 4 ]] || fail "veritysetup $args exits $vrc; blkcrypt exits 4"
    done
    rm -f "$TMP/h6"
fi
no_temp() { [[ -z $(find "$TMP" -maxdepth 1 -name '.*.??????' -print -quit) ]] || fail "temporary file left"; }
no_temp
echo "verity CLI: ok"
