#!/bin/bash
# Replays golden.txt (make-kernel-golden.sh) without the oracle: the
# signatures blkcrypt makes now are the bytes the kernel saw, blkcrypt's
# table line and default key description are the ones the kernel and
# veritysetup used, and blkcrypt's verdict on each signature, with a keyring
# that lacks the signer (as the kernel's did), is the kernel's:
#   -ENOKEY -> exit 2 "not signed by a trusted certificate" / "self-signed"
#   -EKEYREJECTED -> exit 2 "does not match the data"
#   -EBADMSG -> exit 1 "not a DER PKCS#7 message"
# and with the signer trusted, only ours and with-cert verify.
source "$(dirname "$0")/../../cli/lib.sh"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KEYS="$HERE/../sig"
G="$HERE/golden.txt"
rc=0
"$BLKCRYPT" verity sign 00 --key "$KEYS/rsa.key" --cert "$KEYS/rsa.pem" --out "$TMP/probe.sig" 2>"$TMP/err" || rc=$?
if grep -q "built without OpenSSL" "$TMP/err"; then echo "built without OpenSSL: skipped"; exit 0; fi
source "$HERE/sigs.sh"
make_sigs "$BLKCRYPT" "$TMP"
for s in $SIG_NAMES; do
    want=$(awk -v s="$s" '$2 == "SIG" && $3 == s {print $4}' "$G")
    got=$(sha256sum <"$TMP/files/$s.sig" | cut -c1-64)
    [[ $want == "$got" ]] || fail "signature $s: sha256 $got, the kernel saw $want"
done
# The kernel's refusal of a test certificate in the secondary keyring.
grep_q "^ADD-SECONDARY add_key asymmetric: Required key not available" "$G" || fail "golden: secondary keyring line"
# veritysetup's key description is our default for the same name.
uuid=5b1d2e3f-4a5b-4c6d-8e7f-0a1b2c3d4e5f
grep_q "^VERITYSETUP-DEBUG Adding signature into keyring cryptsetup:$uuid-v\$" "$G" || fail "golden: veritysetup key description"
table=$("$BLKCRYPT" verity table "$TMP/data" "$TMP/hash" "$ROOT" --root-hash-signature "$TMP/files/ours.sig" \
        --trusted-cert "$KEYS/rsa.pem" --name v)
[[ $table == *" root_hash_sig_key_desc cryptsetup:$uuid-v" ]] || fail "default key description: $table"
table=$("$BLKCRYPT" verity table "$TMP/data" "$TMP/hash" "$ROOT" --root-hash-signature "$TMP/files/ours.sig" \
        --trusted-cert "$KEYS/rsa.pem" --sig-key-desc blkcrypt:sig-test)
table=${table//"$TMP/data"//dev/vda}
table=${table//"$TMP/hash"//dev/vdb}
grep_q "table: ${table//$ROOT/ROOT}\$" "$G" || fail "the table line differs from the one the kernel loaded: $table"

kernel_code() {  # NAME -> the kernel's error for veritysetup open with it
    sed -n "s/^VERITYSETUP $1 rc=[0-9]* kernel=.*verification failed (\(-E[A-Z]*\))\$/\1/p" "$G"
}
for s in $SIG_NAMES; do
    code=$(kernel_code "$s")
    case $code in
        -ENOKEY) want=2 msg="not signed by a trusted certificate|untrusted self-signed" ;;
        -EKEYREJECTED) want=2 msg="does not match the data" ;;
        -EBADMSG) want=1 msg="not a DER PKCS#7 message" ;;
        *) fail "golden: no kernel verdict for $s" ;;
    esac
    expect_exit "$want" "$BLKCRYPT" verity verify "$TMP/data" "$TMP/hash" "$ROOT" \
        --root-hash-signature "$TMP/files/$s.sig" --trusted-cert "$KEYS/other.pem"
    grep -qE "$msg" "$TMP/stderr" || fail "$s: the kernel said $code, blkcrypt: $(cat "$TMP/stderr")"
done
# The table loaded with dmsetup got the kernel's verdict for the same bytes.
grep_q "^DMSETUP ours rc=1 kernel=.*(-ENOKEY)\$" "$G" || fail "golden: dmsetup ours"
# With the signer trusted (what the kernel could not be given), blkcrypt
# accepts exactly the two signatures over ROOT that verify.
for s in $SIG_NAMES; do
    rc=0
    "$BLKCRYPT" verity verify "$TMP/data" "$TMP/hash" "$ROOT" --root-hash-signature "$TMP/files/$s.sig" \
        --trusted-cert "$KEYS/rsa.pem" >/dev/null 2>&1 || rc=$?
    case $s in ours | with-cert) [[ $rc == 0 ]] || fail "$s refused with the signer trusted" ;;
                *) [[ $rc != 0 ]] || fail "$s accepted" ;; esac
done
echo "kernel signature golden: all checks passed"
