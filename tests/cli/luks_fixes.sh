#!/bin/bash
# LUKS behaviours fixed for issue 23, each against cryptsetup 2.6.1 run live
# (skipped, exit 0 with a note, where it or python3-cryptography is missing):
# a LUKS2 primary header without its magic is read from the secondary copy
# (16 KiB and 64 KiB metadata); unbound and digest-less keyslots as
# cryptsetup treats them; an old "argon2" KDF name dumped as written;
# aes-xts-essiv:wp256 with the whirlpool hash (LUKS1) against an independent
# reference; a filesystem whose block size is below the encryption sector
# size refused with cryptsetup reencrypt --encrypt's words.
source "$(dirname "$0")/lib.sh"
command -v cryptsetup >/dev/null || { echo "cryptsetup not installed: LUKS fixes skipped"; exit 0; }
python3 -c 'import cryptography' 2>/dev/null || { echo "python3-cryptography missing: LUKS fixes skipped"; exit 0; }

printf 'first passphrase' >"$TMP/p1"
printf 'unbound one' >"$TMP/p2"
printf 'wrong' >"$TMP/p9"
PBKDF2=(--pbkdf pbkdf2 --pbkdf-force-iterations 1000)

# rewrite_json IMG PYTHON: runs PYTHON on the LUKS2 JSON `md` of both copies,
# checksums redone.
rewrite_json() {
    python3 - "$1" "$2" <<'PY'
import hashlib, json, struct, sys
f = open(sys.argv[1], "r+b")
f.seek(8)
hdr_size = struct.unpack(">Q", f.read(8))[0]
for off in (0, hdr_size):
    f.seek(off)
    blob = bytearray(f.read(hdr_size))
    md = json.loads(blob[4096:].rstrip(b"\0"))
    exec(sys.argv[2])
    text = json.dumps(md, separators=(",", ":")).encode()
    blob[4096:] = text + bytes(hdr_size - 4096 - len(text))
    blob[448:512] = bytes(64)
    blob[448:480] = hashlib.sha256(blob).digest()
    f.seek(off)
    f.write(blob)
PY
}

# same_answer WHAT CS_ARGS -- OUR_ARGS: cryptsetup and blkcrypt exit alike,
# with the same message (ours after "blkcrypt: ").
same_answer() {
    local what=$1 cs=() ours=() rc_cs=0 rc_ours=0
    shift
    while [[ $1 != -- ]]; do cs+=("$1"); shift; done
    shift
    ours=("$@")
    cryptsetup "${cs[@]}" >/dev/null 2>"$TMP/cs.err" || rc_cs=$?
    "$BLKCRYPT" "${ours[@]}" >/dev/null 2>"$TMP/our.err" || rc_ours=$?
    [[ $rc_cs == "$rc_ours" ]] || fail "$what: exit $rc_ours, cryptsetup $rc_cs ($(cat "$TMP/our.err") / $(cat "$TMP/cs.err"))"
    diff <(grep -v WARNING "$TMP/cs.err") <(grep -v WARNING "$TMP/our.err" | sed 's/^blkcrypt: //') >/dev/null ||
        fail "$what: '$(cat "$TMP/our.err")', cryptsetup '$(cat "$TMP/cs.err")'"
}

# --- A primary LUKS2 header that lost its magic: the secondary opens it.
for meta in 16384 65536; do
    img=$TMP/sec-$meta.img
    rm -f "$img" && truncate -s 8M "$img"
    cryptsetup luksFormat -q --type luks2 "${PBKDF2[@]}" --luks2-metadata-size "$meta" --offset 4096 \
        --key-file "$TMP/p1" "$img" || fail "sec $meta: luksFormat"
    random_file "$TMP/plain" 1048576
    "$BLKCRYPT" luks encrypt --key-file "$TMP/p1" "$TMP/plain" "$img" || fail "sec $meta: encrypt"
    "$BLKCRYPT" luks dump -q --dump-volume-key --key-file "$TMP/p1" "$img" >"$TMP/vk.before"
    dd if=/dev/zero of="$img" bs=512 count=1 conv=notrunc status=none  # sector 0: the magic gone
    cp "$img" "$TMP/sec.cs"  # cryptsetup may repair what it opens: it gets a copy
    cryptsetup isLuks "$TMP/sec.cs" || fail "sec $meta: cryptsetup no longer sees LUKS"
    "$BLKCRYPT" luks is-luks "$img" || fail "sec $meta: is-luks"
    "$BLKCRYPT" luks dump "$img" 2>"$TMP/err" >"$TMP/ours" || fail "sec $meta: dump: $(cat "$TMP/err")"
    cryptsetup luksDump "$TMP/sec.cs" | cmp -s - "$TMP/ours" || fail "sec $meta: dump differs from cryptsetup's"
    grep -q "WARNING: the primary LUKS2 header is damaged" "$TMP/err" || fail "sec $meta: no warning"
    [[ $("$BLKCRYPT" luks uuid "$img" 2>/dev/null) == $(cryptsetup luksUUID "$TMP/sec.cs") ]] || fail "sec $meta: uuid"
    cryptsetup open --test-passphrase --key-file "$TMP/p1" "$TMP/sec.cs" || fail "sec $meta: cryptsetup test"
    "$BLKCRYPT" luks test-passphrase --key-file "$TMP/p1" "$img" 2>/dev/null || fail "sec $meta: test-passphrase"
    expect_exit 2 "$BLKCRYPT" luks test-passphrase --key-file "$TMP/p9" "$img"
    "$BLKCRYPT" luks dump -q --dump-volume-key --key-file "$TMP/p1" "$img" 2>/dev/null | cmp -s - "$TMP/vk.before" ||
        fail "sec $meta: another volume key"
    "$BLKCRYPT" luks decrypt --key-file "$TMP/p1" "$img" "$TMP/out" 2>/dev/null || fail "sec $meta: decrypt"
    cmp -s -n 1048576 "$TMP/out" "$TMP/plain" || fail "sec $meta: decrypt gave other bytes"
    rm -f "$TMP/out"
