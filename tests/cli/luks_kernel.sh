#!/bin/bash
# The kernel proof of blkcrypt's LUKS, replayed without the kernel: the golden
# files in tests/luks/kernel/ (written by make-kernel-golden.sh, which ran the
# real kernel and cryptsetup in the qemu oracle) are checked against this build.
#  ours (blkcrypt wrote, the kernel read): the container is rebuilt from the
#    manifest (same volume key, UUID, costs); its dump equals the kernel-side
#    cryptsetup luksDump (LUKS2: and --dump-json-metadata) up to random salts
#    and digests, and the kernel's dm table; the guest's records
#    say cryptsetup printed our volume key, every passphrase opened the
#    keyslot we put it in, a wrong one was refused, /dev/mapper read back
#    pattern A; `luks encrypt --volume-key-file` of pattern A gives the exact
#    ciphertext the kernel read, of pattern B the exact ciphertext the kernel
#    wrote, and `luks decrypt` gives B back.
#  theirs (cryptsetup and the kernel wrote): the committed container's dump,
#    --dump-json-metadata and --dump-volume-key equal the guest's cryptsetup
#    output (and the host's cryptsetup luksDump, when installed), every
#    passphrase opens the keyslot cryptsetup named, and `luks decrypt` gives
#    pattern B, which the kernel wrote through `cryptsetup open`.
#  keys: our kill-slot + add-key on two of those give the header that the
#    guest's cryptsetup then opened (p1, p3) and refused (p2).
source "$(dirname "$0")/lib.sh"
K="$(cd "$(dirname "$0")/../luks/kernel" && pwd)"
source "$K/lib.sh"
for t in openssl xxd xz sha512sum; do command -v $t >/dev/null || fail "needs $t"; done
MANIFEST=$K/manifest.tsv
[[ -f $MANIFEST ]] || fail "no $MANIFEST"
HAVE_CS=0
command -v cryptsetup >/dev/null && HAVE_CS=1 || echo "note: cryptsetup not installed: host luksDump comparisons skipped"

sha() { sha256sum "$1" | cut -c1-64; }
segment_sha() { tail -c "$DATA_SIZE" "$1" | sha256sum | cut -c1-64; }
# recorded CASE SECTION: what the guest printed for it (without the rc line)
recorded() { guest_section "$K/guest/$1.txt" "$2"; }
recorded_rc() { guest_rc "$K/guest/$1.txt" "$2"; }
# same WHAT FILE_A FILE_B
same() { cmp -s "$2" "$3" || fail "$1: $(diff "$2" "$3" | head -20)"; }

write_passphrases "$TMP"
pattern A "$TMP/A.bin"
pattern B "$TMP/B.bin"
grep_q -F "pattern A sha256 $(sha "$TMP/A.bin"), pattern B sha256 $(sha "$TMP/B.bin")" <"$MANIFEST" ||
    fail "the patterns differ from the manifest's"

