#!/bin/bash
# LUKS2 through `blkcrypt luks`, against cryptsetup (run live: skipped, exit
# 0 with a note, where it or python3-cryptography is missing).
# Theirs read by us: dump, --dump-json-metadata and --dump-volume-key equal
# to cryptsetup's byte for byte, uuid, test-passphrase on two keyslots and
# wrong passphrases (exit 2, cryptsetup's words), decrypt giving the
# plaintext python3-cryptography encrypted with the volume key cryptsetup
# prints, encrypt writing what that reference writes; aes-xts 256/512 and
# aes-cbc-essiv, sectors 512/4096, pbkdf2/argon2i/argon2id, a label, a
# detached header. Ours read by cryptsetup: format (its defaults and
# options), add-key, change-key, remove-key, kill-slot, uuid, erase,
# header-backup/-restore, each checked with luksDump / open
# --test-passphrase / --dump-volume-key.
source "$(dirname "$0")/lib.sh"
command -v cryptsetup >/dev/null || { echo "cryptsetup not installed: LUKS2 tests skipped"; exit 0; }
python3 -c 'import cryptography' 2>/dev/null || { echo "python3-cryptography missing: LUKS2 tests skipped"; exit 0; }

printf 'first passphrase' >"$TMP/p1"
printf 'slot three' >"$TMP/p3"
printf 'a new one' >"$TMP/p4"
# Tiny KDF costs: the script must stay fast (and under ASan).
PBKDF2=(--pbkdf pbkdf2 --pbkdf-force-iterations 1000)
ARGON2ID=(--pbkdf argon2id --pbkdf-force-iterations 4 --pbkdf-memory 32 --pbkdf-parallel 1)
ARGON2I=(--pbkdf argon2i --pbkdf-force-iterations 4 --pbkdf-memory 32 --pbkdf-parallel 1)

# volume_key KEYFILE ARGS...: the hex cryptsetup dumps.
volume_key() {
    local kf=$1
    shift
    cryptsetup luksDump -q --dump-volume-key --key-file "$kf" "$@" | sed -n '/^MK dump:/,$p' | sed 's/^MK dump://' |
        tr -d ' \t\n'
}

