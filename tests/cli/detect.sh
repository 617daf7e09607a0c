#!/usr/bin/env bash
# The commands that detect the container format (cli/cmd_detect.cpp):
# `blkcrypt dump|test-passphrase|decrypt|table|open IMAGE` and `serve IMAGE`
# find LUKS1/LUKS2 (made here by cryptsetup luksFormat; also from the
# secondary LUKS2 header), BitLocker and FileVault 2 (the shared fixtures,
# skipped with a note where absent) and a dm-verity superblock, and then do
# exactly what `blkcrypt FORMAT ACTION` does: the same stdout, exit status
# and bytes. --type names the formats without a signature (tcrypt, loopaes,
# plain) as cryptsetup open --type does; luks1/luks2 against the other
# version is refused with cryptsetup's words and status; an image without a
# signature and without --type is refused naming --type; a FIFO or a
# directory is refused at once. `open` serves (NAME is the NBD export),
# `serve` unlocks a container, and `--type raw` serves its bytes, read back
# with nbdcopy.
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SHARED=${BLKCRYPT_SHARED_DIR:-$SRC/../shared}/fixtures
HAVE_NBD=0
if command -v nbdcopy >/dev/null; then
    NBD_CLIENTS=nbdcopy source "$(dirname "$0")/nbd_lib.sh"
    HAVE_NBD=1
else
    echo "nbdcopy not installed: open and serve cases skipped"
fi

# same_as WHAT STDIN -- TOP-ARGS -- FORMAT-ARGS: `blkcrypt TOP-ARGS` and
# `blkcrypt FORMAT-ARGS` (STDIN on stdin of both) exit alike and print the
# same stdout; the status must be WANT_RC (default 0).
same_as() {
    local what=$1 input=$2 rc1=0 rc2=0
    shift 3
    local top=() fmt=()
    while [[ $1 != -- ]]; do top+=("$1"); shift; done
    shift
    fmt=("$@")
    printf '%s' "$input" | "$BLKCRYPT" "${top[@]}" >"$TMP/top.out" 2>"$TMP/top.err" || rc1=$?
    printf '%s' "$input" | "$BLKCRYPT" "${fmt[@]}" >"$TMP/fmt.out" 2>"$TMP/fmt.err" || rc2=$?
    [[ $rc1 == "${WANT_RC:-0}" ]] || fail "$what: blkcrypt ${top[*]}: exit $rc1, want ${WANT_RC:-0}: $(cat "$TMP/top.err")"
    [[ $rc1 == "$rc2" ]] || fail "$what: exit $rc1, but $rc2 from blkcrypt ${fmt[*]}"
    [[ ${WANT_RC:-0} != 0 || -s $TMP/top.out ]] || fail "$what: nothing printed"
    cmp -s "$TMP/top.out" "$TMP/fmt.out" || fail "$what: blkcrypt ${top[*]} prints otherwise than blkcrypt ${fmt[*]}:
$(diff "$TMP/top.out" "$TMP/fmt.out" | head -5)"
}

# same_bytes WHAT STDIN -- TOP-ARGS -- FORMAT-ARGS: decrypt to OUT (the last
# word, given to both as $TMP/top.bin and $TMP/fmt.bin) gives the same bytes.
same_bytes() {
    local what=$1 input=$2
    shift 3
    local top=() fmt=()
    while [[ $1 != -- ]]; do top+=("$1"); shift; done
    shift
    fmt=("$@")
    rm -f "$TMP/top.bin" "$TMP/fmt.bin"
    printf '%s' "$input" | "$BLKCRYPT" "${top[@]}" "$TMP/top.bin" 2>"$TMP/top.err" || fail "$what: blkcrypt ${top[*]}: $(cat "$TMP/top.err")"
    printf '%s' "$input" | "$BLKCRYPT" "${fmt[@]}" "$TMP/fmt.bin" 2>"$TMP/fmt.err" || fail "$what: blkcrypt ${fmt[*]}: $(cat "$TMP/fmt.err")"
    [[ -s $TMP/top.bin ]] || fail "$what: decrypt wrote nothing"
    cmp "$TMP/top.bin" "$TMP/fmt.bin" || fail "$what: decrypt gives other bytes than blkcrypt ${fmt[*]}"
}