done
# A LUKS1 header without its magic has no second copy: still not LUKS, as for cryptsetup.
img=$TMP/l1.img
rm -f "$img" && truncate -s 4M "$img"
cryptsetup luksFormat -q --type luks1 --pbkdf-force-iterations 1000 --key-file "$TMP/p1" "$img"
dd if=/dev/zero of="$img" bs=512 count=1 conv=notrunc status=none
same_answer "luks1 without magic" open --test-passphrase --key-file "$TMP/p1" "$img" -- \
    luks test-passphrase --key-file "$TMP/p1" "$img"

# --- Unbound keyslots: skipped unless named, as cryptsetup does.
img=$TMP/unbound.img
rm -f "$img" && truncate -s 8M "$img"
cryptsetup luksFormat -q --type luks2 "${PBKDF2[@]}" --offset 4096 --key-file "$TMP/p1" "$img"
cryptsetup luksAddKey -q --unbound -s 256 "${PBKDF2[@]}" --key-file "$TMP/p1" "$img" "$TMP/p2" ||
    fail "luksAddKey --unbound"
cryptsetup luksDump "$img" | grep -q '^  1: luks2 (unbound)$' || fail "no unbound keyslot 1"
"$BLKCRYPT" luks dump "$img" | cmp -s - <(cryptsetup luksDump "$img") || fail "unbound: dump differs"
for args in "p1" "p2" "p9" "p2 1" "p1 1" "p2 0" "p1 0"; do
    set -- $args
    slot=()
    [[ -n ${2:-} ]] && slot=(--key-slot "$2")
    same_answer "unbound: test-passphrase $args" open --test-passphrase "${slot[@]}" --key-file "$TMP/$1" "$img" -- \
        luks test-passphrase "${slot[@]}" --key-file "$TMP/$1" "$img"
    # (luksDump --dump-volume-key ignores --key-slot: compared without it.)
    [[ -n ${2:-} ]] || same_answer "unbound: dump --dump-volume-key $args" luksDump -q --dump-volume-key \
        --key-file "$TMP/$1" "$img" -- luks dump -q --dump-volume-key --key-file "$TMP/$1" "$img"
done
expect_exit 1 "$BLKCRYPT" luks decrypt --key-slot 1 --key-file "$TMP/p2" "$img" "$TMP/out"
grep -q "No usable keyslot is available." "$TMP/stderr" || fail "unbound decrypt: $(cat "$TMP/stderr")"
[[ ! -e $TMP/out ]] || fail "unbound decrypt wrote OUT"
# A luks2 keyslot in no digest: cryptsetup refuses the whole header.
rewrite_json "$img" 'del md["digests"]["1"]'
# (Ours says why in parentheses after cryptsetup's sentence.)
for args in "p1" "p2"; do
    cryptsetup open --test-passphrase --key-file "$TMP/$args" "$img" 2>"$TMP/cs.err" && fail "digest-less: cryptsetup opens"
    grep -qx "Device $img is not a valid LUKS device." "$TMP/cs.err" || fail "digest-less: cryptsetup says $(cat "$TMP/cs.err")"
    expect_exit 1 "$BLKCRYPT" luks test-passphrase --key-file "$TMP/$args" "$img"
    grep -q "^blkcrypt: Device $img is not a valid LUKS device (.*keyslot 1 is assigned to no digest" "$TMP/stderr" ||
        fail "digest-less: $(cat "$TMP/stderr")"
done

