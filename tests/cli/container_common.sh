#!/usr/bin/env bash
# What every container command does the same way (cli/container_common.*,
# cli/passphrase.*, common.hpp's expect), checked for every format: luks1 and
# luks2 (made here by cryptsetup luksFormat), tcrypt, bitlk and fvault2 (the
# shared fixtures, skipped with a note where absent), loop-AES and plain
# `crypt` (made here by blkcrypt; no secret to check, so only the IMAGE and
# serve rules apply):
#  - --tries: a wrong passphrase typed at the terminal is asked again, 3
#    times by default; --tries 1 asks once;
#  - dump --dump-volume-key asks cryptsetup's question before the secret,
#    "no" aborts (exit 1) and -q skips it;
#  - a wrong secret exits 2 and leaves OUT as it was (absent, or unchanged);
#  - IMAGE that is a FIFO, a directory or a socket is refused at once, exit 4
#    ("Device X is not compatible"), in dump, table and serve;
#  - serve --read-only refuses writes; serve without it takes writes that
#    land encrypted: read back by decrypt, and for luks2 and fvault2 by
#    AES-XTS in python3-cryptography with the key cryptsetup prints.
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SHARED=${BLKCRYPT_SHARED_DIR:-$SRC/../shared}/fixtures
source "$(dirname "$0")/nbd_lib.sh"
PTYDIR=$(cd "$(dirname "$0")" && pwd)

# FORMATS: name, the secret-checking command (its IMAGE last), the passphrase.
declare -A CHECK DUMPKEY PASS DECRYPT SERVE
add_format() {  # NAME PASS IMAGE CHECK-ARGS DUMP-ARGS DECRYPT-ARGS SERVE-ARGS (args without IMAGE)
    PASS[$1]=$2
    CHECK[$1]="$4 $3"
    DUMPKEY[$1]="$5 $3"
    DECRYPT[$1]="$6 $3"
    SERVE[$1]="$7"
    IMAGE[$1]=$3
}
declare -A IMAGE
NAMES=()

if command -v cryptsetup >/dev/null; then
    for v in 1 2; do
        truncate -s 20M "$TMP/l$v.img"
        printf 'pw-luks%s' $v | cryptsetup luksFormat -q --type luks$v --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
            --key-file - "$TMP/l$v.img" || fail "cryptsetup luksFormat luks$v"
        add_format luks$v pw-luks$v "$TMP/l$v.img" "luks test-passphrase" "luks dump --dump-volume-key" "luks decrypt" "luks serve"
        NAMES+=(luks$v)
    done
else
    echo "cryptsetup not installed: luks cases skipped"
fi
if [[ -f $SHARED/tcrypt-images.tar.xz ]]; then
    tar xSJf "$SHARED/tcrypt-images.tar.xz" -C "$TMP"
    add_format tcrypt aaaaaaaaaaaa "$TMP/tcrypt/tc_3-ripemd160-xts-serpent" "tcrypt dump --disable-veracrypt -h ripemd160" \
        "tcrypt dump --disable-veracrypt -h ripemd160 --dump-volume-key" "tcrypt decrypt --disable-veracrypt -h ripemd160" \
        "tcrypt serve --disable-veracrypt -h ripemd160"
    NAMES+=(tcrypt)
else
    echo "$SHARED/tcrypt-images.tar.xz absent: tcrypt cases skipped"
fi
if [[ -f $SHARED/bitlk-images.tar.xz ]]; then
    tar xSJf "$SHARED/bitlk-images.tar.xz" -C "$TMP"
    add_format bitlk anaconda "$TMP/bitlk/bitlk-aes-xts-128.img" "bitlk test-passphrase" "bitlk dump --dump-volume-key" \
        "bitlk decrypt" "bitlk serve"
    NAMES+=(bitlk)
else
    echo "$SHARED/bitlk-images.tar.xz absent: bitlk cases skipped"
fi
if [[ -f $SHARED/fvault2-images.tar.xz ]]; then
    tar xSJf "$SHARED/fvault2-images.tar.xz" -C "$TMP"
    add_format fvault2 heslo123 "$TMP/fvault2-images/small" "fvault2 test-passphrase" "fvault2 dump --dump-volume-key" \
        "fvault2 decrypt" "fvault2 serve"
    NAMES+=(fvault2)
else
    echo "$SHARED/fvault2-images.tar.xz absent: fvault2 cases skipped"
fi

