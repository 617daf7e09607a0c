#!/usr/bin/env bash
# VeraCrypt volumes written by the test-side generator tests/tcrypt/make_volume.py
# (python3-cryptography, independent of blkcrypt), proven against the real peer
# once: the oracle's `cryptsetup tcryptOpen` mapped exactly the plaintext the
# generator encrypted and `tcryptDump --dump-volume-key` printed the key
# (tests/tcrypt/kernel/generated.golden, GEN.dump, oracle-generated.txt).
# Here the generator writes the same volumes again (a seed fixes every byte)
# and `blkcrypt tcrypt decrypt` must give the kernel's bytes, `dump` the
# kernel's dump.
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
echo "tcrypt generated: $n volumes read as the kernel read them"
