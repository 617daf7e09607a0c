#!/bin/bash
# LUKS2 containers with integrity (luksFormat --integrity) made by
# cryptsetup 2.6.1 in the kernel (tests/golden/luks2-integrity, record.sh):
# `luks dump` prints what the oracle's `cryptsetup luksDump` printed, and what
# the host's prints live where it is installed (luksDump needs no root on a
# file); `luks table` prints the two tables cryptsetup stacked, as the kernel
# reported them (NAME_dif's integrity line, NAME's crypt line over it), with
# the passphrase or the volume key; `luks decrypt --start/--size` of the two
# ranges the kernel wrote gives the sha256 the kernel read back, each probe
# sector reads as the kernel's did or fails naming its sector where the
# kernel's read failed (never written); a whole decrypt fails on the first
# never-written sector and leaves no OUT; `luks serve` serves the stack
# read-write: blocks written through it decrypt back and fill the holes;
# `luks encrypt` writes through the stack.
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
GOLD=$SRC/tests/golden/luks2-integrity
HOST=$(command -v cryptsetup || true)
[[ -n $HOST ]] || echo "cryptsetup not installed: live comparison skipped (oracle transcripts compared)"

info() { sed -n "s/^$2=//p" "$GOLD/$1.info"; }
n=0
for inf in "$GOLD"/*.info; do
    name=$(basename "$inf" .info)
    xz -dc "$GOLD/$name.img.xz" >"$TMP/$name.img"
    hdr=()
    hfile=$TMP/$name.img
    if [[ -f $GOLD/$name.hdr.xz ]]; then
        xz -dc "$GOLD/$name.hdr.xz" >"$TMP/$name.hdr"
        hdr=(--header "$TMP/$name.hdr")
        hfile=$TMP/$name.hdr
    fi
    # dump: the oracle's text (LUKS2's has no device name), and the host's.
    "$BLKCRYPT" luks dump "$hfile" >"$TMP/got" || fail "luks dump $name"
    cmp "$GOLD/$name.dump" "$TMP/got" || { diff "$GOLD/$name.dump" "$TMP/got" >&2; fail "$name: dump differs from the oracle's"; }
    if [[ -n $HOST ]]; then
        "$HOST" luksDump "$hfile" >"$TMP/want" 2>/dev/null || fail "host cryptsetup luksDump $name"
        cmp "$TMP/want" "$TMP/got" || { diff "$TMP/want" "$TMP/got" >&2; fail "$name: dump differs from cryptsetup's"; }
    fi

    # table: both lines as the kernel reported them, device numbers aside.
    uuid=$(sed -n 's/^UUID: *\t*//p' "$GOLD/$name.dump" | tr -d '\t ')
    map=luks-$uuid
    info "$name" volume_key | xxd -r -p >"$TMP/vk"
    # The kernel's 254:N is the data device (the image), 253:0 the _dif device.
    {
        echo "${map}_dif: $(info "$name" table_dif | awk -v d="$TMP/$name.img" '{$4=d; print}')"
        echo "$map: $(info "$name" table_crypt | awk -v d="/dev/mapper/${map}_dif" '{$7=d; print}')"
    } >"$TMP/want"
    "$BLKCRYPT" luks table --show-key --volume-key-file "$TMP/vk" "${hdr[@]}" "$TMP/$name.img" >"$TMP/got" ||
        fail "luks table $name"
    cmp "$TMP/want" "$TMP/got" || { diff "$TMP/want" "$TMP/got" >&2; fail "$name: tables differ from the kernel's"; }
    if [[ $(info "$name" keyslot_area) == kept* ]]; then
        info "$name" passphrase | tr -d '\n' >"$TMP/pass"
        "$BLKCRYPT" luks table --show-key --key-file "$TMP/pass" "${hdr[@]}" "$TMP/$name.img" >"$TMP/got2" ||
            fail "luks table $name with the passphrase"
        cmp "$TMP/want" "$TMP/got2" || fail "$name: tables from the passphrase differ"
        # Keys hidden without --show-key: zeros of the key's length.
        "$BLKCRYPT" luks table --key-file "$TMP/pass" "${hdr[@]}" "$TMP/$name.img" >"$TMP/got3"
        ! grep -q "$(info "$name" volume_key)" "$TMP/got3" || fail "$name: key printed without --show-key"
    fi
    # decrypt: the kernel's bytes where it wrote, its failures where not.
    ss=$(info "$name" sector_size)
    while read -r _ r off len sum; do
        "$BLKCRYPT" luks decrypt --volume-key-file "$TMP/vk" "${hdr[@]}" --start $((off / 512)) --size $((len / 512)) \
            "$TMP/$name.img" "$TMP/range" || fail "$name: decrypt range $r"
        [[ $(sha256sum <"$TMP/range" | cut -c1-64) == "$sum" ]] || fail "$name: range $r differs from the kernel's"
    done < <(grep '^range ' "$GOLD/$name.info")
    while read -r _ off verdict sum; do
        rc=0
        "$BLKCRYPT" luks decrypt --volume-key-file "$TMP/vk" "${hdr[@]}" --start $((off / 512)) --size $((ss / 512)) \
            "$TMP/$name.img" "$TMP/probe" 2>"$TMP/err" || rc=$?
        if [[ $verdict == ok ]]; then
            [[ $rc == 0 && $(sha256sum <"$TMP/probe" | cut -c1-64) == "$sum" ]] || fail "$name: probe $off: $(cat "$TMP/err")"
        else
            [[ $rc == 1 ]] || fail "$name: probe $off read, the kernel's failed"
            grep -q "sector $((off / 512)) fails its integrity check" "$TMP/err" || fail "$name: probe $off: $(cat "$TMP/err")"
            [[ ! -e $TMP/probe ]] || fail "$name: a failed decrypt left OUT"
        fi
        rm -f "$TMP/probe"
    done < <(grep '^probe ' "$GOLD/$name.info")
    n=$((n + 1))
