#!/bin/bash
# blkcrypt crypt: round trips, kernel golden vectors, table lines, errors and
# interruption.
source "$(dirname "$0")/lib.sh"
GOLDEN="$(cd "$(dirname "$0")/../dmcrypt/golden" && pwd)"

# no_temp_files DIR: no ".NAME.XXXXXX" leftovers of an interrupted/failed run.
no_temp_files() {
    [[ -z $(find "$1" -maxdepth 1 -name '.*.??????' -print -quit) ]] ||
        fail "temporary file left in $1: $(find "$1" -maxdepth 1 -name '.*.??????')"
}

# --- round trip of 1 MiB + 4 KiB with aes-xts-plain64, --table and --key-file agree
random_file "$TMP/img" $((1024 * 1024 + 4096))
random_file "$TMP/key.bin" 64
key=$(xxd -p -c 256 "$TMP/key.bin")
"$BLKCRYPT" crypt encrypt --table "aes-xts-plain64 $key 0" "$TMP/img" "$TMP/ct1" || fail "encrypt --table: exit $?"
"$BLKCRYPT" crypt encrypt --cipher aes-xts-plain64 --key-file "$TMP/key.bin" --key-size 512 \
    "$TMP/img" "$TMP/ct2" || fail "encrypt --key-file: exit $?"
cmp -s "$TMP/ct1" "$TMP/ct2" || fail "--table and --cipher/--key-file ciphertexts differ"
cmp -s "$TMP/img" "$TMP/ct1" && fail "ciphertext equals plaintext"
# As in cryptsetup, --key-file - is a passphrase (hashed) unless --hash plain.
"$BLKCRYPT" crypt encrypt --cipher aes-xts-plain64 --key-file - --hash plain -s 512 "$TMP/img" "$TMP/ct3" <"$TMP/key.bin" ||
    fail "encrypt --key-file -: exit $?"
cmp -s "$TMP/ct1" "$TMP/ct3" || fail "key from stdin gives another ciphertext"
"$BLKCRYPT" crypt decrypt --table "aes-xts-plain64 $key 0" --threads 2 "$TMP/ct1" "$TMP/back1" ||
    fail "decrypt --table: exit $?"
cmp -s "$TMP/img" "$TMP/back1" || fail "--table round trip differs"
"$BLKCRYPT" crypt decrypt -c aes-xts-plain64 --key-file "$TMP/key.bin" -s 512 "$TMP/ct1" "$TMP/back2" ||
    fail "decrypt --key-file: exit $?"
cmp -s "$TMP/img" "$TMP/back2" || fail "--key-file round trip differs"

# --offset/--skip: ciphertext after a 8-sector header, IVs from sector 16.
"$BLKCRYPT" crypt encrypt -c aes-xts-plain64 --key-file "$TMP/key.bin" -s 512 --offset 8 --skip 16 \
    "$TMP/img" "$TMP/ct4" || fail "encrypt --offset: exit $?"
[[ $(stat -c %s "$TMP/ct4") == $((1024 * 1024 + 4096 + 4096)) ]] || fail "--offset: wrong OUT size"
"$BLKCRYPT" crypt decrypt --table "aes-xts-plain64 $key 16" --offset 8 "$TMP/ct4" "$TMP/back4" ||
    fail "decrypt --offset: exit $?"
cmp -s "$TMP/img" "$TMP/back4" || fail "--offset/--skip round trip differs"

# --start/--size: a range of the device; its IVs and ciphertext position count
# from the device's sector 0 (here 1000 sectors past the start, IV 1016).
"$BLKCRYPT" crypt decrypt --table "aes-xts-plain64 $key 16" --offset 8 --start 1000 --size 24 "$TMP/ct4" "$TMP/r1" ||
    fail "decrypt --start: exit $?"
dd if="$TMP/img" of="$TMP/slice" bs=512 skip=1000 count=24 status=none
cmp -s "$TMP/r1" "$TMP/slice" || fail "decrypt --start gives other bytes"
"$BLKCRYPT" crypt decrypt --table "aes-xts-plain64 $key 16" --offset 8 --start 1000 --size 24 - "$TMP/r2" <"$TMP/ct4" ||
    fail "decrypt --start from a stream: exit $?"
cmp -s "$TMP/r2" "$TMP/slice" || fail "decrypt --start from a stream gives other bytes"
"$BLKCRYPT" crypt decrypt --table "aes-xts-plain64 $key 16" --offset 8 --start 2048 "$TMP/ct4" "$TMP/r3" ||
    fail "decrypt --start without --size: exit $?"
tail -c 4096 "$TMP/img" | cmp -s - "$TMP/r3" || fail "decrypt --start without --size: not the tail"
# encrypt --start --in-place replaces those sectors only.
random_file "$TMP/patch" $((16 * 512))
cp "$TMP/ct4" "$TMP/ct5"
"$BLKCRYPT" crypt encrypt --table "aes-xts-plain64 $key 16" --offset 8 --start 512 --in-place "$TMP/patch" "$TMP/ct5" ||
    fail "encrypt --start: exit $?"
