#!/bin/bash
# The providers of this build (BLKCRYPT_WITH_OPENSSL). Without OpenSSL: no
# OpenSSL driver is registered and no ELF of the build needs libcrypto or
# libssl, yet every algorithm of the kernel golden suite is there (all its
# cases encrypt to the kernel's bytes) and every self-test passes. With it:
# the OpenSSL drivers are registered and libblkcrypt needs libcrypto.
# usage: providers.sh BLKCRYPT WITH_OPENSSL(0|1) ELF...
source "$(dirname "$0")/lib.sh"
WITH=${2:?with_openssl 0 or 1}
shift 2
GOLDEN="$(cd "$(dirname "$0")/../dmcrypt/golden" && pwd)"

"$BLKCRYPT" list >"$TMP/list" || fail "list: exit $?"
openssl_drivers=$(grep -E '^(driver|module) +: (.*-)?openssl$' "$TMP/list" || true)
if [[ $WITH == 1 ]]; then
    for d in xts-aes-openssl cbc-aes-openssl gcm-aes-openssl sha256-openssl hmac-sha256-openssl; do
        grep -qE "^driver +: $d\$" "$TMP/list" || fail "built with OpenSSL, but no $d in blkcrypt list"
    done
else
    [[ -z $openssl_drivers ]] || fail "built without OpenSSL, but blkcrypt list names: $(head -n 2 <<<"$openssl_drivers" | tr -s " \n" " ")..."
fi

# libcrypto.so / libssl.so, not Crypto++'s libcrypto++.so.
for elf in "$@"; do
    needed=$(readelf -d "$elf" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    ossl=$(grep -E '^lib(crypto|ssl)\.so' <<<"$needed" || true)
    if [[ $WITH == 0 && -n $ossl ]]; then fail "$elf needs $ossl"; fi
    if [[ $WITH == 1 && $(basename "$elf") == libblkcrypt.so* && -z $ossl ]]; then
        fail "$elf does not need libcrypto although built with OpenSSL"
    fi
done

# Every case of the kernel golden suite, whichever provider serves it.
n=0
while IFS=$'\t' read -r case cipher key_hex iv_offset sector_size opts size ct_file rest; do
    [[ $case == case ]] && continue  # the header
    extra=()
    [[ $sector_size != 512 ]] && extra+=("sector_size:$sector_size")
    [[ $opts != - ]] && extra+=(${opts//,/ })
    args="$cipher $key_hex $iv_offset"
    ((${#extra[@]})) && args+=" ${#extra[@]} ${extra[*]}"
    head -c "$size" "$GOLDEN/plaintext.bin" >"$TMP/pt"
    "$BLKCRYPT" crypt encrypt --table "$args" "$TMP/pt" "$TMP/ct" 2>"$TMP/err" ||
        fail "$case: encrypt exit $? ($(cat "$TMP/err"))"
    cmp -s "$TMP/ct" "$GOLDEN/$ct_file" || fail "$case: ciphertext differs from the kernel's"
    n=$((n + 1))
done <"$GOLDEN/manifest.tsv"
[[ $n -ge 90 ]] || fail "only $n golden cases in the manifest"

"$BLKCRYPT" selftest >"$TMP/selftest" || fail "selftest: exit $? ($(grep -v passed "$TMP/selftest" | head -3))"
echo "providers: with_openssl=$WITH, $n golden cases, $# ELF files checked"
