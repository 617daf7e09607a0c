#!/bin/bash
# `table` of every container format: the dmsetup lines `cryptsetup open`
# would load, served by `serve --dm-table`, read back by nbdcopy, equal what
# `decrypt` writes; the key is zeros unless --show-key. Over LUKS1 and LUKS2
# containers cryptsetup makes here, and the shared TrueCrypt/VeraCrypt,
# BitLocker and FileVault 2 fixtures (each skipped with a note where absent).
# With a second argument, examples/open_container (the container API: detect,
# open, unlock to a table) reads a range of each detectable one, which must
# equal the same bytes of decrypt's output.
OPEN_CONTAINER=${2:-}
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SHARED=${BLKCRYPT_SHARED_DIR:-$SRC/../shared}/fixtures
command -v nbdcopy >/dev/null || { echo "nbdcopy not installed: format table tests skipped"; exit 0; }
NBD_CLIENTS=nbdcopy source "$(dirname "$0")/nbd_lib.sh"
checked=0

# check NAME FORMAT SECRET IMAGE [OPTIONS...]: table, table --show-key, the
# served table against decrypt. SECRET goes to stdin (one line).
check() {
    local name=$1 fmt=$2 secret=$3 img=$4
    shift 4
    printf '%s\n' "$secret" >"$TMP/secret"
    "$BLKCRYPT" "$fmt" table "$@" "$img" <"$TMP/secret" >"$TMP/$name.hidden" 2>"$TMP/stderr" ||
        fail "$name: table: $(cat "$TMP/stderr")"
    "$BLKCRYPT" "$fmt" table --show-key "$@" "$img" <"$TMP/secret" >"$TMP/$name.table" ||
        fail "$name: table --show-key"
    grep_q " crypt " <"$TMP/$name.table" || fail "$name: no crypt line"
    # The same lines, keys as zeros; the shown keys are not all zeros.
    awk '$3=="crypt"{k=$5; gsub(/./,"0",k); $5=k} {print}' "$TMP/$name.table" | cmp - "$TMP/$name.hidden" ||
        fail "$name: the hidden table differs from the shown one beyond the key"
    awk '$3=="crypt" && $5 ~ /[1-9a-f]/{k=1} END{exit !k}' "$TMP/$name.table" || fail "$name: --show-key shows no key"
    "$BLKCRYPT" "$fmt" decrypt "$@" "$img" "$TMP/$name.plain" <"$TMP/secret" 2>"$TMP/stderr" ||
        fail "$name: decrypt: $(cat "$TMP/stderr")"
    start_server serve --dm-table "$TMP/$name.table" --read-only --socket "$SOCK"
    rm -f "$TMP/$name.served"
    T nbdcopy "$URI" "$TMP/$name.served" || fail "$name: nbdcopy: $(cat "$TMP/log")"
    stop_server
    cmp "$TMP/$name.served" "$TMP/$name.plain" || fail "$name: the served table differs from decrypt"
    if [[ -n $OPEN_CONTAINER && $fmt != tcrypt ]]; then
        # The passphrase as a key file: the secret without its newline.
        if [[ $fmt == luks ]]; then cp "$TMP/pass" "$TMP/kf"; else printf '%s' "$secret" >"$TMP/kf"; fi
        local size off len
        size=$(stat -c %s "$TMP/$name.plain")
        off=$((size / 3 + 77)) len=$((size / 3))
        "$OPEN_CONTAINER" "$img" "$TMP/kf" "$off" "$len" >"$TMP/$name.range" 2>"$TMP/stderr" ||
            fail "$name: open_container: $(cat "$TMP/stderr")"
        [[ $(stat -c %s "$TMP/$name.range") == "$len" ]] || fail "$name: open_container wrote the wrong length"
        cmp -i "$off:0" -n "$len" "$TMP/$name.plain" "$TMP/$name.range" ||
            fail "$name: open_container's range differs from decrypt"
        rm -f "$TMP/$name.range"
    fi
    rm -f "$TMP/$name.served" "$TMP/$name.plain"
    checked=$((checked + 1))
}

# LUKS1 and LUKS2 made here (no root needed for a file), 4K sectors too.
if command -v cryptsetup >/dev/null; then
    printf 'luks pass' >"$TMP/pass"
    for t in luks1 luks2 luks2-4k; do
        img=$TMP/$t.img
        truncate -s 24M "$img"
        opts=(--type "${t%-4k}")
        [[ $t == *-4k ]] && opts+=(--sector-size 4096)
        cryptsetup luksFormat --batch-mode --pbkdf pbkdf2 --pbkdf-force-iterations 1000 "${opts[@]}" \
            --key-file "$TMP/pass" "$img" || fail "cryptsetup luksFormat $t"
        head -c 4M /dev/urandom | dd of="$img" bs=1M seek=18 conv=notrunc status=none
        check "$t" luks "" "$img" --key-file "$TMP/pass"
    done
else
    echo "cryptsetup not installed: LUKS table tests skipped"
fi

if [[ -f $SHARED/tcrypt-images.tar.xz ]]; then
    tar xSJf "$SHARED/tcrypt-images.tar.xz" -C "$TMP"
    D=$TMP/tcrypt
    check tc4aes tcrypt aaaaaaaaaaaa "$D/tc_4-sha512-xts-aes-hidden" -h sha512
    check tc4aes-hidden tcrypt bbbbbbbbbbbb "$D/tc_4-sha512-xts-aes-hidden" -h sha512 --tcrypt-hidden
    check vc1 tcrypt aaaaaaaaaaaa "$D/vc_1-sha256-xts-aes" -h sha256
    check tc2lrw tcrypt aaaaaaaaaaaa "$D/tc_2-ripemd160-lrw-aes" -h ripemd160
    rm -rf "$D"
else
    echo "no tcrypt-images.tar.xz in $SHARED: TrueCrypt table tests skipped"
fi

if [[ -f $SHARED/bitlk-images.tar.xz ]]; then
    tar xSJf "$SHARED/bitlk-images.tar.xz" -C "$TMP"
    D=$TMP/bitlk
    conf() {
        awk -v s="[$1]" -v k="$2" '$0==s{on=1;next} /^\[/{on=0} on && index($0,k"=")==1{print substr($0,length(k)+2)}' \
            "$D/images.conf"
    }
    # Zero, crypt and (To Go) relocated-header lines; 4K sectors in none of them.
    for i in bitlk-aes-xts-128 bitlk-aes-cbc-elephant-128 bitlk-togo-aes-xts-128; do
        check "$i" bitlk "$(conf "$i" PW)" "$D/$i.img"
        grep_q " zero$" <"$TMP/$i.table" || fail "$i: no zero line over the metadata"
    done
    rm -rf "$D"
else
    echo "no bitlk-images.tar.xz in $SHARED: BitLocker table tests skipped"
fi

if [[ -f $SHARED/fvault2-images.tar.xz ]]; then
    tar xSJf "$SHARED/fvault2-images.tar.xz" -C "$TMP"
    check fvault2 fvault2 heslo123 "$TMP/fvault2-images/small"
    rm -rf "$TMP/fvault2-images"
else
    echo "no fvault2-images.tar.xz in $SHARED: FileVault 2 table tests skipped"
fi

echo "format tables: $checked checked"
