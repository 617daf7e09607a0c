#!/bin/bash
# blkcrypt reencrypt / repair against cryptsetup 2.6.1 (run live: skipped
# without it): every option cryptsetup takes with reencrypt is known; a
# re-key (checksum, journal, none; new cipher, key size, sector size) keeps
# the plaintext; a reencryption initialised or crashed by either tool is
# repaired and resumed by the other; LUKS1 re-key and cryptsetup's non-root
# LUKS\xde\xad leftover; a second run at once (the lock), a wrong passphrase,
# a full disk, an image that shrank and cryptsetup's mangled-metadata cases
# fail with a clear message and nothing lost; an integrity profile, which
# cryptsetup refuses, is re-keyed.
source "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
BLKCRYPT=$(readlink -f "$BLKCRYPT")
command -v cryptsetup >/dev/null || { echo "cryptsetup not installed: reencrypt tests skipped"; exit 0; }
trap '[[ $BASHPID != "$$" ]] || { umount "$TMP/small" 2>/dev/null || true; rm -rf "$TMP"; }' EXIT
CS=(cryptsetup reencrypt -q --disable-locks --force-offline-reencrypt)
MiB=$((1024 * 1024))
printf pw >"$TMP/pw"
random_file "$TMP/plain" $((12 * MiB))

# fresh TYPE IMG [cryptsetup luksFormat args]: a container of $TMP/plain.
fresh() {
    local type=$1 img=$2
    shift 2
    rm -f "$img"
    truncate -s $((32 * MiB)) "$img"
    cryptsetup luksFormat -q --type "$type" --pbkdf pbkdf2 --pbkdf-force-iterations 1000 "$@" "$img" "$TMP/pw" ||
        fail "luksFormat $type $*"
    "$BLKCRYPT" luks encrypt --key-file "$TMP/pw" "$TMP/plain" "$img" 2>/dev/null || fail "luks encrypt"
}
# same IMG WHAT: the plaintext is still $TMP/plain.
same() {
    "$BLKCRYPT" luks decrypt --key-file "$TMP/pw" "$1" "$TMP/out" || fail "$2: decrypt"
    cmp -s -n $((12 * MiB)) "$TMP/plain" "$TMP/out" || fail "$2: the plaintext changed"
}
digest() { sha256sum "$1" | cut -d' ' -f1; }
state() { cryptsetup luksDump "$1" 2>/dev/null | grep -c "in-reencryption\|online-reencrypt" || true; }
IMG=$TMP/img
# done_bytes IMG: bytes already re-keyed (the first segment's length), or
# nothing when no step has landed or the run is over.
done_bytes() {
    cryptsetup luksDump --disable-locks "$1" 2>/dev/null | sed -n '/^Data segments:/,/^Keyslots:/p' |
        sed -n 's/^\tlength: \([0-9]*\) .*/\1/p' | head -1
}
# interrupt PID IMG: SIGINT once a step has landed (polled, not slept, so a
# fast machine still stops mid-way); a run already over is left alone.
interrupt() {
    for _ in $(seq 400); do
        kill -0 "$1" 2>/dev/null || return 0
        [[ -n $(done_bytes "$2") ]] && break
        sleep 0.01
    done
    kill -INT "$1" 2>/dev/null || true
}

