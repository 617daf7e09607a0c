#!/bin/bash
# The luks actions' argument checks (and crypt, loopaes): key files refused as
# the header a command writes, exit statuses compared with cryptsetup 2.6 run
# live (fixed values where it is missing), `dump -`, `help luksFormat`, the
# header backup's mode, and the bytes before --offset in an existing OUT kept
# (a new OUT gets a hole there).
source "$(dirname "$0")/lib.sh"
FAST=(--pbkdf pbkdf2 --pbkdf-force-iterations 1000)
have_cs=0
command -v cryptsetup >/dev/null && have_cs=1

printf 'pass' >"$TMP/pass"
printf 'second' >"$TMP/p2"
truncate -s 20M "$TMP/img"
expect_exit 0 "$BLKCRYPT" luks format -q "${FAST[@]}" --key-file "$TMP/pass" "$TMP/img"

# --- format: the key file is neither IMAGE nor --header; --header is not IMAGE.
cp "$TMP/pass" "$TMP/kf"
expect_exit 2 "$BLKCRYPT" luks format -q "${FAST[@]}" --key-file "$TMP/kf" "$TMP/kf"
expect_one_error_line
grep_q "IMAGE '$TMP/kf' is the key file" <"$TMP/stderr" || fail "format IMAGE = key file: $(cat "$TMP/stderr")"
cmp -s "$TMP/kf" "$TMP/pass" || fail "the key file was overwritten"
truncate -s 4M "$TMP/data"
expect_exit 2 "$BLKCRYPT" luks format -q "${FAST[@]}" --header "$TMP/kf" --key-file "$TMP/kf" "$TMP/data"
grep_q "header '$TMP/kf' is the key file" <"$TMP/stderr" || fail "format --header = key file: $(cat "$TMP/stderr")"
cmp -s "$TMP/kf" "$TMP/pass" || fail "the key file was overwritten as a header"
expect_exit 2 "$BLKCRYPT" luks format -q "${FAST[@]}" --header "$TMP/data" --key-file "$TMP/pass" "$TMP/data"
grep_q "header '$TMP/data' is IMAGE" <"$TMP/stderr" || fail "format --header X X: $(cat "$TMP/stderr")"
ln -s "$TMP/kf" "$TMP/kflink"
expect_exit 2 "$BLKCRYPT" luks format -q "${FAST[@]}" --key-file "$TMP/kflink" "$TMP/kf"   # through a symlink
head -c 64 /dev/urandom >"$TMP/vk"
cp "$TMP/vk" "$TMP/vk0"
expect_exit 2 "$BLKCRYPT" luks format -q "${FAST[@]}" --key-file "$TMP/pass" --volume-key-file "$TMP/vk" "$TMP/vk"
cmp -s "$TMP/vk" "$TMP/vk0" || fail "the volume key file was overwritten"
# A new detached header named as the key file (neither exists yet): refused, nothing created.
expect_exit 2 "$BLKCRYPT" luks format -q "${FAST[@]}" --header "$TMP/newhdr" --key-file "$TMP/newhdr" "$TMP/data"
[[ ! -e $TMP/newhdr ]] || fail "a header file was created"
# A detached header of its own still works.
expect_exit 0 "$BLKCRYPT" luks format -q "${FAST[@]}" --header "$TMP/hdr" --key-file "$TMP/pass" "$TMP/data"
expect_exit 0 "$BLKCRYPT" luks test-passphrase --header "$TMP/hdr" --key-file "$TMP/pass" "$TMP/data"

# --- keyslot actions: IMAGE or the header is no key file (it changes with the write).
cp "$TMP/img" "$TMP/img0"
expect_exit 2 "$BLKCRYPT" luks add-key "${FAST[@]}" --key-file "$TMP/pass" "$TMP/img" "$TMP/img"
grep_q "IMAGE '$TMP/img' is the new key file" <"$TMP/stderr" || fail "add-key IMAGE IMAGE: $(cat "$TMP/stderr")"
cmp -s "$TMP/img" "$TMP/img0" || fail "add-key changed IMAGE"
expect_exit 2 "$BLKCRYPT" luks add-key "${FAST[@]}" --header "$TMP/hdr" --key-file "$TMP/pass" "$TMP/data" "$TMP/hdr"
expect_exit 2 "$BLKCRYPT" luks change-key "${FAST[@]}" --key-file "$TMP/pass" "$TMP/img" "$TMP/img"
expect_exit 2 "$BLKCRYPT" luks remove-key -q "$TMP/img" "$TMP/img"
expect_exit 2 "$BLKCRYPT" luks kill-slot -q --key-file "$TMP/img" "$TMP/img" 0
expect_exit 2 "$BLKCRYPT" luks token import --json-file "$TMP/img" "$TMP/img"
cmp -s "$TMP/img" "$TMP/img0" || fail "a keyslot action changed IMAGE"
expect_exit 0 "$BLKCRYPT" luks add-key "${FAST[@]}" --key-file "$TMP/pass" "$TMP/img" "$TMP/p2"