done
[[ $n -ge 13 ]] || fail "only $n golden images"

# A whole decrypt stops at the first never-written sector (0), OUT untouched.
name=gcm-random-512
info $name volume_key | xxd -r -p >"$TMP/vk"
expect_exit 1 "$BLKCRYPT" luks decrypt --volume-key-file "$TMP/vk" "$TMP/$name.img" "$TMP/out"
expect_one_error_line
grep -q "sector 0 fails its integrity check" "$TMP/stderr" || fail "whole decrypt: $(cat "$TMP/stderr")"
[[ ! -e $TMP/out ]] || fail "decrypt left OUT behind"
# A flipped ciphertext byte in range A: that sector fails, its neighbours read.
cp "$TMP/$name.img" "$TMP/tamper.img"
# data offset 1 MiB; the 512-byte sector 20 of the mapping lies at
# initial + mrun sectors into the area (dm-integrity geometry), so find it as
# the kernel's layout puts it: journal 88 + 8 sectors, 1792 tag sectors.
printf '\xff' | dd of="$TMP/tamper.img" bs=1 seek=$((1048576 + (8 + 88 + 1792 + 20) * 512 + 7)) conv=notrunc status=none
expect_exit 1 "$BLKCRYPT" luks decrypt --volume-key-file "$TMP/vk" --start 16 --size 72 "$TMP/tamper.img" "$TMP/out"
grep -q "sector 20 fails its integrity check" "$TMP/stderr" || fail "tamper: $(cat "$TMP/stderr")"
"$BLKCRYPT" luks decrypt --volume-key-file "$TMP/vk" --start 21 --size 4 "$TMP/tamper.img" "$TMP/out" ||
    fail "the sectors after the tampered one"