# --- An old header's "argon2" KDF: dumped as written.
img=$TMP/argon2.img
rm -f "$img" && truncate -s 8M "$img"
cryptsetup luksFormat -q --type luks2 --pbkdf argon2i --pbkdf-force-iterations 4 --pbkdf-memory 32 \
    --pbkdf-parallel 1 --offset 4096 --key-file "$TMP/p1" "$img"
rewrite_json "$img" 'md["keyslots"]["0"]["kdf"]["type"] = "argon2"'
cryptsetup luksDump "$img" | grep -q $'^\tPBKDF:      argon2$' || fail "argon2: cryptsetup prints otherwise"
"$BLKCRYPT" luks dump "$img" | cmp -s - <(cryptsetup luksDump "$img") || fail "argon2: dump differs"
"$BLKCRYPT" luks dump --dump-json-metadata "$img" | cmp -s - <(cryptsetup luksDump --dump-json-metadata "$img") ||
    fail "argon2: JSON dump differs"

# --- Whirlpool: wp256/wp384 are wp512 cut short (OpenSSL's whirlpool), and a
# LUKS1 container with aes-xts-essiv:wp256 and the whirlpool hash. cryptsetup
# reads its header (its keyslots need dm-crypt for essiv:wp256, which its
# userspace crypto backend lacks); the data is checked against
# python3-cryptography with dm-crypt's essiv IV.
if openssl dgst -whirlpool -provider legacy -provider default </dev/null >/dev/null 2>&1; then
    printf 'abc' >"$TMP/abc"
    wp=$(openssl dgst -whirlpool -provider legacy -provider default -r "$TMP/abc" | cut -d' ' -f1)
    for n in 256 384; do
        [[ $("$BLKCRYPT" hash --alg wp$n "$TMP/abc" | cut -d' ' -f1) == "${wp:0:$((n / 4))}" ]] || fail "wp$n of abc"
    done
    img=$TMP/wp.img
    rm -f "$img" && truncate -s 4M "$img"
    "$BLKCRYPT" luks format -q --type luks1 --hash whirlpool --cipher aes-xts-essiv:wp256 --pbkdf-force-iterations 1000 \
        --key-file "$TMP/p1" "$img" || fail "wp: format"
    cryptsetup luksDump "$img" >"$TMP/theirs" || fail "wp: cryptsetup cannot read the header"
    grep -q '^Cipher mode:.*[[:space:]]xts-essiv:wp256$' "$TMP/theirs" || fail "wp: $(cat "$TMP/theirs")"
    "$BLKCRYPT" luks dump "$img" | cmp -s - "$TMP/theirs" || fail "wp: dump differs"
    random_file "$TMP/plain" 65536
    "$BLKCRYPT" luks encrypt --key-file "$TMP/p1" "$TMP/plain" "$img" || fail "wp: encrypt"
    vk=$("$BLKCRYPT" luks dump -q --dump-volume-key --key-file "$TMP/p1" "$img" | sed -n '/^MK dump:/,$p' |
        sed 's/^MK dump://' | tr -d ' \t\n')
    off=$(sed -n 's/^Payload offset:\t*//p' "$TMP/theirs")
    salt=$(printf '%s' "$vk" | xxd -r -p | openssl dgst -whirlpool -provider legacy -provider default -r | cut -c1-64)
    python3 - "$vk" "$salt" "$TMP/plain" "$TMP/ref" <<'PY'
