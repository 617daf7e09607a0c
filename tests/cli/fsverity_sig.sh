#!/bin/bash
# blkcrypt fsverity sign must write `fsverity sign`'s bytes and print its line
# (RSA; an EC signature is randomized, so it is checked by openssl instead),
# and fsverity verify-sig must accept fsverity-utils' signatures and refuse
# wrong, untrusted and malformed ones. The fsverity-utils part is skipped
# when the tool is not installed.
source "$(dirname "$0")/lib.sh"

SIGS=$(cd "$(dirname "$0")/../verity/sig" && pwd)
cd "$TMP"
for k in rsa ec other expired; do
    install -m 600 "$SIGS/$k.key" "$k.key"
    cp "$SIGS/$k.pem" "$k.pem"
done
random_file file 200001
random_file empty 0

rc=0
"$BLKCRYPT" fsverity sign file our.sig --key rsa.key --cert rsa.pem >out 2>err || rc=$?
if grep -q "built without OpenSSL" err; then
    [[ $rc == 1 ]] || fail "fsverity sign without OpenSSL exits $rc"
    expect_exit 1 "$BLKCRYPT" fsverity verify-sig file "$SIGS/fsverity.sig" --cert rsa.pem
    grep_q "built without OpenSSL" "$TMP/stderr" || fail "verify-sig without OpenSSL: $(cat "$TMP/stderr")"
    echo "built without OpenSSL: refusals checked, the rest skipped"
    exit 0
fi
[[ $rc == 0 ]] || fail "fsverity sign: $(cat err)"

optsets=("" "--hash-alg=sha512" "--block-size=1024 --salt=0011" "--hash-alg=sha512 --block-size=65536 --salt=$(printf 'ab%.0s' {1..32})" "--salt=")
if command -v fsverity >/dev/null; then
    for f in file empty; do
        for opts in "${optsets[@]}"; do
            # shellcheck disable=SC2086
            fsverity sign "$f" peer.sig --key=rsa.key --cert=rsa.pem $opts >peer.out
            # shellcheck disable=SC2086
            "$BLKCRYPT" fsverity sign "$f" our.sig --key rsa.key --cert rsa.pem $opts >our.out
            cmp peer.sig our.sig || fail "fsverity sign $f $opts: signatures differ"
            cmp peer.out our.out || fail "fsverity sign $f $opts: '$(cat our.out)' vs '$(cat peer.out)'"
            # shellcheck disable=SC2086
            "$BLKCRYPT" fsverity verify-sig "$f" peer.sig --cert rsa.pem $opts >verify.out ||
                fail "verify-sig refuses fsverity sign's signature ($f $opts)"
            # shellcheck disable=SC2086
            fsverity sign "$f" peer-ec.sig --key=ec.key --cert=ec.pem $opts >/dev/null
            # shellcheck disable=SC2086
            "$BLKCRYPT" fsverity verify-sig "$f" peer-ec.sig --cert ec.pem $opts >/dev/null ||
                fail "verify-sig refuses fsverity sign's EC signature ($f $opts)"
        done
    done
    # The certificate defaults to the key file, as in fsverity-utils.
    cat rsa.key rsa.pem >both.pem
    chmod 600 both.pem
    fsverity sign file peer.sig --key=both.pem >/dev/null
    "$BLKCRYPT" fsverity sign file our.sig --key both.pem >/dev/null
    cmp peer.sig our.sig || fail "sign with the certificate in the key file"
    # openssl verifies our EC signature over the formatted digest.
    "$BLKCRYPT" fsverity sign file our-ec.sig --key ec.key --cert ec.pem >/dev/null
    fsverity digest file --for-builtin-sig --compact | xxd -r -p >formatted
    openssl smime -verify -binary -inform der -in our-ec.sig -content formatted -certfile ec.pem -CAfile ec.pem \
        -purpose any -out /dev/null 2>ossl.err || fail "openssl refuses our EC signature: $(cat ossl.err)"
else
    echo "fsverity (fsverity-utils) not installed: live comparison skipped"
fi
# fsverity-utils' recorded signature (make-golden.sh), byte for byte.
"$BLKCRYPT" fsverity sign "$SIGS/fsverity.data" golden.sig --key rsa.key --cert rsa.pem >/dev/null
cmp golden.sig "$SIGS/fsverity.sig" || fail "fsverity sign differs from the recorded fsverity-utils signature"

