#!/bin/bash
# blkcrypt hash must print exactly what coreutils' *sum tools print.
source "$(dirname "$0")/lib.sh"

random_file "$TMP/empty" 0
random_file "$TMP/one" 1
random_file "$TMP/big" $((1024 * 1024 + 3))  # crosses the 1 MiB read chunk
random_file "$TMP/back\\slash" 5            # sha256sum escapes such names

for alg in sha256 sha1 sha512 md5; do
    sum=${alg}sum
    for f in "$TMP/empty" "$TMP/one" "$TMP/big" "$TMP/back\\slash"; do
        want=$($sum "$f")
        got=$("$BLKCRYPT" hash --alg "$alg" "$f") || fail "$alg $f: exit $?"
        [[ $got == "$want" ]] || fail "$alg $f: got '$got', want '$want'"
    done
    want=$($sum <"$TMP/big")
    got=$("$BLKCRYPT" hash --alg "$alg" <"$TMP/big") || fail "$alg stdin: exit $?"
    [[ $got == "$want" ]] || fail "$alg stdin: got '$got', want '$want'"
    got=$("$BLKCRYPT" hash --alg "$alg" - <"$TMP/one") || fail "$alg '-': exit $?"
    [[ $got == "$($sum - <"$TMP/one")" ]] || fail "$alg '-': got '$got'"
    want=$($sum "$TMP/empty" "$TMP/one" "$TMP/big")
    got=$("$BLKCRYPT" hash --alg "$alg" "$TMP/empty" "$TMP/one" "$TMP/big") || fail "$alg several"
    [[ $got == "$want" ]] || fail "$alg several files: got '$got', want '$want'"
done

# An async ahash goes through the Ahash fallback and gives the same digest.
want=$(sha256sum "$TMP/big")
got=$("$BLKCRYPT" hash --alg 'cryptd(sha256)' "$TMP/big") || fail "cryptd(sha256): exit $?"
[[ $got == "$want" ]] || fail "cryptd(sha256): got '$got', want '$want'"

# blake2s-256 (TrueCrypt/VeraCrypt's PBKDF2 hash) against Python's hashlib,
# which embeds the BLAKE2 reference code; the big file crosses read chunks.
for f in "$TMP/empty" "$TMP/big"; do
    want=$(python3 -c 'import hashlib, sys; print(hashlib.blake2s(open(sys.argv[1], "rb").read()).hexdigest())' "$f")
    got=$("$BLKCRYPT" hash --alg blake2s-256 "$f") || fail "blake2s-256 $f: exit $?"
    [[ ${got%% *} == "$want" ]] || fail "blake2s-256 $f: got '$got', want '$want'"
done

expect_exit 1 "$BLKCRYPT" hash --alg sha256 "$TMP/missing"
expect_exit 2 "$BLKCRYPT" hash --alg nosuchhash "$TMP/one"
expect_one_error_line
expect_exit 2 "$BLKCRYPT" hash --alg sha256 --key 00112233 "$TMP/one"
expect_one_error_line
expect_exit 2 "$BLKCRYPT" hash "$TMP/one"
expect_one_error_line
echo "hash: ok"