# check_guest CASE PASSES SLOTS: the kernel side's records of either direction.
check_guest() {
    local c=$1 i p
    local -a ps=($2) slots=($3)
    [[ -s $K/guest/$c.txt ]] || fail "$c: no guest record"
    for s in luksDump vkdump open; do
        [[ $(recorded_rc "$c" $s) == rc=0 ]] || fail "$c: the guest's $s failed: $(recorded "$c" $s)"
    done
    for i in "${!ps[@]}"; do
        p=${ps[$i]}
        # LUKS2 with -v first says "No usable token is available." (none can unlock)
        [[ $(recorded "$c" "test-$p" | grep -vx 'No usable token is available\.') == \
            "Key slot ${slots[$i]} unlocked."$'\n'"Command successful." ]] ||
            fail "$c: cryptsetup open --test-passphrase $p: $(recorded "$c" "test-$p")"
    done
    [[ $(recorded "$c" wrong-passphrase) == "No key available with this passphrase." &&
        $(recorded_rc "$c" wrong-passphrase) == rc=2 ]] || fail "$c: a wrong passphrase was not refused"
    [[ $(recorded "$c" size) == "$DATA_SIZE" ]] || fail "$c: the mapping is $(recorded "$c" size) bytes"
    [[ $(recorded "$c" reread-sha) == "$(sha "$TMP/B.bin")" ]] || fail "$c: the kernel did not read back pattern B"
}
# check_table CASE DUMPFILE: the kernel mapped the data segment our dump
# describes: "0 <sectors> crypt <cipher> <key> 0 <dev> <offset> [1 sector_size:N]".
check_table() {
    local c=$1 cipher off sector want
    cipher=$(awk -F'\t' '/^Cipher name:/ { n = $2 } /^Cipher mode:/ { print n "-" $2; exit }
                         /^\tcipher: / { sub(/^\tcipher: /, ""); print; exit }' "$2")
    off=$(($(data_offset_bytes "$2") / 512))
    sector=$(awk '/^\tsector: [0-9]+ \[bytes\]/ { print $2; exit }' "$2")
    want="0 $((DATA_SIZE / 512)) crypt $cipher"
    read -r -a t <<<"$(recorded "$c" table)"
    [[ "${t[*]:0:4}" == "$want" && ${t[5]} == 0 && ${t[7]} == "$off" ]] ||
        fail "$c: the kernel's table '${t[*]}' is not '$want ... 0 DEV $off'"
    if [[ ${sector:-512} == 512 ]]; then
        [[ ${#t[@]} == 8 ]] || fail "$c: kernel table options '${t[*]:8}'"
    else
        [[ "${t[*]:8}" == "1 sector_size:$sector" ]] || fail "$c: kernel table options '${t[*]:8}', want sector_size:$sector"
    fi
}
# mk_dump_hex FILE: the volume key of a --dump-volume-key output.
mk_dump_hex() { sed -n '/^MK dump:/,$p' "$1" | sed 's/^MK dump://' | tr -d ' \t\n'; }

n_ours=0
n_theirs=0
while IFS=$'\t' read -r side name type bits detached uuid off ctA ctB passes fargs addkeys token; do
    [[ $side == ours ]] || continue
    if [[ $token == 1 && $HAVE_CS == 0 ]]; then
        echo "note: $name skipped (its token is imported by cryptsetup)"
        continue
    fi
    D=$TMP/ours/$name
    build_ours "$BLKCRYPT" "$D" "$TMP" "$name" "$type" "$bits" "$detached" "$uuid" "$fargs" "$addkeys" "$token" ||
        fail "$name: rebuilding the container"
    hdropt=()
    [[ $detached == 1 ]] && hdropt=(--header "$D/hdr")
    [[ $(cat "$D/offset") == "$off" ]] || fail "$name: data offset $(cat "$D/offset"), the kernel's was $off"
    # the slot each passphrase went into: p1 in 0 (format), the rest from add_keys
    slots=0
    for ak in $addkeys; do [[ $ak == - ]] || slots+=" ${ak%%:*}"; done
    check_guest "$name" "$passes" "$slots"
    [[ $(recorded "$name" read-sha) == "$(sha "$TMP/A.bin")" ]] || fail "$name: the kernel did not read pattern A"
    recorded "$name" luksDump | mask_random >"$TMP/theirs-dump"
    mask_random <"$D/our-dump" >"$TMP/our-dump"
    same "$name: our dump differs from the kernel-side luksDump (salts and digests masked)" "$TMP/our-dump" "$TMP/theirs-dump"
    check_table "$name" "$D/our-dump"
    if [[ $type == luks2 ]]; then
        recorded "$name" json | mask_random_json >"$TMP/theirs-json"
        "$BLKCRYPT" luks dump --dump-json-metadata "${hdropt[@]}" "$D/data" | mask_random_json >"$TMP/our-json" ||
            fail "$name: json"
        same "$name: --dump-json-metadata differs from the kernel-side one (salts, digests masked)" \
            "$TMP/our-json" "$TMP/theirs-json"
    fi
    if [[ $token == 1 ]]; then  # kept through our add-key rewrites, read by the kernel's cryptsetup
        grep_q -Fx '  2: blkcrypt-test' <"$TMP/theirs-dump" || fail "$name: the guest's luksDump shows no token 2"
    fi
    if [[ $HAVE_CS == 1 ]]; then
        cryptsetup luksDump "${hdropt[@]}" "$D/data" | mask_random >"$TMP/host-dump"
        same "$name: host cryptsetup luksDump of the rebuilt container" "$TMP/host-dump" "$TMP/theirs-dump"
    fi
    recorded "$name" vkdump >"$TMP/vk"
    [[ $(mk_dump_hex "$TMP/vk") == "$(xxd -p "$D/vk" | tr -d '\n')" ]] ||
        fail "$name: the kernel-side cryptsetup printed another volume key"
    "$BLKCRYPT" luks encrypt --volume-key-file "$D/vk" "${hdropt[@]}" "$TMP/A.bin" "$D/data" || fail "$name: encrypt A"
    [[ $(segment_sha "$D/data") == "$ctA" ]] || fail "$name: the ciphertext of pattern A is not the one the kernel read"
    "$BLKCRYPT" luks encrypt --volume-key-file "$D/vk" "${hdropt[@]}" "$TMP/B.bin" "$D/data" || fail "$name: encrypt B"
    [[ $(segment_sha "$D/data") == "$ctB" ]] || fail "$name: the ciphertext of pattern B is not the one the kernel wrote"
    for p in $passes; do
        rm -f "$D/out"
        "$BLKCRYPT" luks decrypt --key-file "$TMP/$p" "${hdropt[@]}" "$D/data" "$D/out" || fail "$name: decrypt with $p"
        same "$name: decrypt with $p" "$D/out" "$TMP/B.bin"
    done
    n_ours=$((n_ours + 1))
done < <(grep -v '^#' "$MANIFEST")

while IFS=$'\t' read -r side name type detached uuid passes token orig csha hsha fargs addkeys; do
    [[ $side == theirs ]] || continue
    D=$TMP/theirs/$name
    mkdir -p "$D"
    xz -dc "$K/theirs/$name.img.xz" >"$D/data" || fail "$name: unxz"
    [[ $(sha "$D/data") == "$csha" ]] || fail "$name: the committed container is not the recorded one"
    hdropt=()
    hdr=$D/data
    if [[ $detached == 1 ]]; then
        hdr=$D/hdr
        xz -dc "$K/theirs/$name.hdr.xz" >"$hdr" || fail "$name: unxz header"
        [[ $(sha "$hdr") == "$hsha" ]] || fail "$name: the committed header is not the recorded one"
        hdropt=(--header "$hdr")
    fi
    slots=0
    for ak in $addkeys; do [[ $ak == - ]] || slots+=" ${ak%%:*}"; done
    check_guest "$name" "$passes" "$slots"
    recorded "$name" luksDump | unify_device >"$TMP/theirs-dump"
    "$BLKCRYPT" luks dump "${hdropt[@]}" "$D/data" | unify_device >"$TMP/our-dump" || fail "$name: dump"
    same "$name: our dump differs from cryptsetup's in the guest" "$TMP/our-dump" "$TMP/theirs-dump"
    check_table "$name" "$TMP/our-dump"
    if [[ $HAVE_CS == 1 ]]; then
        cryptsetup luksDump "${hdropt[@]}" "$D/data" | unify_device >"$TMP/host-dump"
        same "$name: host cryptsetup luksDump" "$TMP/host-dump" "$TMP/theirs-dump"
    fi
    if [[ $type == luks2 ]]; then
        recorded "$name" json >"$TMP/theirs-json"
        "$BLKCRYPT" luks dump --dump-json-metadata "${hdropt[@]}" "$D/data" >"$TMP/our-json" || fail "$name: json"
        same "$name: --dump-json-metadata" "$TMP/our-json" "$TMP/theirs-json"
        if [[ $token == 1 ]]; then
            grep_q -F '"type":"blkcrypt-test"' < <(tr -d ' \n' <"$TMP/our-json") || fail "$name: the token is missing"
        fi
    fi
    recorded "$name" vkdump | unify_device >"$TMP/theirs-vk"
    "$BLKCRYPT" luks dump -q --dump-volume-key --key-file "$TMP/p1" "${hdropt[@]}" "$D/data" | unify_device \
        >"$TMP/our-vk" || fail "$name: --dump-volume-key"
    same "$name: --dump-volume-key" "$TMP/our-vk" "$TMP/theirs-vk"
    [[ $("$BLKCRYPT" luks uuid "${hdropt[@]}" "$D/data") == "$uuid" ]] || fail "$name: uuid"
    read -r -a ps <<<"$passes"
    read -r -a ss <<<"$slots"
    for i in "${!ps[@]}"; do
        "$BLKCRYPT" luks test-passphrase -v --key-file "$TMP/${ps[$i]}" "${hdropt[@]}" "$D/data" >"$TMP/out" ||
            fail "$name: test-passphrase ${ps[$i]}"
        [[ $(cat "$TMP/out") == "Key slot ${ss[$i]} unlocked." ]] || fail "$name: ${ps[$i]}: $(cat "$TMP/out")"
        rm -f "$D/out"
        "$BLKCRYPT" luks decrypt --key-file "$TMP/${ps[$i]}" "${hdropt[@]}" "$D/data" "$D/out" ||
            fail "$name: decrypt with ${ps[$i]}"
        same "$name: decrypt with ${ps[$i]} (the kernel's pattern B)" "$D/out" "$TMP/B.bin"
    done
    expect_exit 2 "$BLKCRYPT" luks test-passphrase --key-file "$K/manifest.tsv" "${hdropt[@]}" "$D/data"
    n_theirs=$((n_theirs + 1))
done < <(grep -v '^#' "$MANIFEST")

# Keyslot changes of ours on cryptsetup's containers, which the guest's
# cryptsetup accepted (guest/keys-t*.txt): the same kill-slot of the p2
# keyslot and add-key of p3 into slot 6 on the committed container must give
# the header the guest dumped (salts masked).
n_keys=0
for f in "$K"/guest/keys-t*.txt; do
    k=$(basename "$f" .txt)
    name=${k#keys-}
    row=$(grep -P "^theirs\t$name\t" "$MANIFEST") || fail "$k: no manifest row for $name"
    IFS=$'\t' read -r _ _ type _ _ _ _ _ _ _ _ addkeys <<<"$row"
    slot=${addkeys%%:p2:*}
    [[ $slot =~ ^[0-9]+$ ]] || fail "$k: $name has no p2 keyslot"
    [[ $(recorded "$k" test-p1 | grep -vx 'No usable token is available\.') == "Key slot 0 unlocked."$'\n'"Command successful." &&
        $(recorded_rc "$k" test-p2) == rc=2 &&
        $(recorded "$k" test-p3 | grep -vx 'No usable token is available\.') == "Key slot 6 unlocked."$'\n'"Command successful." ]] ||
        fail "$k: the guest's cryptsetup did not see our keyslot changes"
    img=$TMP/theirs/$name/data
    cp "$img" "$TMP/keys.img"
    "$BLKCRYPT" luks kill-slot -q "$TMP/keys.img" "$slot" "$TMP/p1" || fail "$k: kill-slot $slot"
    read -r -a ka <<<"$(kdf_args "$type" P2)"
    "$BLKCRYPT" luks add-key --key-file "$TMP/p1" --key-slot 6 "${ka[@]}" "$TMP/keys.img" "$TMP/p3" || fail "$k: add-key"
    "$BLKCRYPT" luks dump "$TMP/keys.img" | mask_random >"$TMP/our-dump"
    recorded "$k" luksDump | mask_random >"$TMP/theirs-dump"
    same "$k: our header after kill-slot and add-key is not the one the kernel-side cryptsetup read" \
        "$TMP/our-dump" "$TMP/theirs-dump"
    n_keys=$((n_keys + 1))
done
[[ $n_keys -ge 2 ]] || fail "only $n_keys keyslot-change records"

[[ $n_ours -ge 10 && $n_theirs -ge 8 ]] || fail "only $n_ours ours and $n_theirs theirs cases in the manifest"
echo "luks kernel golden: $n_ours containers of ours read by the kernel, $n_theirs of cryptsetup's read by us," \
    "$n_keys with our keyslot changes read by the kernel's cryptsetup: all match"
