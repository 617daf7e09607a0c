#!/bin/bash
# LUKS1 reencrypt options against cryptsetup 2.6.1 (run live; skipped
# without it): --keep-key rewrites only the header and keyslot (checked
# field by field against cryptsetup's own --keep-key run; the volume key and
# every data byte unchanged), refuses what would lose data; a SIGKILL loop
# on it, each leftover rolled back by `blkcrypt repair`, finished by
# `blkcrypt reencrypt` or by `cryptsetup reencrypt --keep-key`; and
# cryptsetup's own --keep-key run killed, finished by blkcrypt.
# --reduce-device-size moves the data offset on (a kill loop, resumed);
# --device-size converts the start only; cryptsetup's size checks.
# --encrypt --type luks1 in place and --decrypt of LUKS1, each in a kill
# loop resumed. A detached --header re-keyed (and --keep-key), in a kill
# loop. KILLS (default 4) sets the count per loop.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kill_lib.sh"
BLKCRYPT=$(readlink -f "$BLKCRYPT")
command -v cryptsetup >/dev/null || { echo "cryptsetup not installed: LUKS1 reencrypt tests skipped"; exit 0; }
KILLS=${KILLS:-4}
MiB=$((1024 * 1024))
printf pw >"$TMP/pw"
random_file "$TMP/plain" $((6 * MiB))
IMG=$TMP/img
RUN=$TMP/run  # the working directory: the LUKS-<uuid>.* files go there
mkdir -p "$RUN"

# fresh [luksFormat args]: $IMG, LUKS1 holding $TMP/plain (payload 2 MiB).
fresh() {
    rm -f "$IMG"
    truncate -s $((8 * MiB)) "$IMG"
    cryptsetup luksFormat -q --type luks1 --pbkdf-force-iterations 1000 "$@" "$IMG" "$TMP/pw" || fail "luksFormat $*"
    "$BLKCRYPT" luks encrypt --key-file "$TMP/pw" "$TMP/plain" "$IMG" 2>/dev/null || fail "luks encrypt"
}
vkey() { cryptsetup luksDump -q --dump-volume-key --key-file "$TMP/pw" "$1" | sed -n '/MK dump:/,$p' | tr -d ' \t\n'; }
field() { cryptsetup luksDump "$1" | sed -n "s/^$2:[[:space:]]*//p" | head -1; }
slot_iters() { cryptsetup luksDump "$1" | sed -n '/Key Slot 0: ENABLED/,/Salt/s/^\s*Iterations:\s*//p'; }
data_sum() { tail -c +$((2 * MiB + 1)) "$1" | sha256sum | cut -d' ' -f1; }
marked() { head -c 6 "$1" | od -An -tx1 | grep -q "4c 55 4b 53 de ad"; }
no_files() { ! ls "$RUN"/LUKS-* >/dev/null 2>&1 || fail "$1: LUKS-<uuid> files left: $(ls "$RUN")"; }
# stale UUID WHAT: a run killed before its log was linked may leave its .org,
# .new and the log's temporary name (nothing resumes them, the next run
# replaces them), nothing else; they are removed.
stale() {
    local f
    for f in "$RUN"/LUKS-*; do
        [[ -e $f ]] || continue
        case ${f##*/} in
        LUKS-"$1".org | LUKS-"$1".new | LUKS-"$1".log.tmp) ;;
        *) fail "$2: more than a run's stale files left: $(ls "$RUN")" ;;
        esac
    done
    rm -f "$RUN"/LUKS-*
}
# kill_marked FILE MS CMD...: runs CMD, SIGKILLs it a random time under MS
# milliseconds after FILE is marked LUKS\xde\xad (polled, so a loaded machine
# still stops it mid-way), or when it ends first.
kill_marked() {
    local f=$1 ms=$2
    shift 2
    "$@" >/dev/null 2>&1 &
    local pid=$!
    for _ in $(seq 600); do
        marked "$f" && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.005
    done
    sleep "$(delay "$ms")"
    kill -KILL $pid 2>/dev/null || true
    wait $pid 2>/dev/null || true
}
opens() {
    cryptsetup open --test-passphrase --key-file "$TMP/pw" "$IMG" || fail "$1: cryptsetup does not open it"
    "$BLKCRYPT" luks decrypt --key-file "$TMP/pw" "$IMG" "$TMP/out" || fail "$1: decrypt"
    cmp -s -n $((6 * MiB)) "$TMP/plain" "$TMP/out" || fail "$1: the plaintext changed"
}