# loop-AES and plain: images made here (1 MiB of random plaintext).
random_file "$TMP/plain.bin" 1048576
printf 'loop-aes key line %02d 0123456789abcdef\n' $(seq 1 64) >"$TMP/la.keys"
"$BLKCRYPT" loopaes encrypt --key-file "$TMP/la.keys" "$TMP/plain.bin" "$TMP/la.img" || fail "loopaes encrypt"
PLAINKEY=$(head -c 64 /dev/urandom | od -An -tx1 | tr -d ' \n')
PLAINTABLE="aes-xts-plain64 $PLAINKEY 0"
"$BLKCRYPT" crypt encrypt --table "$PLAINTABLE" "$TMP/plain.bin" "$TMP/plain.img" || fail "crypt encrypt"

# ---- the terminal: --tries and the volume-key question ----------------------
if ((${#NAMES[@]})); then
    args=()
    for n in "${NAMES[@]}"; do args+=("$n" "${PASS[$n]}" "${CHECK[$n]}" "${DUMPKEY[$n]}"); done
    PYTHONPATH=$PTYDIR python3 - "$BLKCRYPT" "${args[@]}" <<'PY' || fail "terminal cases"
import sys
import pty_session
blk, rest = sys.argv[1], sys.argv[2:]
for i in range(0, len(rest), 4):
    name, pw, check, dump = rest[i], rest[i + 1], rest[i + 2].split(), rest[i + 3].split()
    def run(args, replies, prompt="Enter passphrase"):
        return pty_session.run([blk] + args, [(prompt, r) for r in replies], timeout=300)
    # --tries: two wrong passphrases are said so and asked again; the third opens.
    rc, out = run(check, ["bad", "worse", pw])
    assert rc == 0 and out.count("Enter passphrase") == 3, (name, "tries default", rc, out)
    rc, out = run(check, ["bad", "worse", "still bad"])
    assert rc == 2 and out.count("Enter passphrase") == 3, (name, "tries exhausted", rc, out)
    rc, out = run(check[:-1] + ["--tries", "1", check[-1]], ["bad"])
    assert rc == 2 and out.count("Enter passphrase") == 1, (name, "--tries 1", rc, out)
    # The question comes before the secret; anything but YES aborts.
    rc, out = run(dump, ["no"], "capital letters): ")
    assert rc == 1 and "Header dump with volume key is sensitive information" in out, (name, "question", rc, out)
    assert "Operation aborted." in out and "Enter passphrase" not in out, (name, "aborted", rc, out)
    rc, out = pty_session.run([blk] + dump, [("capital letters): ", "YES"), ("Enter passphrase", pw)], timeout=300)
    assert rc == 0 and "capital letters" in out, (name, "YES", rc, out)
    # -q: no question.
    rc, out = run(dump[:-1] + ["-q", dump[-1]], [pw])
    assert rc == 0 and "capital letters" not in out and "Enter passphrase" in out, (name, "-q", rc, out)
    print(name, "terminal cases ok")
PY
fi

# ---- a wrong secret: exit 2, OUT untouched ----------------------------------
for n in "${NAMES[@]}"; do
    read -r -a dec <<<"${DECRYPT[$n]}"
    rm -f "$TMP/out"
    expect_exit 2 sh -c 'echo wrong-secret | "$@"' sh "$BLKCRYPT" "${dec[@]}" "$TMP/out"
    [[ ! -e $TMP/out ]] || fail "$n: a wrong secret left OUT"
    printf 'keep me' >"$TMP/out"
    expect_exit 2 sh -c 'echo wrong-secret | "$@"' sh "$BLKCRYPT" "${dec[@]}" "$TMP/out"
    [[ $(cat "$TMP/out") == "keep me" ]] || fail "$n: a wrong secret changed OUT"
    expect_exit 2 sh -c 'echo wrong-secret | "$@"' sh "$BLKCRYPT" "${dec[@]:0:1}" "${dec[1]}" --in-place "${dec[@]:2}" "$TMP/out"
    [[ $(cat "$TMP/out") == "keep me" ]] || fail "$n: a wrong secret changed OUT --in-place"
    if ls -a "$TMP" | grep -q 'blkcrypt-tmp'; then fail "$n: a temporary file left behind"; fi
done

# ---- IMAGE: a FIFO, a directory, a socket are refused at once ---------------
mkfifo "$TMP/fifo"
mkdir "$TMP/dir"
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$TMP/sock"
refused() {  # WHAT ARGS...: exit 4 within 20 s, naming the device
    expect_exit 4 timeout 20 "$BLKCRYPT" "${@:2}"
    grep_q "is not compatible" <"$TMP/stderr" || fail "$1: $(cat "$TMP/stderr")"
}
for bad in fifo dir sock; do
    for n in "${NAMES[@]}"; do
        read -r -a chk <<<"${CHECK[$n]}"
        read -r -a srv <<<"${SERVE[$n]}"
        refused "$n $bad" "${chk[@]:0:${#chk[@]}-1}" "$TMP/$bad" </dev/null
        refused "$n serve $bad" "${srv[@]}" --socket "$TMP/s2.sock" "$TMP/$bad" </dev/null
    done
    refused "loopaes table $bad" loopaes table --key-file "$TMP/la.keys" "$TMP/$bad"
    refused "loopaes serve $bad" loopaes serve --key-file "$TMP/la.keys" --socket "$TMP/s2.sock" "$TMP/$bad"
    refused "crypt serve $bad" crypt serve --table "$PLAINTABLE" --socket "$TMP/s2.sock" "$TMP/$bad"
done

# ---- serve: --read-only honoured, writes land encrypted ---------------------
need nbdinfo qemu-io nbdcopy
# xts_check IMAGE DATA-OFFSET KEY-HEX AT LEN BYTE SECTOR IV-UNIT: the
# ciphertext of [AT, AT+LEN) of the mapping, at DATA-OFFSET in IMAGE,
# decrypts (aes-xts-plain64, SECTOR-byte sectors, IV = offset in the mapping
# / IV-UNIT) to LEN bytes of BYTE.
xts_check() {
    python3 - "$@" <<'PY'
import sys
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
img, base, key, at, n, byte = sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6], 0)
ss, unit = int(sys.argv[7]), int(sys.argv[8])
with open(img, "rb") as f:
    f.seek(base + at)
    ct = f.read(n)
assert ct != bytes([byte]) * n, "the plaintext is stored as it is"
for s in range(0, n, ss):
    d = Cipher(algorithms.AES(key), modes.XTS(((at + s) // unit).to_bytes(16, "little"))).decryptor()
    pt = d.update(ct[s:s + ss]) + d.finalize()
    assert pt == bytes([byte]) * ss, "the sector at %d decrypts to something else" % (at + s)
PY
}
# key_hex DUMP: the volume key of a cryptsetup key dump, as hex.
key_hex() {
    python3 -c '
import re, sys
on, key = False, ""
for line in sys.stdin:
    if line.startswith(("Volume key:", "MK dump:")):
        on, line = True, line.split(":", 1)[1]
    elif not line[:1].isspace():
        on = False
    if on:
        key += "".join(re.findall(r"\b[0-9a-f]{2}\b", line))
print(key)'
}
for n in "${NAMES[@]}" loopaes plain; do
    AT=131072 LEN=65536
    [[ $n != tcrypt ]] || AT=4096 LEN=8192  # the volume holds 18944 bytes
    case $n in
        loopaes) img=$TMP/la.img srv=(loopaes serve --key-file "$TMP/la.keys") dec=(loopaes decrypt --key-file "$TMP/la.keys") ;;
        plain) img=$TMP/plain.img srv=(crypt serve --table "$PLAINTABLE") dec=(crypt decrypt --table "$PLAINTABLE") ;;
        *) img=${IMAGE[$n]}; read -r -a srv <<<"${SERVE[$n]}"; read -r -a dec <<<"${DECRYPT[$n]}"; dec=("${dec[@]:0:${#dec[@]}-1}") ;;
    esac
    cp "$img" "$TMP/rw.img"
    cp "$img" "$TMP/rw.orig"
    printf '%s\n' "${PASS[$n]:-}" >"$TMP/pw"
    SERVER_INPUT=$TMP/pw start_server "${srv[@]}" --read-only --socket "$SOCK" "$TMP/rw.img"
    T nbdinfo --json "$URI" >"$TMP/info"
    grep_q '"is_read_only": true' <"$TMP/info" || fail "$n: --read-only not advertised"
    T qemu-io -f raw -c "write -P 0x5a $AT $LEN" "$URI" >"$TMP/qemu-io.out" 2>&1 || true
    grep -qi "permitted\|read-only\|permission denied" "$TMP/qemu-io.out" || fail "$n: a write with --read-only: $(cat "$TMP/qemu-io.out")"
    stop_server TERM
    cmp "$TMP/rw.img" "$TMP/rw.orig" || fail "$n: --read-only changed the image"
    SERVER_INPUT=$TMP/pw start_server "${srv[@]}" --socket "$SOCK" "$TMP/rw.img"
    T nbdinfo --json "$URI" >"$TMP/info"
    grep_q '"is_read_only": false' <"$TMP/info" || fail "$n: serve is read-only without --read-only"
    T qemu-io -f raw -c "write -P 0x5a $AT $LEN" -c "flush" "$URI" >"$TMP/qemu-io.out" 2>&1 || fail "$n: write: $(cat "$TMP/qemu-io.out")"
    stop_server TERM
    # The plaintext: what it was, but for the bytes written.
    "$BLKCRYPT" "${dec[@]}" "$TMP/rw.orig" "$TMP/before.bin" <"$TMP/pw" || fail "$n: decrypt before"
    "$BLKCRYPT" "${dec[@]}" "$TMP/rw.img" "$TMP/after.bin" <"$TMP/pw" || fail "$n: decrypt after"
    python3 - "$TMP/before.bin" "$TMP/after.bin" $AT $LEN <<'PY' || fail "$n: the plaintext after the write"
import sys
a, b = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
at, n = int(sys.argv[3]), int(sys.argv[4])
assert len(a) == len(b)
assert b[at:at + n] == b"\x5a" * n, "the written bytes do not read back"
assert a[:at] == b[:at] and a[at + n:] == b[at + n:], "bytes outside the write changed"
PY
    case $n in
        luks2)
            key=$(printf 'pw-luks2' | cryptsetup luksDump --dump-volume-key -q --key-file - "$TMP/rw.img" | key_hex)
            cryptsetup luksDump "$TMP/rw.img" >"$TMP/dump"
            off=$(awk '/^\toffset: *[0-9]+ \[bytes\]/ { print $2; exit }' "$TMP/dump")
            ss=$(awk '/^\tsector: *[0-9]+ \[bytes\]/ { print $2; exit }' "$TMP/dump")
            xts_check "$TMP/rw.img" "$off" "$key" $AT $LEN 0x5a "$ss" 512 || fail "$n: not the ciphertext cryptsetup's key decrypts" ;;
        fvault2)
            key=$(echo heslo123 | cryptsetup fvault2Dump --dump-volume-key "$TMP/rw.img" | key_hex)
            off=$(cryptsetup fvault2Dump "$TMP/rw.img" | sed -n 's/^Logical volume offset:[[:space:]]*\([0-9]*\) .*/\1/p')
            xts_check "$TMP/rw.img" "$off" "$key" $AT $LEN 0x5a 512 512 || fail "$n: not the ciphertext cryptsetup's key decrypts" ;;
        bitlk)
            cryptsetup bitlkDump "$TMP/rw.img" | cmp - <(cryptsetup bitlkDump "$TMP/rw.orig" | sed "s|rw.orig|rw.img|") || fail "$n: the metadata changed"
            key=$(echo anaconda | cryptsetup bitlkDump --dump-volume-key "$TMP/rw.img" | key_hex)
            xts_check "$TMP/rw.img" 0 "$key" $AT $LEN 0x5a 512 512 || fail "$n: not the ciphertext cryptsetup's key decrypts" ;;
    esac
    echo "$n serve ok"
