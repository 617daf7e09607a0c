#!/bin/bash
# LUKS1 containers made by cryptsetup (run live: skipped, exit 0 with a note,
# where it is not installed) read by `blkcrypt luks`: dump equal to
# `cryptsetup luksDump` byte for byte (with --dump-volume-key too), uuid,
# is-luks, test-passphrase with several keyslots, --key-slot, key-file
# options and piped passphrases, wrong passphrases (exit 2, cryptsetup's
# words), detached headers, broken headers (exit 1, one line), and decrypt
# giving the plaintext that python3-cryptography encrypted into the payload
# with the volume key cryptsetup prints.
source "$(dirname "$0")/lib.sh"
command -v cryptsetup >/dev/null || { echo "cryptsetup not installed: LUKS1 tests skipped"; exit 0; }
python3 -c 'import cryptography' 2>/dev/null || { echo "python3-cryptography missing: LUKS1 tests skipped"; exit 0; }

printf 'first passphrase' >"$TMP/p1"
printf 'slot three' >"$TMP/p3"
FAST=(--pbkdf-force-iterations 1000)

# volume_key IMG KEYFILE [HEADER]: the hex cryptsetup dumps.
volume_key() {
    local hdr=()
    [[ $# -gt 2 ]] && hdr=(--header "$3")
    cryptsetup luksDump -q --dump-volume-key --key-file "$2" "${hdr[@]}" "$1" |
        sed -n '/^MK dump:/,$p' | sed 's/^MK dump://' | tr -d ' \t\n'
}

# encrypt_ref CIPHER KEYHEX PLAIN OUT: dm-crypt sectors as the kernel writes
# them (512-byte sectors, IV from the sector number), by python3-cryptography.
encrypt_ref() {
    python3 - "$@" <<'PY'
import hashlib, sys, warnings
warnings.simplefilter("ignore")  # Camellia moving to the "decrepit" module
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
spec, key, plain = sys.argv[1], bytes.fromhex(sys.argv[2]), open(sys.argv[3], "rb").read()
name, mode, iv = spec.split("-", 2)
alg = {"aes": algorithms.AES, "camellia": algorithms.Camellia}[name]
out = bytearray()
for s in range(len(plain) // 512):
    block = plain[s * 512:(s + 1) * 512]
    sector = s.to_bytes(8, "little") + bytes(8)
    if iv == "plain64":
        ivb = sector
    elif iv == "essiv:sha256":
        salt = hashlib.sha256(key).digest()
        e = Cipher(alg(salt), modes.ECB()).encryptor()
        ivb = e.update(sector) + e.finalize()
    else:
        raise SystemExit("unknown IV " + iv)
    m = modes.XTS(ivb) if mode == "xts" else modes.CBC(ivb)
    e = Cipher(alg(key), m).encryptor()
    out += e.update(block) + e.finalize()
open(sys.argv[4], "wb").write(out)
PY
}

# check_container CIPHER BITS HASH
check_container() {
    local cipher=$1 bits=$2 hash=$3 img=$TMP/img
    rm -f "$img" && truncate -s 4M "$img"
    cryptsetup luksFormat -q --type luks1 --cipher "$cipher" --key-size "$bits" --hash "$hash" "${FAST[@]}" \
        --key-file "$TMP/p1" "$img" || fail "cryptsetup luksFormat $cipher $bits $hash"
    cryptsetup luksAddKey -q "${FAST[@]}" --key-slot 3 --key-file "$TMP/p1" "$img" "$TMP/p3" ||
        fail "cryptsetup luksAddKey"
    local what="$cipher $bits $hash"

    # dump, luksDump alias, uuid
    "$BLKCRYPT" luks dump "$img" >"$TMP/ours" || fail "$what: dump"
    cryptsetup luksDump "$img" >"$TMP/theirs"
    cmp -s "$TMP/ours" "$TMP/theirs" || fail "$what: dump differs: $(diff "$TMP/ours" "$TMP/theirs")"
    "$BLKCRYPT" luksDump "$img" | cmp -s - "$TMP/theirs" || fail "$what: luksDump alias"
    [[ $("$BLKCRYPT" luks uuid "$img") == $(cryptsetup luksUUID "$img") ]] || fail "$what: uuid"
    "$BLKCRYPT" luks dump -q --dump-volume-key --key-file "$TMP/p3" "$img" >"$TMP/ours" || fail "$what: vk dump"
    cryptsetup luksDump -q --dump-volume-key --key-file "$TMP/p1" "$img" >"$TMP/theirs"
    cmp -s "$TMP/ours" "$TMP/theirs" || fail "$what: --dump-volume-key differs: $(diff "$TMP/ours" "$TMP/theirs")"

    # test-passphrase: both keyslots, --key-slot, wrong passphrases
    "$BLKCRYPT" luks test-passphrase -v --key-file "$TMP/p1" "$img" >"$TMP/out" || fail "$what: slot 0"
    [[ $(cat "$TMP/out") == "Key slot 0 unlocked." ]] || fail "$what: slot 0 says $(cat "$TMP/out")"
    "$BLKCRYPT" luks test-passphrase -v --key-file "$TMP/p3" "$img" >"$TMP/out" || fail "$what: slot 3"
    [[ $(cat "$TMP/out") == "Key slot 3 unlocked." ]] || fail "$what: slot 3 says $(cat "$TMP/out")"
    "$BLKCRYPT" luks test-passphrase --key-slot 3 --key-file "$TMP/p3" "$img" || fail "$what: --key-slot 3"
    expect_exit 2 "$BLKCRYPT" luks test-passphrase --key-slot 0 --key-file "$TMP/p3" "$img"
    expect_exit 2 "$BLKCRYPT" luks test-passphrase --key-file "$TMP/p1" --keyfile-size 5 "$img"
    [[ $(cat "$TMP/stderr") == "blkcrypt: No key available with this passphrase." ]] ||
        fail "$what: wrong passphrase message: $(cat "$TMP/stderr")"

    # decrypt: known plaintext written into the payload by the reference
    local vk off
    vk=$(volume_key "$img" "$TMP/p1")
    off=$(cryptsetup luksDump "$img" | sed -n 's/^Payload offset:\t//p')
    random_file "$TMP/plain" $(((8192 - off) * 512))
    encrypt_ref "$cipher" "$vk" "$TMP/plain" "$TMP/ct"
    dd if="$TMP/ct" of="$img" bs=512 seek="$off" conv=notrunc status=none
    "$BLKCRYPT" luks decrypt --key-file "$TMP/p3" "$img" "$TMP/back" || fail "$what: decrypt"
    cmp -s "$TMP/back" "$TMP/plain" || fail "$what: decrypt gives other bytes than the plaintext"
    # ... and a wrong passphrase writes nothing.
    rm -f "$TMP/back2"
    expect_exit 2 "$BLKCRYPT" luks decrypt --key-file "$TMP/p3" --keyfile-offset 1 "$img" "$TMP/back2"
    [[ ! -e $TMP/back2 ]] || fail "$what: a wrong passphrase left OUT behind"
}

check_container aes-xts-plain64 256 sha256
check_container aes-xts-plain64 512 sha512
check_container aes-cbc-essiv:sha256 256 sha1
check_container aes-cbc-plain64 128 ripemd160
check_container aes-cbc-plain64 256 whirlpool
check_container camellia-cbc-plain64 256 sha256

img=$TMP/img
# Passphrases: one line of piped stdin (newline dropped), all of stdin with
# --key-file -, --keyfile-offset/--keyfile-size picking the passphrase out of a file.
printf 'first passphrase\nrest' | "$BLKCRYPT" luks test-passphrase "$img" || fail "piped line"
expect_exit 2 "$BLKCRYPT" luks test-passphrase --key-file - "$img" < <(printf 'first passphrase\n')
printf 'first passphrase' | "$BLKCRYPT" luks test-passphrase --key-file - "$img" || fail "--key-file -"
printf 'xxfirst passphraseyy' >"$TMP/padded"
"$BLKCRYPT" luks test-passphrase --key-file "$TMP/padded" --keyfile-offset 2 --keyfile-size 16 "$img" ||
    fail "--keyfile-offset/--keyfile-size"
expect_exit 2 "$BLKCRYPT" luks test-passphrase --key-file "$TMP/padded" --keyfile-offset 2 "$img"

# is-luks / isLuks: silent, 0 or 1.
"$BLKCRYPT" isLuks "$img" || fail "isLuks on a container"
expect_exit 1 "$BLKCRYPT" luks is-luks "$TMP/p1"
[[ ! -s $TMP/stdout && ! -s $TMP/stderr ]] || fail "is-luks is not silent"
expect_exit 1 "$BLKCRYPT" luks dump "$TMP/p1"
[[ $(cat "$TMP/stderr") == "blkcrypt: Device $TMP/p1 is not a valid LUKS device." ]] ||
    fail "not LUKS: $(cat "$TMP/stderr")"
expect_exit 1 "$BLKCRYPT" luksUUID "$TMP/p1"
# Options outside their actions are refused.
expect_exit 2 "$BLKCRYPT" luks uuid --key-slot 1 "$img"
expect_exit 2 "$BLKCRYPT" luks dump --key-slot 1 "$img"  # only with --dump-volume-key
expect_exit 1 "$BLKCRYPT" luks test-passphrase --key-slot 8 --key-file "$TMP/p1" "$img"
grep -q "Key slot 8 is invalid" "$TMP/stderr" || fail "slot 8: $(cat "$TMP/stderr")"

# A damaged header: one line and exit 1, never a crash (stripes of slot 2 set to 1).
cp "$img" "$TMP/bad"
printf '\x00\x00\x00\x01' | dd of="$TMP/bad" bs=1 seek=$((208 + 2 * 48 + 44)) conv=notrunc status=none
expect_exit 1 "$BLKCRYPT" luks dump "$TMP/bad"
expect_one_error_line
grep -q "LUKS keyslot 2 is invalid" "$TMP/stderr" || fail "bad stripes: $(cat "$TMP/stderr")"
cryptsetup luksDump "$TMP/bad" >/dev/null 2>&1 && fail "cryptsetup accepts the damaged header"
# A header device cut short of its keyslot areas.
head -c 1048576 "$img" >"$TMP/short"
expect_exit 1 "$BLKCRYPT" luks test-passphrase --key-file "$TMP/p1" "$TMP/short"
grep -q "is too small" "$TMP/stderr" || fail "short device: $(cat "$TMP/stderr")"

# A detached header: the header file holds the keyslots, the data device only data.
rm -f "$TMP/hdr" "$TMP/data"
truncate -s 4M "$TMP/hdr"
truncate -s 2M "$TMP/data"
cryptsetup luksFormat -q --type luks1 "${FAST[@]}" --header "$TMP/hdr" --key-file "$TMP/p1" "$TMP/data" ||
    fail "luksFormat --header"
"$BLKCRYPT" luks dump --header "$TMP/hdr" "$TMP/data" >"$TMP/ours"
cryptsetup luksDump --header "$TMP/hdr" "$TMP/data" >"$TMP/theirs"
cmp -s "$TMP/ours" "$TMP/theirs" || fail "detached dump: $(diff "$TMP/ours" "$TMP/theirs")"
vk=$(volume_key "$TMP/data" "$TMP/p1" "$TMP/hdr")
random_file "$TMP/plain" $((2 * 1048576))
encrypt_ref aes-xts-plain64 "$vk" "$TMP/plain" "$TMP/data"
"$BLKCRYPT" luks decrypt --header "$TMP/hdr" --key-file "$TMP/p1" "$TMP/data" "$TMP/back" || fail "detached decrypt"
cmp -s "$TMP/back" "$TMP/plain" || fail "detached decrypt gives other bytes"
# ... and streams: the data from stdin, the plaintext to stdout.
"$BLKCRYPT" luks decrypt --header "$TMP/hdr" --key-file "$TMP/p1" - - <"$TMP/data" | cmp -s - "$TMP/plain" ||
    fail "detached decrypt through pipes"
expect_exit 2 "$BLKCRYPT" luks decrypt --key-file "$TMP/p1" - "$TMP/back" <"$TMP/data"
# OUT may not be an input.
expect_exit 2 "$BLKCRYPT" luks decrypt --header "$TMP/hdr" --key-file "$TMP/p1" "$TMP/data" "$TMP/hdr"

# Ours read by cryptsetup: luks format with a given volume key, then
# cryptsetup's dump equals ours, it accepts the passphrase in the keyslot we
# chose and prints our volume key; luks encrypt writes exactly the reference
# ciphertext into the payload.
# check_format CIPHER BITS HASH [FORMAT OPTIONS...]
check_format() {
    local cipher=$1 bits=$2 hash=$3
    shift 3
    local what="format $cipher $bits $hash $*"
    rm -f "$img" && truncate -s 8M "$img"
    head -c $((bits / 8)) /dev/urandom >"$TMP/vk"
    "$BLKCRYPT" luksFormat --type luks1 -q --cipher "$cipher" --key-size "$bits" --hash "$hash" "${FAST[@]}" \
        --volume-key-file "$TMP/vk" --key-file "$TMP/p1" "$@" "$img" || fail "$what"
    cryptsetup luksDump "$img" >"$TMP/theirs" || fail "$what: cryptsetup luksDump refuses it"
    "$BLKCRYPT" luks dump "$img" | cmp -s - "$TMP/theirs" || fail "$what: dumps differ"
    cryptsetup open --test-passphrase --key-file "$TMP/p1" "$img" || fail "$what: cryptsetup refuses the passphrase"
    [[ $(volume_key "$img" "$TMP/p1") == $(xxd -p -c 256 "$TMP/vk") ]] || fail "$what: another volume key"
    local off
    off=$(sed -n 's/^Payload offset:\t//p' "$TMP/theirs")
    random_file "$TMP/plain" $((5 * 1048576))
    "$BLKCRYPT" luks encrypt --key-file "$TMP/p1" "$TMP/plain" "$img" || fail "$what: encrypt"
    encrypt_ref "$cipher" "$(xxd -p -c 256 "$TMP/vk")" "$TMP/plain" "$TMP/want"
    dd if="$img" bs=512 skip="$off" count=$((5 * 2048)) status=none | cmp -s - "$TMP/want" ||
        fail "$what: payload differs from the reference ciphertext"
    cryptsetup open --test-passphrase --key-file "$TMP/p1" "$img" || fail "$what: header damaged by encrypt"
}
check_format aes-xts-plain64 512 sha256
check_format aes-xts-plain64 256 sha1 --key-slot 4
check_format aes-cbc-essiv:sha256 256 sha512 --align-payload 3000
check_format aes-cbc-plain64 128 ripemd160 --offset 2048 --uuid 01234567-89AB-cdef-0123-456789abcdef
check_format camellia-cbc-plain64 256 whirlpool
grep -q "Key Slot 4: ENABLED" <(cryptsetup luksDump "$img") && fail "keyslot 4 left over"
[[ $(cryptsetup luksUUID "$img") == 01234567-89ab-cdef-0123-456789abcdef ]] && fail "uuid left over"
check_format aes-cbc-plain64 128 sha256 --uuid 01234567-89AB-cdef-0123-456789abcdef
[[ $(cryptsetup luksUUID "$img") == 01234567-89ab-cdef-0123-456789abcdef ]] || fail "--uuid"
"$BLKCRYPT" luks format --type luks1 -q "${FAST[@]}" --key-slot 4 --key-file "$TMP/p1" "$img" || fail "--key-slot 4"
cryptsetup luksDump "$img" | grep_q "Key Slot 4: ENABLED" || fail "--key-slot 4 not used"
cryptsetup open --test-passphrase --key-slot 4 --key-file "$TMP/p1" "$img" || fail "keyslot 4 passphrase"

# Defaults as cryptsetup's (aes-xts-plain64, 512 bits, sha256, 4096 sectors),
# iterations benchmarked for --iter-time (at least 1000).
"$BLKCRYPT" luks format --type luks1 -q --iter-time 50 --key-file "$TMP/p1" "$img" || fail "benchmarked format"
cryptsetup luksDump "$img" >"$TMP/theirs"
for want in "Cipher mode:   .xts-plain64" "Hash spec:     .sha256" "MK bits:       .512" "Payload offset:.4096"; do
    grep -q "^$want\$" "$TMP/theirs" || fail "default: no '$want'"
done
iters=$(sed -n 's/^\tIterations: *\t//p' "$TMP/theirs")
[[ $iters -ge 1000 ]] || fail "benchmarked iterations $iters"
cryptsetup open --test-passphrase --key-file "$TMP/p1" "$img" || fail "benchmarked: cryptsetup refuses"
# Piped passphrase: one line, as cryptsetup reads it.
printf 'piped\n' | "$BLKCRYPT" luks format --type luks1 -q "${FAST[@]}" "$img" || fail "piped format"
printf 'piped' | cryptsetup open --test-passphrase --key-file - "$img" || fail "piped format: passphrase"

# Refusals: a bad UUID, an unknown cipher, argon2 for LUKS1, a
# wrong passphrase for encrypt (exit 2, IMAGE untouched).
expect_exit 2 "$BLKCRYPT" luks format --type luks1 -q --uuid nope --key-file "$TMP/p1" "$img"
expect_exit 2 "$BLKCRYPT" luks format --type luks1 -q --cipher nosuch-xts-plain64 "${FAST[@]}" --key-file "$TMP/p1" "$img"
expect_exit 2 "$BLKCRYPT" luks format --type luks1 -q --pbkdf argon2id --key-file "$TMP/p1" "$img"
# Fewer than cryptsetup's 1000 forced iterations: exit 1, as cryptsetup.
expect_exit 1 "$BLKCRYPT" luks format --type luks1 -q --pbkdf-force-iterations 999 --key-file "$TMP/p1" "$img"
expect_exit 1 "$BLKCRYPT" luks add-key --pbkdf-force-iterations 999 --key-file "$TMP/p1" "$img" "$TMP/p3"
cp "$img" "$TMP/before"
expect_exit 2 "$BLKCRYPT" luks encrypt --key-file "$TMP/p3" "$TMP/plain" "$img"
cmp -s "$img" "$TMP/before" || fail "a wrong passphrase changed IMAGE"
random_file "$TMP/big" $((7 * 1048576))
expect_exit 2 "$BLKCRYPT" luks encrypt --key-file - "$TMP/big" "$img" < <(printf piped)
grep -q "do not fit" "$TMP/stderr" || fail "too big: $(cat "$TMP/stderr")"

# A file too small for the header grows as cryptsetup's does, to the payload.
rm -f "$TMP/small" && truncate -s 1M "$TMP/small"
"$BLKCRYPT" luks format --type luks1 -q "${FAST[@]}" --key-file "$TMP/p1" "$TMP/small" 2>"$TMP/stderr" || fail "small"
[[ $(stat -c %s "$TMP/small") == 2097152 ]] || fail "small image: $(stat -c %s "$TMP/small") bytes"
grep -q "too small for activation" "$TMP/stderr" || fail "no warning for a full image"
cryptsetup open --test-passphrase --key-file "$TMP/p1" "$TMP/small" || fail "small: cryptsetup"

# IN from a pipe, read to its end; a stream larger than the data segment fails.
rm -f "$img" && truncate -s 4M "$img"
"$BLKCRYPT" luks format --type luks1 -q "${FAST[@]}" --key-file "$TMP/p1" "$img"
random_file "$TMP/plain" $((1536 * 1024))
cat "$TMP/plain" | "$BLKCRYPT" luks encrypt --key-file "$TMP/p1" - "$img" || fail "encrypt from a pipe"
encrypt_ref aes-xts-plain64 "$(volume_key "$img" "$TMP/p1")" "$TMP/plain" "$TMP/want"
dd if="$img" bs=512 skip=4096 count=3072 status=none | cmp -s - "$TMP/want" || fail "piped encrypt differs"
expect_exit 1 "$BLKCRYPT" luks encrypt --key-file "$TMP/p1" - "$img" < <(head -c $((3 * 1048576)) /dev/zero)
grep -q "holds more than the 2097152 bytes" "$TMP/stderr" || fail "oversized stream: $(cat "$TMP/stderr")"
[[ $(stat -c %s "$img") == 4194304 ]] || fail "an oversized stream grew IMAGE"

# A detached header made by us: a new header file, the payload at 0 of the data device.
rm -f "$TMP/hdr2"
truncate -s 2M "$TMP/data2"
"$BLKCRYPT" luks format --type luks1 -q "${FAST[@]}" --header "$TMP/hdr2" --key-file "$TMP/p1" "$TMP/data2" ||
    fail "format --header"
cryptsetup luksDump "$TMP/hdr2" | grep_q "^Payload offset:.0$" || fail "detached payload offset"
cryptsetup open --test-passphrase --header "$TMP/hdr2" --key-file "$TMP/p1" "$TMP/data2" || fail "detached: cryptsetup"
random_file "$TMP/plain" $((2 * 1048576))
"$BLKCRYPT" luks encrypt --header "$TMP/hdr2" --key-file "$TMP/p1" "$TMP/plain" "$TMP/data2" || fail "detached encrypt"
encrypt_ref aes-xts-plain64 "$(volume_key "$TMP/data2" "$TMP/p1" "$TMP/hdr2")" "$TMP/plain" "$TMP/want"
cmp -s "$TMP/data2" "$TMP/want" || fail "detached encrypt: data differs from the reference"

# Keyslots changed by us are seen by cryptsetup and the other way round.
rm -f "$img" && truncate -s 4M "$img"
cryptsetup luksFormat -q --type luks1 "${FAST[@]}" --key-file "$TMP/p1" "$img"
printf 'slot two' >"$TMP/p2"
"$BLKCRYPT" luksAddKey -v "${FAST[@]}" --key-slot 2 --key-file "$TMP/p1" "$img" "$TMP/p2" >"$TMP/out" ||
    fail "add-key"
[[ $(cat "$TMP/out") == "Key slot 2 created." ]] || fail "add-key says $(cat "$TMP/out")"
cryptsetup open --test-passphrase --key-slot 2 --key-file "$TMP/p2" "$img" || fail "cryptsetup: our keyslot 2"
"$BLKCRYPT" luks dump "$img" | cmp -s - <(cryptsetup luksDump "$img") || fail "dump after add-key"
# The first free slot, both passphrases from piped lines.
printf 'slot two\nslot one\n' | "$BLKCRYPT" luks add-key -v "${FAST[@]}" "$img" >"$TMP/out" || fail "piped add-key"
[[ $(cat "$TMP/out") == "Key slot 1 created." ]] || fail "first free slot: $(cat "$TMP/out")"
printf 'slot one' | cryptsetup open --test-passphrase --key-slot 1 --key-file - "$img" || fail "cryptsetup: slot 1"
expect_exit 2 "$BLKCRYPT" luks add-key "${FAST[@]}" --key-file "$TMP/p3" "$img" "$TMP/p2"   # wrong existing one
expect_exit 1 "$BLKCRYPT" luks add-key "${FAST[@]}" --key-slot 2 --key-file "$TMP/p1" "$img" "$TMP/p3"  # taken, 1 as cryptsetup
cryptsetup luksAddKey -q "${FAST[@]}" --key-slot 5 --key-file "$TMP/p1" "$img" "$TMP/p3"
"$BLKCRYPT" luks test-passphrase --key-slot 5 --key-file "$TMP/p3" "$img" || fail "cryptsetup's slot 5"
# remove-key removes the slot its passphrase opens; kill-slot the one named;
# the area is overwritten and cryptsetup sees the slot gone.
area=$(cryptsetup luksDump "$img" | awk '/^Key Slot 5/{f=1} f && /Key material offset/{print $4 * 512; exit}')
dd if="$img" bs=1 skip="$area" count=4096 status=none >"$TMP/area-before"
"$BLKCRYPT" luksRemoveKey -v "$img" "$TMP/p3" >"$TMP/out" || fail "remove-key"
[[ $(cat "$TMP/out") == "Key slot 5 removed." ]] || fail "remove-key says $(cat "$TMP/out")"
cryptsetup luksDump "$img" | grep_q "^Key Slot 5: DISABLED$" || fail "cryptsetup still sees slot 5"
dd if="$img" bs=1 skip="$area" count=4096 status=none | cmp -s - "$TMP/area-before" && fail "slot 5 not wiped"
expect_exit 2 "$BLKCRYPT" luks test-passphrase --key-file "$TMP/p3" "$img"
expect_exit 2 "$BLKCRYPT" luksKillSlot "$img" 1 "$TMP/p3"   # no remaining passphrase given
"$BLKCRYPT" luksKillSlot "$img" 1 "$TMP/p2" || fail "kill-slot 1"
cryptsetup luksDump "$img" | grep_q "^Key Slot 1: DISABLED$" || fail "cryptsetup still sees slot 1"
expect_exit 1 "$BLKCRYPT" luks kill-slot "$img" 1 "$TMP/p2"   # not active (1, as cryptsetup)
expect_exit 1 "$BLKCRYPT" luks kill-slot "$img" 9 "$TMP/p2"
cryptsetup luksKillSlot -q "$img" 2 --key-file "$TMP/p1"
expect_exit 2 "$BLKCRYPT" luks test-passphrase --key-file "$TMP/p2" "$img"
"$BLKCRYPT" luks test-passphrase --key-file "$TMP/p1" "$img" || fail "slot 0 after the changes"

# luksUUID --uuid sets it, as cryptsetup reads it back.
"$BLKCRYPT" luksUUID -q --uuid 0AAAAAAA-bbbb-4ccc-8ddd-eeeeeeeeeeee "$img" || fail "uuid --uuid"
[[ $(cryptsetup luksUUID "$img") == 0aaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee ]] || fail "uuid not set"
expect_exit 2 "$BLKCRYPT" luks uuid --uuid 0aaaaaaa-bbbb-4ccc-8ddd "$img"
"$BLKCRYPT" luks test-passphrase --key-file "$TMP/p1" "$img" || fail "passphrase after uuid"

# --volume-key-file instead of a passphrase: the key cryptsetup dumps opens,
# decrypts and adds a keyslot; another key is refused with exit 2.
volume_key "$img" "$TMP/p1" | xxd -r -p >"$TMP/vkfile"
"$BLKCRYPT" luks test-passphrase --volume-key-file "$TMP/vkfile" "$img" || fail "--volume-key-file"
"$BLKCRYPT" luks decrypt --volume-key-file "$TMP/vkfile" "$img" "$TMP/byvk" || fail "decrypt --volume-key-file"
"$BLKCRYPT" luks decrypt --key-file "$TMP/p1" "$img" "$TMP/bypass"
cmp -s "$TMP/byvk" "$TMP/bypass" || fail "volume key and passphrase decrypt differently"
"$BLKCRYPT" luks add-key "${FAST[@]}" --volume-key-file "$TMP/vkfile" "$img" "$TMP/p3" || fail "add-key --volume-key-file"
cryptsetup open --test-passphrase --key-file "$TMP/p3" "$img" || fail "cryptsetup: keyslot added from the volume key"
head -c 64 /dev/zero >"$TMP/zerokey"
expect_exit 2 "$BLKCRYPT" luks test-passphrase --volume-key-file "$TMP/zerokey" "$img"
[[ $(cat "$TMP/stderr") == "blkcrypt: Volume key does not match the volume." ]] || fail "wrong vk: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" luks test-passphrase --volume-key-file "$TMP/vkfile" --key-file "$TMP/p1" "$img"

# luksChangeKey: the new passphrase in a free keyslot, the old one gone.
printf 'changed' >"$TMP/p4"
"$BLKCRYPT" luksChangeKey -v "${FAST[@]}" --key-file "$TMP/p3" "$img" "$TMP/p4" >"$TMP/out" || fail "change-key"
grep -q "^Key slot [0-7] changed to key slot [0-7]\.$" "$TMP/out" || fail "change-key says $(cat "$TMP/out")"
cryptsetup open --test-passphrase --key-file "$TMP/p4" "$img" || fail "cryptsetup: changed passphrase"
cryptsetup open --test-passphrase --key-file "$TMP/p3" "$img" 2>/dev/null && fail "the old passphrase still opens"
"$BLKCRYPT" luks dump "$img" | cmp -s - <(cryptsetup luksDump "$img") || fail "dump after change-key"
expect_exit 2 "$BLKCRYPT" luks change-key "${FAST[@]}" --key-file "$TMP/p3" "$img" "$TMP/p4"

# luksHeaderBackup: the same file as cryptsetup's; luksHeaderRestore of it onto
# a wiped header brings the container back (for cryptsetup too).
rm -f "$TMP/bk-ours" "$TMP/bk-theirs"
"$BLKCRYPT" luksHeaderBackup --header-backup-file "$TMP/bk-ours" "$img" || fail "header-backup"
cryptsetup luksHeaderBackup --header-backup-file "$TMP/bk-theirs" "$img"
cmp -s "$TMP/bk-ours" "$TMP/bk-theirs" || fail "header backups differ"
expect_exit 1 "$BLKCRYPT" luks header-backup --header-backup-file "$TMP/bk-ours" "$img"
grep -q "already exists" "$TMP/stderr" || fail "existing backup: $(cat "$TMP/stderr")"
cp "$img" "$TMP/wiped"
dd if=/dev/zero of="$TMP/wiped" bs=1M count=2 conv=notrunc status=none
expect_exit 1 "$BLKCRYPT" luks test-passphrase --key-file "$TMP/p1" "$TMP/wiped"
"$BLKCRYPT" luksHeaderRestore -q --header-backup-file "$TMP/bk-theirs" "$TMP/wiped" || fail "header-restore"
cryptsetup open --test-passphrase --key-file "$TMP/p1" "$TMP/wiped" || fail "cryptsetup after our restore"
cmp -s "$TMP/wiped" "$img" || fail "restored image differs"
head -c 4096 "$TMP/bk-ours" >"$TMP/bk-short"
expect_exit 1 "$BLKCRYPT" luks header-restore -q --header-backup-file "$TMP/bk-short" "$TMP/wiped"
grep -q "Backup file does not contain valid LUKS header." "$TMP/stderr" || fail "short backup: $(cat "$TMP/stderr")"
cryptsetup luksFormat -q --type luks1 --key-size 256 "${FAST[@]}" --key-file "$TMP/p1" "$TMP/wiped"
expect_exit 1 "$BLKCRYPT" luks header-restore -q --header-backup-file "$TMP/bk-ours" "$TMP/wiped"
grep -q "Data offset or key size differs" "$TMP/stderr" || fail "other key size: $(cat "$TMP/stderr")"

# luksErase: every keyslot gone and its area overwritten, the header still LUKS.
cp "$img" "$TMP/erased"
"$BLKCRYPT" luksErase -q "$TMP/erased" || fail "erase"
[[ $(cryptsetup luksDump "$TMP/erased" | grep -c ': DISABLED$') == 8 ]] || fail "erase left a keyslot"
expect_exit 2 "$BLKCRYPT" luks test-passphrase --key-file "$TMP/p1" "$TMP/erased"
off=$(cryptsetup luksDump "$img" | awk '/^Key Slot 0/{f=1} f && /Key material offset/{print $4; exit}')
cmp -s <(dd if="$img" bs=512 skip="$off" count=8 status=none) <(dd if="$TMP/erased" bs=512 skip="$off" count=8 status=none) &&
    fail "erase kept keyslot 0's material"
"$BLKCRYPT" isLuks "$TMP/erased" || fail "erase destroyed the header"

echo "luks1: all passed"