# --- exit statuses as cryptsetup's (checked live where it is installed).
head -c 10 /dev/urandom >"$TMP/k10"
head -c 10 /dev/urandom >"$TMP/vk10"
cs_status() {  # cs_status WANT CRYPTSETUP-ARGS...: cryptsetup's status, or WANT without it
    local want=$1 rc=0
    shift
    if [[ $have_cs == 1 ]]; then cryptsetup "$@" >/dev/null 2>&1 </dev/null || rc=$?; echo "$rc"; else echo "$want"; fi
}
check_status() {  # check_status "BLKCRYPT ARGS" "CRYPTSETUP ARGS" WANT
    local -a ours theirs
    read -ra ours <<<"$1"
    read -ra theirs <<<"$2"
    local want
    want=$(cs_status "$3" "${theirs[@]}")
    [[ $want == "$3" ]] || fail "cryptsetup ${theirs[*]} exits $want, not $3"
    expect_exit "$want" "$BLKCRYPT" "${ours[@]}" </dev/null
}
I=$TMP/img
check_status "luks test-passphrase -l 100 --key-file $TMP/k10 $I" "open --test-passphrase -l 100 --key-file $TMP/k10 $I" 1
check_status "luks test-passphrase --keyfile-offset 100 --key-file $TMP/k10 $I" "open --test-passphrase --keyfile-offset 100 --key-file $TMP/k10 $I" 1
# An offset past what off_t holds, on stdin (cryptsetup: "Cannot seek to requested keyfile offset.", 1).
expect_exit 1 "$BLKCRYPT" luks test-passphrase --keyfile-offset 18446744073709551615 --key-file - "$I" <"$TMP/k10"
grep_q -- "stdin: --keyfile-offset 18446744073709551615 is past the end" <"$TMP/stderr" || fail "huge offset: $(cat "$TMP/stderr")"
if [[ $have_cs == 1 ]]; then
    rc=0
    cryptsetup open --test-passphrase --keyfile-offset 18446744073709551615 --key-file - "$I" <"$TMP/k10" 2>/dev/null || rc=$?
    [[ $rc == 1 ]] || fail "cryptsetup exits $rc for the huge offset"
fi
check_status "luks test-passphrase --key-file /dev/null $I" "open --test-passphrase --key-file /dev/null $I" 1
check_status "luks add-key ${FAST[*]} --volume-key-file $TMP/vk10 $I $TMP/p2" "luksAddKey -q ${FAST[*]} --volume-key-file $TMP/vk10 $I $TMP/p2" 1
check_status "luks add-key ${FAST[*]} -S 1 --key-file $TMP/pass $I $TMP/p2" "luksAddKey -q ${FAST[*]} -S 1 --key-file $TMP/pass $I $TMP/p2" 1
check_status "luks kill-slot -q --key-file $TMP/pass $I 5" "luksKillSlot -q --key-file $TMP/pass $I 5" 1
check_status "luks test-passphrase --key-file $TMP/p2 -S 0 $I" "open --test-passphrase --key-file $TMP/p2 -S 0 $I" 2
check_status "luks is-luks $TMP/nonexist" "isLuks $TMP/nonexist" 4
grep_q "Device $TMP/nonexist does not exist or access denied." <"$TMP/stderr" || fail "is-luks nonexist: $(cat "$TMP/stderr")"
check_status "luks dump $TMP/nonexist" "luksDump $TMP/nonexist" 4
check_status "luks is-luks $TMP/pass" "isLuks $TMP/pass" 1
[[ ! -s $TMP/stderr ]] || fail "is-luks of a non-LUKS file is not silent"
# Deliberately safer than cryptsetup (docs/exit-status.md): kill-slot with
# nothing on stdin removes no slot.
cp "$I" "$TMP/img1"
expect_exit 1 "$BLKCRYPT" luks kill-slot -q "$TMP/img1" 1 </dev/null
cmp -s "$TMP/img1" "$I" || fail "kill-slot with empty stdin changed IMAGE"

# --- stdin is no IMAGE for dump, as for bitlk and tcrypt.
expect_exit 2 "$BLKCRYPT" luks dump - <"$I"
grep_q "IMAGE cannot be stdin" <"$TMP/stderr" || fail "luks dump -: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" fvault2 dump - <"$I"
grep_q "IMAGE cannot be stdin" <"$TMP/stderr" || fail "fvault2 dump -: $(cat "$TMP/stderr")"

# --- help through cryptsetup's names; luks --help names every alias.
expect_exit 0 "$BLKCRYPT" help luksFormat
cp "$TMP/stdout" "$TMP/help1"
expect_exit 0 "$BLKCRYPT" luksFormat --help
cmp -s "$TMP/stdout" "$TMP/help1" || fail "help luksFormat differs from luksFormat --help"
grep_q -- "--pbkdf-force-iterations" <"$TMP/help1" || fail "help luksFormat: no luks options"
expect_exit 0 "$BLKCRYPT" help bitlkDump
grep_q "BitLocker" <"$TMP/stdout" || fail "help bitlkDump: $(cat "$TMP/stdout")"
expect_exit 2 "$BLKCRYPT" help luksNoSuch
expect_exit 0 "$BLKCRYPT" luks --help
grep_q "convert, config, token" <"$TMP/stdout" || fail "luks --help does not list token"