# --- 1. every option cryptsetup 2.6.1 takes with reencrypt is known here
# (accepted, or refused naming it, never "unknown option"), as is repair's.
OPTS=(--batch-mode --debug --debug-json --decrypt --disable-external-tokens --disable-keyring --disable-locks
      --dump-json-metadata --dump-master-key --dump-volume-key --encrypt --force-offline-reencrypt --force-password
      --init-only --integrity-legacy-padding --integrity-no-journal --integrity-no-wipe --keep-key --new
      --perf-no_read_workqueue --perf-no_write_workqueue --perf-same_cpu_crypt --perf-submit_from_crypt_cpus
      --progress-json --readonly --resume-only --token-only --use-directio --use-fsync --use-random --use-urandom
      --veracrypt --veracrypt-query-pim --verbose --verify-passphrase --write-log --active-name=x
      --align-payload=1 --block-size=1 --cipher=aes-xts-plain64 --hash=sha256 --header=/nonexistent
      --header-backup-file=x --hotzone-size=1M --integrity=hmac-sha256 --iter-time=1 --json-file=x
      --key-description=x --key-file=x --key-slot=1 --keyfile-offset=1 --keyfile-size=1 --label=x
      --luks2-keyslots-size=1M --luks2-metadata-size=16k --master-key-file=x --new-keyfile-offset=1
      --new-keyfile-size=1 --offset=1 --pbkdf-force-iterations=1000 --pbkdf-memory=1000 --pbkdf-parallel=1
      --progress-frequency=1 --resilience=journal --resilience-hash=sha256 --subsystem=x --timeout=1 --token-id=1
      --token-type=x --tries=1 --type=luks2 --uuid=x --volume-key-file=x --key-size=256 --sector-size=4096
      --pbkdf=pbkdf2 --reduce-device-size=32M --device-size=1M -q -v -N -caes -s256 -S1 -dx -l1 -B4 -T1
      -Mluks2 -r -y -i1 -hsha256 -o1)
for o in "${OPTS[@]}"; do
    cryptsetup reencrypt --test-args "$o" "$TMP/plain" >/dev/null 2>&1 </dev/null ||
        [[ $o == --active-name=x || $o == --integrity=hmac-sha256 ]] || fail "cryptsetup refuses $o: list out of date"
    rc=0
    "$BLKCRYPT" reencrypt --test-args "$o" "$TMP/plain" >/dev/null 2>"$TMP/err" </dev/null || rc=$?
    [[ $rc == 0 ]] || grep -q -- "${o%%=*}" "$TMP/err" || fail "reencrypt $o: $(cat "$TMP/err")"
    ! grep -qi "unrecognised\|unknown option" "$TMP/err" || fail "reencrypt $o unknown: $(cat "$TMP/err")"
done
for o in --disable-locks --header=x --key-file=x --batch-mode --type=luks2 --token-id=1 --resilience=journal; do
    expect_exit 0 "$BLKCRYPT" repair --test-args "$o" "$TMP/plain"
done
# cryptsetup refuses these with reencrypt; so do we.
for o in --priority=normal --new-key-slot=1 --size=1 --skip=1; do
    expect_exit nonzero "$BLKCRYPT" reencrypt --test-args "$o" "$TMP/plain"
done
expect_exit 2 "$BLKCRYPT" reencrypt --encrypt --decrypt "$TMP/plain"
expect_exit 2 "$BLKCRYPT" reencrypt --init-only --resume-only "$TMP/plain"

# --- 2. re-key: each resilience, a new cipher / key size / sector size; the
# result is a clean LUKS2 header (cryptsetup reads it and its passphrase).
for args in "--resilience checksum" "--resilience journal --hotzone-size 1M" "--resilience none" \
            "-c serpent-xts-plain64 -s 256" "--sector-size 512 --hotzone-size 3M" "-c aes-cbc-essiv:sha256 -s 256"; do
    fresh luks2 "$IMG"
    # shellcheck disable=SC2086
    expect_exit 0 "$BLKCRYPT" reencrypt --key-file "$TMP/pw" $args "$IMG"
    same "$IMG" "re-key $args"
    [[ $(state "$IMG") == 0 ]] || fail "re-key $args left reencryption metadata"
    cryptsetup open --test-passphrase --key-file "$TMP/pw" "$IMG" || fail "re-key $args: cryptsetup cannot unlock"