# encrypt_ref CIPHER KEYHEX PLAIN OUT SECTOR_SIZE: the data segment as
# dm-crypt writes it for LUKS2 (SECTOR_SIZE-byte units, the IV counting
# 512-byte sectors from the segment start), by python3-cryptography.
encrypt_ref() {
    python3 - "$@" <<'PY'
import hashlib, sys
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
spec, key, plain, ss = sys.argv[1], bytes.fromhex(sys.argv[2]), open(sys.argv[3], "rb").read(), int(sys.argv[5])
name, mode, iv = spec.split("-", 2)
assert name == "aes"
out = bytearray()
for s in range(len(plain) // ss):
    block = plain[s * ss:(s + 1) * ss]
    sector = (s * ss // 512).to_bytes(8, "little") + bytes(8)
    if iv == "plain64":
        ivb = sector
    elif iv == "essiv:sha256":
        e = Cipher(algorithms.AES(hashlib.sha256(key).digest()), modes.ECB()).encryptor()
        ivb = e.update(sector) + e.finalize()
    else:
        raise SystemExit("unknown IV " + iv)
    m = modes.XTS(ivb) if mode == "xts" else modes.CBC(ivb)
    e = Cipher(algorithms.AES(key), m).encryptor()
    out += e.update(block) + e.finalize()
open(sys.argv[4], "wb").write(out)
PY
}

# check_theirs NAME CIPHER BITS SECTOR KDF(pbkdf2|argon2i|argon2id) DETACHED(0|1) [luksFormat options...]
check_theirs() {
    local what=$1 cipher=$2 bits=$3 ss=$4 kdf=$5 detached=$6
    shift 6
    local img=$TMP/img hdr=() kdfargs
    case $kdf in pbkdf2) kdfargs=("${PBKDF2[@]}") ;; argon2i) kdfargs=("${ARGON2I[@]}") ;; *) kdfargs=("${ARGON2ID[@]}") ;; esac
    rm -f "$img" "$TMP/hdr" && truncate -s 4M "$img"
    if ((detached)); then
        hdr=(--header "$TMP/hdr")
    else
        set -- --offset 4096 "$@"  # 2 MiB of header, 2 MiB of data
    fi
    cryptsetup luksFormat -q --type luks2 --cipher "$cipher" --key-size "$bits" --sector-size "$ss" "${kdfargs[@]}" \
        "${hdr[@]}" --key-file "$TMP/p1" "$@" "$img" || fail "$what: cryptsetup luksFormat"
    cryptsetup luksAddKey -q "${kdfargs[@]}" --key-slot 3 "${hdr[@]}" --key-file "$TMP/p1" "$img" "$TMP/p3" ||
        fail "$what: cryptsetup luksAddKey"
    local dev=$img
    ((detached)) && dev=$TMP/hdr

    # dump (and the luksDump alias), --dump-json-metadata, --dump-volume-key, uuid
    "$BLKCRYPT" luks dump "${hdr[@]}" "$img" >"$TMP/ours" || fail "$what: dump"
    cryptsetup luksDump "$dev" >"$TMP/theirs"
    cmp -s "$TMP/ours" "$TMP/theirs" || fail "$what: dump differs: $(diff "$TMP/ours" "$TMP/theirs")"
    "$BLKCRYPT" luksDump "${hdr[@]}" "$img" | cmp -s - "$TMP/theirs" || fail "$what: luksDump alias"
    "$BLKCRYPT" luks dump --dump-json-metadata "${hdr[@]}" "$img" >"$TMP/ours" || fail "$what: json dump"
    cryptsetup luksDump --dump-json-metadata "$dev" >"$TMP/theirs"
    cmp -s "$TMP/ours" "$TMP/theirs" || fail "$what: json differs: $(diff "$TMP/ours" "$TMP/theirs")"
    "$BLKCRYPT" luks dump -q --dump-volume-key --key-file "$TMP/p3" "${hdr[@]}" "$img" >"$TMP/ours" || fail "$what: vk"
    cryptsetup luksDump -q --dump-volume-key --key-file "$TMP/p1" "${hdr[@]}" "$img" >"$TMP/theirs"
    cmp -s "$TMP/ours" "$TMP/theirs" || fail "$what: --dump-volume-key differs: $(diff "$TMP/ours" "$TMP/theirs")"
    [[ $("$BLKCRYPT" luks uuid "${hdr[@]}" "$img") == $(cryptsetup luksUUID "$dev") ]] || fail "$what: uuid"

    # test-passphrase: both keyslots, --key-slot, a wrong passphrase
    "$BLKCRYPT" luks test-passphrase -v "${hdr[@]}" --key-file "$TMP/p1" "$img" >"$TMP/out" || fail "$what: slot 0"
    [[ $(cat "$TMP/out") == "Key slot 0 unlocked." ]] || fail "$what: slot 0 says $(cat "$TMP/out")"
    "$BLKCRYPT" luks test-passphrase -v "${hdr[@]}" --key-file "$TMP/p3" "$img" >"$TMP/out" || fail "$what: slot 3"
    [[ $(cat "$TMP/out") == "Key slot 3 unlocked." ]] || fail "$what: slot 3 says $(cat "$TMP/out")"
    expect_exit 2 "$BLKCRYPT" luks test-passphrase --key-slot 0 "${hdr[@]}" --key-file "$TMP/p3" "$img"
    [[ $(cat "$TMP/stderr") == "blkcrypt: No key available with this passphrase." ]] ||
        fail "$what: wrong passphrase message: $(cat "$TMP/stderr")"

    # decrypt: reference ciphertext in the data segment gives the plaintext back.
    local vk off
    vk=$(volume_key "$TMP/p1" "${hdr[@]}" "$img")
    off=$(($(cryptsetup luksDump "$dev" | sed -n 's/^\toffset: \([0-9]*\) \[bytes\]$/\1/p') / 512))
    random_file "$TMP/plain" $(((8192 - off) * 512))
    encrypt_ref "$cipher" "$vk" "$TMP/plain" "$TMP/ct" "$ss"
    dd if="$TMP/ct" of="$img" bs=512 seek="$off" conv=notrunc status=none
    "$BLKCRYPT" luks decrypt "${hdr[@]}" --key-file "$TMP/p3" "$img" "$TMP/back" || fail "$what: decrypt"
    cmp -s "$TMP/back" "$TMP/plain" || fail "$what: decrypt gives other bytes than the plaintext"
    rm -f "$TMP/back2"
    expect_exit 2 "$BLKCRYPT" luks decrypt "${hdr[@]}" --key-file "$TMP/p4" "$img" "$TMP/back2"
    [[ ! -e $TMP/back2 ]] || fail "$what: a wrong passphrase left OUT behind"

    # encrypt: another plaintext, written as the reference writes it.
    random_file "$TMP/plain2" $(((8192 - off) * 512))
    encrypt_ref "$cipher" "$vk" "$TMP/plain2" "$TMP/ct2" "$ss"
    "$BLKCRYPT" luks encrypt "${hdr[@]}" --key-file "$TMP/p1" "$TMP/plain2" "$img" || fail "$what: encrypt"
    cmp -s <(dd if="$img" bs=512 skip="$off" status=none) "$TMP/ct2" || fail "$what: encrypt differs from the reference"
    cryptsetup open --test-passphrase "${hdr[@]}" --key-file "$TMP/p3" "$img" || fail "$what: encrypt hurt the header"
}

