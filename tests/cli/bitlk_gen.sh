#!/bin/bash
# blkcrypt bitlk over volumes made by tests/bitlk/make_image.py (python3-cryptography;
# skipped with a note where absent): what the Windows fixtures cannot show.
# - Each volume of tests/bitlk/gen-golden/cases.txt (4096-byte sectors, aes-cbc and
#   aes-xts 128/256, To Go, a non-ASCII passphrase): the generator's plaintext is what the
#   kernel's bitlkOpen mapped (sha256 recorded once, gen-golden/bitlkopen.sha256), and
#   `blkcrypt bitlk decrypt` gives exactly it.
# - dump equal to the host's `cryptsetup bitlkDump`; --dump-volume-key with the non-ASCII
#   passphrase equal to cryptsetup's with the recovery password (cryptsetup 2.6.1 hashes
#   non-ASCII passphrases zero padded; an image hashed that way opens in cryptsetup 2.6 and
#   not in blkcrypt, which hashes as Windows does).
# - dislocker-file (an independent reader; skipped where not installed) gives the
#   generator's plaintext too (it converts ASCII passphrases only: the recovery password
#   for the non-ASCII case).
# - Paused encryption (state 5, which cryptsetup refuses): the encrypted size decrypted,
#   the rest as stored, as dislocker reads the encrypted part.
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
GEN=$SRC/tests/bitlk/make_image.py
G=$SRC/tests/bitlk/gen-golden
python3 -c 'import cryptography' 2>/dev/null || { echo "python3-cryptography absent: bitlk_gen skipped"; exit 0; }
have_cryptsetup=false
command -v cryptsetup >/dev/null && have_cryptsetup=true
$have_cryptsetup || echo "cryptsetup not installed: dump comparisons skipped"
have_dislocker=false
command -v dislocker-file >/dev/null && have_dislocker=true
$have_dislocker || echo "dislocker not installed: dislocker comparisons skipped"
# dislocker_plain IMAGE OUT SECRET_OPTION: dislocker's plaintext of IMAGE.
dislocker_plain() {
    rm -f "$2"
    timeout 300 dislocker-file -V "$1" "$3" -- "$2" >dislocker.log 2>&1 || fail "dislocker-file $1: $(tail -3 dislocker.log)"
}