done
cryptsetup luksDump "$IMG" | grep -q "cipher: aes-cbc-essiv:sha256" || fail "the new cipher is not in the header"
# The alias, and a second passphrase kept under --key-slot only.
fresh luks2 "$IMG"
old=$(cryptsetup luksDump --dump-volume-key -q --key-file "$TMP/pw" "$IMG" | grep -A2 "MK dump" | tr -d ' \n')
expect_exit 0 "$BLKCRYPT" luks reencrypt --key-file "$TMP/pw" "$IMG"
new=$(cryptsetup luksDump --dump-volume-key -q --key-file "$TMP/pw" "$IMG" | grep -A2 "MK dump" | tr -d ' \n')
[[ $old != "$new" ]] || fail "luks reencrypt kept the volume key"
same "$IMG" "luks reencrypt"
printf pw2 >"$TMP/pw2"
cryptsetup luksAddKey -q --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --key-file "$TMP/pw" "$IMG" "$TMP/pw2"
before=$(digest "$IMG")
expect_exit 1 "$BLKCRYPT" reencrypt --key-file "$TMP/pw" "$IMG"
grep -q "Key file can be used only with --key-slot" "$TMP/stderr" || fail "two keyslots: $(cat "$TMP/stderr")"
[[ $(digest "$IMG") == "$before" ]] || fail "the refusal wrote"
slot=$(cryptsetup open --test-passphrase -v --key-file "$TMP/pw" "$IMG" | sed -n 's/^Key slot \([0-9]*\) unlocked.*/\1/p')
expect_exit 0 "$BLKCRYPT" reencrypt --key-file "$TMP/pw" -S "$slot" "$IMG"
same "$IMG" "re-key -S $slot"
cryptsetup open --test-passphrase --key-file "$TMP/pw2" "$IMG" 2>/dev/null && fail "-S kept the other keyslot"
# --volume-key-file: that key; the current key itself changes nothing.
head -c 64 /dev/urandom >"$TMP/vk"
expect_exit 0 "$BLKCRYPT" reencrypt --key-file "$TMP/pw" --volume-key-file "$TMP/vk" "$IMG"
cryptsetup open --test-passphrase --volume-key-file "$TMP/vk" "$IMG" || fail "--volume-key-file: not that key"
same "$IMG" "--volume-key-file"
before=$(digest "$IMG")
expect_exit 1 "$BLKCRYPT" reencrypt --key-file "$TMP/pw" --volume-key-file "$TMP/vk" "$IMG"
grep -q "No data segment parameters changed" "$TMP/stderr" || fail "same key: $(cat "$TMP/stderr")"
[[ $(digest "$IMG") == "$before" ]] || fail "the same key wrote"

# A detached header: the metadata and the resilience area in --header.
truncate -s $((12 * MiB)) "$TMP/data"
truncate -s $((16 * MiB)) "$TMP/hdr"
cryptsetup luksFormat -q --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --header "$TMP/hdr" "$TMP/data" \
    "$TMP/pw" || fail "luksFormat --header"
"$BLKCRYPT" luks encrypt --header "$TMP/hdr" --key-file "$TMP/pw" "$TMP/plain" "$TMP/data" || fail "encrypt --header"
hsame() {
    "$BLKCRYPT" luks decrypt --header "$TMP/hdr" --key-file "$TMP/pw" "$TMP/data" "$TMP/out" || fail "$1: decrypt"
    cmp -s "$TMP/plain" "$TMP/out" || fail "$1: the plaintext changed"
}
expect_exit 0 "$BLKCRYPT" reencrypt --header "$TMP/hdr" --key-file "$TMP/pw" --resilience journal "$TMP/data"
hsame "--header re-key"
"${CS[@]}" --init-only --header "$TMP/hdr" --key-file "$TMP/pw" "$TMP/data" || fail "cryptsetup --init-only --header"
expect_exit 0 "$BLKCRYPT" reencrypt --resume-only --header "$TMP/hdr" --key-file "$TMP/pw" "$TMP/data"
hsame "--header: cryptsetup initialised, ours resumed"
expect_exit 0 "$BLKCRYPT" reencrypt --init-only --header "$TMP/hdr" --key-file "$TMP/pw" "$TMP/data"
"${CS[@]}" --resume-only --header "$TMP/hdr" --key-file "$TMP/pw" "$TMP/data" || fail "cryptsetup resumes --header"
hsame "--header: ours initialised, cryptsetup resumed"

