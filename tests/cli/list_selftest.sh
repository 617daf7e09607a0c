#!/bin/bash
# blkcrypt list / selftest, and the top-level usage errors.
source "$(dirname "$0")/lib.sh"

expect_exit 0 "$BLKCRYPT" list
# The aes block: name line directly followed by the Crypto++ driver line.
grep -A1 -x 'name         : aes' "$TMP/stdout" | grep_q -x 'driver       : aes-cryptopp' ||
    fail "list has no block for aes / aes-cryptopp"
grep -qx 'selftest     : passed' "$TMP/stdout" || fail "list shows no passed self-test"
# Every block starts with name and is closed by a blank line.
awk 'prev == "" && $0 != "" && $1 != "name" { bad = 1 } { prev = $0 } END { exit bad }' \
    "$TMP/stdout" || fail "list: a block does not start with 'name'"

expect_exit 0 "$BLKCRYPT" list --json
python3 -m json.tool "$TMP/stdout" >/dev/null || fail "list --json is not valid JSON"
python3 - "$TMP/stdout" <<'PY' || fail "list --json entries lack fields"
import json, sys
algs = json.load(open(sys.argv[1]))
assert isinstance(algs, list) and algs, "empty list"
for a in algs:
    assert isinstance(a["name"], str) and isinstance(a["driver"], str), a
    assert isinstance(a["priority"], int), a
assert any(a["name"] == "aes" and a["driver"] == "aes-cryptopp" for a in algs)
PY

expect_exit 0 "$BLKCRYPT" selftest
grep -Eqx '[0-9]+ passed, 0 failed, [0-9]+ untested' "$TMP/stdout" || fail "selftest: no summary"
grep -q '^PASS  aes-cryptopp (aes): ' "$TMP/stdout" || fail "selftest: aes did not pass"

expect_exit 0 "$BLKCRYPT" selftest aes sha256
grep -Eqx '[1-9][0-9]* passed, 0 failed, [0-9]+ untested' "$TMP/stdout" || fail "selftest aes sha256"

# The algorithms TrueCrypt/VeraCrypt need beyond the kernel's usual set.
expect_exit 0 "$BLKCRYPT" selftest blake2s-256 streebog256 streebog512 kuznyechik
for d in blake2s-256-cryptopp streebog256-generic streebog512-generic kuznyechik-generic; do
    grep -q "^PASS  $d (" "$TMP/stdout" || fail "selftest: $d did not pass"
done
grep -Eqx '4 passed, 0 failed, 0 untested' "$TMP/stdout" || fail "selftest of the GOST/BLAKE2s set"

expect_exit nonzero "$BLKCRYPT" selftest nosuchalg
grep -q '^FAIL  nosuchalg: ' "$TMP/stdout" || fail "selftest nosuchalg: no FAIL line"
grep -Eqx '0 passed, 1 failed, 0 untested' "$TMP/stdout" || fail "selftest nosuchalg: summary"

expect_exit 2 "$BLKCRYPT" frobnicate
expect_one_error_line
expect_exit 2 "$BLKCRYPT" hash --bogus
expect_one_error_line
expect_exit 2 "$BLKCRYPT"
expect_one_error_line
expect_exit 0 "$BLKCRYPT" --help
grep -q '^  skcipher' "$TMP/stdout" || fail "--help does not list the commands"
expect_exit 0 "$BLKCRYPT" --version
for cmd in list selftest hash skcipher aead; do
    expect_exit 0 "$BLKCRYPT" "$cmd" --help
    grep -q "^Usage: blkcrypt $cmd" "$TMP/stdout" || fail "$cmd --help"
done
echo "list_selftest: ok"