check_theirs "xts-256 512 pbkdf2" aes-xts-plain64 256 512 pbkdf2 0
check_theirs "xts-512 4096 argon2id label" aes-xts-plain64 512 4096 argon2id 0 --label "my disk" --subsystem sys
check_theirs "cbc-essiv 4096 argon2i" aes-cbc-essiv:sha256 256 4096 argon2i 0
check_theirs "cbc-essiv 512 pbkdf2 detached" aes-cbc-essiv:sha256 256 512 pbkdf2 1
check_theirs "xts-512 4096 argon2id detached" aes-xts-plain64 512 4096 argon2id 1

# An unknown mandatory requirement (set in both copies, checksums redone):
# test-passphrase and dump still work, data and keyslot changes refuse, as
# cryptsetup's open --test-passphrase, luksDump and luksAddKey do.
img=$TMP/req.img
rm -f "$img" && truncate -s 4M "$img"
cryptsetup luksFormat -q --type luks2 "${PBKDF2[@]}" --offset 4096 --key-file "$TMP/p1" "$img" || fail "req: luksFormat"
python3 - "$img" <<'PY'
import hashlib, json, struct, sys
f = open(sys.argv[1], "r+b")
f.seek(8)
hdr_size = struct.unpack(">Q", f.read(8))[0]
for off in (0, hdr_size):
    f.seek(off)
    blob = bytearray(f.read(hdr_size))
    md = json.loads(blob[4096:].rstrip(b"\0"))
    md["config"]["requirements"] = {"mandatory": ["blkcrypt-unknown"]}
    text = json.dumps(md, separators=(",", ":")).encode()
    blob[4096:] = text + bytes(hdr_size - 4096 - len(text))
    blob[448:512] = bytes(64)  # the checksum covers the copy with its own field zeroed
    blob[448:480] = hashlib.sha256(blob).digest()
    f.seek(off)
    f.write(blob)
PY
cryptsetup open --test-passphrase --key-file "$TMP/p1" "$img" || fail "req: cryptsetup refuses the test"
cryptsetup luksAddKey -q "${PBKDF2[@]}" --key-file "$TMP/p1" "$img" "$TMP/p3" 2>/dev/null && fail "req: cryptsetup adds a key"
"$BLKCRYPT" luks dump "$img" | cmp -s - <(cryptsetup luksDump "$img") || fail "req: dump differs"
"$BLKCRYPT" luks test-passphrase --key-file "$TMP/p1" "$img" || fail "req: test-passphrase"
cp "$img" "$TMP/req.before"
expect_exit 1 "$BLKCRYPT" luks decrypt --key-file "$TMP/p1" "$img" "$TMP/req.out"
grep -q "Unmet LUKS2 requirements detected (blkcrypt-unknown)." "$TMP/stderr" || fail "req: $(cat "$TMP/stderr")"
[[ ! -e $TMP/req.out ]] || fail "req: decrypt left OUT behind"
expect_exit 1 "$BLKCRYPT" luks add-key "${PBKDF2[@]}" --key-file "$TMP/p1" "$img" "$TMP/p3"
expect_exit 1 "$BLKCRYPT" luks kill-slot -q --key-file "$TMP/p1" "$img" 0
expect_exit 1 "$BLKCRYPT" luks encrypt --key-file "$TMP/p1" "$TMP/p3" "$img"
cmp -s "$img" "$TMP/req.before" || fail "req: a refused action changed the container"