# --- 3. either tool resumes what the other initialised or left mid-way.
fresh luks2 "$IMG"
expect_exit 0 "$BLKCRYPT" reencrypt --init-only --key-file "$TMP/pw" --resilience journal "$IMG"
[[ $(state "$IMG") != 0 ]] || fail "--init-only wrote no metadata"
expect_exit 1 "$BLKCRYPT" reencrypt --init-only --key-file "$TMP/pw" "$IMG"
grep -q "already initialized" "$TMP/stderr" || fail "init twice: $(cat "$TMP/stderr")"
"${CS[@]}" --resume-only --key-file "$TMP/pw" "$IMG" || fail "cryptsetup resumes ours"
same "$IMG" "ours initialised, cryptsetup resumed"
"${CS[@]}" --init-only --key-file "$TMP/pw" --resilience checksum "$IMG" || fail "cryptsetup --init-only"
expect_exit 0 "$BLKCRYPT" reencrypt --resume-only --key-file "$TMP/pw" "$IMG"
same "$IMG" "cryptsetup initialised, ours resumed"
expect_exit 1 "$BLKCRYPT" reencrypt --resume-only --key-file "$TMP/pw" "$IMG"
grep -q "Device reencryption not in progress." "$TMP/stderr" || fail "resume nothing: $(cat "$TMP/stderr")"
# Stopped by SIGINT between steps: resumable by cryptsetup.
fresh luks2 "$IMG"
"$BLKCRYPT" reencrypt --key-file "$TMP/pw" --resilience journal --hotzone-size 64k "$IMG" 2>"$TMP/err" &
pid=$!
interrupt $pid "$IMG"
rc=0
wait $pid || rc=$?
if [[ $rc == 130 ]]; then
    grep -q "Reencryption interrupted" "$TMP/err" || fail "SIGINT: $(cat "$TMP/err")"
    [[ $(state "$IMG") != 0 ]] || fail "SIGINT: no metadata left"
    "${CS[@]}" --resume-only --key-file "$TMP/pw" "$IMG" || fail "cryptsetup resumes after SIGINT"
else
    [[ $rc == 0 ]] || fail "SIGINT run: exit $rc"
fi
same "$IMG" "SIGINT"

# --- 4. a second run at once fails before writing; wrong passphrase; full
# disk; an image that shrank; an integrity profile (re-keyed; cryptsetup refuses).
fresh luks2 "$IMG"
before=$(digest "$IMG")
exec {lockfd}<"$IMG"
flock -x $lockfd
expect_exit 1 "$BLKCRYPT" reencrypt --key-file "$TMP/pw" "$IMG"
grep -q "in use by another reencryption" "$TMP/stderr" || fail "lock: $(cat "$TMP/stderr")"
expect_exit 1 "$BLKCRYPT" repair --key-file "$TMP/pw" "$IMG"
exec {lockfd}<&-
[[ $(digest "$IMG") == "$before" ]] || fail "a locked run wrote"
printf wrong >"$TMP/bad"
expect_exit 2 "$BLKCRYPT" reencrypt --key-file "$TMP/bad" "$IMG"
grep -q "No key available with this passphrase" "$TMP/stderr" || fail "wrong passphrase: $(cat "$TMP/stderr")"
[[ $(digest "$IMG") == "$before" ]] || fail "a wrong passphrase wrote"
# Stopped mid-way, then the image loses its end: refused, nothing written.
"$BLKCRYPT" reencrypt --key-file "$TMP/pw" --resilience journal --hotzone-size 64k "$IMG" 2>/dev/null &
pid=$!
interrupt $pid "$IMG"
wait $pid || true
done_bytes=$(done_bytes "$IMG")
if [[ -n $done_bytes ]]; then
    cp "$IMG" "$TMP/full-size"
    truncate -s $((16 * MiB + done_bytes / 2)) "$IMG"
    before=$(digest "$IMG")
    expect_exit 1 "$BLKCRYPT" reencrypt --resume-only --key-file "$TMP/pw" "$IMG"
    grep -q "shrank" "$TMP/stderr" || fail "shrunk: $(cat "$TMP/stderr")"
    [[ $(digest "$IMG") == "$before" ]] || fail "the shrunk image was written"
    cp "$TMP/full-size" "$IMG"
    expect_exit 0 "$BLKCRYPT" reencrypt --resume-only --key-file "$TMP/pw" "$IMG"