# --- 1. --keep-key: the header and keyslot rewritten, like cryptsetup's.
fresh --hash sha1
key0=$(vkey "$IMG") data0=$(data_sum "$IMG")
cp "$IMG" "$TMP/cs.img"
(cd "$RUN" && "$BLKCRYPT" reencrypt --keep-key --hash sha512 --pbkdf-force-iterations 3000 --key-file "$TMP/pw" "$IMG") ||
    fail "--keep-key"
(cd "$RUN" && cryptsetup reencrypt -q --keep-key --hash sha512 --pbkdf-force-iterations 3000 --key-file "$TMP/pw" \
    "$TMP/cs.img") || fail "cryptsetup --keep-key"
no_files "--keep-key"
[[ $(vkey "$IMG") == "$key0" ]] || fail "--keep-key changed the volume key"
[[ $(data_sum "$IMG") == "$data0" ]] || fail "--keep-key touched the data"
for f in "Cipher name" "Cipher mode" "Hash spec" "Payload offset" "MK bits" UUID; do
    [[ $(field "$IMG" "$f") == $(field "$TMP/cs.img" "$f") ]] ||
        fail "--keep-key: $f is $(field "$IMG" "$f"), cryptsetup's $(field "$TMP/cs.img" "$f")"
done
[[ $(field "$IMG" "Hash spec") == sha512 ]] || fail "--keep-key: the hash"
[[ $(slot_iters "$IMG") == 3000 && $(slot_iters "$TMP/cs.img") == 3000 ]] || fail "--keep-key: the keyslot's iterations"
cmp -s "$IMG" "$TMP/cs.img" && fail "two runs wrote the same salts"
opens "--keep-key"
# No --hash: cryptsetup's "default hash algorithm is always used" (sha256).
(cd "$RUN" && "$BLKCRYPT" reencrypt --keep-key --pbkdf-force-iterations 1000 --key-file "$TMP/pw" "$IMG") || fail "--keep-key 2"
[[ $(field "$IMG" "Hash spec") == sha256 ]] || fail "--keep-key without --hash: $(field "$IMG" "Hash spec")"
[[ $(vkey "$IMG") == "$key0" && $(data_sum "$IMG") == "$data0" ]] || fail "--keep-key 2 changed the key or data"
# What would lose data is refused, nothing written.
sum0=$(sha256sum <"$IMG")
for bad in "-c aes-cbc-essiv:sha256" "--reduce-device-size 1M"; do
    # shellcheck disable=SC2086
    expect_exit nonzero bash -c "cd '$RUN' && '$BLKCRYPT' reencrypt --keep-key $bad --key-file '$TMP/pw' '$IMG'"
    grep -q -- "--keep-key" "$TMP/stderr" || fail "--keep-key $bad: $(cat "$TMP/stderr")"
    [[ $(sha256sum <"$IMG") == "$sum0" ]] || fail "--keep-key $bad wrote"
    no_files "--keep-key $bad"
done

