#!/usr/bin/env bash
# VeraCrypt system encryption of one partition (tests/tcrypt/make_volume.py
# --system-disk: an MBR or GPT disk whose partition 2, at sector 6144, is
# encrypted, the header at sector 62 of the disk), replayed against what the
# oracle's kernel mapped once (tests/tcrypt/kernel/make-system.sh,
# oracle-system.txt, system.golden): `cryptsetup tcryptOpen --tcrypt-system
# /dev/vdX2` (cryptsetup finds the disk through sysfs) gave exactly the bytes
# `blkcrypt tcrypt decrypt --tcrypt-system` must give for
#   --partition 2 DISK              (the whole-disk image),
#   --header TRACK|DISK PART        (an image of the partition alone, its
#                                    header in the disk's first 63 sectors
#                                    or in the disk),
#   DISK                            (the encrypted area, volume size),
# and `tcryptDump --dump-volume-key` on /dev/vdX2 printed the dump. The
# fixture's full-disk image (sys_vc_1_mbr_full) through its partition 1 as the
# kernel mapped /dev/vdX1 (FAT UUID DEAD-BABE). serve --partition exports the
# same bytes and writes land only in the partition. Refused: a partition
# image without --header, an empty or absent partition, one past the image's
# end, --partition without --tcrypt-system.
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
GOLD=$SRC/tests/tcrypt/kernel
python3 -c 'import cryptography' 2>/dev/null || { echo "python3-cryptography missing: system encryption tests skipped"; exit 0; }

# golden NAME FIELD: system.golden's size (2) or sha256 (3) of a case.
golden() { awk -F'\t' -v n="$1" -v f="$2" '$1==n{print $f}' "$GOLD/system.golden"; }
# check NAME WHAT FILE: FILE holds what the kernel mapped for NAME.
check() {
    [[ $(stat -c %s "$3") == "$(golden "$1" 2)" ]] || fail "$2: $(stat -c %s "$3") bytes, the kernel mapped $(golden "$1" 2)"
    [[ $(sha256sum <"$3" | cut -d' ' -f1) == "$(golden "$1" 3)" ]] || fail "$2: not what the kernel mapped for $1"
}
# decrypt WHAT ARGS...: tcrypt decrypt ARGS into $TMP/out.
decrypt() {
    local what=$1
    shift
    rm -f "$TMP/out"
    "$BLKCRYPT" tcrypt decrypt --passphrase-file "$TMP/pw" "${O[@]}" "$@" "$TMP/out" 2>"$TMP/stderr" ||
        fail "$what: $(cat "$TMP/stderr")"
}