[[ $(stat -c %s "$TMP/ct5") == $(stat -c %s "$TMP/ct4") ]] || fail "encrypt --start changed the size"
"$BLKCRYPT" crypt decrypt --table "aes-xts-plain64 $key 16" --offset 8 "$TMP/ct5" "$TMP/back5" || fail "decrypt ct5"
cp "$TMP/img" "$TMP/want5"
dd if="$TMP/patch" of="$TMP/want5" bs=512 seek=512 conv=notrunc status=none
cmp -s "$TMP/back5" "$TMP/want5" || fail "encrypt --start wrote elsewhere"
expect_exit 2 "$BLKCRYPT" crypt encrypt --table "aes-xts-plain64 $key 16" --start 8 "$TMP/patch" -
grep -q -- '--start needs a seekable OUT' "$TMP/stderr" || fail "encrypt --start to a stream: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" crypt decrypt --table "aes-xts-plain64 $key 16" --offset 8 --start 2057 "$TMP/ct4" "$TMP/r4"
grep -q -- 'past the end' "$TMP/stderr" || fail "decrypt --start past the end: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" crypt decrypt --table "aes-xts-plain64 $key 16 1 sector_size:4096" --start 4 "$TMP/ct1" "$TMP/r4"
grep -q -- '--start must be a multiple of the sector size (8 sectors)' "$TMP/stderr" || fail "$(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" crypt table --table "aes-xts-plain64 $key 16" --start 8

