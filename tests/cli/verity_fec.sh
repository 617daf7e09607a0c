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