sha() { sha256sum <"$1" | cut -d' ' -f1; }
cd "$TMP"
cases=0
while read -r name open args; do
    [[ -z $name || $name == \#* ]] && continue
    cases=$((cases + 1))
    # shellcheck disable=SC2086
    python3 "$GEN" --seed "$name" --info "$name.info" $args "$name.img" "$name.plain" >"$name.key"
    want=$(awk -v n="$name" '$2==n{print $1}' "$G/bitlkopen.sha256")
    [[ -n $want ]] || fail "$name: no kernel sha256 in gen-golden/bitlkopen.sha256"
    [[ $(sha "$name.plain") == "$want" ]] || fail "$name: the generator's plaintext is not what the kernel mapped"
    rp=$(sed -n 's/^RP=//p' "$name.info")
    pw=${args#*--password }
    pw=${pw%% *}
    printf '%s\n' "$pw" | "$BLKCRYPT" bitlk decrypt "$name.img" "$name.out" || fail "decrypt $name"
    cmp "$name.out" "$name.plain" || fail "$name: blkcrypt's plaintext differs"
    if [[ -n $rp ]]; then
        rm -f "$name.out"
        echo "$rp" | "$BLKCRYPT" bitlk decrypt "$name.img" "$name.out" || fail "decrypt $name (recovery password)"
        cmp "$name.out" "$name.plain" || fail "$name: plaintext with the recovery password differs"
    fi
    rm -f "$name.out"
    # Our key dump, with the passphrase.
    printf '%s\n' "$pw" | "$BLKCRYPT" bitlk dump --dump-volume-key "$name.img" >"$name.kd"
    grep_q "^MK dump:	$(head -c 32 "$name.key" | sed 's/../& /g')" <"$name.kd" ||
        fail "$name: the key dump is not the generator's FVEK"
    if $have_cryptsetup; then
        cryptsetup bitlkDump "$name.img" >want
        "$BLKCRYPT" bitlk dump "$name.img" >got
        cmp want got || { diff want got >&2; fail "dump differs: $name"; }
        if [[ $open == rp ]]; then
            echo "$rp" | cryptsetup bitlkDump --dump-volume-key "$name.img" >want || fail "cryptsetup key $name"
        else
            printf '%s\n' "$pw" | cryptsetup bitlkDump --dump-volume-key "$name.img" >want || fail "cryptsetup key $name"
        fi
        cmp want "$name.kd" || { diff want "$name.kd" >&2; fail "key dump differs: $name"; }
    fi
    if $have_dislocker; then
        if [[ $open == rp ]]; then dislocker_plain "$name.img" "$name.d" "-p$rp"; else dislocker_plain "$name.img" "$name.d" "-u$pw"; fi
        cmp "$name.d" "$name.plain" || fail "$name: dislocker's plaintext differs from the generator's"
        rm -f "$name.d"
    fi
    rm -f "$name.img" "$name.plain"
done <"$G/cases.txt"
[[ $cases -ge 6 ]] || fail "only $cases cases read"

# A non-ASCII passphrase: hashed as its UTF-16 string (Windows), not as cryptsetup 2.6.1
# hashes it (zero padded to twice its UTF-8 length).
PW='hesloŽluťoučký€😀'
python3 "$GEN" --seed u261 --cryptsetup261 --password "$PW" u261.img u261.plain >u261.key
expect_exit 2 sh -c "printf '%s\n' '$PW' | '$BLKCRYPT' bitlk test-passphrase u261.img"
grep_q -x "blkcrypt: No key available with this passphrase." <"$TMP/stderr" || fail "wrong hashing message"
if $have_cryptsetup && cryptsetup --version | grep_q '^cryptsetup 2\.6\.'; then
    printf '%s\n' "$PW" | cryptsetup bitlkDump --dump-volume-key u261.img >want ||
        fail "cryptsetup 2.6 does not open its own hashing of a non-ASCII passphrase"
    grep_q "^MK dump:	$(head -c 32 u261.key | sed 's/../& /g')" <want || fail "cryptsetup 2.6 key differs"
fi
# The same passphrase, as Windows hashes it: blkcrypt opens, a one-letter change does not.
python3 "$GEN" --seed utf8w --password "$PW" w.img w.plain >w.key
printf '%s\n' "$PW" | "$BLKCRYPT" bitlk decrypt w.img w.out
cmp w.out w.plain || fail "non-ASCII passphrase plaintext"
expect_exit 2 sh -c "printf '%s\n' 'hesloZluťoučký€😀' | '$BLKCRYPT' bitlk test-passphrase w.img"

# Paused encryption: 1 MiB converted (the relocated boot sectors, at 1088 KiB, are not yet
# encrypted), then 2 MiB (they are).
for enc in 1048576 2097152; do
    python3 "$GEN" --seed paused --size 4194304 --encrypted-size $enc --state 5,4 --password anaconda p.img p.plain >/dev/null
    echo anaconda | "$BLKCRYPT" bitlk decrypt p.img p.out 2>"$TMP/stderr" || fail "paused decrypt: $(cat "$TMP/stderr")"
    grep_q -x "blkcrypt: warning: encryption of this volume is paused: the $enc bytes from the start are decrypted, the rest is read as stored (cryptsetup refuses it)" <"$TMP/stderr" ||
        fail "paused warning: $(cat "$TMP/stderr")"
    cmp p.out p.plain || fail "paused volume ($enc encrypted): plaintext differs"
    # Past the encrypted size and the metadata, the image holds the plaintext itself.
    cmp -n 983040 -i 3211264 p.img p.plain || fail "paused volume: the unconverted part is not stored plain"
    if $have_dislocker; then
        # dislocker-file writes the encrypted size only.
        dislocker_plain p.img p.d -uanaconda
        [[ $(stat -c %s p.d) == "$enc" ]] || fail "dislocker wrote $(stat -c %s p.d) bytes, not $enc"
        cmp -n $enc p.d p.plain || fail "paused volume ($enc encrypted): dislocker's plaintext differs"
    fi
done
# The same view served (bitlk::dm_table's linear lines), read back by nbdcopy.
if command -v nbdcopy >/dev/null; then
    SOCK=$TMP/s.sock
    echo anaconda | "$BLKCRYPT" bitlk serve --socket "$SOCK" --pid-file "$TMP/pid" p.img 2>"$TMP/log" &
    SERVER=$!
    for _ in $(seq 100); do [[ -s $TMP/pid ]] && break; kill -0 $SERVER 2>/dev/null || fail "serve died: $(cat "$TMP/log")"; sleep 0.1; done
    [[ -s $TMP/pid ]] || fail "serve did not start"
    timeout 120 nbdcopy "nbd+unix:///?socket=$SOCK" served || fail "nbdcopy: $(cat "$TMP/log")"
    kill -TERM $SERVER
    wait $SERVER || fail "serve exit on SIGTERM: $(cat "$TMP/log")"
    cmp served p.plain || fail "served paused volume differs"
else
    echo "nbdcopy not installed: serve of a paused volume skipped"
fi
# Decryption paused (5, next 1): the same rule, its own words.
python3 "$GEN" --seed paused --size 4194304 --encrypted-size 2097152 --state 5,1 --password anaconda p.img p.plain >/dev/null
echo anaconda | "$BLKCRYPT" bitlk decrypt p.img p2.out 2>"$TMP/stderr"
grep_q "^blkcrypt: warning: decryption of this volume is paused: the 2097152 bytes" <"$TMP/stderr" || fail "decryption paused warning"
cmp p2.out p.plain || fail "decryption paused: plaintext differs"
# A state cryptsetup and blkcrypt both refuse: conversion running (2).
python3 "$GEN" --seed running --encrypted-size 1048576 --state 2,4 --password anaconda r.img r.plain >/dev/null
expect_exit 1 sh -c "echo anaconda | '$BLKCRYPT' bitlk decrypt r.img r.out"
grep_q "This BITLK device is in an unsupported state and cannot be activated." <"$TMP/stderr" || fail "running state message"
# Every output kind of a passphrase decrypt (OUT is allocated while the passphrase is
# stretched): a new file (0600), a replaced one, stdout and a pipe, --in-place; a wrong
# passphrase leaves no file, and an --in-place OUT as it was (not grown, not changed).
python3 "$GEN" --seed kinds --size 4194304 --password anaconda k.img k.plain >/dev/null
rm -f k.out
echo anaconda | "$BLKCRYPT" bitlk decrypt k.img k.out || fail "decrypt into a new file"
cmp k.out k.plain || fail "new file: plaintext differs"
[[ $(stat -c %a k.out) == 600 ]] || fail "new plaintext file is mode $(stat -c %a k.out), not 600"
printf 'old' >k.out
echo anaconda | "$BLKCRYPT" bitlk decrypt k.img k.out || fail "decrypt over a file"
cmp k.out k.plain || fail "replaced file: plaintext differs"
"$BLKCRYPT" bitlk decrypt --key-file <(printf anaconda) k.img - >k.stdout || fail "decrypt to stdout"
cmp k.stdout k.plain || fail "stdout: plaintext differs"
"$BLKCRYPT" bitlk decrypt --key-file <(printf anaconda) k.img - | cat >k.pipe || fail "decrypt into a pipe"
cmp k.pipe k.plain || fail "pipe: plaintext differs"
mkdir wrong && cp k.img wrong/
expect_exit 2 sh -c "echo wrong | '$BLKCRYPT' bitlk decrypt wrong/k.img wrong/k.out"
[[ $(ls wrong) == k.img ]] || fail "a wrong passphrase left files: $(ls wrong)"
printf 'keep me' >inplace.out
expect_exit 2 sh -c "echo wrong | '$BLKCRYPT' bitlk decrypt --in-place k.img inplace.out"
[[ $(cat inplace.out) == "keep me" ]] || fail "--in-place OUT changed by a wrong passphrase ($(stat -c %s inplace.out) bytes)"
echo anaconda | "$BLKCRYPT" bitlk decrypt --in-place k.img inplace.out || fail "decrypt --in-place"
cmp inplace.out k.plain || fail "--in-place: plaintext differs"
echo "bitlk_gen: all passed"
