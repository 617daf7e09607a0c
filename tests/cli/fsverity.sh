#!/bin/bash
# blkcrypt fsverity digest must print (and write) exactly what the real
# `fsverity digest` (fsverity-utils) does; that part is skipped when the tool
# is not installed. Error cases are always checked.
source "$(dirname "$0")/lib.sh"

cd "$TMP"
random_file empty 0
random_file one 1
random_file block 4096
random_file odd 200001
random_file multi $((128 * 4096 + 3))   # two tree levels at 4K/sha256
random_file "with space" 5000

if command -v fsverity >/dev/null; then
    files=(empty one block odd multi "with space")
    optsets=(
        ""
        "--compact"
        "--for-builtin-sig"
        "--for-builtin-sig --compact"
        "--hash-alg=sha512"
        "--hash-alg=sha512 --for-builtin-sig"
        "--block-size=1024 --salt=00112233"
        "--block-size=65536"
        "--block-size=512 --hash-alg=sha512 --salt=ab"
        "--block-size=64"
        "--salt="
        "--salt=$(printf 'ff%.0s' {1..32})"
    )
    for opts in "${optsets[@]}"; do
        # shellcheck disable=SC2086
        want=$(fsverity digest "${files[@]}" $opts) || fail "fsverity digest $opts"
        # shellcheck disable=SC2086
        got=$("$BLKCRYPT" fsverity digest "${files[@]}" $opts) || fail "blkcrypt fsverity digest $opts: exit $?"
        [[ $got == "$want" ]] || fail "$opts: got '$got', want '$want'"
    done
    for f in "${files[@]}"; do
        for opts in "" "--block-size=1024 --salt=abcd" "--hash-alg=sha512 --block-size=128"; do
            rm -f t1 d1 t2 d2
            # shellcheck disable=SC2086
            fsverity digest "$f" $opts --out-merkle-tree=t1 --out-descriptor=d1 >want
            # shellcheck disable=SC2086
            "$BLKCRYPT" fsverity digest "$f" $opts --out-merkle-tree=t2 --out-descriptor=d2 --threads=2 >got ||
                fail "--out-* $f $opts: exit $?"
            cmp -s want got || fail "--out-* $f $opts: stdout differs"
            cmp -s t1 t2 || fail "$f $opts: Merkle tree differs"
            cmp -s d1 d2 || fail "$f $opts: descriptor differs"
        done
    done
    # Same digest whatever the thread count.
    for t in 1 2 5; do
        got=$("$BLKCRYPT" fsverity digest --threads=$t multi)
        [[ $got == "$(fsverity digest multi)" ]] || fail "--threads=$t: got '$got'"
    done
else
    echo "fsverity not installed: skipping the comparison with fsverity-utils"
fi

# Errors: one line on stderr, non-zero exit, no output file left behind.
for bad in "--block-size=1000" "--block-size=0" "--block-size=abc" "--block-size=32" \
           "--block-size=2147483648" "--hash-alg=md5" "--salt=abc" "--salt=zz" \
           "--salt=$(printf '00%.0s' {1..33})" "--threads=-1" "--bogus"; do
    expect_exit 2 "$BLKCRYPT" fsverity digest one "$bad" --out-merkle-tree=t3 --out-descriptor=d3
    expect_one_error_line
    [[ ! -s stdout ]] || fail "$bad: printed '$(cat stdout)'"
done
expect_exit 1 "$BLKCRYPT" fsverity digest missing --out-merkle-tree=t3 --out-descriptor=d3
expect_one_error_line
grep -q "missing" stderr || fail "the error does not name the file: $(cat stderr)"
expect_exit 1 "$BLKCRYPT" fsverity digest . --out-merkle-tree=t3
expect_one_error_line
expect_exit 2 "$BLKCRYPT" fsverity digest one odd --out-merkle-tree=t3
expect_one_error_line
expect_exit 2 "$BLKCRYPT" fsverity digest odd --out-merkle-tree=odd
expect_one_error_line
expect_exit 2 "$BLKCRYPT" fsverity digest odd --out-merkle-tree=t3 --out-descriptor=t3
expect_one_error_line
expect_exit 2 "$BLKCRYPT" fsverity digest
expect_one_error_line
expect_exit 2 "$BLKCRYPT" fsverity
expect_one_error_line
expect_exit 2 "$BLKCRYPT" fsverity frobnicate one
expect_one_error_line
[[ ! -e t3 && ! -e d3 ]] || fail "an output file was left behind"
if compgen -G ".t3.*" >/dev/null || compgen -G ".d3.*" >/dev/null; then fail "a temporary file was left behind"; fi
# A file that fails part way (missing after a good one) keeps the good line.
expect_exit 1 "$BLKCRYPT" fsverity digest one missing
[[ $(wc -l <stdout) == 1 ]] || fail "want the first file's line before the error"

expect_exit 0 "$BLKCRYPT" fsverity --help
grep -q digest stdout || fail "fsverity --help does not mention digest"
expect_exit 0 "$BLKCRYPT" fsverity digest --help
grep -q -- --out-merkle-tree stdout || fail "digest --help does not list --out-merkle-tree"
echo "fsverity: ok"