# --- Ours, read by cryptsetup.
img=$TMP/ours.img
head -c 64 /dev/urandom >"$TMP/vk"
vkhex=$(od -An -tx1 -v "$TMP/vk" | tr -d ' \n')
# format with no --type is LUKS2 with cryptsetup 2.6.1's defaults: sector
# 4096 for an image file, aes-xts-plain64 512 bits, 16 MiB data offset.
truncate -s 17M "$img"
"$BLKCRYPT" luks format -q "${ARGON2ID[@]}" --label ours --volume-key-file "$TMP/vk" --key-file "$TMP/p1" "$img" ||
    fail "format"
cryptsetup luksDump "$img" >"$TMP/theirs" || fail "cryptsetup cannot read our format"
grep -q "^Version:       	2$" "$TMP/theirs" || fail "default type is not luks2"
grep -q "^	sector: 4096 \[bytes\]$" "$TMP/theirs" || fail "default sector size is not 4096"
grep -q "^	offset: 16777216 \[bytes\]$" "$TMP/theirs" || fail "default data offset is not 16 MiB"
grep -q "^	cipher: aes-xts-plain64$" "$TMP/theirs" || fail "default cipher"
grep -q "^Label:         	ours$" "$TMP/theirs" || fail "label"
grep -q "^	PBKDF:      argon2id$" "$TMP/theirs" || fail "pbkdf"
"$BLKCRYPT" luks dump "$img" | cmp -s - "$TMP/theirs" || fail "our dump of our format differs"
cryptsetup open --test-passphrase --key-file "$TMP/p1" "$img" || fail "cryptsetup rejects our passphrase"
[[ $(volume_key "$TMP/p1" "$img") == "$vkhex" ]] || fail "cryptsetup sees another volume key"
# --volume-key-file instead of a passphrase: test-passphrase, add-key.
"$BLKCRYPT" luks test-passphrase --volume-key-file "$TMP/vk" "$img" || fail "test-passphrase --volume-key-file"
head -c 64 /dev/zero >"$TMP/vk0"
expect_exit 2 "$BLKCRYPT" luks test-passphrase --volume-key-file "$TMP/vk0" "$img"
grep -q "Volume key does not match the volume." "$TMP/stderr" || fail "wrong volume key: $(cat "$TMP/stderr")"
"$BLKCRYPT" luks add-key "${PBKDF2[@]}" --key-slot 7 --volume-key-file "$TMP/vk" "$img" "$TMP/p4" || fail "add-key by volume key"
cryptsetup open --test-passphrase --key-slot 7 --key-file "$TMP/p4" "$img" || fail "cryptsetup: slot 7"
"$BLKCRYPT" luks kill-slot -q --key-file "$TMP/p4" "$img" 7 || fail "kill-slot 7"
# encrypt into our container: the reference bytes.
random_file "$TMP/plain" $((1024 * 1024))
encrypt_ref aes-xts-plain64 "$vkhex" "$TMP/plain" "$TMP/ct" 4096
"$BLKCRYPT" luks encrypt --key-file "$TMP/p1" "$TMP/plain" "$img" || fail "encrypt into ours"
cmp -s <(dd if="$img" bs=1M skip=16 status=none) "$TMP/ct" || fail "encrypt into ours differs from the reference"