n=0
while IFS=$'\t' read -r name gen pw opts; do
    [[ -z $name || $name == \#* ]] && continue
    read -r -a ga <<<"$gen"
    read -r -a O <<<"$opts --tcrypt-system"
    disk=$TMP/$name.img
    gsha=$(python3 "$SRC/tests/tcrypt/make_volume.py" "$disk" --password "$pw" "${ga[@]}" | tail -1)
    [[ $gsha == "$(golden "$name-part" 3)" ]] || fail "$name: the generator now writes $gsha"
    printf '%s\n' "$pw" >"$TMP/pw"
    decrypt "$name --partition 2" --partition 2 "$disk"
    check "$name-part" "$name --partition 2" "$TMP/out"
    # The encrypted area of the whole disk: the partition's bytes (cryptsetup
    # 2.6.1 maps on to the disk's end: the same table, longer).
    decrypt "$name whole disk" "$disk"
    check "$name-part" "$name whole disk" "$TMP/out"
    [[ $(golden "$name-disk" 2) -gt $(golden "$name-part" 2) ]] || fail "$name: the kernel's whole-disk mapping is not longer"
    # --header naming IMAGE itself: the whole disk still (cryptsetup: the same device).
    decrypt "$name --header DISK DISK" --header "$disk" "$disk"
    check "$name-part" "$name --header DISK DISK" "$TMP/out"
    # The partition alone, its header elsewhere.
    dd if="$disk" of="$TMP/part.img" bs=512 skip=6144 count=$(($(golden "$name-part" 2) / 512)) status=none
    dd if="$disk" of="$TMP/track.img" bs=512 count=63 status=none
    decrypt "$name --header track" --header "$TMP/track.img" "$TMP/part.img"
    check "$name-part" "$name --header track" "$TMP/out"
    decrypt "$name --header disk" --header "$disk" "$TMP/part.img"
    check "$name-part" "$name --header disk" "$TMP/out"
    decrypt "$name --header track --partition 2" --header "$TMP/track.img" --partition 2 "$TMP/part.img"
    check "$name-part" "$name --header track --partition 2" "$TMP/out"
    # IVs count from the partition's start on the disk: partition 1's start
    # decrypts to other bytes.
    decrypt "$name --header track --partition 1" --header "$TMP/track.img" --partition 1 "$TMP/part.img"
    [[ $(sha256sum <"$TMP/out" | cut -d' ' -f1) != "$gsha" ]] || fail "$name: the IV offset is not used"
    # The dump of the partition, as cryptsetup printed it for /dev/vdX2.
    for form in "--partition 2 $disk" "--header $TMP/track.img $TMP/part.img"; do
        read -r -a f <<<"$form"
        "$BLKCRYPT" tcrypt dump -q --dump-volume-key --passphrase-file "$TMP/pw" "${O[@]}" "${f[@]}" >"$TMP/dump" ||
            fail "$name: dump $form"
        sed "1s|for .*|for ${f[-1]}|" "$GOLD/$name-part.dump" >"$TMP/want"
        diff -u "$TMP/want" "$TMP/dump" >&2 || fail "$name: dump $form differs from cryptsetup tcryptDump of the partition"
    done
    # Refusals: a partition image on its own (its first sector is
    # ciphertext, no partition table), an empty and an absent partition, a
    # partition past the end of a truncated disk, --partition alone.
    expect_exit 1 "$BLKCRYPT" tcrypt decrypt --passphrase-file "$TMP/pw" "${O[@]}" "$TMP/part.img" "$TMP/no"
    grep_q 'has no partition table, so it is not a whole disk.*--header DISK' <"$TMP/stderr" || fail "partition image: $(cat "$TMP/stderr")"
    expect_one_error_line
    expect_exit 1 "$BLKCRYPT" tcrypt decrypt --passphrase-file "$TMP/pw" "${O[@]}" --partition 3 "$disk" "$TMP/no"
    grep_q 'partition 3' <"$TMP/stderr" || fail "--partition 3: $(cat "$TMP/stderr")"
    expect_exit 1 "$BLKCRYPT" tcrypt decrypt --passphrase-file "$TMP/pw" "${O[@]}" --partition 200 "$disk" "$TMP/no"
    grep_q 'partition 200' <"$TMP/stderr" || fail "--partition 200: $(cat "$TMP/stderr")"
    head -c $((6144 * 512 + 4096)) "$disk" >"$TMP/short.img"
    expect_exit 1 "$BLKCRYPT" tcrypt decrypt --passphrase-file "$TMP/pw" "${O[@]}" --partition 2 "$TMP/short.img" "$TMP/no"
    grep_q 'reaches past the end of the image' <"$TMP/stderr" || fail "truncated disk: $(cat "$TMP/stderr")"
    [[ ! -e $TMP/no ]] || fail "$name: OUT written for a refused case"
    n=$((n + 1))
done <"$GOLD/system.tsv"
[[ $n == 2 ]] || fail "$n system disks, want 2"
expect_exit 2 "$BLKCRYPT" tcrypt decrypt --passphrase-file "$TMP/pw" --partition 2 "$TMP/sys-mbr.img" "$TMP/no"
grep_q -- '--partition needs --tcrypt-system' <"$TMP/stderr" || fail "--partition alone: $(cat "$TMP/stderr")"

# --header without --tcrypt-system: a detached copy of a volume's header
# opens the volume whose own header was wiped (the kernel's plaintext of
# the intact volume, generated.golden).
read -r size sha < <(awk -F'\t' '$1=="gen-default"{print $2, $3}' "$GOLD/generated.golden")
python3 "$SRC/tests/tcrypt/make_volume.py" "$TMP/vol.img" --password genpass-2 --size 65536 --seed gen2 >/dev/null
head -c 512 "$TMP/vol.img" >"$TMP/hdr.bin"
dd if=/dev/zero of="$TMP/vol.img" bs=512 count=1 conv=notrunc status=none
printf 'genpass-2\n' >"$TMP/pw"
expect_exit 2 "$BLKCRYPT" tcrypt decrypt --passphrase-file "$TMP/pw" -h sha512 "$TMP/vol.img" "$TMP/no"
O=(-h sha512)
decrypt "detached header" --header "$TMP/hdr.bin" "$TMP/vol.img"
[[ $(stat -c %s "$TMP/out") == "$size" && $(sha256sum <"$TMP/out" | cut -d' ' -f1) == "$sha" ]] ||
    fail "--header: not the kernel's plaintext of gen-default"
expect_exit 1 "$BLKCRYPT" tcrypt decrypt --passphrase-file "$TMP/pw" -h sha512 --header "$TMP/hdr.bin" "$TMP/hdr.bin" "$TMP/no"
grep_q 'hdr.bin is too small for the TCRYPT volume' <"$TMP/stderr" || fail "header as its own data: $(cat "$TMP/stderr")"

# serve --partition: the kernel's bytes read-only; read-write, qemu-io's
# writes land encrypted in partition 2 alone (python3-cryptography: AES-XTS
# with the dumped key, the tweak the sector's number on the disk).
if command -v nbdcopy >/dev/null && command -v qemu-io >/dev/null; then
    source "$(dirname "$0")/nbd_lib.sh"
    printf 'syspass-1\n' >"$TMP/pw"
    disk=$TMP/sys-mbr.img
    start_server tcrypt serve --passphrase-file "$TMP/pw" -h sha512 --veracrypt-pim 1 --tcrypt-system --partition 2 \
        --read-only --socket "$SOCK" "$disk"
    T nbdcopy "$URI" "$TMP/served"
    stop_server TERM
    check sys-mbr-part "serve --partition 2" "$TMP/served"
    cp "$disk" "$TMP/orig.img"
    start_server tcrypt serve --passphrase-file "$TMP/pw" -h sha512 --veracrypt-pim 1 --tcrypt-system --partition 2 \
        --socket "$SOCK" "$disk"
    cp "$TMP/served" "$TMP/model"
    qemu_io_script "$TMP/model" "$TMP/qemu-io.cmds" 7 30
    T qemu-io -f raw "$URI" <"$TMP/qemu-io.cmds" >"$TMP/qemu-io.out" 2>&1
    ! grep -qiE "fail|error|mismatch" "$TMP/qemu-io.out" || fail "qemu-io: $(grep -iE 'fail|error|mismatch' "$TMP/qemu-io.out" | head -3)"
    stop_server TERM
    ! cmp -s "$TMP/model" "$TMP/served" || fail "the qemu-io script changed nothing"
    START=$((6144 * 512)) SIZE=$(golden sys-mbr-part 2)
    cmp -n "$START" "$TMP/orig.img" "$disk" || fail "bytes before partition 2 (MBR, header, partition 1) changed"
    cmp -i $((START + SIZE)) "$TMP/orig.img" "$disk" || fail "bytes after partition 2 changed"
    VK=$(sed -n '/^MK dump:/,$p' "$GOLD/sys-mbr-part.dump" | sed 's/^MK dump://' | tr -d ' \t\n')
    python3 - "$disk" "$VK" 6144 "$SIZE" "$TMP/ref" <<'PY'
import sys
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
img, key = open(sys.argv[1], "rb").read(), bytes.fromhex(sys.argv[2])
first, size = int(sys.argv[3]), int(sys.argv[4])
out = bytearray()
for s in range(first, first + size // 512):
    d = Cipher(algorithms.AES(key), modes.XTS(s.to_bytes(16, "little"))).decryptor()
    out += d.update(img[s * 512:(s + 1) * 512]) + d.finalize()
open(sys.argv[5], "wb").write(out)
PY
    cmp "$TMP/model" "$TMP/ref" || fail "python3-cryptography does not find what was written through serve --partition 2"
else
    echo "nbdcopy or qemu-io missing: serve --partition skipped"
fi

# The fixture's full-disk image: partition 1 (sector 2048) as the kernel
# mapped /dev/vdX1 (header at the disk's sector 62, encrypted area from 63).
FIX=${BLKCRYPT_SHARED_DIR:-$SRC/../shared}/fixtures/tcrypt-images.tar.xz
if [[ -f $FIX ]]; then
    tar xSJf "$FIX" -C "$TMP" tcrypt/sys_vc_1_mbr_full-sha256-xts-aes
    img=$TMP/tcrypt/sys_vc_1_mbr_full-sha256-xts-aes
    printf 'aaaaaaaaaaaa\n' >"$TMP/pw"
    O=(-h sha256 --tcrypt-system)
    decrypt "fixture --partition 1" --partition 1 "$img"
    check sys-fixture-part1 "fixture --partition 1" "$TMP/out"
    if command -v blkid >/dev/null; then
        [[ $(blkid -p -o value -s UUID "$TMP/out" || true) == DEAD-BABE ]] || fail "fixture partition 1: no FAT DEAD-BABE"
    fi
    "$BLKCRYPT" tcrypt dump -q --dump-volume-key --passphrase-file "$TMP/pw" "${O[@]}" --partition 1 "$img" >"$TMP/dump"
    sed "1s|for .*|for $img|" "$GOLD/sys-fixture-part1.dump" >"$TMP/want"
    diff -u "$TMP/want" "$TMP/dump" >&2 || fail "fixture partition 1: dump differs from cryptsetup tcryptDump"
    n=$((n + 1))
else
    echo "no $FIX (../shared/fixtures absent): the fixture's partition skipped"
fi
echo "tcrypt system: $n disks read as the kernel mapped their system partition"
