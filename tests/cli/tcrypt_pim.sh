#!/bin/bash
# A VeraCrypt PIM makes every KDF try slow (PIM 1234: 1.25 million PBKDF2
# iterations, and Argon2id 1216 passes over 1 GiB): with --progress, or at a
# terminal, tcrypt says on stderr which KDF it is running, so a wrong
# passphrase is not minutes of silence. Over the vcpim fixture (skipped where
# ../shared/fixtures is absent); -h sha256 keeps the run to seconds.
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
FIX=${BLKCRYPT_SHARED_DIR:-$SRC/../shared}/fixtures/tcrypt-images.tar.xz
# The Argon2id bound (docs/tcrypt.md): a search without -h tries Argon2id up
# to PIM 31 and above leaves it out, saying so even without a terminal; a
# wrong passphrase at PIM 100 then fails after the PBKDF2 tries, not after 82
# passes over 1 GiB. Any file serves: no header opens with "wrong".
random_file "$TMP/noise" $((1 << 20))
start=$SECONDS
expect_exit 2 timeout 300 sh -c "echo wrong | '$BLKCRYPT' tcrypt dump --veracrypt-pim 100 '$TMP/noise'"
grep_q -x "Not trying KDF argon2id at this PIM (82 passes over 1024 MiB a try; above PIM 31 only -h argon2id tries it)." \
    <"$TMP/stderr" || fail "PIM 100: no notice of the Argon2id bound: $(cat "$TMP/stderr")"
grep_q "No device header detected with this passphrase." <"$TMP/stderr" || fail "PIM 100: $(cat "$TMP/stderr")"
echo "PIM 100, wrong passphrase, no -h: exit 2 after $((SECONDS - start)) s"
# At PIM 31 and below Argon2id stays in the search (PIM 1: 3 passes over 64 MiB).
expect_exit 2 sh -c "echo wrong | '$BLKCRYPT' tcrypt decrypt --progress --veracrypt-pim 1 '$TMP/noise' '$TMP/out1'"
grep_q -x "Trying KDF argon2id: 3 passes over 64 MiB (this takes minutes; -h HASH limits the search)..." \
    <"$TMP/stderr" || fail "PIM 1: Argon2id not tried: $(cat "$TMP/stderr")"
grep_q "Not trying" <"$TMP/stderr" && fail "PIM 1: Argon2id left out"

[[ -f $FIX ]] || { echo "$FIX absent: PIM notice test skipped"; exit 0; }
tar xSJf "$FIX" -C "$TMP" tcrypt/vcpim_1_1234-sha256-xts-aes
img=$TMP/tcrypt/vcpim_1_1234-sha256-xts-aes

expect_exit 2 sh -c "echo wrong | '$BLKCRYPT' tcrypt decrypt --progress --veracrypt-pim 1234 -h sha256 '$img' '$TMP/out'"
grep_q -x "Trying KDF sha256: 1249000 iterations..." <"$TMP/stderr" || fail "no KDF notice: $(cat "$TMP/stderr")"
[[ ! -e $TMP/out ]] || fail "a wrong passphrase wrote OUT"
# Without --progress and not at a terminal: quiet, as before.
expect_exit 2 sh -c "echo wrong | '$BLKCRYPT' tcrypt dump --veracrypt-pim 1234 -h sha256 -c aes '$img'"
! grep -q "Trying KDF" "$TMP/stderr" || fail "notice without a terminal or --progress"
# The right passphrase still opens, with the notice.
echo cccccccccccccccccccc | "$BLKCRYPT" tcrypt decrypt --progress --veracrypt-pim 1234 -h sha256 "$img" "$TMP/out" \
    2>"$TMP/stderr" || fail "right passphrase with PIM: $(cat "$TMP/stderr")"
grep_q "^Trying KDF sha256: 1249000 iterations...$" <"$TMP/stderr" || fail "no notice on success"
echo "tcrypt PIM notice tests passed"