done
echo "== the container driver: test-passphrase and decrypt's progress in every format (cli/container_driver.cpp)"
for n in "${NAMES[@]}"; do
    [[ $n == tcrypt || $n == bitlk || $n == fvault2 || $n == luks? ]] || continue
    read -r -a dec <<<"${DECRYPT[$n]}"
    opts=("${dec[@]:2:${#dec[@]}-3}")  # the format's own options, without the action and IMAGE
    img=${IMAGE[$n]}
    printf '%s\n' "${PASS[$n]}" | "$BLKCRYPT" "${dec[0]}" test-passphrase "${opts[@]}" "$img" || fail "$n: test-passphrase of the right secret"
    expect_exit 2 "$BLKCRYPT" "${dec[0]}" test-passphrase "${opts[@]}" "$img" <<<"wrong-secret"
    printf '%s\n' "${PASS[$n]}" | "$BLKCRYPT" "${dec[@]}" --progress-json "$TMP/dec.bin" >"$TMP/progress" ||
        fail "$n: decrypt --progress-json"
    size=$(stat -c %s "$TMP/dec.bin")
    tail -n 1 "$TMP/progress" | grep_q "\"device_bytes\":\"$size\"" || fail "$n: no final progress line of $size bytes: $(tail -n 1 "$TMP/progress")"
    printf '%s\n' "${PASS[$n]}" >"$TMP/pwfile"
    "$BLKCRYPT" "${dec[0]}" test-passphrase "${opts[@]}" --passphrase-file "$TMP/pwfile" "$img" </dev/null ||
        fail "$n: test-passphrase --passphrase-file"
done
# loop-AES decrypt is what its table maps: whole sectors after --offset
# (cryptsetup's mapping of a file whose size is not a multiple of 512).
head -c 1000 /dev/urandom >>"$TMP/la.img"
"$BLKCRYPT" loopaes decrypt --key-file "$TMP/la.keys" "$TMP/la.img" "$TMP/la.dec" || fail "loopaes decrypt of a ragged image"
[[ $(stat -c %s "$TMP/la.dec") == $((1048576 + 512)) ]] || fail "loopaes decrypt: $(stat -c %s "$TMP/la.dec") bytes"
cmp -n 1048576 "$TMP/la.dec" "$TMP/plain.bin" || fail "loopaes decrypt of a ragged image: not the plaintext"
echo "container_common: ok (${NAMES[*]} loopaes plain)"
