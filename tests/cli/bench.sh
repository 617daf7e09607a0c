#!/bin/bash
# blkcrypt bench: the table and JSON are well formed, every figure is a
# positive throughput, the drivers are the registry's choices, bad options fail.
source "$(dirname "$0")/lib.sh"
# OpenSSL's xts driver, or without it (BLKCRYPT_WITH_OPENSSL=OFF) the composition.
xts_driver='xts(aes-cryptopp)'
have_driver xts-aes-openssl && xts_driver=xts-aes-openssl

"$BLKCRYPT" bench --time 0.01 --request 4096 >"$TMP/out" || fail "bench: exit $?"
grep -q '^# Tests are approximate using memory only' "$TMP/out" || fail "no header"
[[ $(grep -cE '^ +[a-z0-9]+-(cbc|xts) +[0-9]+b +[0-9.]+ MiB/s +[0-9.]+ MiB/s +[^ ]+$' "$TMP/out") == 12 ]] ||
    fail "not 12 cipher lines: $(cat "$TMP/out")"
grep -qE "^ +aes-xts +512b .* (xts-aes-vaes(-avx2)?|${xts_driver//[()]/.})\$" "$TMP/out" || fail "aes-xts is not on the best driver (VAES, AVX-512 or AVX2, or $xts_driver)"
[[ $(grep -cE '^ +(sha1|sha256|sha512|blake2b-512) +[0-9.]+ MiB/s +[^ ]+$' "$TMP/out") == 4 ]] || fail "hash lines"
grep -E ' 0\.0 MiB/s' "$TMP/out" && fail "a zero throughput"

"$BLKCRYPT" bench --cipher serpent-xts --key-size 256 --hash sha256 --time 0.01 --json >"$TMP/json"
python3 - "$TMP/json" <<'PY' || fail "bench --json: $(cat "$TMP/json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["request_bytes"] == 65536
[c] = d["ciphers"]
assert c["cipher"] == "serpent-xts" and c["key_bits"] == 256 and c["driver"].startswith("xts(serpent")
assert c["encrypt_mib_s"] > 0 and c["decrypt_mib_s"] > 0
[h] = d["hashes"]
assert h["hash"] == "sha256" and h["mib_s"] > 0
PY

"$BLKCRYPT" bench -h | grep_q "^Usage: blkcrypt bench" || fail "bench -h is not the help"
# --driver measures the named driver of the one cipher or hash.
"$BLKCRYPT" bench --cipher aes-xts --driver "$xts_driver" --time 0.01 --json >"$TMP/drv.json"
grep -qF "\"driver\": \"$xts_driver\"" "$TMP/drv.json" || fail "bench --driver $xts_driver: $(cat "$TMP/drv.json")"
"$BLKCRYPT" bench --hash sha256 --driver sha256-cryptopp --time 0.01 | grep_q -E '^ +sha256 .* sha256-cryptopp$' ||
    fail "bench --driver sha256-cryptopp"
expect_exit 2 "$BLKCRYPT" bench --hash sha256 --driver "$xts_driver" --time 0.01
expect_exit 2 "$BLKCRYPT" bench --driver "$xts_driver" --time 0.01
expect_exit 2 "$BLKCRYPT" bench --cipher aes-xts --hash sha256 --driver "$xts_driver" --time 0.01
expect_exit 2 "$BLKCRYPT" bench --cipher nosuch-xts --time 0.01
expect_exit 2 "$BLKCRYPT" bench --cipher aes --time 0.01
expect_exit 2 "$BLKCRYPT" bench --cipher aes-xts --key-size 100 --time 0.01
expect_exit 2 "$BLKCRYPT" bench --key-size 256
expect_exit 2 "$BLKCRYPT" bench --request 100
expect_exit 2 "$BLKCRYPT" bench --hash 'hmac(sha256)' --time 0.01
echo "bench CLI: ok"