# --- 2. --keep-key killed at random moments (the new keyslot's PBKDF2 and
# the header writes take ~0.1-0.5 s): each leftover rolled back by repair,
# finished by blkcrypt, or finished by cryptsetup; then cryptsetup's own
# --keep-key killed and finished by blkcrypt.
fresh --hash sha1
key0=$(vkey "$IMG") data0=$(data_sum "$IMG")
cp "$IMG" "$TMP/template"
runs=0 leftovers=0
for i in $(seq $((KILLS * 2))); do
    cp "$TMP/template" "$IMG"
    # Half at a random moment, half once the image is marked (blkcrypt then
    # unlocks .new, ~0.1-0.3 s, before the restore; cryptsetup restores at once).
    case $((i % 4)) in
    1) (cd "$RUN" && kill_at "$(delay 500)" "$BLKCRYPT" reencrypt --keep-key --hash sha512 \
           --pbkdf-force-iterations 200000 --key-file "$TMP/pw" "$IMG") ;;
    3) (cd "$RUN" && kill_marked "$IMG" 250 "$BLKCRYPT" reencrypt --keep-key --hash sha512 \
           --pbkdf-force-iterations 200000 --key-file "$TMP/pw" "$IMG") ;;
    2) (cd "$RUN" && kill_marked "$IMG" 5 cryptsetup reencrypt -q --keep-key --hash sha512 \
           --pbkdf-force-iterations 200000 --key-file "$TMP/pw" "$IMG") ;;
    0) (cd "$RUN" && kill_at "$(delay 500)" cryptsetup reencrypt -q --keep-key --hash sha512 \
           --pbkdf-force-iterations 200000 --key-file "$TMP/pw" "$IMG") ;;
    esac
    runs=$((runs + 1))
    what="kill $i"
    if marked "$IMG"; then
        leftovers=$((leftovers + 1))
        case $((leftovers % 3)) in
        0) (cd "$RUN" && "$BLKCRYPT" repair --key-file "$TMP/pw" "$IMG") >/dev/null || fail "$what: repair"
           [[ $(field "$IMG" "Hash spec") == sha1 ]] || fail "$what: repair did not roll back" ;;
        1) (cd "$RUN" && "$BLKCRYPT" reencrypt --key-file "$TMP/pw" "$IMG") || fail "$what: blkcrypt finish" ;;
        2) if ((i % 2)); then
               (cd "$RUN" && cryptsetup reencrypt -q --keep-key --key-file "$TMP/pw" "$IMG") || fail "$what: cryptsetup finish"
           else
               (cd "$RUN" && "$BLKCRYPT" reencrypt --keep-key --key-file "$TMP/pw" "$IMG") || fail "$what: blkcrypt finish"
           fi ;;
        esac
        marked "$IMG" && fail "$what: still marked"
        ((leftovers % 3 == 0)) || [[ $(field "$IMG" "Hash spec") == sha512 ]] || fail "$what: not finished"
    fi
    # Killed after the header landed, before the files went: they belong to nothing now.
    rm -f "$RUN"/LUKS-*
    [[ $(vkey "$IMG") == "$key0" ]] || fail "$what: the volume key changed"
    [[ $(data_sum "$IMG") == "$data0" ]] || fail "$what: the data changed"
    cryptsetup open --test-passphrase --key-file "$TMP/pw" "$IMG" || fail "$what: cryptsetup does not open it"
done
echo "--keep-key kill loop: $runs runs killed, $leftovers left marked and recovered"

# --- 3. --reduce-device-size: the data offset 1 MiB on, the data moved with
# it (its last 1 MiB lost), killed at random and resumed by blkcrypt.
fresh
cp "$IMG" "$TMP/template"
(cd "$RUN" && "$BLKCRYPT" reencrypt --reduce-device-size 1M -B 1 --pbkdf-force-iterations 1000 --key-file "$TMP/pw" "$IMG") ||
    fail "--reduce-device-size"
