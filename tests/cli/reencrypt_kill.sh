#!/bin/bash
# Real-SIGKILL kill loop of LUKS2 reencryption through the CLI (run live with
# cryptsetup 2.6.1; skipped without it). For each resilience (checksum,
# journal), KILLS times: `blkcrypt reencrypt` is killed at a random moment
# (during init, a step, the header update, the finish), then the image is
# repaired if the header says a hotzone crashed and resumed, alternately by
# cryptsetup (repair, reencrypt --resume-only --disable-locks
# --force-offline-reencrypt) and by blkcrypt (repair, reencrypt
# --resume-only); the plaintext must be the original. Then the reverse:
# cryptsetup killed, blkcrypt repairs and resumes. KILLS (default 3: the CI
# size) sets the count per mode; the summary line gives the counts.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kill_lib.sh"
BLKCRYPT=$(readlink -f "$BLKCRYPT")
command -v cryptsetup >/dev/null || { echo "cryptsetup not installed: reencrypt kill loop skipped"; exit 0; }
KILLS=${KILLS:-3}
CS=(cryptsetup -q --disable-locks)
MiB=$((1024 * 1024))
printf pw >"$TMP/pw"
random_file "$TMP/plain" $((4 * MiB))
truncate -s $((20 * MiB)) "$TMP/template"
cryptsetup luksFormat -q --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 "$TMP/template" "$TMP/pw"
"$BLKCRYPT" luks encrypt --key-file "$TMP/pw" "$TMP/plain" "$TMP/template" 2>/dev/null || fail "luks encrypt"
IMG=$TMP/img
runs=0 midway=0 crashed=0

# recover BY WHAT: repair (when crashed) and resume with BY (blkcrypt or
# cryptsetup), then check the plaintext.
recover() {
    local by=$1 what=$2
    runs=$((runs + 1))
    if cryptsetup luksDump "$IMG" | grep -q "online-reencrypt"; then
        midway=$((midway + 1))
        repair_if_crashed "$by" "$IMG" "$what"
        pick_resumer "$by" "$IMG"
        if [[ $RESUMER == cryptsetup ]]; then
            "${CS[@]}" reencrypt --force-offline-reencrypt --resume-only --key-file "$TMP/pw" "$IMG" ||
                fail "$what: cryptsetup resume"
        elif [[ $RESUMER == blkcrypt ]]; then
            "$BLKCRYPT" reencrypt --resume-only --key-file "$TMP/pw" "$IMG" || fail "$what: blkcrypt resume"
        fi
    fi
    "$BLKCRYPT" luks decrypt --key-file "$TMP/pw" "$IMG" "$TMP/out" || fail "$what: decrypt"
    cmp -s -n $((4 * MiB)) "$TMP/plain" "$TMP/out" || fail "$what: the plaintext changed"
}

for mode in checksum journal; do
    for ((i = 0; i < KILLS; i++)); do
        cp "$TMP/template" "$IMG"
        t=$(delay 999)
        kill_at "$t" "$BLKCRYPT" reencrypt --key-file "$TMP/pw" --resilience "$mode" --hotzone-size 64k "$IMG"
        by=$([[ $((i % 2)) == 0 ]] && echo cryptsetup || echo blkcrypt)
        recover "$by" "blkcrypt $mode killed at ${t}s, $by resumed"
    done
    for ((i = 0; i < (KILLS + 1) / 2; i++)); do
        cp "$TMP/template" "$IMG"
        t=$(delay 999)
        kill_at "$t" "${CS[@]}" reencrypt --force-offline-reencrypt --key-file "$TMP/pw" --resilience "$mode" \
            --hotzone-size 64k "$IMG"
        recover blkcrypt "cryptsetup $mode killed at ${t}s, blkcrypt resumed"
    done
done
echo "reencrypt kill loop: $runs kills, $midway left mid-way, $crashed with a crashed hotzone" \
    "($repair_finished finished by blkcrypt's repair, $cs_all_converted left by cryptsetup's repair in the state" \
    "its resume would convert again); all recovered"
