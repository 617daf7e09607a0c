#!/usr/bin/env bash
# TrueCrypt 4.x/5.x legacy CBC volumes (cast5, des3_ede, TrueCrypt's
# little-endian Blowfish, the outer-CBC cascades) written by the test-side
# generator tests/tcrypt/make_volume.py --legacy (python3-cryptography, and
# libgcrypt through ctypes for Serpent and Twofish: independent of blkcrypt).
# The oracle's cryptsetup read each of them once (tests/tcrypt/kernel/
# oracle-legacy.txt): its tcryptDump decrypted every header (NAME.plain,
# NAME.dump with the volume key) and, for the chains the kernel maps (aes,
# cast5, des3_ede in cbc-tcw), tcryptOpen mapped exactly the generator's
# plaintext (legacy.golden). Here `tcrypt dump` must print what tcryptDump
# printed, and `tcrypt decrypt` must give the generator's plaintext: the
# kernel's bytes where it maps the chain; elsewhere the generator's, a FAT
# filesystem whose volume ID is DEAD-BABE. The inner-CBC Blowfish chains
# (blowfish_le-aes, serpent-blowfish_le-aes) open and dump, and decrypt says
# clearly that it cannot yet. `tcrypt serve` gives the same bytes over NBD.
# A wrong passphrase is refused (exit 2).
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
GOLD=$SRC/tests/tcrypt/kernel
python3 -c 'import cryptography' 2>/dev/null || { echo "python3-cryptography missing: legacy TrueCrypt volumes skipped"; exit 0; }
python3 -c 'import ctypes.util, sys; sys.exit(not ctypes.util.find_library("gcrypt"))' ||
    { echo "libgcrypt missing (the generator's Serpent and Twofish): legacy TrueCrypt volumes skipped"; exit 0; }
command -v blkid >/dev/null || { echo "blkid not installed: legacy TrueCrypt volumes skipped"; exit 0; }

n=0 kernel=0
while IFS=$'\t' read -r name gen pw opts; do
    [[ -z $name || $name == \#* ]] && continue
    read -r -a ga <<<"$gen"
    read -r -a o <<<"$opts"
    ksha=$(awk -F'\t' -v n="$name" '$1==n{print $3}' "$GOLD/legacy.golden")
    [[ -n $ksha ]] || fail "$name: not in legacy.golden"
    img=$TMP/$name.img
    gsha=$(python3 "$SRC/tests/tcrypt/make_volume.py" "$img" --password "$pw" "${ga[@]}" | tail -1)
    [[ $ksha == - || $ksha == "$gsha" ]] || fail "$name: the generator now writes $gsha, the kernel mapped $ksha"
    printf '%s\n' "$pw" >"$TMP/pw"
    for kind in plain dump; do
        ko=()
        [[ $kind == dump ]] && ko=(-q --dump-volume-key)
        "$BLKCRYPT" tcrypt dump "${ko[@]}" --passphrase-file "$TMP/pw" "${o[@]}" "$img" >"$TMP/dump" ||
            fail "$name: dump failed"
        sed "1s|for .*|for $img|" "$GOLD/$name.$kind" >"$TMP/want"
        diff -u "$TMP/want" "$TMP/dump" >&2 || fail "$name: dump ($kind) differs from cryptsetup tcryptDump"
    done
    chain=${ga[1]}  # generator arguments: --legacy CHAIN ...
    if [[ $chain == *blowfish_le-* ]]; then
        expect_exit nonzero "$BLKCRYPT" tcrypt decrypt --passphrase-file "$TMP/pw" "${o[@]}" "$img" "$TMP/out"
        grep_q 'legacy inner-CBC chain .* cannot be decrypted yet' <"$TMP/stderr" ||
            fail "$name: decrypt: $(cat "$TMP/stderr")"
        [[ ! -e $TMP/out ]] || fail "$name: OUT written for a volume it cannot decrypt"
    else
        "$BLKCRYPT" tcrypt decrypt --passphrase-file "$TMP/pw" "${o[@]}" "$img" "$TMP/out" 2>"$TMP/stderr" ||
            fail "$name: decrypt: $(cat "$TMP/stderr")"
        [[ $(sha256sum <"$TMP/out" | cut -d' ' -f1) == "$gsha" ]] || fail "$name: plaintext differs from the generator's"
        [[ $(blkid -p -o value -s UUID "$TMP/out" || true) == DEAD-BABE ]] || fail "$name: no FAT volume DEAD-BABE"
        [[ $ksha == - ]] || kernel=$((kernel + 1))
        rm -f "$TMP/out"
    fi
    rm -f "$img"
    n=$((n + 1))
done <"$GOLD/legacy.tsv"
[[ $n -ge 11 && $kernel -ge 3 ]] || fail "only $n legacy cases ($kernel against the kernel's mapping)"

# tcrypt serve gives the same bytes over NBD (the target, not the copy
# loop): cast5 (the kernel's bytes), an outer-CBC chain (the generator's);
# an inner-CBC Blowfish chain is refused before anything listens.
source "$(dirname "$0")/nbd_lib.sh"
if command -v nbdcopy >/dev/null; then
    for chain in cast5 twofish-aes blowfish_le-aes; do
        sha=$(python3 "$SRC/tests/tcrypt/make_volume.py" "$TMP/v.img" --password served --legacy "$chain" \
            --size 65536 --seed "serve-$chain" | tail -1)
        printf 'served\n' >"$TMP/pw"
        if [[ $chain == blowfish_le-aes ]]; then
            expect_exit 1 "$BLKCRYPT" tcrypt serve --passphrase-file "$TMP/pw" -h sha1 --read-only --socket "$SOCK" "$TMP/v.img"
            grep_q 'cannot be decrypted yet' <"$TMP/stderr" || fail "serve $chain: $(cat "$TMP/stderr")"
            [[ ! -e $SOCK ]] || fail "serve $chain: socket left behind"
            continue
        fi
        start_server tcrypt serve --passphrase-file "$TMP/pw" -h sha1 --read-only --socket "$SOCK" "$TMP/v.img"
        rm -f "$TMP/served"
        T nbdcopy "$URI" "$TMP/served"
        stop_server TERM
        [[ $(sha256sum <"$TMP/served" | cut -d' ' -f1) == "$sha" ]] || fail "serve $chain: not the generator's plaintext"
    done
else
    echo "nbdcopy missing: tcrypt serve of legacy volumes skipped"
fi

# Refusals: a wrong passphrase on an outer-CBC chain and on cast5, and a
# search limited to other ciphers (-c) that cannot find the chain.
for chain in aes-twofish-serpent cast5; do
    python3 "$SRC/tests/tcrypt/make_volume.py" "$TMP/v.img" --password right --legacy "$chain" --size 65536 >/dev/null
    printf 'wrong\n' >"$TMP/pw"
    expect_exit 2 "$BLKCRYPT" tcrypt decrypt --passphrase-file "$TMP/pw" -h sha1 "$TMP/v.img" "$TMP/no"
    grep_q 'No device header detected with this passphrase.' <"$TMP/stderr" || fail "$chain wrong passphrase: $(cat "$TMP/stderr")"
    [[ ! -e $TMP/no ]] || fail "OUT written for a refused volume"
    printf 'right\n' >"$TMP/pw"
    expect_exit 2 "$BLKCRYPT" tcrypt dump --passphrase-file "$TMP/pw" -h sha1 -c blowfish "$TMP/v.img"
done
echo "tcrypt legacy: $n volumes read as tcryptDump read them ($kernel also mapped by the kernel), refusals checked"
