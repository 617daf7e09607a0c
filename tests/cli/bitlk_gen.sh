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
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
GEN=$SRC/tests/bitlk/make_image.py
G=$SRC/tests/bitlk/gen-golden
python3 -c 'import cryptography' 2>/dev/null || { echo "python3-cryptography absent: bitlk_gen skipped"; exit 0; }
have_cryptsetup=false
command -v cryptsetup >/dev/null && have_cryptsetup=true
$have_cryptsetup || echo "cryptsetup not installed: dump comparisons skipped"

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
echo "bitlk_gen: all passed"
