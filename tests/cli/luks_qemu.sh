#!/bin/bash
# LUKS1 both ways with qemu-img and qemu-io (QEMU 7.2 has no LUKS2), run live:
# skipped with a note where qemu-utils is missing.
# - qemu-img convert -O luks over a matrix of qemu's ciphers, modes, IV
#   generators and hashes: `luks decrypt` gives the source back;
# - luks format --type luks1 + luks encrypt: qemu-img convert and
#   qemu-img compare through driver=luks see the plaintext;
# - qemu-io writes at odd byte offsets into a qemu container: ours decrypts them;
# - a sparse 4 TiB container (past 2^32 sectors, as QEMU's iotest 149):
#   patterns at 100 MiB and 3 TiB written by qemu-io and by `luks encrypt
#   --start`, read back by `luks decrypt --start --size` and by qemu-io, on
#   a qemu-made and on a blkcrypt-made container.
source "$(dirname "$0")/lib.sh"
command -v qemu-img >/dev/null && command -v qemu-io >/dev/null ||
    { echo "qemu-img/qemu-io not installed: qemu LUKS tests skipped"; exit 0; }

printf 'qemu pass phrase' >"$TMP/pass"
SECRET=(--object "secret,id=s0,file=$TMP/pass")
FAST=(--pbkdf-force-iterations 1000)
random_file "$TMP/plain" $((3 << 20))

# qemu's PBKDF2 benchmark fails now and then on a loaded machine ("Unable to
# get accurate CPU usage"): such a run is repeated, anything else fails.
qemu_retry() {
    local i
    for i in $(seq 20); do
        "$@" >"$TMP/q.out" 2>"$TMP/q.err" && return 0
        grep -q 'accurate CPU usage' "$TMP/q.err" || fail "$* ($(cat "$TMP/q.err"))"
        sleep 0.5  # let the load that upset its benchmark pass
    done
    fail "$*: qemu's PBKDF2 benchmark failed 20 times"
}

# luks_opts IMG: qemu's --image-opts string for a LUKS image.
luks_opts() {
    echo "driver=luks,key-secret=s0,file.driver=file,file.filename=$1"
}

# qemu CIPHER-ALG MODE IVGEN IVHASH HASH ; ours CIPHER KEYBITS HASH
matrix=(
    "aes-256 xts plain64 - sha256 aes-xts-plain64 512 sha256"
    "aes-256 cbc essiv sha256 sha256 aes-cbc-essiv:sha256 256 sha256"
    "aes-128 xts plain64 - sha1 aes-xts-plain64 256 sha1"
    "aes-128 cbc plain64 - sha512 aes-cbc-plain64 128 sha512"
    "aes-256 cbc plain - sha1 aes-cbc-plain 256 sha1"
    "twofish-256 xts plain64 - sha256 twofish-xts-plain64 512 sha256"
    "serpent-128 cbc essiv sha256 sha256 serpent-cbc-essiv:sha256 128 sha256"
)

