#!/usr/bin/env bash
# The C API (capi_test.c) against what the CLI and cryptsetup/veritysetup make
# and read: LUKS1 and LUKS2 images cryptsetup formats (plaintext, key file,
# volume key, wrong passphrase, writes read back by the CLI, dump JSON equal
# to `luks dump --json`), the shared fixtures (VeraCrypt, TrueCrypt,
# BitLocker, FileVault 2; skipped with a note where ../shared is absent),
# verity format checked by veritysetup verify, hashes and ciphers.
# Usage: capi.sh BLKCRYPT CAPI_TEST SOURCE_DIR
source "$(dirname "$0")/../cli/lib.sh"
T=${2:?usage: $0 BLKCRYPT CAPI_TEST SOURCE_DIR}
SRC=${3:?usage: $0 BLKCRYPT CAPI_TEST SOURCE_DIR}

"$T" errors || fail "errors"
"$T" crypto || fail "crypto"
# One version for users: blk_version() is the CLI's (and the package's).
[[ $("$T" version) == "$("$BLKCRYPT" --version | awk '{print $2}')" ]] ||
    fail "blk_version $("$T" version) is not blkcrypt --version's $("$BLKCRYPT" --version)"

# same_plaintext NAME CAPI_ARGS... -- CLI_ARGS...: capi_test read's output
# equals the CLI's decrypt to stdout (compared by digest: the fixtures are
# hundreds of MiB).
same_plaintext() {
    local name=$1 a=() c=()
    shift
    while [[ $1 != -- ]]; do a+=("$1"); shift; done
    shift
    c=("$@")
    local mine theirs
    mine=$("$T" read "${a[@]}" 2>"$TMP/capi.err" | sha256sum) || fail "$name: capi read: $(cat "$TMP/capi.err")"
    grep -q 'CHECK' "$TMP/capi.err" && fail "$name: $(cat "$TMP/capi.err")"
    theirs=$("${c[@]}" | sha256sum) || fail "$name: the CLI's decrypt"
    [[ $mine == "$theirs" ]] || fail "$name: the C API's plaintext differs from the CLI's"
    echo "ok $name ($(sed -n 's/^type //p' "$TMP/capi.err"))"
}