# --- golden kernel vectors: encrypt plaintext.bin[:size] gives the .ct, and back
golden_case() {
    local name=$1 case cipher key_hex iv_offset sector_size opts size ct_file rest
    while IFS=$'\t' read -r case cipher key_hex iv_offset sector_size opts size ct_file rest; do
        [[ $case == "$name" ]] || continue
        local extra=()
        [[ $sector_size != 512 ]] && extra+=("sector_size:$sector_size")
        [[ $opts != - ]] && extra+=(${opts//,/ })
        local args="$cipher $key_hex $iv_offset"
        ((${#extra[@]})) && args+=" ${#extra[@]} ${extra[*]}"
        head -c "$size" "$GOLDEN/plaintext.bin" >"$TMP/gpt"
        "$BLKCRYPT" crypt encrypt --table "$args" "$TMP/gpt" "$TMP/gct" || fail "$name: encrypt exit $?"
        cmp -s "$TMP/gct" "$GOLDEN/$ct_file" || fail "$name: ciphertext differs from the kernel's"
        "$BLKCRYPT" crypt decrypt --table "$args" "$GOLDEN/$ct_file" "$TMP/gback" || fail "$name: decrypt exit $?"
        cmp -s "$TMP/gback" "$TMP/gpt" || fail "$name: decrypting the kernel's ciphertext differs"
        GOLDEN_ARGS=$args
        return 0
    done <"$GOLDEN/manifest.tsv"
    fail "case $name not in the manifest"
}
golden_case aes-xts-plain64-512
golden_case aes-cbc-essiv_sha256-4096-large-off8
golden_case aes-cbc-lmk-v3-512-off7
# Android's adiantum and the null cipher (key '-') through the command as well.
golden_case adiantum-xchacha12-aes-plain64-512
golden_case capi-adiantum_xchacha20_aes-plain64-4096-large
golden_case cipher_null-ecb-512

# The same essiv 4096 case through --cipher/--key-file/--sector-size/--iv-large-sectors.
row=$(grep -P '^aes-cbc-essiv_sha256-4096-large-off8\t' "$GOLDEN/manifest.tsv")
xxd -r -p <<<"$(cut -f3 <<<"$row")" >"$TMP/gkey"
head -c 16384 "$GOLDEN/plaintext.bin" >"$TMP/gpt"
"$BLKCRYPT" crypt encrypt -c aes-cbc-essiv:sha256 --key-file "$TMP/gkey" --sector-size 4096 \
    --iv-large-sectors --skip 8 "$TMP/gpt" "$TMP/gct2" || fail "essiv --key-file: exit $?"
cmp -s "$TMP/gct2" "$GOLDEN/$(cut -f8 <<<"$row")" || fail "essiv via --cipher differs from the kernel's"

# --- crypt table
golden_case aes-xts-plain64-512
line=$("$BLKCRYPT" crypt table --table "$GOLDEN_ARGS" --device /dev/sdx --size 16 --offset 4) ||
    fail "crypt table: exit $?"
[[ $line == "0 16 crypt aes-xts-plain64 $(printf '0%.0s' $(seq 128)) 0 /dev/sdx 4" ]] ||
    fail "crypt table without --show-key: '$line'"
line=$("$BLKCRYPT" crypt table --table "$GOLDEN_ARGS" --device /dev/sdx --size 16 --offset 4 --show-key)
[[ $line == "0 16 crypt $GOLDEN_ARGS /dev/sdx 4" ]] || fail "crypt table --show-key: '$line'"
line=$("$BLKCRYPT" crypt table -c aes-cbc-essiv:sha256 --key-file "$TMP/gkey" --sector-size 4096 \
    --iv-large-sectors --skip 8 --device "$TMP/gct2" --show-key) || fail "crypt table --cipher: exit $?"
[[ $line == "0 32 crypt aes-cbc-essiv:sha256 $(xxd -p -c 256 "$TMP/gkey") 8 $TMP/gct2 0 2 sector_size:4096 iv_large_sectors" ]] ||
    fail "crypt table --cipher: '$line'"

# --- errors
random_file "$TMP/odd" $((4096 + 100))
expect_exit nonzero "$BLKCRYPT" crypt encrypt --table "aes-xts-plain64 $key 0" "$TMP/odd" "$TMP/oddout"
expect_one_error_line
[[ ! -e $TMP/oddout ]] || fail "an input not a multiple of the sector size left OUT"
head -c 4096 "$TMP/img" >"$TMP/pt4k"
expect_exit nonzero "$BLKCRYPT" crypt encrypt --table "aes-xts-plain64 $key 0 1 sector_size:4096" \
    "$TMP/odd" "$TMP/oddout"
[[ ! -e $TMP/oddout ]] || fail "sector_size:4096 with a ragged input left OUT"
cp "$TMP/pt4k" "$TMP/same"
expect_exit 2 "$BLKCRYPT" crypt encrypt --table "aes-xts-plain64 $key 0" "$TMP/same" "$TMP/same"
expect_one_error_line
cmp -s "$TMP/pt4k" "$TMP/same" || fail "OUT == IN modified the input"
expect_exit 2 "$BLKCRYPT" crypt encrypt --table "nosuch-cbc-plain $key 0" "$TMP/pt4k" "$TMP/bad"
expect_one_error_line
expect_exit 2 "$BLKCRYPT" crypt encrypt --table "aes-xts-bogusiv $key 0" "$TMP/pt4k" "$TMP/bad"
expect_one_error_line
expect_exit 2 "$BLKCRYPT" crypt encrypt --table "aes-xts-plain64 ${key:0:30} 0" "$TMP/pt4k" "$TMP/bad"
expect_one_error_line
grep -qi "${key:0:16}" "$TMP/stderr" && fail "key material on stderr"
expect_exit 2 "$BLKCRYPT" crypt encrypt -c aes-xts-plain64 --key-file "$TMP/key.bin" --key-size 200 \
    "$TMP/pt4k" "$TMP/bad"
expect_one_error_line
expect_exit 2 "$BLKCRYPT" crypt encrypt -c aes-xts-plain64 "$TMP/pt4k" "$TMP/bad" </dev/null
expect_one_error_line
expect_exit 2 "$BLKCRYPT" crypt encrypt --table "aes-xts-plain64 $key 0" --cipher aes-xts-plain64 \
    "$TMP/pt4k" "$TMP/bad"
expect_exit 2 "$BLKCRYPT" crypt frobnicate --table "aes-xts-plain64 $key 0" "$TMP/pt4k" "$TMP/bad"
expect_exit 1 "$BLKCRYPT" crypt encrypt --table "aes-xts-plain64 $key 0" "$TMP/nonexistent" "$TMP/bad"
expect_one_error_line
[[ ! -e $TMP/bad ]] || fail "a failed run left OUT"
# An existing OUT is only written in place with --in-place.
cp "$TMP/ct1" "$TMP/existing"
"$BLKCRYPT" crypt decrypt --table "aes-xts-plain64 $key 0" --in-place "$TMP/ct1" "$TMP/existing" ||
    fail "--in-place: exit $?"
cmp -s "$TMP/img" "$TMP/existing" || fail "--in-place decrypt differs"
no_temp_files "$TMP"

# --- SIGTERM midway: no OUT, no temporary file, input intact
mkdir "$TMP/kill"
for size in 256M 4G; do  # 4G only if the machine finished 256M within 0.3 s
    truncate -s "$size" "$TMP/kill/sparse"
    rc=0
    "$BLKCRYPT" crypt encrypt --table "aes-xts-plain64 $key 0" "$TMP/kill/sparse" "$TMP/kill/out" \
        2>"$TMP/kill.err" &
    pid=$!
    sleep 0.3
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" || rc=$?
    if [[ $rc == 0 ]]; then
        rm -f "$TMP/kill/out"
        continue
    fi
    [[ ! -e $TMP/kill/out ]] || fail "SIGTERM left OUT"
    no_temp_files "$TMP/kill"
    [[ $(stat -c %s "$TMP/kill/sparse") == $(numfmt --from=iec "$size") ]] || fail "SIGTERM changed the input"
    break
done
[[ $rc != 0 ]] || fail "encrypting 4 GiB finished within 0.3 s: cannot test SIGTERM"
echo "crypt.sh: all passed"