import sys
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
vk, salt = bytes.fromhex(sys.argv[1]), bytes.fromhex(sys.argv[2])
pt = open(sys.argv[3], "rb").read()
essiv = Cipher(algorithms.AES(salt), modes.ECB()).encryptor()
out = b""
for s in range(len(pt) // 512):
    iv = essiv.update(s.to_bytes(8, "little") + bytes(8))  # dm-crypt essiv: E_{hash(key)}(le64 sector)
    out += Cipher(algorithms.AES(vk), modes.XTS(iv)).encryptor().update(pt[s * 512:(s + 1) * 512])
open(sys.argv[4], "wb").write(out)
PY
    cmp -s <(tail -c +$((off * 512 + 1)) "$img" | head -c 65536) "$TMP/ref" || fail "wp: ciphertext differs from the reference"
    "$BLKCRYPT" luks decrypt --key-file "$TMP/p1" "$img" "$TMP/out" && cmp -s -n 65536 "$TMP/out" "$TMP/plain" ||
        fail "wp: decrypt"
    rm -f "$TMP/out"
else
    echo "OpenSSL has no whirlpool (legacy provider): whirlpool checks skipped"
fi

# --- A filesystem whose block size is below the encryption sector size.
if command -v mkfs.ext4 >/dev/null; then
    fs=$TMP/fs1k.img
    rm -f "$fs" && truncate -s 8M "$fs" && mkfs.ext4 -q -b 1024 "$fs"
    cp "$fs" "$TMP/fs1k.orig"
    # cryptsetup's words, live (it refuses before writing anything).
    rc=0
    cryptsetup reencrypt --encrypt -q --force-offline-reencrypt --sector-size 4096 --header "$TMP/cs.hdr" \
        "${PBKDF2[@]}" --key-file "$TMP/p1" "$fs" 2>"$TMP/cs.err" || rc=$?
    [[ $rc == 1 ]] || fail "fs: cryptsetup reencrypt exit $rc"
    expect_exit 1 "$BLKCRYPT" luks encrypt --format --sector-size 4096 --header "$TMP/h.hdr" "${PBKDF2[@]}" \
        --key-file "$TMP/p1" "$fs" "$TMP/enc.img"
    # cryptsetup's two lines are our one (every blkcrypt error is one line), then the --force hint.
    [[ $(cat "$TMP/stderr") == "blkcrypt: $(tr '\n' ' ' <"$TMP/cs.err")(--force encrypts it anyway.)" ]] ||
        fail "fs: '$(cat "$TMP/stderr")', cryptsetup '$(cat "$TMP/cs.err")'"
    [[ ! -e $TMP/enc.img && ! -e $TMP/h.hdr ]] || fail "fs: a refused encrypt left files"
    cmp -s "$fs" "$TMP/fs1k.orig" || fail "fs: IN changed"
    # The default sector size (4096) too; 1024 or --force go ahead.
    expect_exit 1 "$BLKCRYPT" luks encrypt --format "${PBKDF2[@]}" --key-file "$TMP/p1" "$fs" "$TMP/enc.img"
    grep -q "^blkcrypt: The default --sector-size 4096 is incompatible with ext4 superblock (block size: 1024 bytes)" "$TMP/stderr" ||
        fail "fs default: $(cat "$TMP/stderr")"
    "$BLKCRYPT" luks encrypt --format --sector-size 1024 "${PBKDF2[@]}" --key-file "$TMP/p1" "$fs" "$TMP/enc.img" ||
        fail "fs: sector size 1024 refused"
    rm -f "$TMP/enc.img"
    "$BLKCRYPT" luks encrypt --format --force "${PBKDF2[@]}" --key-file "$TMP/p1" "$fs" "$TMP/enc.img" ||
        fail "fs: --force refused"
    # Into an existing container: its sector size counts.
    expect_exit 1 "$BLKCRYPT" luks encrypt --key-file "$TMP/p1" "$fs" "$TMP/enc.img"
    grep -q "^blkcrypt: The sector size 4096 of $TMP/enc.img is incompatible with ext4 superblock (block" "$TMP/stderr" ||
        fail "fs existing: $(cat "$TMP/stderr")"
    "$BLKCRYPT" luks encrypt --force --key-file "$TMP/p1" "$fs" "$TMP/enc.img" || fail "fs existing: --force"
    img=$TMP/c512.img
    rm -f "$img" && truncate -s 16M "$img"
    cryptsetup luksFormat -q --type luks2 "${PBKDF2[@]}" --sector-size 512 --offset 4096 --key-file "$TMP/p1" "$img"
    "$BLKCRYPT" luks encrypt --key-file "$TMP/p1" "$fs" "$img" || fail "fs: a 512-byte-sector container refused"
    # 4 KiB blocks: no objection.
    fs4=$TMP/fs4k.img
    rm -f "$fs4" && truncate -s 8M "$fs4" && mkfs.ext4 -q -b 4096 "$fs4"
    rm -f "$TMP/enc.img"
    "$BLKCRYPT" luks encrypt --format "${PBKDF2[@]}" --key-file "$TMP/p1" "$fs4" "$TMP/enc.img" || fail "fs 4k refused"
    # Other types and sizes: our verdict and its words follow blkid's TYPE and BLOCK_SIZE.
    mk=("ext2 -b 2048" "ext3 -b 1024")
    command -v mkfs.xfs >/dev/null && mk+=("xfs -f")
    for m in "${mk[@]}"; do
        set -- $m
        f=$TMP/fs-$1.img
        rm -f "$f" && truncate -s 320M "$f" && "mkfs.$1" -q "${@:2}" "$f" >/dev/null
        type=$(blkid -p -o value -s TYPE "$f") bs=$(blkid -p -o value -s BLOCK_SIZE "$f")
        rm -f "$TMP/h.hdr"
        expect_exit 1 "$BLKCRYPT" luks encrypt --format --sector-size 4096 --header "$TMP/h.hdr" "${PBKDF2[@]}" \
            --key-file "$TMP/p1" "$f" "$TMP/x.img"
        grep -q "incompatible with $type superblock (block size: $bs bytes)" "$TMP/stderr" ||
            fail "$m: blkid says $type $bs; $(cat "$TMP/stderr")"
    done
fi

echo "luks fixes: all passed"