# refused WANT PATTERN WHAT ARGS...: exit WANT within 20 s, stderr matching PATTERN.
refused() {
    local want=$1 pattern=$2 what=$3
    shift 3
    expect_exit "$want" timeout 20 "$BLKCRYPT" "$@" </dev/null
    grep -q -- "$pattern" "$TMP/stderr" || fail "$what: stderr lacks '$pattern': $(cat "$TMP/stderr")"
}

# served_equals WHAT EXPORT FILE SERVER-ARGS...: starts blkcrypt SERVER-ARGS,
# copies EXPORT out with nbdcopy and compares it with FILE.
served_equals() {
    local what=$1 export=$2 want=$3
    shift 3
    start_server "$@"
    rm -f "$TMP/served.bin"
    T nbdcopy "nbd+unix:///$export?socket=$SOCK" "$TMP/served.bin" || fail "$what: nbdcopy: $(tail -3 "$TMP/log")"
    stop_server
    cmp "$TMP/served.bin" "$want" || fail "$what: the export differs from $want"
}

# ---- LUKS1 and LUKS2, made by cryptsetup ---------------------------------
random_file "$TMP/random.img" 4194304
if command -v cryptsetup >/dev/null; then
    printf 'pw-detect' >"$TMP/pass"
    for v in 1 2; do
        img=$TMP/l$v.img
        truncate -s 20M "$img"
        cryptsetup luksFormat -q --type luks$v --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
            --key-file "$TMP/pass" "$img" || fail "cryptsetup luksFormat luks$v"
        head -c 2M /dev/urandom | dd of="$img" bs=1M seek=16 conv=notrunc status=none
        same_as "luks$v dump" "" -- dump "$img" -- luks dump "$img"
        grep -q "^Version: *[[:space:]]$v\$" "$TMP/top.out" || fail "luks$v dump: not the LUKS$v header: $(head -3 "$TMP/top.out")"
        same_as "luks$v dump -qM luks --dump-volume-key" "pw-detect" -- dump -qM luks --dump-volume-key "$img" -- \
            luks dump -q --dump-volume-key "$img"
        grep -qE "^(MK dump|Volume key):" "$TMP/top.out" || fail "luks$v dump --dump-volume-key printed no key"
        same_as "luks$v table" "" -- table -d "$TMP/pass" --show-key "$img" -- luks table -d "$TMP/pass" --show-key "$img"
        same_bytes "luks$v decrypt" "pw-detect" -- decrypt "$img" -- luks decrypt "$img"
        same_bytes "luks$v decrypt --type luks$v" "" -- decrypt --key-file="$TMP/pass" --type luks$v "$img" -- \
            luks decrypt --key-file="$TMP/pass" "$img"
        expect_exit 0 "$BLKCRYPT" test-passphrase -d "$TMP/pass" "$img"
        expect_exit 2 sh -c 'echo wrong | "$@"' sh "$BLKCRYPT" test-passphrase "$img"
        grep -q "No key available with this passphrase" "$TMP/stderr" || fail "luks$v: wrong passphrase: $(cat "$TMP/stderr")"
        # --type of the other LUKS version: cryptsetup's words and status.
        other=$((3 - v))
        for cmd in dump table test-passphrase; do
            refused 1 "^blkcrypt: Device $img is not a valid LUKS device.\$" "luks$v $cmd --type luks$other" \
                "$cmd" --type luks$other -d "$TMP/pass" "$img"
        done
        rm -f "$TMP/never.bin"
        refused 1 "is not a valid LUKS device." "luks$v decrypt -M luks$other" decrypt -M luks$other -d "$TMP/pass" "$img" "$TMP/never.bin"
        [[ ! -e $TMP/never.bin ]] || fail "luks$v: a refused --type wrote OUT"
        cp "$img" "$TMP/l$v.orig"
    done
    # What cryptsetup itself says to --type luks1 on LUKS2 (the words above).
    cryptsetup luksDump --type luks1 "$TMP/l2.img" >/dev/null 2>"$TMP/cs.err" && fail "cryptsetup luksDump --type luks1 of LUKS2 succeeded"
    grep -q "^Device $TMP/l2.img is not a valid LUKS device.\$" "$TMP/cs.err" || fail "cryptsetup's words changed: $(cat "$TMP/cs.err")"
    # A LUKS2 image whose primary header is gone is found by its secondary one.
    cp "$TMP/l2.img" "$TMP/l2-secondary.img"
    dd if=/dev/zero of="$TMP/l2-secondary.img" bs=4096 count=1 conv=notrunc status=none
    same_as "luks2 secondary dump" "" -- dump "$TMP/l2-secondary.img" -- luks dump "$TMP/l2-secondary.img"
    same_bytes "luks2 secondary decrypt" "pw-detect" -- decrypt "$TMP/l2-secondary.img" -- luks decrypt "$TMP/l2-secondary.img"
    # A detached header holds the signature; IMAGE is then all data.
    cryptsetup luksHeaderBackup --header-backup-file "$TMP/hdr.img" "$TMP/l2.img" || fail "cryptsetup luksHeaderBackup"
    same_as "luks2 --header dump" "" -- dump --header "$TMP/hdr.img" "$TMP/random.img" -- luks dump --header "$TMP/hdr.img" "$TMP/random.img"
    refused 1 "Device $TMP/hdr.img is not a valid LUKS device." "--header --type luks1" \
        dump --type luks1 --header "$TMP/hdr.img" "$TMP/random.img"