no_files "--reduce-device-size"
[[ $(field "$IMG" "Payload offset") == 6144 ]] || fail "--reduce-device-size: payload $(field "$IMG" "Payload offset")"
cryptsetup open --test-passphrase --key-file "$TMP/pw" "$IMG" || fail "--reduce-device-size: cryptsetup does not open it"
"$BLKCRYPT" luks decrypt --key-file "$TMP/pw" "$IMG" "$TMP/out" || fail "--reduce-device-size: decrypt"
[[ $(stat -c %s "$TMP/out") == $((5 * MiB)) ]] || fail "--reduce-device-size: $(stat -c %s "$TMP/out") bytes of data"
cmp -s -n $((5 * MiB)) "$TMP/plain" "$TMP/out" || fail "--reduce-device-size: the plaintext"
shifted=0
for i in $(seq "$KILLS"); do
    cp "$TMP/template" "$IMG"
    (cd "$RUN" && kill_at "$(delay 200)" "$BLKCRYPT" reencrypt --reduce-device-size 1M -B 1 \
        --pbkdf-force-iterations 1000 --key-file "$TMP/pw" "$IMG")
    if marked "$IMG"; then
        shifted=$((shifted + 1))
        (cd "$RUN" && "$BLKCRYPT" reencrypt --key-file "$TMP/pw" "$IMG") || fail "shift kill $i: resume"
    fi
    rm -f "$RUN"/LUKS-*
    "$BLKCRYPT" luks decrypt --key-file "$TMP/pw" "$IMG" "$TMP/out" || fail "shift kill $i: decrypt"
    cmp -s -n $((5 * MiB)) "$TMP/plain" "$TMP/out" || fail "shift kill $i: the plaintext"
done
echo "--reduce-device-size kill loop: $KILLS runs killed, $shifted resumed"

# --- 4. --device-size: only the first 2 MiB re-keyed, the rest lost.
fresh
(cd "$RUN" && "$BLKCRYPT" reencrypt --device-size 2M --pbkdf-force-iterations 1000 --key-file "$TMP/pw" "$IMG") ||
    fail "--device-size"
"$BLKCRYPT" luks decrypt --key-file "$TMP/pw" "$IMG" "$TMP/out" || fail "--device-size: decrypt"
cmp -s -n $((2 * MiB)) "$TMP/plain" "$TMP/out" || fail "--device-size: the first 2 MiB"
cmp -s -i $((2 * MiB)) -n $((4 * MiB)) "$TMP/plain" "$TMP/out" && fail "--device-size: the rest was re-keyed too"

# --- 5. cryptsetup's size checks, nothing written.
fresh
sum0=$(sha256sum <"$IMG")
for bad in "--reduce-device-size 1000:Reduce size must be multiple of 512 bytes sector." \
           "--reduce-device-size 2G:Maximum device reduce size is 1 GiB." \
           "--reduce-device-size 1536:Data offset is not multiple of 4096 bytes." \
           "--reduce-device-size 6M:is too small for activation" \
           "--device-size 1000:Device size must be multiple of 512 bytes sector." \
           "--device-size 7M:is larger than the data"; do
    # shellcheck disable=SC2086
    expect_exit nonzero bash -c "cd '$RUN' && '$BLKCRYPT' reencrypt ${bad%%:*} --key-file '$TMP/pw' '$IMG'"
    grep -q -- "${bad#*:}" "$TMP/stderr" || fail "${bad%%:*}: $(cat "$TMP/stderr")"
    [[ $(sha256sum <"$IMG") == "$sum0" ]] || fail "${bad%%:*} wrote"
    no_files "${bad%%:*}"
done