# --- header-backup: 0400, as cryptsetup makes it.
expect_exit 0 "$BLKCRYPT" luks header-backup --header-backup-file "$TMP/bk" "$I"
[[ $(stat -c %a "$TMP/bk") == 400 ]] || fail "header backup mode $(stat -c %a "$TMP/bk")"
if [[ $have_cs == 1 ]]; then
    cryptsetup luksHeaderBackup --header-backup-file "$TMP/bk-cs" "$I"
    [[ $(stat -c %a "$TMP/bk-cs") == 400 ]] || fail "cryptsetup's backup is not 0400 here"
fi

# --- a truncated container is damaged (1), not a usage error.
head -c 3000000 "$I" >"$TMP/trunc"
expect_exit 1 "$BLKCRYPT" luks decrypt --key-file "$TMP/pass" "$TMP/trunc" "$TMP/out"
grep_q "truncated or damaged container" <"$TMP/stderr" || fail "truncated: $(cat "$TMP/stderr")"

# --- crypt / loopaes encrypt --offset: an existing OUT keeps its prefix, a new one gets a hole.
head -c 32 /dev/urandom >"$TMP/kk"
head -c 1M /dev/urandom >"$TMP/fs"
head -c 2M /dev/urandom >"$TMP/old"
C=(--cipher aes-xts-plain64 --key-size 256 --key-file "$TMP/kk")
cp "$TMP/old" "$TMP/ex"
expect_exit 0 "$BLKCRYPT" crypt encrypt "${C[@]}" -o 8 "$TMP/fs" "$TMP/ex"
cmp -s -n 4096 "$TMP/ex" "$TMP/old" || fail "crypt encrypt -o 8 did not keep OUT's first 4 KiB"
[[ $(stat -c %s "$TMP/ex") == $((4096 + 1048576)) ]] || fail "crypt encrypt -o 8: size $(stat -c %s "$TMP/ex")"
expect_exit 0 "$BLKCRYPT" crypt decrypt "${C[@]}" -o 8 "$TMP/ex" "$TMP/back"
cmp -s "$TMP/back" "$TMP/fs" || fail "crypt -o 8 round trip"
# 1 GiB before the data: a hole, not 1 GiB of written zeros.
expect_exit 0 "$BLKCRYPT" crypt encrypt "${C[@]}" -o 2097152 "$TMP/fs" "$TMP/new"
[[ $(stat -c %s "$TMP/new") == $((1073741824 + 1048576)) ]] || fail "new OUT size $(stat -c %s "$TMP/new")"
(( $(stat -c %b "$TMP/new") * $(stat -c %B "$TMP/new") < 8 * 1048576 )) ||
    fail "the prefix of a new OUT is allocated: $(stat -c %b "$TMP/new") blocks"
expect_exit 0 "$BLKCRYPT" crypt decrypt "${C[@]}" -o 2097152 "$TMP/new" "$TMP/back"
cmp -s "$TMP/back" "$TMP/fs" || fail "crypt -o 2097152 round trip"
# Through a file: under pipefail, head closing the pipe early would fail the script.
head -c 4096 /dev/urandom | base64 -w 32 >"$TMP/la.b64"
head -n 65 "$TMP/la.b64" >"$TMP/la.key"
cp "$TMP/old" "$TMP/ex"
expect_exit 0 "$BLKCRYPT" loopaes encrypt --key-file "$TMP/la.key" --offset 8 "$TMP/fs" "$TMP/ex"
cmp -s -n 4096 "$TMP/ex" "$TMP/old" || fail "loopaes encrypt --offset 8 did not keep OUT's first 4 KiB"
expect_exit 0 "$BLKCRYPT" loopaes decrypt --key-file "$TMP/la.key" --offset 8 "$TMP/ex" "$TMP/back"
cmp -s "$TMP/back" "$TMP/fs" || fail "loopaes --offset 8 round trip"

# --- messages name the option given.
expect_exit 2 "$BLKCRYPT" crypt encrypt "${C[@]}" -o 36028797018963967 "$TMP/fs" "$TMP/x"
grep_q -- "--offset is too large" <"$TMP/stderr" || fail "-o too large: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" crypt encrypt "${C[@]}" --sector-size 1000 "$TMP/fs" "$TMP/x"
grep_q -- "^blkcrypt: --sector-size 1000" <"$TMP/stderr" || fail "--sector-size 1000: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" crypt table --cipher aes-xts-plain64 --key-file "$TMP/kk"
grep_q -- "needs --device PATH" <"$TMP/stderr" || fail "crypt table without --device: $(cat "$TMP/stderr")"
expect_exit 0 "$BLKCRYPT" crypt --help
grep_q -- " --device PATH \[--size" <"$TMP/stdout" || fail "crypt --help shows --device as optional"
echo "luks_actions: ok"