else
    echo "SKIP: the run finished before SIGINT (shrunk-image case)"
fi
same "$IMG" "after the shrunk image was restored"
# A full file system under a sparse image: the step fails, repair + resume.
mkdir "$TMP/small"
if mount -t tmpfs -o size=40m tmpfs "$TMP/small" 2>/dev/null; then
    S=$TMP/small/img
    truncate -s $((32 * MiB)) "$S"
    cryptsetup luksFormat -q --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 "$S" "$TMP/pw"
    "$BLKCRYPT" luks encrypt --key-file "$TMP/pw" "$TMP/plain" "$S" 2>/dev/null || fail "luks encrypt (tmpfs)"
    head -c $((40 * MiB)) /dev/zero >"$TMP/small/filler" 2>/dev/null || true
    expect_exit 1 "$BLKCRYPT" reencrypt --key-file "$TMP/pw" --resilience journal --hotzone-size 4M "$S"
    grep -q "No space left on device" "$TMP/stderr" || fail "ENOSPC: $(cat "$TMP/stderr")"
    rm "$TMP/small/filler"
    if grep -q "run blkcrypt repair" "$TMP/stderr"; then
        expect_exit 0 "$BLKCRYPT" repair --key-file "$TMP/pw" "$S"
    fi
    expect_exit 0 "$BLKCRYPT" reencrypt --resume-only --key-file "$TMP/pw" "$S"
    same "$S" "ENOSPC, then resumed"
    umount "$TMP/small"
else
    echo "SKIP: no tmpfs mount (full-disk case)"
fi
# LUKS2 --integrity: cryptsetup refuses it (its words), we re-key it and
# keep the plaintext (tests/cli/reencrypt_integrity.sh goes further).
truncate -s $((32 * MiB)) "$TMP/integ"
"$BLKCRYPT" luks format -q --integrity hmac-sha256 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
    --key-file "$TMP/pw" "$TMP/integ" || fail "format --integrity"
"$BLKCRYPT" luks encrypt --key-file "$TMP/pw" "$TMP/plain" "$TMP/integ" 2>/dev/null || fail "luks encrypt --integrity"
"$BLKCRYPT" luks decrypt --key-file "$TMP/pw" "$TMP/integ" "$TMP/integ.before" || fail "luks decrypt --integrity"
before=$(digest "$TMP/integ")
"${CS[@]}" --key-file "$TMP/pw" "$TMP/integ" 2>"$TMP/err" && fail "cryptsetup reencrypted an integrity profile"
grep -q "Reencryption of device with integrity profile is not supported." "$TMP/err" ||
    fail "cryptsetup's words changed: $(cat "$TMP/err")"
[[ $(digest "$TMP/integ") == "$before" ]] || fail "cryptsetup's integrity refusal wrote"
expect_exit 0 "$BLKCRYPT" reencrypt --key-file "$TMP/pw" "$TMP/integ"
[[ $(digest "$TMP/integ") != "$before" ]] || fail "the integrity re-key wrote nothing"
"$BLKCRYPT" luks decrypt --key-file "$TMP/pw" "$TMP/integ" "$TMP/integ.after" || fail "luks decrypt after the re-key"
cmp -s "$TMP/integ.before" "$TMP/integ.after" || fail "the integrity re-key changed the plaintext"
cryptsetup luksDump "$TMP/integ" | grep -q "integrity: hmac(sha256)" || fail "the integrity profile is gone"