for row in "${matrix[@]}"; do
    read -r qalg qmode qiv qivhash qhash cipher bits hash <<<"$row"
    what="$qalg-$qmode-$qiv${qivhash/-/}/$qhash"
    opts="key-secret=s0,cipher-alg=$qalg,cipher-mode=$qmode,ivgen-alg=$qiv,hash-alg=$qhash,iter-time=10"
    [[ $qivhash != - ]] && opts+=",ivgen-hash-alg=$qivhash"

    # qemu's container, ours decrypts
    img=$TMP/q.luks
    rm -f "$img"
    qemu_retry qemu-img convert -f raw -O luks "${SECRET[@]}" -o "$opts" "$TMP/plain" "$img"
    "$BLKCRYPT" luks dump "$img" >"$TMP/dump" || fail "$what: dump of qemu's container"
    grep -qx "Cipher name: *	${cipher%%-*}" "$TMP/dump" && grep -qx "Cipher mode: *	${cipher#*-}" "$TMP/dump" &&
        grep -qx "Hash spec: *	$hash" "$TMP/dump" && grep -qx "MK bits: *	$bits" "$TMP/dump" ||
        fail "$what: dump: $(cat "$TMP/dump")"
    rm -f "$TMP/out"
    "$BLKCRYPT" luks decrypt --key-file "$TMP/pass" "$img" "$TMP/out" || fail "$what: decrypt"
    cmp "$TMP/out" "$TMP/plain" || fail "$what: qemu's container decrypts to other bytes"

    # our container (the data segment as long as the plaintext), qemu reads
    ours=$TMP/ours.luks
    rm -f "$ours" && truncate -s $((5 << 20)) "$ours"
    "$BLKCRYPT" luks format --type luks1 -q "${FAST[@]}" --cipher "$cipher" --key-size "$bits" --hash "$hash" \
        --key-file "$TMP/pass" "$ours" || fail "$what: format"
    payload=$("$BLKCRYPT" luks dump "$ours" | awk '/^Payload offset:/ {print $3}')
    [[ -n $payload ]] || fail "$what: no payload offset"
    truncate -s $((payload * 512 + (3 << 20))) "$ours"
    "$BLKCRYPT" luks encrypt --key-file "$TMP/pass" "$TMP/plain" "$ours" || fail "$what: encrypt"
    rm -f "$TMP/qout"
    qemu-img convert "${SECRET[@]}" --image-opts "$(luks_opts "$ours")" -O raw "$TMP/qout" ||
        fail "$what: qemu-img convert from our container"
    cmp "$TMP/qout" "$TMP/plain" || fail "$what: qemu reads other bytes from ours"
    qemu-img compare -q "${SECRET[@]}" --image-opts "$(luks_opts "$ours")" \
        "driver=raw,file.driver=file,file.filename=$TMP/plain" || fail "$what: qemu-img compare"
done

# The comparison can fail: one flipped ciphertext byte is seen by qemu-img compare.
flip_byte "$ours" $(( $("$BLKCRYPT" luks dump "$ours" | awk '/^Payload offset:/ {print $3}') * 512 + 1000 ))
expect_exit 1 qemu-img compare -q "${SECRET[@]}" --image-opts "$(luks_opts "$ours")" \
    "driver=raw,file.driver=file,file.filename=$TMP/plain"

# qemu-io writes at odd offsets (read-modify-write of partial sectors);
# the same bytes land in a copy of the plaintext.
img=$TMP/q.luks
rm -f "$img"
qemu_retry qemu-img convert -f raw -O luks "${SECRET[@]}" \
    -o key-secret=s0,cipher-alg=aes-256,cipher-mode=cbc,ivgen-alg=essiv,ivgen-hash-alg=sha256,iter-time=10 \
    "$TMP/plain" "$img"
cp "$TMP/plain" "$TMP/expect"
writes=("0xa5 1 1" "0x5a 511 2" "0x3c 12345 7777" "0xc3 1048575 4099" "0x77 3145727 1")
for w in "${writes[@]}"; do
    read -r pat off len <<<"$w"
    qemu-io "${SECRET[@]}" --image-opts "$(luks_opts "$img")" -c "write -P $pat $off $len" >/dev/null ||
        fail "qemu-io write $w"
    python3 -c 'import sys
p, off, n = int(sys.argv[2], 16), int(sys.argv[3]), int(sys.argv[4])
with open(sys.argv[1], "r+b") as f:
    f.seek(off); f.write(bytes([p]) * n)' "$TMP/expect" "$pat" "$off" "$len"
done
rm -f "$TMP/out"
"$BLKCRYPT" luks decrypt --key-file "$TMP/pass" "$img" "$TMP/out" || fail "decrypt after qemu-io"
cmp "$TMP/out" "$TMP/expect" || fail "qemu-io's odd writes decrypt to other bytes"
cmp -s "$TMP/out" "$TMP/plain" && fail "qemu-io changed nothing"

