#!/bin/bash
# LUKS2 containers with integrity (luksFormat --integrity) made by
# cryptsetup 2.6.1 in the kernel (tests/golden/luks2-integrity, record.sh):
# `luks dump` prints what the oracle's `cryptsetup luksDump` printed, and what
# the host's prints live where it is installed (luksDump needs no root on a
# file); `luks table` prints the two tables cryptsetup stacked, as the kernel
# reported them (NAME_dif's integrity line, NAME's crypt line over it), with
# the passphrase or the volume key; decrypt and serve refuse the stack with
# one error line; the library's one-table front refuses it too.
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
    n=$((n + 1))
done
[[ $n -ge 13 ]] || fail "only $n golden images"

# decrypt and serve: refused, one line, no output left behind.
name=gcm-random-512
info $name volume_key | xxd -r -p >"$TMP/vk"
expect_exit 1 "$BLKCRYPT" luks decrypt --volume-key-file "$TMP/vk" "$TMP/$name.img" "$TMP/out"
expect_one_error_line
grep -q "dm-integrity" "$TMP/stderr" || fail "decrypt's refusal does not say why: $(cat "$TMP/stderr")"
[[ ! -e $TMP/out ]] || fail "decrypt left OUT behind"
head -c 4096 /dev/zero >"$TMP/in"
cp "$TMP/$name.img" "$TMP/enc.img"
expect_exit 1 "$BLKCRYPT" luks encrypt --volume-key-file "$TMP/vk" "$TMP/in" "$TMP/enc.img"
expect_one_error_line
cmp "$TMP/$name.img" "$TMP/enc.img" || fail "a refused encrypt changed IMAGE"
expect_exit 1 "$BLKCRYPT" luks serve --socket "$TMP/sock" --volume-key-file "$TMP/vk" "$TMP/$name.img"
expect_one_error_line
grep -q "dm-integrity" "$TMP/stderr" || fail "serve's refusal does not say why: $(cat "$TMP/stderr")"

# A segment without its dm-integrity superblock (the area zeroed) is named.
cp "$TMP/$name.img" "$TMP/nosb.img"
dd if=/dev/zero of="$TMP/nosb.img" bs=4096 seek=256 count=1 conv=notrunc status=none
expect_exit 1 "$BLKCRYPT" luks table --volume-key-file "$TMP/vk" "$TMP/nosb.img"
grep -q "no dm-integrity superblock at sector 2048" "$TMP/stderr" || fail "missing superblock: $(cat "$TMP/stderr")"
echo "OK: $n LUKS2 integrity images"
