#!/bin/bash
# blkcrypt loopaes against the real kernel's loop-AES mappings, recorded once
# by tests/loopaes/kernel/make-golden.sh (cryptsetup 2.6.1 loopaesOpen in
# ../shared/oracle): for every case, `loopaes table --show-key` is the table
# the kernel loaded, `loopaes encrypt` of the known plaintext is the kernel's
# image byte for byte (sha256), `loopaes decrypt` of it is the plaintext the
# kernel read back; the committed kernel images decrypt to that plaintext;
# key files cryptsetup refuses are refused with its words; serve over NBD.
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
K=$SRC/tests/loopaes/kernel
ORACLE=$K/oracle.txt
"$K/gen-plain.sh" >"$TMP/plain.img"
plain_sha=$(sha256sum <"$TMP/plain.img" | cut -d' ' -f1)

# One line per case, "|" between (read would merge empty tab fields): name, key file, options, rc, first message, table, readback, image sha256.
awk 'function out() { if (name != "") printf "%s|%s|%s|%s|%s|%s|%s|%s\n", name, key, opts, rc, msg, table, rb, img }
     /^=== end/ { out(); name = ""; next }
     /^=== / { out(); name = $2; key = $3; opts = ""; for (i = 4; i <= NF; i++) opts = opts (i > 4 ? " " : "") $i
               rc = msg = table = rb = img = "-"; next }
     /^rc=/ { rc = substr($0, 4) } /^msg: / { if (msg == "-") msg = substr($0, 6) }
     /^table=/ { table = substr($0, 7) } /^readback=/ { rb = substr($0, 10) } /^image=/ { img = substr($0, 7) }' \
    "$ORACLE" >"$TMP/cases"
[[ $(grep -c . "$TMP/cases") -ge 30 ]] || fail "too few cases parsed from $ORACLE"
ok=0 refused=0
while IFS="|" read -r name key opts rc msg table rb img; do
    read -ra o <<<"$opts"
    kf=(--key-file "$K/keys/$key")
    if [[ $rc != 0 ]]; then
        expect_exit nonzero "$BLKCRYPT" loopaes table "${kf[@]}" "${o[@]}" "$TMP/plain.img"
        expect_one_error_line
        # cryptsetup says nothing for an unusable --hash; blkcrypt names it.
        [[ $msg == - ]] && msg="Key processing error"
        [[ $msg == "Cannot read requested amount of data." ]] && msg="cannot read the requested"
        grep -qF "${msg%.}" "$TMP/stderr" || fail "$name: want '$msg', got: $(cat "$TMP/stderr")"
        refused=$((refused + 1))
        continue
    fi
    [[ $rb == "$plain_sha" ]] || fail "$name: the oracle read back other plaintext"
    off=0
    [[ $opts =~ --offset\ ([0-9]+) ]] && off=${BASH_REMATCH[1]}
    # encrypt: the kernel's whole image (zeros before --offset).
    rm -f "$TMP/ct.img"
    expect_exit 0 "$BLKCRYPT" loopaes encrypt "${kf[@]}" "${o[@]}" "$TMP/plain.img" "$TMP/ct.img"
    [[ $(sha256sum <"$TMP/ct.img" | cut -d' ' -f1) == "$img" ]] || fail "$name: encrypt differs from the kernel's image"
    expect_exit 0 "$BLKCRYPT" loopaes table --show-key "${kf[@]}" "${o[@]}" "$TMP/ct.img"
    [[ $(sed "s| $TMP/ct.img | DEV |" "$TMP/stdout") == "$table" ]] ||
        fail "$name: table differs: $(cat "$TMP/stdout") != $table"
    rm -f "$TMP/pt.img"
    expect_exit 0 "$BLKCRYPT" loopaes decrypt "${kf[@]}" "${o[@]}" "$TMP/ct.img" "$TMP/pt.img"
    cmp -s "$TMP/pt.img" "$TMP/plain.img" || fail "$name: decrypt is not the kernel's plaintext"
    ok=$((ok + 1))
done <"$TMP/cases"
[[ $ok -ge 20 && $refused -ge 8 ]] || fail "only $ok mapped and $refused refused cases"