# --- beyond 2^32 sectors: a sparse 4 TiB container, patterns at 100 MiB and 3 TiB.
MiB=$((1 << 20))
TiB=$((1 << 40))
# pattern BYTE FILE: 1 MiB of BYTE.
pattern() { python3 -c 'import sys; open(sys.argv[2], "wb").write(bytes([int(sys.argv[1], 16)]) * (1 << 20))' "$1" "$2"; }
pattern 0xa1 "$TMP/pa1"
pattern 0xa3 "$TMP/pa3"
pattern 0xb1 "$TMP/pb1"
pattern 0xb3 "$TMP/pb3"

# check_big IMG WHO: qemu-io's patterns read by us, ours read by qemu-io.
check_big() {
    local img=$1 who=$2 s100=$((100 * MiB / 512)) s3t=$((3 * TiB / 512))
    qemu-io "${SECRET[@]}" --image-opts "$(luks_opts "$img")" -c "write -P 0xa1 $((100 * MiB)) $MiB" \
        -c "write -P 0xa3 $((3 * TiB)) $MiB" >/dev/null || fail "$who: qemu-io writes"
    rm -f "$TMP/r"
    "$BLKCRYPT" luks decrypt --key-file "$TMP/pass" --start "$s100" --size 2048 "$img" "$TMP/r" ||
        fail "$who: decrypt at 100 MiB"
    cmp "$TMP/r" "$TMP/pa1" || fail "$who: 100 MiB pattern"
    rm -f "$TMP/r"
    "$BLKCRYPT" luks decrypt --key-file "$TMP/pass" --start "$s3t" --size 2048 "$img" "$TMP/r" ||
        fail "$who: decrypt at 3 TiB"
    cmp "$TMP/r" "$TMP/pa3" || fail "$who: 3 TiB pattern (sector $s3t, past 2^32)"
    # A range across the pattern's start: zeros (a hole decrypts to noise,
    # so qemu's zero-write first) then the pattern.
    qemu-io "${SECRET[@]}" --image-opts "$(luks_opts "$img")" -c "write -z $((3 * TiB - MiB)) $MiB" >/dev/null ||
        fail "$who: qemu-io write -z"
    rm -f "$TMP/r"
    "$BLKCRYPT" luks decrypt --key-file "$TMP/pass" --start $((s3t - 2048)) --size 4096 "$img" "$TMP/r" ||
        fail "$who: decrypt across 3 TiB"
    head -c "$MiB" /dev/zero | cat - "$TMP/pa3" | cmp - "$TMP/r" || fail "$who: range across 3 TiB"

    # ours written, qemu-io reads (read -P fails on a mismatch: its output says so)
    "$BLKCRYPT" luks encrypt --key-file "$TMP/pass" --start $((s100 + 2048)) "$TMP/pb1" "$img" ||
        fail "$who: encrypt at 101 MiB"
    # (IN a pipe: the copy goes through the chunk ring, not a mapping of IN)
    "$BLKCRYPT" luks encrypt --key-file "$TMP/pass" --start $((s3t + 2048)) - "$img" <"$TMP/pb3" ||
        fail "$who: encrypt at 3 TiB + 1 MiB"
    qemu-io "${SECRET[@]}" --image-opts "$(luks_opts "$img")" -c "read -P 0xb1 $((101 * MiB)) $MiB" \
        -c "read -P 0xb3 $((3 * TiB + MiB)) $MiB" -c "read -P 0xa3 $((3 * TiB)) $MiB" \
        -c "read -P 0xa1 $((100 * MiB)) $MiB" >"$TMP/qio" || fail "$who: qemu-io reads"
    grep -q 'Pattern verification failed' "$TMP/qio" && fail "$who: qemu-io reads other bytes: $(cat "$TMP/qio")"
    [[ $(grep -c '^read 1048576/1048576 bytes' "$TMP/qio") == 4 ]] || fail "$who: qemu-io: $(cat "$TMP/qio")"
    # The file stays sparse: only what was written is allocated.
    [[ $(du -k "$img" | cut -f1) -lt $((64 * 1024)) ]] || fail "$who: $(du -k "$img") KiB allocated"
}