else
    echo "cryptsetup not installed: LUKS cases skipped"
fi

# ---- BitLocker and FileVault 2 fixtures ---------------------------------
if [[ -f $SHARED/bitlk-images.tar.xz ]]; then
    tar xSJf "$SHARED/bitlk-images.tar.xz" -C "$TMP"
    for i in bitlk-aes-xts-128 bitlk-aes-cbc-elephant-128 bitlk-togo-aes-xts-128; do
        img=$TMP/bitlk/$i.img
        same_as "$i dump" "" -- dump "$img" -- bitlk dump "$img"
        grep -qE "^Info for BITLK (To Go )?device " "$TMP/top.out" || fail "$i: not bitlkDump's output"
        same_as "$i table" "anaconda" -- table "$img" -- bitlk table "$img"
        expect_exit 0 sh -c 'echo anaconda | "$@"' sh "$BLKCRYPT" test-passphrase "$img"
        expect_exit 2 sh -c 'echo wrong | "$@"' sh "$BLKCRYPT" test-passphrase "$img"
    done
    img=$TMP/bitlk/bitlk-aes-xts-128.img
    same_bytes "bitlk decrypt" "anaconda" -- decrypt "$img" -- bitlk decrypt "$img"
    cp "$TMP/top.bin" "$TMP/bitlk.plain"
    refused 1 "is not a valid LUKS device" "bitlk --type luks" dump --type luks "$img"
    refused 1 "not a valid FVAULT2 device" "bitlk --type fvault2" dump --type fvault2 "$img"
else
    echo "$SHARED/bitlk-images.tar.xz absent: BitLocker cases skipped"
fi
if [[ -f $SHARED/fvault2-images.tar.xz ]]; then
    tar xSJf "$SHARED/fvault2-images.tar.xz" -C "$TMP"
    img=$TMP/fvault2-images/small
    same_as "fvault2 dump" "" -- dump "$img" -- fvault2 dump "$img"
    grep -q "^Header information for FVAULT2 device " "$TMP/top.out" || fail "fvault2: not fvault2Dump's output"
    same_as "fvault2 table" "heslo123" -- table "$img" -- fvault2 table "$img"
    same_bytes "fvault2 decrypt" "heslo123" -- decrypt "$img" -- fvault2 decrypt "$img"
    expect_exit 0 sh -c 'echo heslo123 | "$@"' sh "$BLKCRYPT" open --test-passphrase "$img"
    expect_exit 2 sh -c 'echo wrong | "$@"' sh "$BLKCRYPT" open --test-passphrase "$img" ignored-name