rm -f "$TMP/out"
# encrypt: IN through both targets at --start; it then decrypts back, and the
# kernel's range A beside it is intact. IN not whole sectors, or too big: refused.
head -c 16384 /dev/urandom >"$TMP/in"
cp "$TMP/$name.img" "$TMP/enc.img"
"$BLKCRYPT" luks encrypt --volume-key-file "$TMP/vk" --start 2048 "$TMP/in" "$TMP/enc.img" || fail "encrypt"
"$BLKCRYPT" luks decrypt --volume-key-file "$TMP/vk" --start 2048 --size 32 "$TMP/enc.img" "$TMP/back" || fail "decrypt after encrypt"
cmp "$TMP/in" "$TMP/back" || fail "encrypt's data does not decrypt back"
"$BLKCRYPT" luks decrypt --volume-key-file "$TMP/vk" --start 16 --size 72 "$TMP/enc.img" "$TMP/back" || fail "range A after encrypt"
[[ $(sha256sum <"$TMP/back" | cut -c1-64) == "$(grep '^range A' "$GOLD/$name.info" | awk '{print $5}')" ]] ||
    fail "encrypt changed range A"
head -c 1000 /dev/urandom >"$TMP/odd"
expect_exit 1 "$BLKCRYPT" luks encrypt --volume-key-file "$TMP/vk" "$TMP/odd" "$TMP/enc.img"
head -c $((8 << 20)) /dev/zero >"$TMP/big"
expect_exit nonzero "$BLKCRYPT" luks encrypt --volume-key-file "$TMP/vk" "$TMP/big" "$TMP/enc.img"
cp "$TMP/enc.img" "$TMP/enc2.img"

# serve: read-write through both targets; what a client writes decrypts back,
# and a written block that was a hole reads from then on.
if command -v nbdcopy >/dev/null; then
    source "$(dirname "$0")/nbd_lib.sh"
    cp "$TMP/$name.img" "$TMP/srv.img"
    head -c 65536 /dev/urandom >"$TMP/w"
    start_server luks serve --socket "$SOCK" --volume-key-file "$TMP/vk" "$TMP/srv.img"
    T nbdcopy "$TMP/w" "$URI" || fail "write through serve: $(cat "$TMP/log")"
    stop_server
    "$BLKCRYPT" luks decrypt --volume-key-file "$TMP/vk" --size 128 "$TMP/srv.img" "$TMP/back" || fail "decrypt after serve"
    cmp "$TMP/w" "$TMP/back" || fail "serve's writes do not decrypt back"
    "$BLKCRYPT" luks decrypt --volume-key-file "$TMP/vk" --start 16 --size 72 "$TMP/srv.img" "$TMP/back" ||
        fail "range A after serve"
else
    echo "nbdcopy missing: serve round trip skipped"
fi

# A segment without its dm-integrity superblock (the area zeroed) is named.
cp "$TMP/$name.img" "$TMP/nosb.img"
dd if=/dev/zero of="$TMP/nosb.img" bs=4096 seek=256 count=1 conv=notrunc status=none
expect_exit 1 "$BLKCRYPT" luks table --volume-key-file "$TMP/vk" "$TMP/nosb.img"
grep -q "no dm-integrity superblock at sector 2048" "$TMP/stderr" || fail "missing superblock: $(cat "$TMP/stderr")"
echo "OK: $n LUKS2 integrity images"

