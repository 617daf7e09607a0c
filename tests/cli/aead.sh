#!/bin/bash
# blkcrypt aead with gcm(aes): the GCM spec's test case 4, a cross-check
# against python3-cryptography, and the failed-tag path; aegis128 with a
# vector of the kernel's testmgr.h.
source "$(dirname "$0")/lib.sh"

gcm() {  # gcm KEY IV AAD ARGS...
    local key=$1 iv=$2 aad=$3
    shift 3
    "$BLKCRYPT" aead --alg 'gcm(aes)' --key "$key" --iv "$iv" --aad "$aad" "$@"
}

# Test case 4 of McGrew & Viega, "The Galois/Counter Mode of Operation".
key=feffe9928665731c6d6a8f9467308308
iv=cafebabefacedbaddecaf888
aad=feedfacedeadbeeffeedfacedeadbeefabaddad2
pt=d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39
ct=42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091
tag=5bc94fbc3221a5db94fae95ae7121a47

echo -n "$pt" | xxd -r -p >"$TMP/pt"
gcm $key $iv $aad --authsize 16 --encrypt --in "$TMP/pt" --out "$TMP/sealed" || fail "encrypt: exit $?"
[[ $(xxd -p "$TMP/sealed" | tr -d '\n') == "$ct$tag" ]] || fail "test case 4: wrong ciphertext||tag"
gcm $key $iv $aad --authsize 16 --decrypt --in "$TMP/sealed" --out "$TMP/opened" || fail "decrypt: exit $?"
cmp -s "$TMP/pt" "$TMP/opened" || fail "test case 4 does not decrypt"

# A shorter tag is a prefix of the full one.
gcm $key $iv $aad --authsize 12 -e <"$TMP/pt" >"$TMP/sealed12" || fail "authsize 12: exit $?"
[[ $(xxd -p "$TMP/sealed12" | tr -d '\n') == "$ct${tag:0:24}" ]] || fail "authsize 12: wrong output"

# Random data through stdin/stdout, against an independent implementation.
if python3 -c 'import cryptography' 2>/dev/null; then
    rkey=$(openssl rand -hex 32) riv=$(openssl rand -hex 12) raad=$(openssl rand -hex 7)
    random_file "$TMP/rand" 1000
    gcm $rkey $riv $raad --authsize 16 -e <"$TMP/rand" >"$TMP/rand.sealed" || fail "random: exit $?"
    python3 - $rkey $riv $raad "$TMP/rand" "$TMP/rand.sealed" <<'PY' || fail "differs from AESGCM"
import sys
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
key, iv, aad = (bytes.fromhex(x) for x in sys.argv[1:4])
pt = open(sys.argv[4], "rb").read()
assert AESGCM(key).encrypt(iv, pt, aad) == open(sys.argv[5], "rb").read()
PY
    gcm $rkey $riv $raad --authsize 16 -d <"$TMP/rand.sealed" | cmp -s - "$TMP/rand" ||
        fail "random data does not round-trip"
else
    echo "python3-cryptography missing: skipping the cross-check"
fi

# One flipped bit in the ciphertext or the tag: exit 1, one error line, no output.
for pos in 0 59 75; do
    cp "$TMP/sealed" "$TMP/bad"
    byte=$(xxd -s "$pos" -l 1 -p "$TMP/bad")
    printf "%02x" $((0x$byte ^ 1)) | xxd -r -p |
        dd of="$TMP/bad" bs=1 seek="$pos" conv=notrunc status=none
    expect_exit 1 gcm $key $iv $aad --authsize 16 --decrypt --in "$TMP/bad" --out "$TMP/bad.out"
    grep -qx 'blkcrypt: authentication failed' "$TMP/stderr" || fail "tamper at $pos: $(cat "$TMP/stderr")"
    [[ ! -e $TMP/bad.out ]] || fail "tamper at $pos: an output file was written"
    expect_exit 1 gcm $key $iv $aad --authsize 16 --decrypt --in "$TMP/bad"
    [[ ! -s $TMP/stdout ]] || fail "tamper at $pos: output on stdout"
done
expect_exit 1 gcm $key $iv 00 --authsize 16 --decrypt --in "$TMP/sealed" --out "$TMP/bad.out"
[[ ! -e $TMP/bad.out ]] || fail "wrong AAD: an output file was written"

# aegis128 (AEGIS-128): testmgr.h aegis128_tv_template, 16 bytes each of
# assoc data and text, a 14-byte tag; the best driver (aegis128-aesni with
# AES-NI) and the portable one give the same bytes.
akey=42f08419a63f2bea34f679a379e9eb0a aiv=51b91280eaded571542da6c878b21b8c
aaad=6183a0e82e7d7ff87463d2ec767c4c0d
apt=704c2f50721c297f959aff1075457d8f
act=b2fbf697697ae9ece294a18ba02b60721d04dd6aef468f68e9e017457012
echo -n "$apt" | xxd -r -p >"$TMP/apt"
for alg in aegis128 aegis128-generic; do
    "$BLKCRYPT" aead --alg $alg --key $akey --iv $aiv --aad $aaad --authsize 14 -e --in "$TMP/apt" \
        --out "$TMP/asealed" || fail "$alg encrypt: exit $?"
    [[ $(xxd -p "$TMP/asealed" | tr -d '\n') == "$act" ]] || fail "$alg: wrong ciphertext||tag"
    "$BLKCRYPT" aead --alg $alg --key $akey --iv $aiv --aad $aaad --authsize 14 -d <"$TMP/asealed" |
        cmp -s - "$TMP/apt" || fail "$alg: the vector does not decrypt"
done
printf '\x01' | dd of="$TMP/asealed" bs=1 seek=20 conv=notrunc status=none
expect_exit 1 "$BLKCRYPT" aead --alg aegis128 --key $akey --iv $aiv --aad $aaad --authsize 14 -d \
    --in "$TMP/asealed" --out "$TMP/abad.out"
grep -qx 'blkcrypt: authentication failed' "$TMP/stderr" || fail "aegis128 tamper: $(cat "$TMP/stderr")"
[[ ! -e $TMP/abad.out ]] || fail "aegis128 tamper: an output file was written"
expect_exit 2 "$BLKCRYPT" aead --alg aegis128 --key $akey --iv $aiv --authsize 7 -e --in "$TMP/apt"
expect_one_error_line

# Usage errors: one line, exit 2.
expect_exit 2 gcm $key $iv $aad --authsize 17 -e --in "$TMP/pt"
expect_one_error_line
expect_exit 2 gcm $key 00 $aad --authsize 16 -e --in "$TMP/pt"
expect_one_error_line
expect_exit 2 gcm ${key}00 $iv $aad --authsize 16 -e --in "$TMP/pt"
expect_one_error_line
expect_exit 2 gcm $key $iv $aad -e --in "$TMP/pt"
expect_one_error_line
expect_exit 2 "$BLKCRYPT" aead --alg 'gcm(aes)' --key $key --authsize 16 -e --in "$TMP/pt"
expect_one_error_line
echo "aead: ok"
