#!/bin/bash
# A VeraCrypt PIM makes every KDF try slow (PIM 1234: 1.25 million PBKDF2
# iterations, and Argon2id 1216 passes over 1 GiB): with --progress, or at a
# terminal, tcrypt says on stderr which KDF it is running, so a wrong
# passphrase is not minutes of silence. Over the vcpim fixture (skipped where
# ../shared/fixtures is absent); -h sha256 keeps the run to seconds.
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
FIX=${BLKCRYPT_SHARED_DIR:-$SRC/../shared}/fixtures/tcrypt-images.tar.xz
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
