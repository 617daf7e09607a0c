#!/bin/bash
# blkcrypt fvault2 over cryptsetup's FileVault 2 test image
# (../shared/fixtures/fvault2-images.tar.xz, made by macOS; skipped with a note
# where absent): dump and --dump-volume-key equal to `cryptsetup fvault2Dump`
# as the oracle's kernel recorded it (tests/fvault2/kernel/oracle.txt) and, where
# the host has cryptsetup, live; a wrong passphrase exits 2 with cryptsetup's
# words; foreign, truncated and tampered images are refused; decrypt equals
# what `cryptsetup open --type fvault2` maps (the oracle's sha256 and size);
# serve read by nbdcopy gives the same bytes.
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
FIX=${BLKCRYPT_SHARED_DIR:-$SRC/../shared}/fixtures/fvault2-images.tar.xz
[[ -f $FIX ]] || { echo "$FIX absent: FileVault 2 tests skipped"; exit 0; }
tar xSJf "$FIX" -C "$TMP"
ORACLE=$SRC/tests/fvault2/kernel/oracle.txt
cd "$TMP/fvault2-images"
IMG=small
PW=heslo123

# section NAME: the lines of oracle.txt's "--- NAME" section, device renamed,
# without the rc line.
section() {
    awk -v s="--- $1" '$0==s{on=1;next} /^--- |^=== /{on=0} on && !/^rc=/' "$ORACLE" | sed "s|/dev/vda|$IMG|"
}
oracle_value() { sed -n "s/^$1=//p" "$ORACLE"; }

# dump: the oracle's transcript, then the host's cryptsetup live.
section plain >"$TMP/want"
"$BLKCRYPT" fvault2 dump "$IMG" >"$TMP/got" || fail "fvault2 dump"
grep_q -x "Logical volume offset:	67108864 \[bytes\]" <"$TMP/want" || fail "oracle transcript lacks the dump"
cmp "$TMP/want" "$TMP/got" || { diff "$TMP/want" "$TMP/got" >&2; fail "dump differs from the oracle's fvault2Dump"; }
section key >"$TMP/want"
echo "$PW" | "$BLKCRYPT" fvault2 dump --dump-volume-key "$IMG" >"$TMP/got" || fail "fvault2 dump --dump-volume-key"
grep_q "^Volume key:" <"$TMP/want" || fail "oracle transcript lacks the volume key"
cmp "$TMP/want" "$TMP/got" || { diff "$TMP/want" "$TMP/got" >&2; fail "key dump differs from the oracle's"; }
"$BLKCRYPT" fvault2Dump "$IMG" >"$TMP/alias" || fail "fvault2Dump alias"
section plain | cmp - "$TMP/alias" || fail "fvault2Dump alias output"
# The passphrase from files: --passphrase-file (first line), --key-file (all of it).
printf '%s\nnext line\n' "$PW" >"$TMP/pwfile"
"$BLKCRYPT" fvault2 dump --dump-volume-key --passphrase-file "$TMP/pwfile" "$IMG" | cmp - "$TMP/got" ||
    fail "--passphrase-file"
printf '%s' "$PW" >"$TMP/keyfile"
"$BLKCRYPT" fvault2 dump --dump-volume-key --key-file "$TMP/keyfile" "$IMG" | cmp - "$TMP/got" || fail "--key-file"
if command -v cryptsetup >/dev/null; then
    cryptsetup fvault2Dump "$IMG" >"$TMP/want" || fail "cryptsetup fvault2Dump"
    "$BLKCRYPT" fvault2 dump "$IMG" | cmp - "$TMP/want" || fail "dump differs from the host's cryptsetup"
    echo "$PW" | cryptsetup fvault2Dump --dump-volume-key "$IMG" >"$TMP/want" || fail "cryptsetup fvault2Dump key"
    cmp "$TMP/want" "$TMP/got" || fail "key dump differs from the host's cryptsetup"
else
    echo "cryptsetup not installed: live fvault2Dump comparison skipped (oracle transcript compared)"
fi

# On a terminal: cryptsetup's volume key warning first (anything but YES
# aborts, no key shown), then the passphrase prompt.
PTY=$(dirname "$0")/pty_session.py
expect_exit 1 python3 "$PTY" --timeout 120 --answer "capital letters): " no -- "$BLKCRYPT" fvault2 dump --dump-volume-key "$IMG"
grep_q "Header dump with volume key is sensitive information" <"$TMP/stdout" || fail "no warning: $(cat "$TMP/stdout")"
grep_q "Operation aborted." <"$TMP/stdout" || fail "not aborted: $(cat "$TMP/stdout")"
if grep -q "Volume key:" "$TMP/stdout"; then fail "a key shown after no"; fi
expect_exit 0 python3 "$PTY" --timeout 120 --answer "capital letters): " YES --answer "Enter passphrase for $IMG: " "$PW" -- \
    "$BLKCRYPT" fvault2 dump --dump-volume-key "$IMG"