else
    echo "$SHARED/fvault2-images.tar.xz absent: FileVault 2 cases skipped"
fi

# ---- TrueCrypt/VeraCrypt: no signature, --type tcrypt --------------------
if [[ -f $SHARED/tcrypt-images.tar.xz ]]; then
    tar xSJf "$SHARED/tcrypt-images.tar.xz" -C "$TMP"
    img=$TMP/tcrypt/tc_3-ripemd160-xts-serpent
    same_as "tcrypt dump" "aaaaaaaaaaaa" -- dump --type tcrypt --disable-veracrypt -h ripemd160 "$img" -- \
        tcrypt dump --disable-veracrypt -h ripemd160 "$img"
    grep -q "^TCRYPT header information" "$TMP/top.out" || fail "tcrypt: not tcryptDump's output"
    same_bytes "tcrypt decrypt" "aaaaaaaaaaaa" -- decrypt -M tcrypt -h ripemd160 "$img" -- tcrypt decrypt -h ripemd160 "$img"
    vc=$TMP/tcrypt/vc_1-sha256-xts-aes
    same_bytes "veracrypt decrypt --veracrypt" "aaaaaaaaaaaa" -- decrypt --type=tcrypt --veracrypt -h sha256 "$vc" -- \
        tcrypt decrypt --veracrypt -h sha256 "$vc"
    same_as "tcrypt table" "aaaaaaaaaaaa" -- table --type tcrypt -h sha256 "$vc" -- tcrypt table -h sha256 "$vc"
    # Without --type: no signature, refused as cryptsetup luksDump refuses it.
    refused 1 "is not a valid LUKS device.*--type" "tcrypt without --type" dump "$img"
else
    echo "$SHARED/tcrypt-images.tar.xz absent: TrueCrypt cases skipped"
fi

# ---- loop-AES and plain dm-crypt, made here ------------------------------
random_file "$TMP/plain.bin" 1048576
printf 'loop-aes key line %02d 0123456789abcdef\n' $(seq 1 64) >"$TMP/la.keys"
"$BLKCRYPT" loopaes encrypt --key-file "$TMP/la.keys" "$TMP/plain.bin" "$TMP/la.img" || fail "loopaes encrypt"
same_bytes "loopaes decrypt" "" -- decrypt --type loopaes --key-file "$TMP/la.keys" "$TMP/la.img" -- \
    loopaes decrypt --key-file "$TMP/la.keys" "$TMP/la.img"
cmp "$TMP/top.bin" "$TMP/plain.bin" || fail "loopaes decrypt: not the plaintext"
same_as "loopaes table" "" -- table -M loopaes --key-file "$TMP/la.keys" "$TMP/la.img" -- \
    loopaes table --key-file "$TMP/la.keys" "$TMP/la.img"
head -c 64 /dev/urandom >"$TMP/plain.key"
plainopts=(--cipher aes-xts-plain64 --key-size 512 --key-file "$TMP/plain.key")
"$BLKCRYPT" crypt encrypt "${plainopts[@]}" "$TMP/plain.bin" "$TMP/plain.img" || fail "crypt encrypt"
same_bytes "plain decrypt" "" -- decrypt --type plain "${plainopts[@]}" "$TMP/plain.img" -- \
    crypt decrypt "${plainopts[@]}" "$TMP/plain.img"