# --- 6. --encrypt --type luks1 in place and --decrypt (cryptsetup's legacy
# modes, which it runs only as root with device-mapper): the result is a
# LUKS1 image cryptsetup opens / the plaintext at offset 0; each killed at
# random moments and resumed (the encryption by running it again in the
# same directory, the decryption with --uuid once its mark is overwritten).
plain_img() { rm -f "$IMG"; cp "$TMP/plain" "$IMG"; truncate -s $((8 * MiB)) "$IMG"; }
ENC=(reencrypt --encrypt --type luks1 --reduce-device-size 2M -B 1 --pbkdf-force-iterations 1000 --key-file "$TMP/pw")
enc_ok() {
    no_files "$1"
    [[ $(field "$IMG" Version) == 1 && $(field "$IMG" "Payload offset") == 4096 && $(field "$IMG" "MK bits") == 256 &&
        $(field "$IMG" "Cipher mode") == xts-plain64 ]] || fail "$1: $(cryptsetup luksDump "$IMG")"
    cryptsetup open --test-passphrase --key-file "$TMP/pw" "$IMG" || fail "$1: cryptsetup does not open it"
    "$BLKCRYPT" luks decrypt --key-file "$TMP/pw" "$IMG" "$TMP/out" || fail "$1: decrypt"
    [[ $(stat -c %s "$TMP/out") == $((6 * MiB)) ]] && cmp -s "$TMP/plain" "$TMP/out" || fail "$1: the plaintext"
}
dec_ok() {
    no_files "$1"
    cryptsetup isLuks "$IMG" && fail "$1: still LUKS"
    cmp -s -n $((6 * MiB)) "$TMP/plain" "$IMG" || fail "$1: the plaintext is not at offset 0"
    cmp -s -i $((6 * MiB)) -n $((2 * MiB)) "$IMG" /dev/zero || fail "$1: the freed tail is not zeroed"
}
plain_img
(cd "$RUN" && "$BLKCRYPT" "${ENC[@]}" "$IMG") || fail "--encrypt --type luks1"
enc_ok "--encrypt --type luks1"
uuid=$(field "$IMG" UUID)
(cd "$RUN" && "$BLKCRYPT" reencrypt --decrypt --key-file "$TMP/pw" "$IMG") || fail "--decrypt of LUKS1"
dec_ok "--decrypt of LUKS1"
encs=0 decs=0
for i in $(seq "$KILLS"); do
    plain_img
    (cd "$RUN" && kill_at "$(printf '0.%03d' $((50 + RANDOM % 250)))" "$BLKCRYPT" "${ENC[@]}" "$IMG")
    if ls "$RUN"/LUKS-cafecafe-cafe-cafe-cafe-cafecafeeeee.log >/dev/null 2>&1; then
        encs=$((encs + 1))
        (cd "$RUN" && "$BLKCRYPT" "${ENC[@]}" "$IMG") || fail "encrypt kill $i: resume"
    elif ! cryptsetup isLuks "$IMG"; then  # killed before it began
        cmp -s -n $((6 * MiB)) "$TMP/plain" "$IMG" || fail "encrypt kill $i: the image changed before the run began"
        (cd "$RUN" && "$BLKCRYPT" "${ENC[@]}" "$IMG") || fail "encrypt kill $i: run again"
    else
        rm -f "$RUN"/LUKS-*  # killed removing its files (the log first): the rest resume nothing
    fi
    enc_ok "encrypt kill $i"
    uuid=$(field "$IMG" UUID)
    (cd "$RUN" && kill_at "$(printf '0.%03d' $((40 + RANDOM % 160)))" "$BLKCRYPT" reencrypt --decrypt -B 1 --key-file "$TMP/pw" "$IMG")
    if ls "$RUN"/LUKS-"$uuid".log >/dev/null 2>&1; then
        decs=$((decs + 1))
        if marked "$IMG"; then
            (cd "$RUN" && "$BLKCRYPT" reencrypt --decrypt --key-file "$TMP/pw" "$IMG") || fail "decrypt kill $i: resume"
        else
            (cd "$RUN" && "$BLKCRYPT" reencrypt --decrypt --uuid "$uuid" --key-file "$TMP/pw" "$IMG") ||
                fail "decrypt kill $i: resume by --uuid"
        fi
    elif cryptsetup isLuks "$IMG"; then
        stale "$uuid" "decrypt kill $i"  # killed before it began
        continue
    else
        rm -f "$RUN"/LUKS-*  # killed removing its files (the log first): the rest resume nothing
    fi
    dec_ok "decrypt kill $i"
