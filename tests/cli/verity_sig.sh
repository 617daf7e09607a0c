#!/bin/bash
# Root-hash signatures: `blkcrypt verity sign` must make openssl smime's bytes
# (RSA; ECDSA is randomized, so each tool verifies the other's), and
# --root-hash-signature must accept and refuse as the kernel's
# dm-verity-verify-sig does (tests/verity/sig holds test-only certificates).
source "$(dirname "$0")/lib.sh"

SIGS=$(cd "$(dirname "$0")/../verity/sig" && pwd)
cd "$TMP"
# Keys readable by the owner only, whatever the checkout's modes.
for k in rsa ec other expired leaf ca; do
    install -m 600 "$SIGS/$k.key" "$k.key"
    cp "$SIGS/$k.pem" "$k.pem"
done
random_file data $((64 * 4096))
"$BLKCRYPT" verity format data hash --salt 00 >fmt
root=$(awk '/^Root hash/ {print $3}' fmt)
[[ ${#root} == 64 ]] || fail "no root hash in: $(cat fmt)"

# A build without OpenSSL refuses every signature option clearly.
rc=0
"$BLKCRYPT" verity sign "$root" --key rsa.key --cert rsa.pem --out our.sig 2>err || rc=$?
if grep -q "built without OpenSSL" err; then
    [[ $rc == 1 ]] || fail "sign without OpenSSL exits $rc"
    expect_exit 1 "$BLKCRYPT" verity verify data hash "$root" --root-hash-signature "$SIGS/rsa.sig" --trusted-cert rsa.pem
    grep_q "built without OpenSSL" "$TMP/stderr" || fail "verify without OpenSSL: $(cat "$TMP/stderr")"
    echo "built without OpenSSL: refusals checked, the rest skipped"
    exit 0
fi
[[ $rc == 0 ]] || fail "verity sign: $(cat err)"

# 1. Our bytes are openssl's (RSA PKCS#1 v1.5 is deterministic).
smime() {  # KEYNAME OUT
    printf %s "$root" | openssl smime -sign -nocerts -noattr -binary -outform der -inkey "$1.key" -signer "$1.pem" -out "$2"
}
smime rsa peer.sig
cmp our.sig peer.sig || fail "verity sign (RSA) differs from openssl smime"
# The kernel checks the lowercase string veritysetup puts in the table.
"$BLKCRYPT" verity sign "${root^^}" --key rsa.key --cert rsa.pem --out upper.sig
cmp upper.sig peer.sig || fail "an upper-case ROOT_HEX is not signed as lower case"
# EC: openssl verifies ours, we verify openssl's.
"$BLKCRYPT" verity sign "$root" --key ec.key --cert ec.pem --out our-ec.sig
printf %s "$root" >root.txt
openssl smime -verify -binary -inform der -in our-ec.sig -content root.txt -certfile ec.pem -CAfile ec.pem \
    -purpose any -out /dev/null 2>ossl.err || fail "openssl refuses our EC signature: $(cat ossl.err)"
openssl smime -verify -binary -inform der -in our.sig -content root.txt -certfile rsa.pem -CAfile rsa.pem \
    -purpose any -out /dev/null 2>ossl.err || fail "openssl refuses our RSA signature: $(cat ossl.err)"
smime ec peer-ec.sig
expect_exit 0 "$BLKCRYPT" verity verify data hash "$root" --root-hash-signature peer-ec.sig --trusted-cert ec.pem

# sign's own errors.
expect_exit 2 "$BLKCRYPT" verity sign "$root" --key other.key --cert rsa.pem --out x.sig
grep_q "the key does not match the certificate" "$TMP/stderr" || fail "mismatched key: $(cat "$TMP/stderr")"
[[ ! -e x.sig ]] || fail "a refused sign left x.sig"
expect_exit 2 "$BLKCRYPT" verity sign "$root" --key rsa.key --cert rsa.pem
expect_exit 2 "$BLKCRYPT" verity sign "$root" --key rsa.key --cert rsa.pem --out rsa.pem
[[ $(head -c 27 rsa.pem) == "-----BEGIN CERTIFICATE-----" ]] || fail "--out over --cert replaced it"
expect_exit 2 "$BLKCRYPT" verity sign zz --key rsa.key --cert rsa.pem --out x.sig

# 2. The check, in verify, read, table and serve.
expect_exit 0 "$BLKCRYPT" verity verify data hash "$root" --root-hash-signature our.sig --trusted-cert rsa.pem
expect_exit 0 "$BLKCRYPT" verity verify data hash "$root" --root-hash-signature our.sig \
    --trusted-cert other.pem --trusted-cert rsa.pem
mkdir certs && cp other.pem ec.pem rsa.pem certs/
expect_exit 0 "$BLKCRYPT" verity verify data hash "$root" --root-hash-signature our.sig --trusted-certs certs
echo "$root" >root.file
expect_exit 0 "$BLKCRYPT" verity verify data hash --root-hash-file root.file --root-hash-signature our.sig --trusted-cert rsa.pem
"$BLKCRYPT" verity read data hash "$root" --root-hash-signature our.sig --trusted-cert rsa.pem --out read.out
cmp read.out data || fail "verity read with a signature returned other data"

refused() {  # STATUS MESSAGE SIG [options...]
    local status=$1 msg=$2 sig=$3
    shift 3
    for action in verify read; do
        expect_exit "$status" "$BLKCRYPT" verity $action data hash "$root" --root-hash-signature "$sig" "$@"
        expect_one_error_line
        grep_q "$msg" "$TMP/stderr" || fail "$action with $sig: '$(cat "$TMP/stderr")' lacks '$msg'"
    done
    [[ ! -e out.never ]] || fail "a refused read wrote its output"
}
refused 2 "not signed by a trusted certificate" our.sig --trusted-cert other.pem
mkdir certs-other && cp other.pem certs-other/
refused 2 "not signed by a trusted certificate" our.sig --trusted-certs certs-other
# A signature of another root hash.
other_root=$(printf %064x 7)
"$BLKCRYPT" verity sign "$other_root" --key rsa.key --cert rsa.pem --out wrong.sig
refused 2 "the signature does not match the data" wrong.sig --trusted-cert rsa.pem
# Malformed, attached, missing.
head -c 300 /dev/urandom >garbage.sig
refused 1 "not a DER PKCS#7 message" garbage.sig --trusted-cert rsa.pem
head -c 200 our.sig >short.sig
refused 1 "not a DER PKCS#7 message" short.sig --trusted-cert rsa.pem
printf %s "$root" | openssl smime -sign -nocerts -noattr -binary -outform der -nodetach -inkey rsa.key -signer rsa.pem -out attached.sig
refused 1 "a detached signature is needed" attached.sig --trusted-cert rsa.pem
refused 1 "missing.sig" missing.sig --trusted-cert rsa.pem
# Expired: refused, unless --ignore-cert-time (what the kernel does).
smime expired expired.sig
refused 2 "certificate '/CN=blkcrypt test expired' expired on Jan  1 00:00:00 2021 GMT" expired.sig --trusted-cert expired.pem
expect_exit 0 "$BLKCRYPT" verity verify data hash "$root" --root-hash-signature expired.sig --trusted-cert expired.pem --ignore-cert-time
# The kernel's chain rules: a signature carrying the leaf is trusted through
# its CA; one without certificates only through the leaf itself.
printf %s "$root" | openssl smime -sign -noattr -binary -outform der -inkey leaf.key -signer leaf.pem -out chain.sig
expect_exit 0 "$BLKCRYPT" verity verify data hash "$root" --root-hash-signature chain.sig --trusted-cert ca.pem
smime leaf leaf.sig
refused 2 "not signed by a trusted certificate" leaf.sig --trusted-cert ca.pem
expect_exit 0 "$BLKCRYPT" verity verify data hash "$root" --root-hash-signature leaf.sig --trusted-cert leaf.pem
# A checked signature does not excuse a corrupted image: the blocks are still checked.
cp data bad && flip_byte bad 5000
expect_exit 2 "$BLKCRYPT" verity verify bad hash "$root" --root-hash-signature our.sig --trusted-cert rsa.pem
grep_q "data block 1 is corrupted" "$TMP/stderr" || fail "corrupted block with a signature: $(cat "$TMP/stderr")"

# Usage errors.
expect_exit 2 "$BLKCRYPT" verity verify data hash "$root" --root-hash-signature our.sig
grep_q "needs --trusted-cert FILE or --trusted-certs DIR" "$TMP/stderr" || fail "no trusted cert: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" verity verify data hash "$root" --trusted-cert rsa.pem
grep_q "only with --root-hash-signature" "$TMP/stderr" || fail "--trusted-cert alone: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" verity verify data hash "$root" --root-hash-signature our.sig --trusted-cert rsa.key
expect_exit 2 "$BLKCRYPT" verity format data hash2 --root-hash-signature our.sig
mkdir certs-bad && cp rsa.pem certs-bad/ && echo "not a certificate" >certs-bad/README
expect_exit 2 "$BLKCRYPT" verity verify data hash "$root" --root-hash-signature our.sig --trusted-certs certs-bad
grep_q "certs-bad/README: not a PEM or DER X.509 certificate" "$TMP/stderr" || fail "non-certificate in DIR: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" verity verify data hash "$root" --root-hash-signature our.sig --trusted-cert rsa.pem --sig-key-desc x

# 3. table: the key description veritysetup open would load the signature under.
uuid=$(awk '/^UUID/ {print $2}' fmt)
"$BLKCRYPT" verity table data hash "$root" --root-hash-signature our.sig --trusted-cert rsa.pem >table
want="0 512 verity 1 data hash 4096 4096 64 1 sha256 $root 00 2 root_hash_sig_key_desc cryptsetup:$uuid-verity"
[[ $(cat table) == "$want" ]] || fail "table: $(cat table), want $want"
"$BLKCRYPT" verity table data hash "$root" --root-hash-signature our.sig --trusted-cert rsa.pem --name vroot --ignore-zero-blocks >table
want="0 512 verity 1 data hash 4096 4096 64 1 sha256 $root 00 3 ignore_zero_blocks root_hash_sig_key_desc cryptsetup:$uuid-vroot"
[[ $(cat table) == "$want" ]] || fail "table --name: $(cat table), want $want"
"$BLKCRYPT" verity table data hash "$root" --root-hash-signature our.sig --trusted-cert rsa.pem --sig-key-desc mykey --json >table.json
grep_q '"root_hash_sig_key_desc": "mykey"' table.json || fail "table --json: $(cat table.json)"
expect_exit 2 "$BLKCRYPT" verity table data hash "$root" --root-hash-signature our.sig --trusted-cert other.pem
"$BLKCRYPT" verity table data hash "$root" >plain.table
grep_q "root_hash_sig_key_desc" plain.table && fail "a table without signature names a key"
# read --table: a line naming a key needs the signature file.
line="0 512 verity 1 data hash 4096 4096 64 1 sha256 $root 00 2 root_hash_sig_key_desc cryptsetup:$uuid-verity"
expect_exit 2 "$BLKCRYPT" verity read --table "$line" --out out.never
grep_q "give the signature with --root-hash-signature" "$TMP/stderr" || fail "read --table without signature: $(cat "$TMP/stderr")"
"$BLKCRYPT" verity read --table "$line" --root-hash-signature our.sig --trusted-cert rsa.pem --out read2.out
cmp read2.out data || fail "read --table with a signature"
expect_exit 2 "$BLKCRYPT" verity read --table "$line" --root-hash-signature wrong.sig --trusted-cert rsa.pem --out out.never
[[ ! -e out.never ]] || fail "a refused read wrote its output"
# serve refuses before it listens.
expect_exit 2 "$BLKCRYPT" verity serve data hash "$root" --root-hash-signature wrong.sig --trusted-cert rsa.pem --socket "$TMP/nbd.sock"
grep_q "the signature does not match the data" "$TMP/stderr" || fail "serve: $(cat "$TMP/stderr")"
[[ ! -e "$TMP/nbd.sock" ]] || fail "serve listened with a refused signature"
# An empty root hash is not signed; a signature or certificate past 8 MiB is
# refused before it is read into memory whole.
expect_exit 2 "$BLKCRYPT" verity sign "" --key rsa.key --cert rsa.pem --out empty.sig
grep_q "the root hash is empty" "$TMP/stderr" || fail "sign of an empty root: $(cat "$TMP/stderr")"
[[ ! -e empty.sig ]] || fail "sign of an empty root wrote SIG"
truncate -s 9M huge.bin
expect_exit 2 "$BLKCRYPT" verity verify data hash "$root" --root-hash-signature huge.bin --trusted-cert rsa.pem
grep_q "more than the maximum of 8388608 bytes" "$TMP/stderr" || fail "huge signature: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" verity verify data hash "$root" --root-hash-signature our.sig --trusted-cert huge.bin
grep_q "more than the maximum of 8388608 bytes" "$TMP/stderr" || fail "huge certificate: $(cat "$TMP/stderr")"
echo "verity signatures: all checks passed"