cmp "$TMP/top.bin" "$TMP/plain.bin" || fail "plain decrypt: not the plaintext"
same_as "plain table" "" -- table --type plain "${plainopts[@]}" "$TMP/plain.img" -- crypt table "${plainopts[@]}" "$TMP/plain.img"
refused 2 "has no header to dump" "plain dump" dump --type plain "$TMP/plain.img"
refused 2 "Option --test-passphrase is allowed only for open of LUKS, TCRYPT, BITLK and FVAULT2 devices." \
    "loopaes test-passphrase" test-passphrase --type loopaes --key-file "$TMP/la.keys" "$TMP/la.img"

# ---- dm-verity: dump reads the superblock --------------------------------
"$BLKCRYPT" verity format "$TMP/plain.bin" "$TMP/hash.img" >/dev/null || fail "verity format"
same_as "verity dump" "" -- dump "$TMP/hash.img" -- verity dump "$TMP/hash.img"
# ---- dm-integrity: dump reads the superblock (one integritysetup formatted) ----
gunzip -c "$(dirname "$0")/../golden/integrity/sha256-odd.head.gz" >"$TMP/integrity.img"
same_as "integrity dump" "" -- dump "$TMP/integrity.img" -- integrity dump "$TMP/integrity.img"
grep -q '^superblock_version' "$TMP/top.out" || fail "integrity: not integritysetup dump's output"
refused 1 "dm-integrity superblock" "integrity decrypt" decrypt "$TMP/integrity.img" "$TMP/never.bin"
refused 1 "dm-verity superblock" "verity decrypt" decrypt "$TMP/hash.img" "$TMP/never.bin"

# ---- no signature, unknown --type, not a file ----------------------------
for cmd in dump test-passphrase table; do
    refused 1 "^blkcrypt: Device $TMP/random.img is not a valid LUKS device. .*--type (luks" "$cmd random" "$cmd" "$TMP/random.img"
done
refused 1 "is not a valid LUKS device" "decrypt random" decrypt "$TMP/random.img" "$TMP/never.bin"
[[ ! -e $TMP/never.bin ]] || fail "decrypt of an image without a signature wrote OUT"
refused 2 "Unrecognized metadata device type foo." "--type foo" dump --type foo "$TMP/random.img"
refused 2 "Unrecognized metadata device type" "serve --type foo" serve --type foo --socket "$TMP/x.sock" "$TMP/random.img"
refused 2 "--type raw is for serve" "dump --type raw" dump --type raw "$TMP/random.img"
refused 2 "unknown option '--bogus'" "unknown option" decrypt --bogus "$TMP/random.img" "$TMP/never.bin"
refused 2 "needs IMAGE" "dump without IMAGE" dump
mkfifo "$TMP/fifo"
mkdir "$TMP/dir"
for bad in fifo dir; do
    for cmd in dump test-passphrase table; do
        refused 4 "Device $TMP/$bad is not compatible" "$cmd $bad" "$cmd" "$TMP/$bad"
    done
    refused 4 "is not compatible" "decrypt $bad" decrypt "$TMP/$bad" "$TMP/never.bin"
    refused 4 "is not compatible" "serve $bad" serve --socket "$TMP/x.sock" "$TMP/$bad"
    refused 4 "is not compatible" "open $bad" open --socket "$TMP/x.sock" "$TMP/$bad" name
done
[[ ! -e $TMP/never.bin ]] || fail "a refused IMAGE wrote OUT"

# ---- help --------------------------------------------------------------
for cmd in dump test-passphrase decrypt table open serve; do
    "$BLKCRYPT" "$cmd" --help >"$TMP/help" || fail "$cmd --help"
    grep -q -- "--type" "$TMP/help" || fail "$cmd --help does not name --type"
done