big=$TMP/big.luks
qemu_retry qemu-img create -f luks "${SECRET[@]}" \
    -o key-secret=s0,cipher-alg=aes-256,cipher-mode=xts,ivgen-alg=plain64,hash-alg=sha256,iter-time=10 "$big" 4T
check_big "$big" "qemu's 4 TiB"
rm -f "$big"
truncate -s $((4 * TiB + 2 * MiB)) "$big"
"$BLKCRYPT" luks format --type luks1 -q "${FAST[@]}" --key-file "$TMP/pass" "$big" || fail "format 4 TiB"
check_big "$big" "our 4 TiB"

# The range options: checked, and refused where they mean nothing. $img
# holds 6144 sectors of data.
expect_exit 2 "$BLKCRYPT" luks decrypt --key-file "$TMP/pass" --start 7000 "$img" "$TMP/r9"
expect_one_error_line
grep -q 'past the end' "$TMP/stderr" || fail "--start past the end: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" luks decrypt --key-file "$TMP/pass" --start 6000 --size 200 "$img" "$TMP/r9"
grep -q 'is more than the 144 sectors' "$TMP/stderr" || fail "--size past the end: $(cat "$TMP/stderr")"
[[ ! -e $TMP/r9 ]] || fail "a refused range left OUT"
expect_exit 2 "$BLKCRYPT" luks encrypt --key-file "$TMP/pass" --start 6142 "$TMP/pa1" "$img"
grep -q 'do not fit the 1024 bytes of the data segment of .* after --start' "$TMP/stderr" ||
    fail "encrypt past the end: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" luks encrypt --key-file "$TMP/pass" --start 6000 --size 200 "$TMP/pa1" "$img"
grep -q -- '--size 200 is more than the 144 sectors' "$TMP/stderr" || fail "encrypt --size: $(cat "$TMP/stderr")"
"$BLKCRYPT" luks decrypt --key-file "$TMP/pass" --start 6000 "$img" "$TMP/r9" || fail "decrypt of the tail"
tail -c $((144 * 512)) "$TMP/expect" | cmp - "$TMP/r9" || fail "--start without --size: the tail"
expect_exit 2 "$BLKCRYPT" luks dump --start 8 "$img"
# LUKS2 with 4096-byte sectors: a range is whole sectors.
l2=$TMP/l2.luks
truncate -s $((20 << 20)) "$l2"
"$BLKCRYPT" luks format -q --pbkdf pbkdf2 "${FAST[@]}" --key-file "$TMP/pass" "$l2" || fail "LUKS2 format"
expect_exit 2 "$BLKCRYPT" luks decrypt --key-file "$TMP/pass" --start 4 "$l2" "$TMP/r9"
grep -q -- '--start must be a multiple of the sector size (8 sectors)' "$TMP/stderr" || fail "$(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" luks encrypt --key-file "$TMP/pass" --start 8 --size 12 "$TMP/pa1" "$l2"
grep -q -- '--size must be a multiple of the sector size (8 sectors)' "$TMP/stderr" || fail "$(cat "$TMP/stderr")"
random_file "$TMP/l2plain" $((4 << 20))
"$BLKCRYPT" luks encrypt --key-file "$TMP/pass" "$TMP/l2plain" "$l2" || fail "LUKS2 encrypt"
"$BLKCRYPT" luks decrypt --key-file "$TMP/pass" --start 8 --size 16 "$l2" "$TMP/r9" || fail "LUKS2 range"
dd if="$TMP/l2plain" bs=4096 skip=1 count=2 status=none | cmp - "$TMP/r9" || fail "LUKS2 4096-byte range differs"
echo "luks_qemu: all passed"
