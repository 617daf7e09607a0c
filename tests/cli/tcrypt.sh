#!/bin/bash
# TrueCrypt/VeraCrypt images made by the real programs (../shared/fixtures,
# cryptsetup's test images) through `blkcrypt tcrypt`: for every case the
# kernel could map, `decrypt` gives exactly the bytes `cryptsetup tcryptOpen`
# mapped (sha256 and size recorded in the oracle: tests/tcrypt/kernel/
# golden.tsv) and `dump --dump-volume-key` prints what `cryptsetup
# tcryptDump --dump-volume-key` printed (tests/tcrypt/kernel/*.dump); every
# plaintext holds the FAT filesystem the images were made with (UUID DEAD-BABE
# for outer volumes, CAFE-BABE for hidden ones). Wrong passphrases, a wrong
# PIM, a missing keyfile and hidden/outer confusion exit 2 with cryptsetup's
# words; an image whose KDF hash the registry lacks names it.
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
FIX=${BLKCRYPT_SHARED_DIR:-$SRC/../shared}/fixtures/tcrypt-images.tar.xz
GOLD=$SRC/tests/tcrypt/kernel
[[ -f $FIX ]] || { echo "no $FIX (../shared/fixtures absent): TrueCrypt/VeraCrypt tests skipped"; exit 0; }
command -v blkid >/dev/null || { echo "blkid not installed: TrueCrypt/VeraCrypt tests skipped"; exit 0; }
tar xSJf "$FIX" -C "$TMP"
D=$TMP/tcrypt

# fat_uuid FILE [OFFSET]: the FAT volume ID blkid finds at OFFSET bytes.
fat_uuid() { blkid -p -O "${2:-0}" -o value -s UUID "$1" || true; }

