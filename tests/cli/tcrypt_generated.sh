#!/usr/bin/env bash
# VeraCrypt volumes written by the test-side generator tests/tcrypt/make_volume.py
# (python3-cryptography, independent of blkcrypt), proven against the real peer
# once: the oracle's `cryptsetup tcryptOpen` mapped exactly the plaintext the
# generator encrypted and `tcryptDump --dump-volume-key` printed the key
# (tests/tcrypt/kernel/generated.golden, GEN.dump, oracle-generated.txt).
# Here the generator writes the same volumes again (a seed fixes every byte)
# and `blkcrypt tcrypt decrypt` must give the kernel's bytes, `dump` the
# kernel's dump. VeraCrypt 1.26's Argon2id volumes, which no peer here opens
# (cryptsetup 2.6.1 has no Argon2id for TCRYPT), are checked against the
# generator alone (python3-argon2): the plaintext it encrypted, under the
# costs of no PIM and of PIM 4, and refusals of the wrong PIM and of a search
# without Argon2id.
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
GOLD=$SRC/tests/tcrypt/kernel
python3 -c 'import cryptography' 2>/dev/null || { echo "python3-cryptography missing: generated VeraCrypt volumes skipped"; exit 0; }

n=0
while IFS=$'\t' read -r name gen pw opts; do
    [[ -z $name || $name == \#* ]] && continue
    read -r -a ga <<<"$gen"
    read -r -a o <<<"$opts"
    size=$(awk -F'\t' -v n="$name" '$1==n{print $2}' "$GOLD/generated.golden")
    sha=$(awk -F'\t' -v n="$name" '$1==n{print $3}' "$GOLD/generated.golden")
    [[ -n $sha ]] || fail "$name: not in generated.golden"
    img=$TMP/$name.img
    gsha=$(python3 "$SRC/tests/tcrypt/make_volume.py" "$img" --password "$pw" "${ga[@]}" | tail -1)
    [[ $gsha == "$sha" ]] || fail "$name: the generator now writes $gsha, the kernel mapped $sha"
    printf '%s\n' "$pw" >"$TMP/pw"
    "$BLKCRYPT" tcrypt decrypt --passphrase-file "$TMP/pw" "${o[@]}" "$img" "$TMP/out" 2>"$TMP/stderr" ||
        fail "$name: decrypt: $(cat "$TMP/stderr")"
    [[ $(stat -c %s "$TMP/out") == "$size" ]] || fail "$name: $(stat -c %s "$TMP/out") bytes, the kernel mapped $size"
    [[ $(sha256sum <"$TMP/out" | cut -d' ' -f1) == "$sha" ]] || fail "$name: plaintext differs from the kernel's"
    "$BLKCRYPT" tcrypt dump -q --dump-volume-key --passphrase-file "$TMP/pw" "${o[@]}" "$img" >"$TMP/dump" ||
        fail "$name: dump failed"
    sed "1s|for .*|for $img|" "$GOLD/$name.dump" >"$TMP/want"
    diff -u "$TMP/want" "$TMP/dump" >&2 || fail "$name: dump differs from cryptsetup tcryptDump"
    rm -f "$TMP/out" "$img"
    n=$((n + 1))
done <"$GOLD/generated.tsv"
[[ $n -ge 3 ]] || fail "only $n generated cases"

# A python3 with both python3-cryptography and python3-argon2 (the Debian
# one when another python3 comes first in PATH).
PY=
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import cryptography, argon2.low_level' 2>/dev/null; then PY=$p; break; fi
done
if [[ -z $PY ]]; then
    echo "python3-argon2 missing: Argon2id volumes skipped (scripts/install-deps.sh installs it)"
else
    printf 'argon2 passphrase\n' >"$TMP/pw"
    for pim in 0 4; do
        img=$TMP/argon2-$pim.img
        pa=()
        [[ $pim == 0 ]] || pa=(--pim "$pim")
        sha=$("$PY" "$SRC/tests/tcrypt/make_volume.py" "$img" --password 'argon2 passphrase' --kdf argon2id \
            --size 262144 --seed "argon2-$pim" "${pa[@]}" | tail -1)
        o=(-h argon2id)
        [[ $pim == 0 ]] || o+=(--veracrypt-pim "$pim")
        "$BLKCRYPT" tcrypt decrypt --passphrase-file "$TMP/pw" "${o[@]}" "$img" "$TMP/out" 2>"$TMP/stderr" ||
            fail "Argon2id PIM $pim: decrypt: $(cat "$TMP/stderr")"
        [[ $(sha256sum <"$TMP/out" | cut -d' ' -f1) == "$sha" ]] || fail "Argon2id PIM $pim: not the generator's plaintext"
        "$BLKCRYPT" tcrypt dump --passphrase-file "$TMP/pw" "${o[@]}" "$img" >"$TMP/dump"
        grep_q $'^PBKDF2 hash:\targon2id$' <"$TMP/dump" || fail "Argon2id PIM $pim: dump: $(cat "$TMP/dump")"
        rm -f "$TMP/out"
    done
    # The backup header too (its own salt).
    "$BLKCRYPT" tcrypt decrypt --passphrase-file "$TMP/pw" -h argon2id --tcrypt-backup "$TMP/argon2-0.img" "$TMP/out" ||
        fail "Argon2id backup header"
    expect_exit 2 "$BLKCRYPT" tcrypt decrypt --passphrase-file "$TMP/pw" -h argon2id --veracrypt-pim 5 "$TMP/argon2-4.img" "$TMP/no"
    grep_q 'No device header detected with this passphrase.' <"$TMP/stderr" || fail "wrong PIM: $(cat "$TMP/stderr")"
    expect_exit 2 "$BLKCRYPT" tcrypt decrypt --passphrase-file "$TMP/pw" -h sha512 "$TMP/argon2-0.img" "$TMP/no"
    [[ ! -e $TMP/no ]] || fail "OUT written for a refused volume"
    n=$((n + 2))
fi
echo "tcrypt generated: $n volumes read as the kernel (or, for Argon2id, the generator) read them"
