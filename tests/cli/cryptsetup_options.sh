#!/bin/bash
# cryptsetup's option names on the container commands: every name that
# cryptsetup 2.6.1 accepts for the matching action (tcryptDump, bitlkDump,
# fvault2Dump, luksDump, open --type ...; the lists below were taken by running
# cryptsetup) is known to blkcrypt: accepted, or refused with a reason
# (docs/cryptsetup-options.md), never "unknown option". Then real runs: the
# no-op names change nothing, the aliases are the options they name, and
# --test-args runs nothing.
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)

# The names cryptsetup 2.6.1 accepts with tcryptDump / bitlkDump / luksDump
# (all but the tcrypt-only ones are global), with a value where one is taken.
GLOBAL=(--active-name=x --block-size=4 --cipher=aes --hash=sha256 --header-backup-file=/nonexistent
        --json-file=/nonexistent --key-description=x --new-keyfile-offset=1 --new-keyfile-size=1 --pbkdf-memory=1000
        --pbkdf-parallel=1 --progress-frequency=1 --reduce-device-size=1M --resilience=none --resilience-hash=sha256
        --timeout=1 --token-id=0 --token-type=x --tries=1 --batch-mode --debug --debug-json --decrypt
        --disable-external-tokens --disable-keyring --disable-locks --dump-json-metadata --encrypt --force-password
        --init-only --integrity-legacy-padding --integrity-no-journal --perf-no_read_workqueue
        --perf-no_write_workqueue --perf-same_cpu_crypt --perf-submit_from_crypt_cpus --readonly --resume-only
        --test-args --token-only --use-directio --use-fsync --veracrypt --verbose --verify-passphrase --write-log
        -q -v)
# Names that take their meaning from our option of that name, or are refused
# with a reason: known, but not a no-op; checked separately below.
MEANINGFUL=(--header=/nonexistent --keyfile-offset=1 --keyfile-size=1 --volume-key-file=/nonexistent
            --master-key-file=/nonexistent --dump-volume-key --dump-master-key
            # open --type ... only
            --allow-discards --persistent --refresh --serialize-memory-hard-pbkdf --iv-large-sectors --shared
            --device-size=1M --size=8 --key-size=256 --key-slot=0)

# known CMD ACTION OPTION [ARGS]: exit 0 with --test-args, or a refusal that
# names the option (not "unknown option").
known() {
    local cmd=$1 action=$2 opt=$3
    shift 3
    "$BLKCRYPT" "$cmd" "$action" --test-args "$opt" "$@" >"$TMP/out" 2>"$TMP/err" && return 0
    grep -q "unknown option\|unrecognised" "$TMP/err" && fail "$cmd $action: $opt is unknown: $(cat "$TMP/err")"
    name=${opt%%=*} ours=${opt%%=*}
    case $name in  # cryptsetup's aliases may be refused by our name
    --readonly) ours=--read-only ;;
    --dump-master-key) ours=--dump-volume-key ;;
    --master-key-file) ours=--volume-key-file ;;
    esac
    grep -qF -e "$name" -e "$ours" "$TMP/err" || fail "$cmd $action $opt refused without naming it: $(cat "$TMP/err")"
}
for cmd_action in "tcrypt dump" "tcrypt decrypt" "tcrypt serve" "bitlk dump" "bitlk test-passphrase" "bitlk decrypt" \
                  "fvault2 dump" "fvault2 test-passphrase" "fvault2 decrypt" "luks dump" "luks test-passphrase" \
                  "luks decrypt" "luks is-luks" "luks uuid" "luks add-key" "loopaes table" "loopaes decrypt" \
                  "crypt decrypt" "crypt table"; do
    read -r cmd action <<<"$cmd_action"
    for o in "${GLOBAL[@]}" "${MEANINGFUL[@]}"; do known "$cmd" "$action" "$o"; done