# ---- open and serve over NBD ---------------------------------------------
if ((HAVE_NBD)); then
    if [[ -f $TMP/l2.orig ]]; then
        "$BLKCRYPT" luks decrypt -d "$TMP/pass" "$TMP/l2.img" "$TMP/l2.plain" || fail "luks decrypt"
        # open IMAGE NAME: NAME is the export's name (the default export is the same one).
        served_equals "open NAME" data "$TMP/l2.plain" open --read-only --socket "$SOCK" -d "$TMP/pass" "$TMP/l2.img" data
        served_equals "open default export" "" "$TMP/l2.plain" open -r --socket "$SOCK" -d "$TMP/pass" "$TMP/l2.img" data
        # cryptsetup's per-type action names: luksOpen is open --type luks.
        served_equals "luksOpen" data "$TMP/l2.plain" luksOpen -r --socket "$SOCK" -d "$TMP/pass" "$TMP/l2.img" data
        served_equals "serve of a LUKS image" "" "$TMP/l2.plain" serve --read-only --socket "$SOCK" -d "$TMP/pass" "$TMP/l2.img"
        served_equals "serve --type raw" "" "$TMP/l2.img" serve --type raw --read-only --socket "$SOCK" "$TMP/l2.img"
        served_equals "open --type raw" raw "$TMP/l2.img" open -M raw --read-only --socket "$SOCK" "$TMP/l2.img" raw
        refused 2 "both name the export" "open NAME --export-name" open --socket "$SOCK" --export-name a -d "$TMP/pass" "$TMP/l2.img" b
        refused 2 "at most one NAME" "open IMAGE NAME EXTRA" open --socket "$SOCK" -d "$TMP/pass" "$TMP/l2.img" b c
        refused 1 "is not a valid LUKS device." "open --type luks1 of LUKS2" open --type luks1 --socket "$SOCK" -d "$TMP/pass" "$TMP/l2.img" b
        [[ ! -e $SOCK ]] || fail "a refused open left its socket"
        expect_exit 0 "$BLKCRYPT" open --test-passphrase -d "$TMP/pass" "$TMP/l1.img"
        # Writes through open land encrypted in the image, and decrypt reads them back.
        cp "$TMP/l1.img" "$TMP/l1-rw.img"
        start_server open --socket "$SOCK" -d "$TMP/pass" "$TMP/l1-rw.img" rw
        head -c 65536 /dev/urandom >"$TMP/chunk"
        T nbdcopy "$TMP/chunk" "nbd+unix:///rw?socket=$SOCK" || fail "open: write through NBD: $(tail -3 "$TMP/log")"
        stop_server
        "$BLKCRYPT" decrypt -d "$TMP/pass" "$TMP/l1-rw.img" "$TMP/l1-rw.plain" || fail "decrypt after open's write"
        cmp -n 65536 "$TMP/l1-rw.plain" "$TMP/chunk" || fail "open: the written bytes do not read back"
        cmp -s "$TMP/l1-rw.img" "$TMP/l1.img" && fail "open: the image did not change"
        python3 -c 'import sys; sys.exit(open(sys.argv[1], "rb").read(512) in open(sys.argv[2], "rb").read())' \
            "$TMP/chunk" "$TMP/l1-rw.img" || fail "open: the plaintext landed unencrypted"
    fi
    if [[ -f $TMP/bitlk.plain ]]; then
        printf 'anaconda\n' >"$TMP/bitlk.pw"
        SERVER_INPUT=$TMP/bitlk.pw served_equals "serve of a BitLocker image" "" "$TMP/bitlk.plain" \
            serve --read-only --socket "$SOCK" "$TMP/bitlk/bitlk-aes-xts-128.img"
    fi
    served_equals "serve --type plain" "" "$TMP/plain.bin" serve -M plain "${plainopts[@]}" --read-only --socket "$SOCK" "$TMP/plain.img"
    served_equals "open --type loopaes" la "$TMP/plain.bin" open --type loopaes --key-file "$TMP/la.keys" -r --socket "$SOCK" "$TMP/la.img" la
    served_equals "loopaesOpen" la "$TMP/plain.bin" loopaesOpen --key-file "$TMP/la.keys" -r --socket "$SOCK" "$TMP/la.img" la
    # No signature: the bytes as they are, as before.
    served_equals "serve of an image without a signature" "" "$TMP/random.img" serve --read-only --socket "$SOCK" "$TMP/random.img"
fi
echo "detect: ok"