# Keyslots: ours seen by cryptsetup.
"$BLKCRYPT" luks add-key -v "${PBKDF2[@]}" --key-file "$TMP/p1" "$img" "$TMP/p3" >"$TMP/out" || fail "add-key"
[[ $(cat "$TMP/out") == "Key slot 1 created." ]] || fail "add-key says $(cat "$TMP/out")"
cryptsetup open --test-passphrase --key-slot 1 --key-file "$TMP/p3" "$img" || fail "cryptsetup: our added slot"
expect_exit 2 "$BLKCRYPT" luks add-key "${PBKDF2[@]}" --key-file "$TMP/p4" "$img" "$TMP/p4"
cryptsetup open --test-passphrase --key-file "$TMP/p4" "$img" 2>/dev/null && fail "add-key with a wrong passphrase added it"
# cryptsetup's floors for forced costs (exit 1, before any passphrase).
expect_exit 1 "$BLKCRYPT" luks add-key --pbkdf pbkdf2 --pbkdf-force-iterations 999 --key-file "$TMP/p1" "$img" "$TMP/p4"
expect_exit 1 "$BLKCRYPT" luks add-key --pbkdf argon2id --pbkdf-force-iterations 3 --key-file "$TMP/p1" "$img" "$TMP/p4"
expect_exit 1 "$BLKCRYPT" luks add-key --pbkdf pbkdf2 --pbkdf-memory 64 --key-file "$TMP/p1" "$img" "$TMP/p4"
"$BLKCRYPT" luks change-key "${PBKDF2[@]}" --key-file "$TMP/p3" "$img" "$TMP/p4" || fail "change-key"
cryptsetup open --test-passphrase --key-slot 1 --key-file "$TMP/p4" "$img" || fail "cryptsetup: changed key"
cryptsetup open --test-passphrase --key-file "$TMP/p3" "$img" 2>/dev/null && fail "the old passphrase still opens"
cryptsetup luksAddKey -q "${PBKDF2[@]}" --key-slot 5 --key-file "$TMP/p1" "$img" "$TMP/p3" || fail "cryptsetup luksAddKey"
"$BLKCRYPT" luks test-passphrase -v --key-file "$TMP/p3" "$img" | grep_q "^Key slot 5 unlocked.$" || fail "their slot 5"
"$BLKCRYPT" luks kill-slot -q --key-file "$TMP/p1" "$img" 5 || fail "kill-slot"
cryptsetup open --test-passphrase --key-file "$TMP/p3" "$img" 2>/dev/null && fail "killed slot 5 still opens"
"$BLKCRYPT" luks remove-key -q "$img" "$TMP/p4" || fail "remove-key"
cryptsetup open --test-passphrase --key-file "$TMP/p4" "$img" 2>/dev/null && fail "removed key still opens"
[[ $(cryptsetup luksDump "$img" | grep -c '^  [0-9]*: luks2$') == 1 ]] || fail "keyslots left: $(cryptsetup luksDump "$img")"
"$BLKCRYPT" luks decrypt --key-file "$TMP/p1" "$img" "$TMP/back" || fail "decrypt ours"
cmp -s <(head -c $((1024 * 1024)) "$TMP/back") "$TMP/plain" || fail "decrypt ours"

# uuid --uuid: cryptsetup reads the new one.
"$BLKCRYPT" luks uuid -q --uuid 01234567-89AB-cdef-0123-456789abcdef "$img" || fail "set uuid"
[[ $(cryptsetup luksUUID "$img") == 01234567-89ab-cdef-0123-456789abcdef ]] || fail "cryptsetup sees another uuid"

# Options: a detached header, sizes, sector 512, subsystem, pbkdf2 with a hash.
rm -f "$TMP/d.hdr" && truncate -s 1M "$TMP/d.img"
"$BLKCRYPT" luksFormat -q --type luks2 --header "$TMP/d.hdr" "${PBKDF2[@]}" --hash sha512 --sector-size 512 \
    --cipher aes-cbc-essiv:sha256 --key-size 256 --subsystem sub --luks2-metadata-size 64k \
    --luks2-keyslots-size 256KiB --key-file "$TMP/p1" "$TMP/d.img" || fail "detached format"