# --- 5. cryptsetup's mangled reencryption metadata: refused by both, never written.
for c in set_direction bad_area_type drop_digest drop_requirement key_size_2 drop_backup_final; do
    fresh luks2 "$IMG"
    "${CS[@]}" --init-only --key-file "$TMP/pw" "$IMG" || fail "cryptsetup --init-only"
    python3 "$HERE/luks2_mangle.py" "$IMG" "$c"
    before=$(digest "$IMG")
    "${CS[@]}" --resume-only --key-file "$TMP/pw" "$IMG" 2>/dev/null && fail "$c: cryptsetup resumed it"
    [[ $(digest "$IMG") == "$before" ]] || fail "$c: cryptsetup wrote"
    expect_exit 1 "$BLKCRYPT" reencrypt --resume-only --key-file "$TMP/pw" "$IMG"
    [[ $(digest "$IMG") == "$before" ]] || fail "$c: we wrote"
    expect_one_error_line
done

# --- 6. crashes: ours (SIGKILL) repaired and resumed by cryptsetup, and
# cryptsetup's repaired and resumed by us (tests/cli/reencrypt_kill.sh loops).
fresh luks2 "$IMG"
"$BLKCRYPT" reencrypt --key-file "$TMP/pw" --resilience checksum --hotzone-size 64k "$IMG" 2>/dev/null &
pid=$!
sleep 0.4
kill -KILL $pid 2>/dev/null || true
wait $pid || true
if cryptsetup luksDump "$IMG" | grep -q in-reencryption; then
    "${CS[@]}" --resume-only --key-file "$TMP/pw" "$IMG" 2>/dev/null && fail "cryptsetup resumed a crash unrepaired"
    expect_exit 1 "$BLKCRYPT" reencrypt --resume-only --key-file "$TMP/pw" "$IMG"
    grep -q "Run repair first" "$TMP/stderr" || fail "crash: $(cat "$TMP/stderr")"
    cryptsetup repair -q --disable-locks --key-file "$TMP/pw" "$IMG" || fail "cryptsetup repair of our crash"
fi
[[ $(state "$IMG") == 0 ]] || "${CS[@]}" --resume-only --key-file "$TMP/pw" "$IMG" || fail "cryptsetup resume"
same "$IMG" "our crash, cryptsetup repaired"
expect_exit 0 "$BLKCRYPT" repair -v --key-file "$TMP/pw" "$IMG"  # nothing to repair

# --- 7. LUKS1: re-key, and cryptsetup's non-root leftover rolled back by repair
# or finished by reencrypt.
fresh luks1 "$IMG"
(cd "$TMP" && "$BLKCRYPT" reencrypt --key-file "$TMP/pw" --pbkdf-force-iterations 1000 -c aes-cbc-essiv:sha256 -s 256 "$IMG") ||
    fail "LUKS1 re-key"
same "$IMG" "LUKS1 re-key"
cryptsetup luksDump "$IMG" | grep -q "cbc-essiv:sha256" || fail "LUKS1: the new cipher"
ls "$TMP"/LUKS-* 2>/dev/null && fail "LUKS1 re-key left its files"
if command -v setpriv >/dev/null; then
    mkdir -p "$TMP/user" && chmod 777 "$TMP/user" "$TMP" && chmod 666 "$IMG" "$TMP/pw"
    for then in repair reencrypt; do
        fresh luks1 "$IMG"
        chmod 666 "$IMG"
        (cd "$TMP/user" && setpriv --reuid 65534 --regid 65534 --clear-groups \
            cryptsetup reencrypt -q --key-file "$TMP/pw" --pbkdf-force-iterations 1000 "$IMG" >/dev/null 2>&1) || true
        if ! head -c 6 "$IMG" | od -An -tx1 | grep -q "4c 55 4b 53 de ad"; then
            echo "SKIP: cryptsetup left no LUKS1 leftover"
            break
        fi
        "$BLKCRYPT" luks dump "$IMG" >/dev/null 2>&1 && fail "the leftover opened"
        (cd "$TMP/user" && "$BLKCRYPT" "$then" --key-file "$TMP/pw" "$IMG") >/dev/null || fail "LUKS1 leftover: $then"
        ls "$TMP"/user/LUKS-* 2>/dev/null && fail "LUKS1 $then left its files"
        same "$IMG" "LUKS1 leftover, $then"
    done
fi
echo "reencrypt: all passed"
