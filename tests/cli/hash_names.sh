#!/bin/bash
# veritysetup's harmless conventions: hash names in any case (verity --hash,
# fsverity --hash-alg, crypt --hash), stored and printed in lower case, and
# veritysetup format's warning for a data block size above the page size.
source "$(dirname "$0")/lib.sh"

head -c $((1024 * 1024)) /dev/urandom >"$TMP/data"
root_of() { awk '/^Root hash:/{print $3}' "$1"; }

"$BLKCRYPT" verity format --hash sha256 --salt 00 "$TMP/data" "$TMP/h1" >"$TMP/o1"
"$BLKCRYPT" verity format --hash SHA256 --salt 00 "$TMP/data" "$TMP/h2" >"$TMP/o2" ||
    fail "verity format --hash SHA256: exit $?"
[[ $(root_of "$TMP/o1") == "$(root_of "$TMP/o2")" ]] || fail "SHA256 and sha256 give different roots"
grep -q $'^Hash algorithm:  \tsha256$' "$TMP/o2" || fail "summary: $(grep Hash "$TMP/o2")"
# The superblock's algorithm field (offset 32) is lower case, as veritysetup writes it.
[[ $(dd if="$TMP/h2" bs=1 skip=32 count=6 status=none) == sha256 ]] || fail "superblock algorithm not lower case"
if command -v veritysetup >/dev/null; then
    theirs=$(veritysetup format --hash SHA256 -s 00 "$TMP/data" "$TMP/h3" | awk '/^Root hash:/{print $3}')
    [[ $theirs == "$(root_of "$TMP/o2")" ]] || fail "root differs from veritysetup --hash SHA256"
fi
# With a superblock the algorithm comes from it; without one, --hash names it.
"$BLKCRYPT" verity format --no-superblock --hash sha256 --salt 00 "$TMP/data" "$TMP/h4" >"$TMP/o4"
"$BLKCRYPT" verity verify --no-superblock --hash Sha256 --salt 00 "$TMP/data" "$TMP/h4" "$(root_of "$TMP/o4")" >/dev/null ||
    fail "verity verify --hash Sha256"

a=$("$BLKCRYPT" fsverity digest --hash-alg sha512 "$TMP/data")
b=$("$BLKCRYPT" fsverity digest --hash-alg SHA512 "$TMP/data") || fail "fsverity --hash-alg SHA512: exit $?"
[[ $a == "$b" ]] || fail "fsverity SHA512 != sha512"

a=$(printf 'pw\n' | "$BLKCRYPT" crypt table -c aes-xts-plain64 -h sha512 -s 512 --device /dev/x --size 8 --show-key)
b=$(printf 'pw\n' | "$BLKCRYPT" crypt table -c aes-xts-plain64 -h SHA512 -s 512 --device /dev/x --size 8 --show-key) ||
    fail "crypt --hash SHA512: exit $?"
[[ $a == "$b" ]] || fail "crypt --hash SHA512 != sha512"

# A data block above the page size: veritysetup's warning on stderr, and the tree still made.
page=$(getconf PAGESIZE)
"$BLKCRYPT" verity format --data-block-size $((page * 2)) "$TMP/data" "$TMP/h4" >"$TMP/o4" 2>"$TMP/e4" ||
    fail "format with a big data block: exit $?"
[[ $(cat "$TMP/e4") == "WARNING: Kernel cannot activate device if data block size exceeds page size ($page)." ]] ||
    fail "page size warning: '$(cat "$TMP/e4")'"
grep -q '^Root hash:' "$TMP/o4" || fail "no summary after the warning"
"$BLKCRYPT" verity format --data-block-size "$page" "$TMP/data" "$TMP/h5" >/dev/null 2>"$TMP/e5"
[[ ! -s $TMP/e5 ]] || fail "a warning at the page size: $(cat "$TMP/e5")"
echo "hash names: ok"