cryptsetup luksDump "$TMP/d.hdr" >"$TMP/theirs" || fail "cryptsetup: our detached header"
grep -q "^Metadata area: 	65536 \[bytes\]$" "$TMP/theirs" || fail "metadata size"
grep -q "^Keyslots area: 	262144 \[bytes\]$" "$TMP/theirs" || fail "keyslots size"
grep -q "^	offset: 0 \[bytes\]$" "$TMP/theirs" || fail "detached data offset"
grep -q "^	sector: 512 \[bytes\]$" "$TMP/theirs" || fail "sector 512"
grep -q "^Subsystem:     	sub$" "$TMP/theirs" || fail "subsystem"
grep -q "^	Hash:       sha512$" "$TMP/theirs" || fail "hash"
cryptsetup open --test-passphrase --header "$TMP/d.hdr" --key-file "$TMP/p1" "$TMP/d.img" || fail "detached open"
# Sizes with cryptsetup's units (tools_string_to_size): k/KiB binary, KB
# decimal, s sectors; cryptsetup reads the same spellings to the same sizes.
for spec in "16384 16384" "16k 16384" "16KiB 16384" "32s 16384" "1M 1048576" "4MiB 4194304"; do
    set -- $spec
    rm -f "$TMP/u.hdr" && truncate -s 1M "$TMP/u.img"
    "$BLKCRYPT" luksFormat -q --type luks2 --header "$TMP/u.hdr" "${PBKDF2[@]}" --luks2-metadata-size "$1" \
        --key-file "$TMP/p1" "$TMP/u.img" || fail "--luks2-metadata-size $1"
    cryptsetup luksDump "$TMP/u.hdr" | grep -q "^Metadata area: 	$2 \[bytes\]$" || fail "--luks2-metadata-size $1 is not $2"
done
# 16KB is 16000 (not a power of two), k is no number, 16Ki and 0x4000 no size:
# cryptsetup refuses all four too.
for bad in 16KB k 16Ki 0x4000 16kb " 16k" 20000000000000000000k; do
    expect_exit 2 "$BLKCRYPT" luks format -q --type luks2 --luks2-metadata-size "$bad" "${PBKDF2[@]}" --key-file "$TMP/p1" "$img"
done
expect_exit 1 "$BLKCRYPT" luks format -q --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations 999 --key-file "$TMP/p1" "$img"
expect_exit 1 "$BLKCRYPT" luks format -q --type luks2 --sector-size 1000 "${PBKDF2[@]}" --key-file "$TMP/p1" "$img"
# (cryptsetup ignores --label for luks1; we refuse it, as every option outside its scope.)
expect_exit 2 "$BLKCRYPT" luks format -q --type luks1 --label x "${PBKDF2[@]}" --key-file "$TMP/p1" "$img"
cryptsetup open --test-passphrase --key-file "$TMP/p1" "$img" || fail "a refused format changed the container"
# --offset, --align-payload: the data offset and keyslots area cryptsetup
# picks for the same options (attached and detached).
layout() { cryptsetup luksDump "$1" | grep -E '^Keyslots area:|^	offset:'; }
for opts in "--offset 8192" "--align-payload 3000" "--align-payload 24576" "--align-payload 24576 --header HDR"; do
    for who in ours theirs; do
        rm -f "$TMP/l-$who.img" "$TMP/l-$who.hdr" && truncate -s 40M "$TMP/l-$who.img"
        o=${opts/HDR/$TMP/l-$who.hdr}
        dev=$TMP/l-$who.img
        [[ $opts == *HDR* ]] && dev=$TMP/l-$who.hdr
        if [[ $who == ours ]]; then
            "$BLKCRYPT" luks format -q "${PBKDF2[@]}" $o --key-file "$TMP/p1" "$TMP/l-$who.img" || fail "format $opts"
        else
            cryptsetup luksFormat -q "${PBKDF2[@]}" $o --key-file "$TMP/p1" "$TMP/l-$who.img" || fail "cryptsetup $opts"
        fi
        layout "$dev" >"$TMP/layout-$who"
    done
    [[ $(grep -c . "$TMP/layout-ours") == 2 ]] || fail "$opts: no layout in $(cat "$TMP/layout-ours")"
    cmp -s "$TMP/layout-ours" "$TMP/layout-theirs" ||
        fail "$opts: layout differs: $(diff "$TMP/layout-ours" "$TMP/layout-theirs")"