# The golden cases: name, image, password, cryptsetup options, size, sha256.
n=0 dumps=0
while IFS=$'\t' read -r name img pw opts size sha; do
    [[ $name == \#* || -z $name ]] && continue
    read -r -a o <<<"$opts"
    # cryptsetup's --key-file paths in the oracle were /tmp/keyfileN.
    o=("${o[@]//\/tmp\/keyfile/$D/keyfile}")
    out=$TMP/$name.out
    printf '%s\n' "$pw" | "$BLKCRYPT" tcrypt decrypt "${o[@]}" "$D/$img" "$out" 2>"$TMP/stderr" ||
        fail "$name: decrypt failed: $(cat "$TMP/stderr")"
    [[ $(stat -c %s "$out") == "$size" ]] || fail "$name: $(stat -c %s "$out") bytes, the kernel mapped $size"
    [[ $(sha256sum <"$out" | cut -d' ' -f1) == "$sha" ]] || fail "$name: plaintext differs from the kernel's"
    want=DEAD-BABE
    [[ $name == *hidden* ]] && want=CAFE-BABE
    at=0
    if [[ $name == sys ]]; then
        # A whole-disk image: the mapping starts at sector 63 (the kernel's
        # table), the FAT at partition 1 of the MBR.
        part=$(od -An -t u4 -j 454 -N 4 "$D/$img" | tr -d ' ')
        at=$(((part - 63) * 512))
    fi
    [[ $(fat_uuid "$out" "$at") == "$want" ]] || fail "$name: FAT UUID $(fat_uuid "$out" "$at"), want $want"
    # The dumps, with and without the volume key (the oracle named the image /dev/vdX).
    for kind in plain dump; do
        [[ -f $GOLD/$name.$kind ]] || continue
        key=()
        [[ $kind == dump ]] && key=(--dump-volume-key)
        printf '%s\n' "$pw" | "$BLKCRYPT" tcrypt dump -q "${key[@]}" "${o[@]}" "$D/$img" >"$TMP/dump" ||
            fail "$name: dump failed"
        sed "1s|for .*|for $D/$img|" "$GOLD/$name.$kind" >"$TMP/want"
        diff -u "$TMP/want" "$TMP/dump" >&2 || fail "$name: dump ${key[*]} differs from cryptsetup tcryptDump"
        dumps=$((dumps + 1))
    done
    rm -f "$out"
    n=$((n + 1))
done <"$GOLD/golden.tsv"
[[ $n -ge 10 ]] || fail "only $n golden cases read from $GOLD/golden.tsv"
[[ $dumps -ge 20 ]] || fail "only $dumps dumps compared"

# Refusals: exit 2 and cryptsetup's message, nothing written.
refused() {
    local pw=$1
    shift
    printf '%s\n' "$pw" >"$TMP/pw"
    expect_exit 2 "$BLKCRYPT" tcrypt decrypt --passphrase-file "$TMP/pw" "$@" "$TMP/refused.out"
    grep_q 'No device header detected with this passphrase.' <"$TMP/stderr" || fail "refusal message: $(cat "$TMP/stderr")"
    expect_one_error_line
    [[ ! -e $TMP/refused.out ]] || fail "OUT written for a refused secret: $*"
}
refused aaaaaaaaaaab --disable-veracrypt "$D/tc_4-sha512-xts-aes-hidden"
refused aaaaaaaaaaab -h sha256 "$D/vc_1-sha256-xts-aes"
refused cccccccccccccccccccc -h sha256 --veracrypt-pim 1233 "$D/vcpim_1_1234-sha256-xts-aes"
refused cccccccccccccccccccc -h sha256 "$D/vcpim_1_1234-sha256-xts-aes"               # PIM missing
refused aaaaaaaaaaaa -h sha256 --key-file "$D/keyfile1" "$D/vck_1_pw12-sha256-xts-aes" # a keyfile missing
refused aaaaaaaaaaaa -h sha256 "$D/vck_1_pw12-sha256-xts-aes"                          # no keyfiles
refused bbbbbbbbbbbb -h sha512 "$D/tc_4-sha512-xts-aes-hidden"                         # hidden password, outer header
refused aaaaaaaaaaaa -h sha512 --tcrypt-hidden "$D/tc_4-sha512-xts-aes-hidden"         # outer password, hidden header
refused aaaaaaaaaaaa -h sha256 --disable-veracrypt "$D/vc_1-sha256-xts-aes"            # VeraCrypt needs its mode
refused aaaaaaaaaaaa -h sha1 -c serpent "$D/tc_1-sha1-cbc-aes"                         # -c limits the chains

# The keyfile pool is a sum: keyfiles in the other order open the volume too.
printf 'aaaaaaaaaaaa\n' | "$BLKCRYPT" tcrypt decrypt -h sha256 --key-file "$D/keyfile2" --key-file "$D/keyfile1" \
    "$D/vck_1_pw12-sha256-xts-aes" "$TMP/kf.out" || fail "keyfiles in the other order"
grep_q "^vck	.*	$(sha256sum <"$TMP/kf.out" | cut -d' ' -f1)\$" <"$GOLD/golden.tsv" || fail "keyfiles reordered: wrong plaintext"

# --veracrypt-query-pim takes the PIM from the next line of stdin.
printf 'cccccccccccccccccccc\n1234\n' | "$BLKCRYPT" tcrypt decrypt -h sha256 --veracrypt-query-pim \
    "$D/vcpim_1_1234-sha256-xts-aes" "$TMP/qpim.out" || fail "--veracrypt-query-pim"
[[ $(fat_uuid "$TMP/qpim.out") == DEAD-BABE ]] || fail "--veracrypt-query-pim: wrong plaintext"
expect_exit 1 "$BLKCRYPT" tcrypt decrypt -h sha256 --veracrypt-query-pim "$D/vcpim_1_1234-sha256-xts-aes" \
    "$TMP/qpim2.out" < <(printf 'cccccccccccccccccccc\n12x4\n')
grep_q 'Invalid PIM value' <"$TMP/stderr" || fail "bad PIM: $(cat "$TMP/stderr")"

# A KDF the registry does not have (VeraCrypt 1.26's BLAKE2s) is named.
printf 'aaaaaaaaaaaa\n' >"$TMP/pw"
if ! "$BLKCRYPT" list >"$TMP/list" || ! grep -q '^name *: blake2s-256$' "$TMP/list"; then
    expect_exit 1 "$BLKCRYPT" tcrypt decrypt --passphrase-file "$TMP/pw" -h blake2s "$D/vc_1-blake2s-xts-aes" "$TMP/b.out"
    grep_q 'not available: blake2s-256' <"$TMP/stderr" || fail "blake2s: $(cat "$TMP/stderr")"
    echo "vc_1-blake2s-xts-aes skipped: blake2s-256 is not in the registry yet"
else
    # VeraCrypt 1.26's BLAKE2s KDF: no kernel golden (the oracle run had no
    # blake2s), so the plaintext is proven by the fixture's FAT UUID.
    "$BLKCRYPT" tcrypt decrypt --passphrase-file "$TMP/pw" -h blake2s "$D/vc_1-blake2s-xts-aes" "$TMP/b.out" ||
        fail "vc_1-blake2s-xts-aes does not open"
    [[ $(fat_uuid "$TMP/b.out") == DEAD-BABE ]] || fail "vc_1-blake2s-xts-aes: wrong plaintext"
fi

# Passphrase limits: 64 bytes for TrueCrypt, 128 with VeraCrypt.
printf '%s\n' "$(printf 'a%.0s' {1..65})" >"$TMP/pw"
expect_exit 1 "$BLKCRYPT" tcrypt dump --passphrase-file "$TMP/pw" --disable-veracrypt "$D/tc_1-sha1-cbc-aes"
grep_q 'Maximum TCRYPT passphrase length (64) exceeded.' <"$TMP/stderr" || fail "64: $(cat "$TMP/stderr")"
# Not a TrueCrypt volume at all (a short file): refused, no crash.
head -c 300 /dev/zero >"$TMP/short"
printf 'x\n' >"$TMP/pw"
expect_exit 2 "$BLKCRYPT" tcrypt dump --passphrase-file "$TMP/pw" --disable-veracrypt "$TMP/short"
echo "tcrypt: $n golden cases ($dumps dumps) and the refusals passed"