done
# The no-ops: accepted by every action (these were refused before).
for cmd_action in "tcrypt dump" "bitlk dump" "fvault2 dump" "luks dump" "luks test-passphrase" "luks encrypt" \
                  "loopaes table" "crypt table"; do
    read -r cmd action <<<"$cmd_action"
    for o in --veracrypt --disable-locks --disable-keyring --debug --verbose --timeout=5 --allow-discards \
             --perf-same_cpu_crypt --perf-no_read_workqueue --batch-mode -q; do
        "$BLKCRYPT" "$cmd" "$action" --test-args "$o" 2>"$TMP/err" || fail "$cmd $action $o refused: $(cat "$TMP/err")"
    done
done
# --type names the command's own format only.
"$BLKCRYPT" tcrypt dump --test-args --type tcrypt || fail "tcrypt --type tcrypt"
"$BLKCRYPT" crypt table --test-args --type plain || fail "crypt --type plain"
expect_exit 2 "$BLKCRYPT" bitlk dump --type luks2 x.img
grep_q -x "blkcrypt: --type luks2: this command reads bitlk only" <"$TMP/stderr" || fail "--type message: $(cat "$TMP/stderr")"
# The refused ones say why.
expect_exit 2 "$BLKCRYPT" bitlk dump --header h.img x.img
grep_q -x "blkcrypt: --header: a detached header is not supported for this format" <"$TMP/stderr" ||
    fail "--header message: $(cat "$TMP/stderr")"
# --test-args does nothing: not even the missing image is noticed.
"$BLKCRYPT" bitlk dump --test-args "$TMP/absent.img" || fail "--test-args ran the command"

# Real runs on a LUKS2 container: no-ops change nothing, -q on encrypt --format.
printf 'pw' >"$TMP/pw"
PBKDF2=(--pbkdf pbkdf2 --pbkdf-force-iterations 1000)
head -c 1M /dev/urandom >"$TMP/in.bin"
"$BLKCRYPT" luks encrypt --format -q --key-file "$TMP/pw" "${PBKDF2[@]}" "$TMP/in.bin" "$TMP/c.img" ||
    fail "luks encrypt --format -q"
"$BLKCRYPT" luks dump "$TMP/c.img" >"$TMP/want"
"$BLKCRYPT" luks dump --disable-locks --debug --timeout 3 --perf-same_cpu_crypt -q -v "$TMP/c.img" >"$TMP/got" ||
    fail "luks dump with no-op options"
cmp "$TMP/want" "$TMP/got" || fail "no-op options changed luks dump"
"$BLKCRYPT" luks dump --dump-volume-key -q --key-file "$TMP/pw" "$TMP/c.img" >"$TMP/want"
"$BLKCRYPT" luks dump --dump-master-key -q --key-file "$TMP/pw" "$TMP/c.img" >"$TMP/got"
cmp "$TMP/want" "$TMP/got" || fail "--dump-master-key is not --dump-volume-key"
grep_q "^MK dump:" <"$TMP/got" || fail "--dump-master-key printed no key"
"$BLKCRYPT" luks test-passphrase -q --disable-keyring --key-file "$TMP/pw" "$TMP/c.img" || fail "test-passphrase -q"

# The headline: tcrypt --veracrypt on a VeraCrypt fixture (skipped without it).
FIX=${BLKCRYPT_SHARED_DIR:-$SRC/../shared}/fixtures/tcrypt-images.tar.xz
if [[ -f $FIX ]]; then
    tar xSJf "$FIX" -C "$TMP" tcrypt/vc_1-sha256-xts-aes
    img=$TMP/tcrypt/vc_1-sha256-xts-aes
    echo aaaaaaaaaaaa | "$BLKCRYPT" tcrypt dump -h sha256 "$img" >"$TMP/want" || fail "tcrypt dump"
    echo aaaaaaaaaaaa | "$BLKCRYPT" tcrypt dump --veracrypt -h sha256 "$img" >"$TMP/got" || fail "tcrypt dump --veracrypt"
    cmp "$TMP/want" "$TMP/got" || fail "--veracrypt changed tcrypt dump"
else
    echo "$FIX absent: the tcrypt --veracrypt run is skipped"
fi
echo "cryptsetup option tests passed"