grep_q -F "$(printf 'Volume key:       \t20 73 4d 33')" <"$TMP/stdout" || fail "no key after YES: $(cat "$TMP/stdout")"

# A wrong passphrase: exit 2 and cryptsetup's words; nothing on stdout.
expect_exit 2 sh -c "echo heslo124 | '$BLKCRYPT' fvault2 dump --dump-volume-key '$IMG'"
grep_q -x "blkcrypt: No key available with this passphrase." <"$TMP/stderr" || fail "wrong passphrase message"
[[ ! -s $TMP/stdout ]] || fail "a wrong passphrase printed a dump"
grep_q "No key available with this passphrase." < <(section wrong) || fail "the oracle's wrong-passphrase words differ"
expect_exit 2 sh -c "echo heslo124 | '$BLKCRYPT' fvault2 test-passphrase '$IMG'"
echo "$PW" | "$BLKCRYPT" fvault2 test-passphrase "$IMG" || fail "test-passphrase with the right one"

# Foreign, truncated and tampered images.
head -c 1048576 /dev/zero >"$TMP/zero.img"
expect_exit 1 "$BLKCRYPT" fvault2 dump "$TMP/zero.img"
expect_one_error_line
grep_q "is not a valid FVAULT2 device" <"$TMP/stderr" || fail "foreign image message"
head -c 8192 "$IMG" >"$TMP/short.img"
expect_exit 1 "$BLKCRYPT" fvault2 dump "$TMP/short.img"
expect_one_error_line
grep_q "too short for the FVAULT2 disk label" <"$TMP/stderr" || fail "truncated image message: $(cat "$TMP/stderr")"
head -c $((2049 * 4096 + 8192)) "$IMG" >"$TMP/short.img"  # ends inside the encrypted metadata
expect_exit 1 "$BLKCRYPT" fvault2 dump "$TMP/short.img"
grep_q "too short for the FVAULT2 encrypted metadata" <"$TMP/stderr" || fail "truncated metadata message"
cp --sparse=always "$IMG" "$TMP/tampered.img"
flip_byte "$TMP/tampered.img" $((2049 * 4096 + 8192 + 1000))  # encrypted metadata block 1 (the keys)
expect_exit 1 "$BLKCRYPT" fvault2 dump "$TMP/tampered.img"
expect_one_error_line
grep_q "block 1 checksum mismatch" <"$TMP/stderr" || fail "tampered metadata message: $(cat "$TMP/stderr")"
rm -f "$TMP/tampered.img" "$TMP/short.img"

# decrypt: the kernel's `cryptsetup open --type fvault2` readback.
want_sha=$(oracle_value sha256) want_size=$(oracle_value size)
[[ -n $want_sha && -n $want_size ]] || fail "oracle transcript lacks the mapped device's sha256/size"
expect_exit 2 sh -c "echo heslo124 | '$BLKCRYPT' fvault2 decrypt '$IMG' '$TMP/never'"
[[ ! -e $TMP/never ]] || fail "OUT written for a wrong passphrase"
echo "$PW" | "$BLKCRYPT" fvault2 decrypt "$IMG" "$TMP/plain" || fail "fvault2 decrypt"
[[ $(stat -c %s "$TMP/plain") == "$want_size" ]] || fail "plaintext size $(stat -c %s "$TMP/plain"), the kernel's $want_size"
[[ $(sha256sum <"$TMP/plain" | cut -d' ' -f1) == "$want_sha" ]] || fail "plaintext differs from the kernel's"
[[ $(stat -c %a "$TMP/plain") == 600 ]] || fail "plaintext not private: $(stat -c %a "$TMP/plain")"
# HFS+ volume header ("H+", version 4) at byte 1024 of the plaintext.
[[ $(od -An -tx1 -j1024 -N4 "$TMP/plain" | tr -d ' ') == 482b0004 ]] || fail "no HFS+ header in the plaintext"
expect_exit nonzero sh -c "echo $PW | '$BLKCRYPT' fvault2 decrypt '$IMG' '$IMG'"
grep_q "refusing to write an output over an input" <"$TMP/stderr" || fail "OUT == IMAGE not refused"

# serve: nbdcopy reads the same plaintext over NBD (read-only export).
if command -v nbdcopy >/dev/null; then
    NBD_CLIENTS=nbdcopy source "$(dirname "$0")/nbd_lib.sh"
    echo "$PW" >"$TMP/pw.line"
    SERVER_INPUT=$TMP/pw.line start_server fvault2 serve --socket "$SOCK" "$IMG"
    timeout 300 nbdcopy "$URI" "$TMP/served" || fail "nbdcopy: $(cat "$TMP/log")"
    stop_server
    cmp "$TMP/served" "$TMP/plain" || fail "served plaintext differs from the kernel's"
else
    echo "nbdcopy not installed: fvault2 serve test skipped"
fi
echo "fvault2: all passed"