# ---- LUKS1 and LUKS2 made by cryptsetup ------------------------------------
if command -v cryptsetup >/dev/null; then
    printf 'correct horse' >"$TMP/key"
    head -c 3M /dev/urandom >"$TMP/plain"
    for v in luks1 luks2; do
        img=$TMP/$v.img
        truncate -s 24M "$img"
        cryptsetup luksFormat --batch-mode --type "$v" --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
            --key-file "$TMP/key" "$img" >/dev/null || fail "cryptsetup luksFormat $v"
        "$BLKCRYPT" luks encrypt --key-file "$TMP/key" "$TMP/plain" "$img" || fail "luks encrypt $v"
        same_plaintext "$v passphrase" "$img" auto "correct horse" -- \
            "$BLKCRYPT" luks decrypt --key-file "$TMP/key" "$img" -
        same_plaintext "$v key file, type luks" "$img" luks "@$TMP/key" -- \
            "$BLKCRYPT" luks decrypt --key-file "$TMP/key" "$img" -
        # A key file that is a pipe (/dev/stdin) or a FIFO: read to its end.
        mine=$(printf 'correct horse' | "$T" read "$img" auto @/dev/stdin 2>"$TMP/capi.err" | sha256sum)
        [[ $mine == "$("$BLKCRYPT" luks decrypt --key-file "$TMP/key" "$img" - | sha256sum)" ]] ||
            fail "$v: key file on a pipe: $(cat "$TMP/capi.err")"
        rm -f "$TMP/fifo" && mkfifo "$TMP/fifo"
        printf 'correct horse' >"$TMP/fifo" &
        mine=$("$T" read "$img" auto "@$TMP/fifo" 2>"$TMP/capi.err" | sha256sum)
        wait
        [[ $mine == "$("$BLKCRYPT" luks decrypt --key-file "$TMP/key" "$img" - | sha256sum)" ]] ||
            fail "$v: key file on a FIFO: $(cat "$TMP/capi.err")"
        echo "ok $v key file on a pipe and a FIFO"
        # A detached header (cryptsetup's backup of it) over the image as data.
        rm -f "$TMP/hdr"
        cryptsetup luksHeaderBackup --header-backup-file "$TMP/hdr" "$img" || fail "luksHeaderBackup $v"
        mine=$("$T" dread "$img" "$TMP/hdr" "correct horse" 2>"$TMP/capi.err" | sha256sum) ||
            fail "$v detached header: $(cat "$TMP/capi.err")"
        [[ $mine == "$("$BLKCRYPT" luks decrypt --header "$TMP/hdr" --key-file "$TMP/key" "$img" - | sha256sum)" ]] ||
            fail "$v: the detached header's plaintext differs"
        echo "ok $v detached header"
        "$T" wrong "$img" "$v" "correct horsf" 2>"$TMP/err" || fail "$v wrong passphrase: $(cat "$TMP/err")"
        grep -q 'No key available with this passphrase' "$TMP/err" || fail "$v: $(cat "$TMP/err")"
        # A named type that is not the image's.
        expect_exit 1 "$T" read "$img" bitlk "correct horse"
        # The volume key as the CLI dumps it (cryptsetup's luksDump needs AF_ALG here).
        vk=$("$BLKCRYPT" luks dump --dump-volume-key --batch-mode --key-file "$TMP/key" "$img" |
            sed -n '/^MK dump:/,$p' | sed 's/^MK dump://' | tr -d ' \t\n')
        [[ ${#vk} -ge 64 ]] || fail "$v: no volume key from luks dump --dump-volume-key: $vk"
        mine=$("$T" vkey "$img" "$vk" 2>"$TMP/err" | sha256sum) || fail "$v vkey: $(cat "$TMP/err")"
        [[ $mine == "$("$BLKCRYPT" luks decrypt --key-file "$TMP/key" "$img" - | sha256sum)" ]] ||
            fail "$v: the volume key's plaintext differs"
        echo "ok $v volume key"
        # dump: the CLI's object.
        "$T" dump "$img" auto - >"$TMP/dump.capi" || fail "$v dump"
        "$BLKCRYPT" luks dump --json "$img" >"$TMP/dump.cli" || fail "$v luks dump --json"
        cmp "$TMP/dump.capi" "$TMP/dump.cli" || fail "$v: blk_dump_json differs from luks dump --json"
        echo "ok $v dump"
        # Writes through the C API, read back by the CLI and by cryptsetup's header.
        cp "$img" "$TMP/w.img"
        "$T" write "$TMP/w.img" "correct horse" || fail "$v write"
        "$BLKCRYPT" luks decrypt --key-file "$TMP/key" "$TMP/w.img" "$TMP/w.plain" || fail "$v decrypt after write"
        python3 - "$TMP/plain" "$TMP/w.plain" <<'PY' || fail "$v: the written plaintext is not what was written"
import sys
old, new = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
pat = bytes((i * 7 + 3) & 0xff for i in range(70000))
want = bytearray(old[:len(new)] if len(old) >= len(new) else old + new[len(old):])
want[4000:5000] = pat[:1000]
want[65536:131072] = pat[:65536]
want[200001:200001 + 70000 - 9] = pat[9:]
want[-1:] = b"Z"
sys.exit(0 if bytes(want) == new else 1)
PY
        echo "ok $v write"
    done
else
    echo "SKIP: cryptsetup not installed (LUKS cases)"
fi

# ---- verity: our tree, veritysetup's verify --------------------------------
head -c 1M /dev/urandom >"$TMP/vdata"
root=$("$T" verity "$TMP/vdata" "$TMP/vhash" 2>"$TMP/err") || fail "verity: $(cat "$TMP/err")"
if command -v veritysetup >/dev/null; then
    veritysetup verify "$TMP/vdata" "$TMP/vhash" "$root" || fail "veritysetup verify refuses blk_verity_format's tree"
fi
"$BLKCRYPT" verity verify "$TMP/vdata" "$TMP/vhash" "$root" >/dev/null || fail "blkcrypt verity verify"
echo "ok verity ($root)"

# ---- the shared fixtures ----------------------------------------------------
SHARED=${BLKCRYPT_SHARED_DIR:-$SRC/../shared}/fixtures
if [[ ! -d $SHARED ]]; then
    echo "SKIP: $SHARED absent (VeraCrypt, TrueCrypt, BitLocker, FileVault 2 cases)"
    echo "capi tests passed"
    exit 0
fi
F=$TMP/fx
mkdir -p "$F"
for a in tcrypt bitlk fvault2; do tar xSJf "$SHARED/$a-images.tar.xz" -C "$F"; done

D=$F/tcrypt
# TrueCrypt (the Python tests take a VeraCrypt one). The C API searches every
# KDF as cryptsetup does without -h; the CLI is told the hash to save time. A
# wrong passphrase is not tried here: it runs the whole search (~45 s).
img=tc_4-sha512-xts-twofish-serpent
same_plaintext "$img" "$D/$img" tcrypt aaaaaaaaaaaa -- \
    sh -c "printf 'aaaaaaaaaaaa\n' | '$BLKCRYPT' tcrypt decrypt -h sha512 '$D/$img' -"
"$T" dump "$D/$img" tcrypt aaaaaaaaaaaa >"$TMP/tc.json" || fail "tcrypt dump"
grep -q '"type":"TCRYPT"' "$TMP/tc.json" || fail "tcrypt dump: $(cat "$TMP/tc.json")"
# blk_tcrypt_options and blk_tcrypt_add_keyfile (the hash named: one KDF run
# each). A hidden volume; VeraCrypt keyfiles, which without them are refused;
# a system-encrypted disk.
# (A PIM is the Python tests'.)
tread() {
    local name=$1 cli=$2
    shift 2
    mine=$("$T" tread "$@" 2>"$TMP/capi.err" | sha256sum) || fail "$name: capi tread: $(cat "$TMP/capi.err")"
    theirs=$(sh -c "$cli" | sha256sum) || fail "$name: the CLI's decrypt"
    [[ $mine == "$theirs" ]] || fail "$name: the C API's plaintext differs from the CLI's"
    echo "ok $name"
}
img=tc_4-sha512-xts-aes-hidden
tread "$img (hidden)" "printf 'bbbbbbbbbbbb\n' | '$BLKCRYPT' tcrypt decrypt -h sha512 --tcrypt-hidden '$D/$img' -" \
    "$D/$img" bbbbbbbbbbbb h 0 sha512
img=vck_1_pw12-sha256-xts-aes
tread "$img (keyfiles)" \
    "printf 'aaaaaaaaaaaa\n' | '$BLKCRYPT' tcrypt decrypt -h sha256 --key-file '$D/keyfile1' --key-file '$D/keyfile2' '$D/$img' -" \
    "$D/$img" aaaaaaaaaaaa - 0 sha256 "$D/keyfile1" "$D/keyfile2"
expect_exit 3 "$T" tread "$D/$img" aaaaaaaaaaaa - 0 sha256 "$D/keyfile1"
img=sys_vc_1_mbr_full-sha256-xts-aes
tread "$img (system)" "printf 'aaaaaaaaaaaa\n' | '$BLKCRYPT' tcrypt decrypt -h sha256 --tcrypt-system '$D/$img' -" \
    "$D/$img" aaaaaaaaaaaa s 0 sha256

B=$F/bitlk
same_plaintext "bitlk password" "$B/bitlk-aes-xts-128.img" auto anaconda -- \
    sh -c "echo anaconda | '$BLKCRYPT' bitlk decrypt '$B/bitlk-aes-xts-128.img' -"
same_plaintext "bitlk .BEK key file" "$B/bitlk-aes-xts-128-startup-key.img" bitlk \
    "@$B/4381F759-C4F8-4DE0-BB61-FC33A831BDA5.BEK" -- \
    "$BLKCRYPT" bitlk decrypt --key-file "$B/4381F759-C4F8-4DE0-BB61-FC33A831BDA5.BEK" \
    "$B/bitlk-aes-xts-128-startup-key.img" -
"$T" wrong "$B/bitlk-aes-xts-128.img" auto anacondb 2>"$TMP/err" || fail "bitlk wrong: $(cat "$TMP/err")"
# The volume key: the CLI's dump of it, then a read with it.
vk=$(echo anaconda | "$BLKCRYPT" bitlk dump --dump-volume-key "$B/bitlk-aes-xts-128.img" |
    sed -n '/^MK dump:/,$p' | sed 's/^MK dump://' | tr -d ' \t\n')
if [[ ${#vk} -ge 32 ]]; then
    mine=$("$T" vkey "$B/bitlk-aes-xts-128.img" "$vk" 2>/dev/null | sha256sum)
    [[ $mine == "$(echo anaconda | "$BLKCRYPT" bitlk decrypt "$B/bitlk-aes-xts-128.img" - | sha256sum)" ]] ||
        fail "bitlk: the volume key's plaintext differs"
    echo "ok bitlk volume key"
else
    fail "bitlk dump --dump-volume-key gave no key"
fi
"$T" dump "$B/bitlk-aes-xts-128.img" auto - >"$TMP/b.json" || fail "bitlk dump"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["type"]=="BITLK" and "8f595209" in d["dump"]' \
    "$TMP/b.json" || fail "bitlk dump json: $(cat "$TMP/b.json")"

V=$F/fvault2-images/small
same_plaintext "fvault2" "$V" auto heslo123 -- sh -c "echo heslo123 | '$BLKCRYPT' fvault2 decrypt '$V' -"
"$T" wrong "$V" fvault2 heslo124 2>"$TMP/err" || fail "fvault2 wrong: $(cat "$TMP/err")"
echo "capi tests passed"