# The kernel's own ciphertext decrypts to its plaintext.
for gz in "$K"/images/*.img.gz; do
    name=$(basename "$gz" .img.gz)
    IFS="|" read -r _ key opts _ <<<"$(awk -F"|" -v n="$name" '$1 == n' "$TMP/cases")"
    read -ra o <<<"$opts"
    gzip -dc "$gz" >"$TMP/k.img"
    rm -f "$TMP/pt.img"
    expect_exit 0 "$BLKCRYPT" loopaes decrypt --key-file "$K/keys/$key" "${o[@]}" "$TMP/k.img" "$TMP/pt.img"
    cmp -s "$TMP/pt.img" "$TMP/plain.img" || fail "$name: the kernel's image does not decrypt to its plaintext"
done

# Without --show-key the key is zeros, as dmsetup table prints it.
gzip -dc "$K/images/k1.img.gz" >"$TMP/k1.img"
expect_exit 0 "$BLKCRYPT" loopaes table --key-file "$K/keys/k1.txt" "$TMP/k1.img"
[[ $(cat "$TMP/stdout") == "0 72 crypt aes-cbc-plain64 $(printf '%064d' 0) 0 $TMP/k1.img 0" ]] ||
    fail "table without --show-key: $(cat "$TMP/stdout")"

# No header, so a wrong key file is not detected: it decrypts to garbage (as cryptsetup maps it).
rm -f "$TMP/pt.img"
expect_exit 0 "$BLKCRYPT" loopaes decrypt --key-file "$K/keys/k64.txt" "$TMP/k1.img" "$TMP/pt.img"
cmp -s "$TMP/pt.img" "$TMP/plain.img" && fail "a wrong key file gave the plaintext"

# The key file is required, as cryptsetup requires it; stdin works as '-'.
expect_exit 2 "$BLKCRYPT" loopaes decrypt "$TMP/k1.img" "$TMP/x.img"
grep -qF "Option --key-file is required." "$TMP/stderr" || fail "no --key-file: $(cat "$TMP/stderr")"
rm -f "$TMP/pt.img"
"$BLKCRYPT" loopaes decrypt --key-file - "$TMP/k1.img" "$TMP/pt.img" <"$K/keys/k1.txt" || fail "key file on stdin"
cmp -s "$TMP/pt.img" "$TMP/plain.img" || fail "key file on stdin: wrong plaintext"
# The plaintext is a secret: never world-readable; OUT == IMAGE refused.
[[ $(stat -c %a "$TMP/pt.img") != *[4-7] ]] || fail "plaintext OUT is world-readable"
expect_exit 2 "$BLKCRYPT" loopaes decrypt --key-file "$K/keys/k1.txt" "$TMP/k1.img" "$TMP/k1.img"
# An offset past the image's end maps nothing.
expect_exit 1 "$BLKCRYPT" loopaes table --key-file "$K/keys/k1.txt" --offset 72 "$TMP/k1.img"
grep -qF "is too small" "$TMP/stderr" || fail "offset past the end: $(cat "$TMP/stderr")"

# serve: nbdcopy reads the plaintext over NBD; a write through it lands as
# loop-AES ciphertext that decrypt reads back.
if command -v nbdcopy >/dev/null; then
    gzip -dc "$K/images/k65-off-skip.img.gz" >"$TMP/s.img"
    NBD_CLIENTS=nbdcopy source "$(dirname "$0")/nbd_lib.sh"
    start_server loopaes serve --socket "$SOCK" --key-file "$K/keys/k65.txt" --offset 8 --skip 3 "$TMP/s.img"
    T nbdcopy "$URI" "$TMP/served" || fail "nbdcopy: $(cat "$TMP/log")"
    cmp -s "$TMP/served" "$TMP/plain.img" || fail "served plaintext differs from the kernel's"
    head -c 36864 /dev/urandom >"$TMP/new.img"
    T nbdcopy "$TMP/new.img" "$URI" || fail "nbdcopy write: $(cat "$TMP/log")"
    stop_server
    rm -f "$TMP/pt.img"
    expect_exit 0 "$BLKCRYPT" loopaes decrypt --key-file "$K/keys/k65.txt" --offset 8 --skip 3 "$TMP/s.img" "$TMP/pt.img"
    cmp -s "$TMP/pt.img" "$TMP/new.img" || fail "what serve wrote does not decrypt back"
    # --read-only: the same plaintext, and a write is refused without touching the image.
    rm -f "$TMP/pid"
    before=$(sha256sum <"$TMP/s.img")
    start_server loopaes serve --read-only --socket "$SOCK" --key-file "$K/keys/k65.txt" --offset 8 --skip 3 "$TMP/s.img"
    rm -f "$TMP/served"
    T nbdcopy "$URI" "$TMP/served" || fail "nbdcopy --read-only: $(cat "$TMP/log")"
    cmp -s "$TMP/served" "$TMP/new.img" || fail "read-only served plaintext differs"
    if T nbdcopy "$TMP/plain.img" "$URI" 2>/dev/null; then fail "a read-only export took a write"; fi
    stop_server
    [[ $(sha256sum <"$TMP/s.img") == "$before" ]] || fail "a read-only export changed the image"
else
    echo "nbdcopy not installed: loopaes serve test skipped"
fi
echo "loopaes: $ok kernel mappings reproduced, $refused key files refused as cryptsetup does; all passed"