# verify-sig against committed fsverity-utils signatures (no peer needed).
cp "$SIGS/fsverity.data" data
expect_exit 0 "$BLKCRYPT" fsverity verify-sig data "$SIGS/fsverity.sig" --cert rsa.pem
grep_q "^Signature OK for file 'data' (sha256:" "$TMP/stdout" || fail "verify-sig output: $(cat "$TMP/stdout")"
expect_exit 0 "$BLKCRYPT" fsverity verify-sig data "$SIGS/fsverity-sha512.sig" --cert ec.pem \
    --hash-alg sha512 --block-size 1024 --salt 0102
mkdir certs && cp other.pem rsa.pem certs/
expect_exit 0 "$BLKCRYPT" fsverity verify-sig data "$SIGS/fsverity.sig" --trusted-certs certs
# Other parameters are another digest.
expect_exit 2 "$BLKCRYPT" fsverity verify-sig data "$SIGS/fsverity-sha512.sig" --cert ec.pem
grep_q "the signature does not match the data" "$TMP/stderr" || fail "wrong parameters: $(cat "$TMP/stderr")"
cp data changed && flip_byte changed 100
expect_exit 2 "$BLKCRYPT" fsverity verify-sig changed "$SIGS/fsverity.sig" --cert rsa.pem
expect_one_error_line
grep_q "the signature does not match the data" "$TMP/stderr" || fail "changed file: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" fsverity verify-sig data "$SIGS/fsverity.sig" --cert other.pem
grep_q "not signed by a trusted certificate" "$TMP/stderr" || fail "untrusted: $(cat "$TMP/stderr")"
head -c 100 "$SIGS/fsverity.sig" >short.sig
expect_exit 1 "$BLKCRYPT" fsverity verify-sig data short.sig --cert rsa.pem
grep_q "not a DER PKCS#7 message" "$TMP/stderr" || fail "malformed: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" fsverity verify-sig data "$SIGS/fsverity.sig"
grep_q "needs --cert FILE, --trusted-cert FILE or --trusted-certs DIR" "$TMP/stderr" || fail "no cert: $(cat "$TMP/stderr")"
# --trusted-cert, as blkcrypt verity names it: the same trust as --cert, repeatable, mixable.
expect_exit 0 "$BLKCRYPT" fsverity verify-sig data "$SIGS/fsverity.sig" --trusted-cert rsa.pem
expect_exit 0 "$BLKCRYPT" fsverity verify-sig data "$SIGS/fsverity.sig" --trusted-cert other.pem --trusted-cert rsa.pem
expect_exit 0 "$BLKCRYPT" fsverity verify-sig data "$SIGS/fsverity.sig" --cert other.pem --trusted-cert rsa.pem
expect_exit 0 "$BLKCRYPT" fsverity verify-sig data "$SIGS/fsverity.sig" --trusted-cert other.pem --cert rsa.pem
expect_exit 2 "$BLKCRYPT" fsverity verify-sig data "$SIGS/fsverity.sig" --trusted-cert other.pem --trusted-cert ec.pem
grep_q "not signed by a trusted certificate" "$TMP/stderr" || fail "--trusted-cert untrusted: $(cat "$TMP/stderr")"
expect_exit 1 "$BLKCRYPT" fsverity verify-sig data "$SIGS/fsverity.sig" --trusted-cert missing.pem
grep_q "missing.pem" "$TMP/stderr" || fail "--trusted-cert missing file: $(cat "$TMP/stderr")"
# Expired signer: refused, accepted with --ignore-cert-time as by the kernel.
"$BLKCRYPT" fsverity sign data exp.sig --key expired.key --cert expired.pem >/dev/null
expect_exit 2 "$BLKCRYPT" fsverity verify-sig data exp.sig --cert expired.pem
grep_q "expired on Jan  1 00:00:00 2021 GMT" "$TMP/stderr" || fail "expired: $(cat "$TMP/stderr")"
expect_exit 0 "$BLKCRYPT" fsverity verify-sig data exp.sig --cert expired.pem --ignore-cert-time

# sign's errors and output policy.
expect_exit 2 "$BLKCRYPT" fsverity sign data x.sig
expect_exit 2 "$BLKCRYPT" fsverity sign data x.sig --key other.key --cert rsa.pem
[[ ! -e x.sig ]] || fail "a refused sign left x.sig"
expect_exit 2 "$BLKCRYPT" fsverity sign data data --key rsa.key --cert rsa.pem
cmp data "$SIGS/fsverity.data" || fail "sign wrote over its input"
expect_exit 2 "$BLKCRYPT" fsverity sign data --key rsa.key --cert rsa.pem
expect_exit 2 "$BLKCRYPT" fsverity sign data - --key rsa.key --cert rsa.pem
grep_q "SIG cannot be stdout" "$TMP/stderr" || fail "sign to stdout: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" fsverity sign data x.sig --key rsa.key --cert rsa.pem --hash-alg md5
echo "fsverity signatures: all checks passed"