done
expect_exit 1 "$BLKCRYPT" luks format -q "${PBKDF2[@]}" --offset 4100 --key-file "$TMP/p1" "$TMP/l-ours.img"
grep -q "^blkcrypt: Data offset is not multiple of 4096 bytes.$" "$TMP/stderr" || fail "offset: $(cat "$TMP/stderr")"

# The digest's PBKDF2 is benchmarked (125 ms, as cryptsetup) unless the
# keyslot costs are forced (then cryptsetup's minimum, 1000).
digest_iterations() { cryptsetup luksDump "$1" | sed -n '/^Digests:/,$s/^\tIterations: //p'; }
[[ $(digest_iterations "$img") == 1000 ]] || fail "forced costs: digest iterations $(digest_iterations "$img")"
rm -f "$TMP/b.img" && truncate -s 17M "$TMP/b.img"
"$BLKCRYPT" luks format -q --pbkdf pbkdf2 --iter-time 1 --key-file "$TMP/p1" "$TMP/b.img" || fail "benchmarked format"
(($(digest_iterations "$TMP/b.img") > 1000)) || fail "digest iterations not benchmarked: $(digest_iterations "$TMP/b.img")"
cryptsetup open --test-passphrase --key-file "$TMP/p1" "$TMP/b.img" || fail "cryptsetup: benchmarked format"

# header-backup / -restore, both directions with cryptsetup.
"$BLKCRYPT" luks header-backup --header-backup-file "$TMP/bk-ours" "$img" || fail "header-backup"
cryptsetup luksHeaderBackup --header-backup-file "$TMP/bk-theirs" "$img"
cmp -s "$TMP/bk-ours" "$TMP/bk-theirs" || fail "header backups differ"
cp "$img" "$TMP/wiped" && dd if=/dev/zero of="$TMP/wiped" bs=1M count=16 conv=notrunc status=none
cryptsetup luksHeaderRestore -q --header-backup-file "$TMP/bk-ours" "$TMP/wiped" || fail "cryptsetup restores ours"
cmp -s "$TMP/wiped" "$img" || fail "cryptsetup's restore of our backup differs"
dd if=/dev/zero of="$TMP/wiped" bs=1M count=16 conv=notrunc status=none
"$BLKCRYPT" luks header-restore -q --header-backup-file "$TMP/bk-theirs" "$TMP/wiped" || fail "header-restore"
cmp -s "$TMP/wiped" "$img" || fail "our restore differs"

# A damaged primary header: a warning on stderr, the secondary opens.
cp "$img" "$TMP/dam"
printf 'X' | dd of="$TMP/dam" bs=1 seek=5000 conv=notrunc status=none
"$BLKCRYPT" luks test-passphrase --key-file "$TMP/p1" "$TMP/dam" 2>"$TMP/err" || fail "damaged primary"
grep -q "^blkcrypt: WARNING: the primary LUKS2 header is damaged" "$TMP/err" || fail "no warning: $(cat "$TMP/err")"
[[ $(grep -c . "$TMP/err") == 1 ]] || fail "warning printed more than once: $(cat "$TMP/err")"

# luksErase: no keyslot left, the header still LUKS2.
"$BLKCRYPT" luksErase -q "$img" || fail "erase"
[[ $(cryptsetup luksDump "$img" | grep -c '^  [0-9]*: luks2$') == 0 ]] || fail "erase left a keyslot"
# No keyslot left to try: cryptsetup 2.6.1 says "No usable keyslot is
# available." and exits 1 (not 2), and so do we.
expect_exit 1 "$BLKCRYPT" luks test-passphrase --key-file "$TMP/p1" "$img"
grep -qx "blkcrypt: No usable keyslot is available." "$TMP/stderr" || fail "erased: $(cat "$TMP/stderr")"
rc=0
cryptsetup open --test-passphrase --key-file "$TMP/p1" "$img" 2>/dev/null || rc=$?
[[ $rc == 1 ]] || fail "erased: cryptsetup exits $rc"
"$BLKCRYPT" isLuks "$img" || fail "erase destroyed the header"

echo "luks2: all passed"
