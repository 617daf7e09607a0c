#!/bin/bash
# blkcrypt skcipher with a bare block cipher (ECB) against openssl enc.
source "$(dirname "$0")/lib.sh"

for bits in 128 192 256; do
    key=$(openssl rand -hex $((bits / 8)))
    for n in 16 4096 $((1024 * 1024 + 48)); do
        random_file "$TMP/pt" "$n"
        openssl enc -aes-$bits-ecb -nopad -K "$key" -in "$TMP/pt" -out "$TMP/want"
        "$BLKCRYPT" skcipher --alg aes --key "$key" --encrypt --in "$TMP/pt" --out "$TMP/ct" ||
            fail "aes-$bits encrypt $n bytes: exit $?"
        cmp -s "$TMP/want" "$TMP/ct" || fail "aes-$bits encrypt $n bytes differs from openssl"
        "$BLKCRYPT" skcipher --alg aes --key "$key" --decrypt --in "$TMP/ct" --out "$TMP/back" ||
            fail "aes-$bits decrypt $n bytes: exit $?"
        cmp -s "$TMP/pt" "$TMP/back" || fail "aes-$bits decrypt $n bytes does not round-trip"
    done
    # stdin to stdout
    "$BLKCRYPT" skcipher --alg aes --key "$key" -e <"$TMP/pt" >"$TMP/ct2" || fail "stdin: exit $?"
    cmp -s "$TMP/want" "$TMP/ct2" || fail "aes-$bits stdin/stdout differs from openssl"
done

key=$(openssl rand -hex 16)
random_file "$TMP/pt" 32

# Usage errors: one line on stderr, exit 2, and never the key.
expect_exit 2 "$BLKCRYPT" skcipher --alg aes --key 00112233445566778899aabbccddee --encrypt --in "$TMP/pt"
expect_one_error_line
grep -qi 00112233 "$TMP/stderr" && fail "key material on stderr"
expect_exit 2 "$BLKCRYPT" skcipher --alg aes --key "${key}0" --encrypt --in "$TMP/pt"
expect_one_error_line
expect_exit 2 "$BLKCRYPT" skcipher --alg aes --key "${key:0:30}zz" --encrypt --in "$TMP/pt"
expect_one_error_line
expect_exit 2 "$BLKCRYPT" skcipher --alg aes --key "$key" --iv 00 --encrypt --in "$TMP/pt"
expect_one_error_line
expect_exit 2 "$BLKCRYPT" skcipher --alg aes --key "$key" --in "$TMP/pt"
expect_one_error_line
expect_exit 2 "$BLKCRYPT" skcipher --alg aes --key "$key" --encrypt --decrypt --in "$TMP/pt"
expect_exit 2 "$BLKCRYPT" skcipher --alg nosuchcipher --key "$key" --encrypt --in "$TMP/pt"
expect_one_error_line
expect_exit 2 "$BLKCRYPT" skcipher --alg sha256 --key "$key" --encrypt --in "$TMP/pt"
expect_one_error_line
[[ ! -e $TMP/out ]] || fail "an --out file appeared after usage errors"

# A length ECB refuses: an error and no output file.
random_file "$TMP/short" 15
expect_exit nonzero "$BLKCRYPT" skcipher --alg aes --key "$key" --encrypt --in "$TMP/short" --out "$TMP/out"
expect_one_error_line
[[ ! -e $TMP/out ]] || fail "15-byte input left an --out file"
[[ -z $(ls -A "$TMP" | grep '^\.out') ]] || fail "a temporary file was left behind"

# The input is never overwritten, however it is spelled.
cp "$TMP/pt" "$TMP/keep"
expect_exit 2 "$BLKCRYPT" skcipher --alg aes --key "$key" --encrypt --in "$TMP/pt" --out "$TMP/pt"
expect_one_error_line
expect_exit 2 "$BLKCRYPT" skcipher --alg aes --key "$key" --encrypt --in "$TMP/pt" --out "$TMP/../$(basename "$TMP")/pt"
cmp -s "$TMP/pt" "$TMP/keep" || fail "the input was modified"

# --out replaces an existing file only on success.
echo old >"$TMP/existing"
expect_exit nonzero "$BLKCRYPT" skcipher --alg aes --key "$key" --encrypt --in "$TMP/short" --out "$TMP/existing"
[[ $(cat "$TMP/existing") == old ]] || fail "a failed run changed an existing --out file"
expect_exit 0 "$BLKCRYPT" skcipher --alg aes --key "$key" --encrypt --in "$TMP/pt" --out "$TMP/existing"
[[ $(stat -c %s "$TMP/existing") == 32 ]] || fail "--out was not replaced"
# --driver forces one implementation; every driver of xts(aes) agrees.
xkey=$(head -c 64 /dev/urandom | od -An -v -tx1 | tr -d ' \n')
xiv=$(head -c 16 /dev/urandom | od -An -v -tx1 | tr -d ' \n')
random_file "$TMP/xpt" 4111
xts_drivers=('xts(aes-cryptopp)')
# OpenSSL's (BLKCRYPT_WITH_OPENSSL), and on CPUs with VAES (+ AVX-512) the x86 ones.
for d in xts-aes-openssl xts-aes-vaes xts-aes-vaes-avx2; do
  have_driver "$d" && xts_drivers+=("$d")
done
for drv in "${xts_drivers[@]}"; do
  "$BLKCRYPT" skcipher --alg 'xts(aes)' --driver "$drv" --key "$xkey" --iv "$xiv" --encrypt \
    --in "$TMP/xpt" --out "$TMP/x.$drv" || fail "xts(aes) with --driver $drv failed"
  cmp -s "$TMP/x.xts(aes-cryptopp)" "$TMP/x.$drv" || fail "xts(aes) drivers disagree: $drv"
done
"$BLKCRYPT" hash --alg sha256 --driver sha256-cryptopp "$TMP/xpt" | grep_q "^$(sha256sum "$TMP/xpt" | cut -d' ' -f1) " \
  || fail "hash --driver sha256-cryptopp differs from sha256sum"
expect_exit 2 "$BLKCRYPT" skcipher --alg 'cbc(aes)' --driver "${xts_drivers[-1]}" --key "$xkey" --iv "$xiv" --encrypt --in "$TMP/xpt"
expect_one_error_line
expect_exit 2 "$BLKCRYPT" skcipher --alg 'xts(aes)' --driver no-such-driver --key "$xkey" --iv "$xiv" --encrypt --in "$TMP/xpt"
echo "skcipher: ok"
