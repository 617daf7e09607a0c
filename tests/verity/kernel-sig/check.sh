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
# Then accept-golden.txt (make-kernel-accept-golden.sh): the kernel with the
# signer enrolled in MokList accepted ours and with-cert, and nothing else.
source "$(dirname "$0")/../../cli/lib.sh"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KEYS="$HERE/../sig"
G="$HERE/golden.txt"
rc=0
"$BLKCRYPT" verity sign 00 --key "$KEYS/rsa.key" --cert "$KEYS/rsa.pem" --out "$TMP/probe.sig" 2>"$TMP/err" || rc=$?
if grep -q "built without OpenSSL" "$TMP/err"; then echo "built without OpenSSL: skipped"; exit 0; fi
source "$HERE/sigs.sh"
# same_sigs GOLDEN NAMES...: the signatures made now are the bytes the kernel saw.
same_sigs() {
    local g=$1 s want got
    shift
    for s in "$@"; do
        want=$(awk -v s="$s" '$2 == "SIG" && $3 == s {print $4}' "$g")
        got=$(sha256sum <"$TMP/files/$s.sig" | cut -c1-64)
        [[ $want == "$got" ]] || fail "$(basename "$g"): signature $s: sha256 $got, the kernel saw $want"
    done
}
make_sigs "$BLKCRYPT" "$TMP"
# shellcheck disable=SC2086 # SIG_NAMES is a word list
same_sigs "$G" $SIG_NAMES
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
# With the signer trusted (the kernel too, in accept-golden.txt below), blkcrypt
# accepts exactly the two signatures over ROOT that verify.
for s in $SIG_NAMES; do
    rc=0
    "$BLKCRYPT" verity verify "$TMP/data" "$TMP/hash" "$ROOT" --root-hash-signature "$TMP/files/$s.sig" \
        --trusted-cert "$KEYS/rsa.pem" >/dev/null 2>&1 || rc=$?
    case $s in ours | with-cert) [[ $rc == 0 ]] || fail "$s refused with the signer trusted" ;;
                *) [[ $rc != 0 ]] || fail "$s accepted" ;; esac
done

# accept-golden.txt (make-kernel-accept-golden.sh): the same kernel booted
# through shim with rsa.pem in MokList, so the signer is in .machine, which
# .secondary_trusted_keys links. It accepted exactly what blkcrypt accepts
# with rsa.pem trusted, read the right data, and refused the rest with the
# codes mapped above (-ENOKEY now only for the untrusted signer).
A="$HERE/accept-golden.txt"
make_accept_sigs "$BLKCRYPT" "$TMP"
# shellcheck disable=SC2086
same_sigs "$A" $ACCEPT_SIG_NAMES
data_sha=$(sha256sum <"$TMP/data" | cut -c1-64)
grep -q "^# DATA $data_sha\$" "$A" || fail "accept: the data device differs from the one the kernel read"
grep -q "table: ${table//$ROOT/ROOT}\$" "$A" || fail "accept: the table line differs from the one the kernel loaded"
grep -q "^SECUREBOOT Secure boot enabled\$" "$A" || fail "accept golden: not a Secure Boot run (the kernel ignores MokList then)"
grep -q "^MOKVAR MokListTrustedRT\$" "$A" || fail "accept golden: shim did not mirror MokListTrustedRT"
skid=$(openssl x509 -in "$KEYS/rsa.pem" -noout -ext subjectKeyIdentifier | tail -n 1 | tr -d ' :' | tr A-F a-f)
grep -q "^IN .machine asymmetric blkcrypt test rsa: $skid\$" "$A" || fail "accept golden: rsa.pem ($skid) not in .machine"
grep -q "^IN .secondary_trusted_keys keyring .machine\$" "$A" || fail "accept golden: .machine not linked into .secondary_trusted_keys"
for s in $ACCEPT_SIG_NAMES; do
    line=$(grep "^VERITYSETUP $s " "$A") || fail "accept golden: no verdict for $s"
    rc=0
    "$BLKCRYPT" verity verify "$TMP/data" "$TMP/hash" "$ROOT" --root-hash-signature "$TMP/files/$s.sig" \
        --trusted-cert "$KEYS/rsa.pem" >/dev/null 2>"$TMP/stderr" || rc=$?
    case $line in
        *" rc=0 kernel="*)
            [[ $rc == 0 ]] || fail "$s: the kernel accepted it, blkcrypt: $(cat "$TMP/stderr")"
            grep -q "^READ $s $data_sha\$" "$A" || fail "accept golden: the kernel's read through $s is not the data" ;;
        *"(-ENOKEY)") [[ $rc == 2 ]] && grep -q "not signed by a trusted certificate" "$TMP/stderr" \
                          || fail "$s: the kernel said -ENOKEY, blkcrypt rc=$rc: $(cat "$TMP/stderr")" ;;
        *"(-EKEYREJECTED)") [[ $rc == 2 ]] && grep -q "does not match the data" "$TMP/stderr" \
                          || fail "$s: the kernel said -EKEYREJECTED, blkcrypt rc=$rc: $(cat "$TMP/stderr")" ;;
        *"(-EBADMSG)") [[ $rc == 1 ]] && grep -q "not a DER PKCS#7 message" "$TMP/stderr" \
                          || fail "$s: the kernel said -EBADMSG, blkcrypt rc=$rc: $(cat "$TMP/stderr")" ;;
        *) fail "accept golden: unexpected verdict: $line" ;;
    esac
done
# The kernel accepted what the signer signed and nothing else.
grep -q "^VERITYSETUP ours rc=0 " "$A" || fail "accept golden: the kernel did not accept our signature"
grep -q "^VERITYSETUP tampered rc=[1-9][0-9]* kernel=.*(-EKEYREJECTED)\$" "$A" || fail "accept golden: tampered not refused"
grep -q "^VERITYSETUP untrusted rc=[1-9][0-9]* kernel=.*(-ENOKEY)\$" "$A" || fail "accept golden: untrusted signer not refused"
# blkcrypt's own table line, loaded with dmsetup and the key description.
grep -q "^DMSETUP ours rc=0 kernel=\$" "$A" || fail "accept golden: dmsetup with our table line failed"
grep -q "^READ dmsetup-ours $data_sha\$" "$A" || fail "accept golden: dmsetup read through our table is not the data"
# The kernel's own view of that table: ours, devices as numbers, the key
# description as the guest named it.
ktable=${table//\/dev\/vda/254:0}
ktable=${ktable//\/dev\/vdb/254:16}
grep -q "^TABLE ${ktable% *} blkcrypt:sig-ours\$" "$A" || fail "accept golden: the kernel's table is not ours: $ktable"
grep -q "^DMSETUP tampered rc=1 kernel=.*(-EKEYREJECTED)\$" "$A" || fail "accept golden: dmsetup tampered"
grep -q "^DMSETUP untrusted rc=1 kernel=.*(-ENOKEY)\$" "$A" || fail "accept golden: dmsetup untrusted"
echo "kernel signature golden: all checks passed"