done
echo "--encrypt/--decrypt kill loop: $KILLS of each killed, $encs encryptions and $decs decryptions resumed"

# --- 7. A detached header (--header HDR, payload 0 on IMAGE): re-keyed with
# HDR marked and restored, the data in IMAGE; killed at random and resumed
# (or rolled back by repair). --keep-key likewise, against cryptsetup's.
HDR=$TMP/hdr
detached() {
    rm -f "$IMG" "$HDR"
    truncate -s $((6 * MiB)) "$IMG"
    cryptsetup luksFormat -q --type luks1 --pbkdf-force-iterations 1000 --header "$HDR" "$IMG" "$TMP/pw" ||
        fail "luksFormat --header"
    "$BLKCRYPT" luks encrypt --header "$HDR" --key-file "$TMP/pw" "$TMP/plain" "$IMG" 2>/dev/null || fail "luks encrypt --header"
}
detached_ok() {
    no_files "$1"
    cryptsetup open --test-passphrase --header "$HDR" --key-file "$TMP/pw" "$IMG" || fail "$1: cryptsetup does not open it"
    "$BLKCRYPT" luks decrypt --header "$HDR" --key-file "$TMP/pw" "$IMG" "$TMP/out" || fail "$1: decrypt"
    cmp -s "$TMP/plain" "$TMP/out" || fail "$1: the plaintext"
}
detached
cp "$IMG" "$TMP/data0"
(cd "$RUN" && "$BLKCRYPT" reencrypt --header "$HDR" -B 1 --pbkdf-force-iterations 1000 --key-file "$TMP/pw" "$IMG") ||
    fail "--header re-key"
detached_ok "--header re-key"
cmp -s "$IMG" "$TMP/data0" && fail "--header re-key: the data was not re-keyed"
[[ $(field "$HDR" "Payload offset") == 0 ]] || fail "--header re-key: payload $(field "$HDR" "Payload offset")"
key1=$(cryptsetup luksDump -q --dump-volume-key --header "$HDR" --key-file "$TMP/pw" "$IMG" | sed -n '/MK dump:/,$p')
(cd "$RUN" && "$BLKCRYPT" reencrypt --header "$HDR" --keep-key --pbkdf-force-iterations 2000 --key-file "$TMP/pw" "$IMG") ||
    fail "--header --keep-key"
detached_ok "--header --keep-key"
[[ $(cryptsetup luksDump -q --dump-volume-key --header "$HDR" --key-file "$TMP/pw" "$IMG" | sed -n '/MK dump:/,$p') == "$key1" ]] ||
    fail "--header --keep-key changed the key"
hkills=0
for i in $(seq "$KILLS"); do
    detached
    (cd "$RUN" && kill_at "$(printf '0.%03d' $((20 + RANDOM % 200)))" "$BLKCRYPT" reencrypt --header "$HDR" -B 1 \
        --pbkdf-force-iterations 1000 --key-file "$TMP/pw" "$IMG")
    if marked "$HDR"; then
        hkills=$((hkills + 1))
        if ((i % 2)); then
            (cd "$RUN" && "$BLKCRYPT" reencrypt --header "$HDR" --key-file "$TMP/pw" "$IMG") || fail "--header kill $i: resume"
        else
            (cd "$RUN" && "$BLKCRYPT" repair --header "$HDR" --key-file "$TMP/pw" "$IMG") >/dev/null ||
                fail "--header kill $i: repair"
        fi
    fi
    rm -f "$RUN"/LUKS-*
    detached_ok "--header kill $i"
done
echo "--header kill loop: $KILLS runs killed, $hkills left marked and recovered"
echo "reencrypt_luks1: all passed"