# luks format --integrity: a container cryptsetup reads, whose every sector
# decrypts to zeros after the wipe (the AEAD of zeros, with valid tags), or
# fails at sector 0 with --integrity-no-wipe; LUKS1 refused as cryptsetup does.
printf 'format pass' >"$TMP/fpass"
FMT=(-q --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --key-file "$TMP/fpass")
for spec in "aes-gcm-random aead 512" "aes-xts-plain64 hmac-sha256 4096" "chacha20-random poly1305 4096" \
            "aes-xts-random hmac-sha512 4096" "aegis128-random aead 512"; do
    read -r cipher integ ss <<<"$spec"
    rm -f "$TMP/f.img"; truncate -s 24M "$TMP/f.img"
    ks=(); [[ $cipher == aegis128* ]] && ks=(--key-size 128)
    "$BLKCRYPT" luks format "${FMT[@]}" --cipher "$cipher" "${ks[@]}" --integrity "$integ" --sector-size "$ss" "$TMP/f.img" ||
        fail "format --integrity $integ ($cipher)"
    if [[ -n $HOST ]]; then
        "$HOST" luksDump "$TMP/f.img" >"$TMP/want" || fail "cryptsetup cannot read our $cipher header"
        "$BLKCRYPT" luks dump "$TMP/f.img" >"$TMP/got"
        cmp "$TMP/want" "$TMP/got" || fail "$cipher: our dump of our header differs from cryptsetup's"
        want=$integ; [[ $integ == hmac-* ]] && want="hmac(${integ#hmac-})"
        grep -q "integrity: $want\$" "$TMP/want" || fail "$cipher: cryptsetup sees no integrity $want"
    fi
    "$BLKCRYPT" luks decrypt --key-file "$TMP/fpass" "$TMP/f.img" "$TMP/f.out" || fail "decrypt after format ($cipher)"
    [[ $(stat -c %s "$TMP/f.out") -gt $((4 << 20)) ]] || fail "$cipher: a small device"
    cmp "$TMP/f.out" <(head -c "$(stat -c %s "$TMP/f.out")" /dev/zero) || fail "$cipher: the wiped device is not zeros"
    rm -f "$TMP/f.out"
done
rm -f "$TMP/f.img"; truncate -s 24M "$TMP/f.img"
"$BLKCRYPT" luks format "${FMT[@]}" --cipher aes-gcm-random --integrity aead --integrity-no-wipe "$TMP/f.img" ||
    fail "format --integrity-no-wipe"
expect_exit 1 "$BLKCRYPT" luks decrypt --key-file "$TMP/fpass" "$TMP/f.img" "$TMP/f.out"
grep -q "sector 0 fails its integrity check" "$TMP/stderr" || fail "no-wipe: $(cat "$TMP/stderr")"
rm -f "$TMP/f.img"; truncate -s 24M "$TMP/f.img"
expect_exit nonzero "$BLKCRYPT" luks format -q --type luks1 --key-file "$TMP/fpass" --integrity aead --cipher aes-gcm-random "$TMP/f.img"
grep -q "Integrity option can be used only for LUKS2 format." "$TMP/stderr" || fail "luks1: $(cat "$TMP/stderr")"
expect_exit nonzero "$BLKCRYPT" luks format "${FMT[@]}" --integrity-no-wipe "$TMP/f.img"
echo "OK: format --integrity"

# Our format's dm-integrity layout is cryptsetup's: the same container shape
# as two recorded images (6 MiB, data at 1 MiB, 4 KiB sectors, xts + HMAC,
# with and without --integrity-legacy-padding) gives the kernel's table.
for name in xts-hmac-sha256-4096 xts-hmac-sha256-legacy; do
    rm -f "$TMP/f.img"; truncate -s 6M "$TMP/f.img"
    legacy=(); [[ $name == *legacy ]] && legacy=(--integrity-legacy-padding)
    "$BLKCRYPT" luks format "${FMT[@]}" --cipher aes-xts-plain64 --integrity hmac-sha256 --sector-size 4096 \
        --offset 2048 --luks2-metadata-size 16384 --luks2-keyslots-size 524288 --integrity-no-wipe "${legacy[@]}" "$TMP/f.img" ||
        fail "format like $name"
    "$BLKCRYPT" luks table --key-file "$TMP/fpass" "$TMP/f.img" | head -1 | cut -d' ' -f2- | awk '{$4="DEV"; print}' >"$TMP/got"
    info "$name" table_dif | awk '{$4="DEV"; print}' >"$TMP/want"
    cmp "$TMP/want" "$TMP/got" || { diff "$TMP/want" "$TMP/got" >&2; fail "format like $name: another integrity table"; }
done
echo "OK: format layouts"
