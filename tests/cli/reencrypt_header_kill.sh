#!/bin/bash
# reencrypt --encrypt/--decrypt --header HDR (a detached header, no data shift)
# through the CLI, live against cryptsetup 2.6.1 (skipped without it): a
# full run by each tool in each resilience mode checked against the other,
# --init-only by one tool and --resume-only by the other, refusals; then
# the real-SIGKILL loop: KILLS times (default 5 per resilience mode, the CI
# size) one tool is killed at a random moment (init, a step, a header
# write, the finish) and the other repairs and resumes what it left. A
# kill before the header lands leaves the plain image (checked, then
# encrypted again). The plaintext must come back every time; the summary
# line gives the counts.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kill_lib.sh"
# A failure after a kill keeps what the kill left (killed.hdr, killed.img,
# and the kill point) outside $TMP, to study with cryptsetup luksDump
# --dump-json-metadata / --debug-json.
fail() {
    echo "FAIL: $*" >&2
    if [[ -f $TMP/killed.hdr ]]; then
        local keep
        keep=$(mktemp -d /tmp/reencrypt_header_kill.XXXXXX)
        cp "$TMP"/killed.* "$TMP/plain" "$keep"/ && echo "state left by the kill kept in $keep" >&2
    fi
    exit 1
}
BLKCRYPT=$(readlink -f "$BLKCRYPT")
command -v cryptsetup >/dev/null || { echo "cryptsetup not installed: reencrypt --encrypt --header skipped"; exit 0; }
KILLS=${KILLS:-5}
MiB=$((1024 * 1024))
SIZE=$((8 * MiB)) HZ=$((512 * 1024))
FLAGS=(-q --disable-locks --force-offline-reencrypt --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --key-file "$TMP/pw")
printf pw >"$TMP/pw"
random_file "$TMP/plain" $SIZE
IMG=$TMP/img HDR=$TMP/hdr

check_plain() {
    "$BLKCRYPT" luks decrypt --header "$HDR" --key-file "$TMP/pw" "$IMG" "$TMP/out" || fail "$1: luks decrypt"
    cmp -s "$TMP/plain" "$TMP/out" || fail "$1: the plaintext changed"
    cmp -s "$TMP/plain" "$IMG" && fail "$1: the image is still plain"
    true
}
fresh() { cp "$TMP/plain" "$IMG" && rm -f "$HDR"; }

# Both tools' full runs in each mode, each checked by the other (cryptsetup
# opens ours; its --decrypt gives the plaintext back).
for mode in checksum journal none; do
    fresh
    "$BLKCRYPT" reencrypt --encrypt --header "$HDR" --resilience $mode --hotzone-size $HZ "${FLAGS[@]}" "$IMG" ||
        fail "blkcrypt --encrypt --header ($mode)"
    cryptsetup luksDump "$HDR" | grep -q online-reencrypt && fail "$mode: the requirement is left"
    cryptsetup open --test-passphrase --disable-locks --header "$HDR" --key-file "$TMP/pw" "$IMG" ||
        fail "cryptsetup cannot open ours ($mode)"
    check_plain "blkcrypt --encrypt --header ($mode)"
    if [[ $mode == checksum ]]; then
        cryptsetup reencrypt --decrypt --header "$HDR" "${FLAGS[@]}" "$IMG" || fail "cryptsetup --decrypt of ours"
        cmp -s "$TMP/plain" "$IMG" || fail "cryptsetup's decryption of ours is not the plaintext"
    fi
    [[ $mode == none ]] && continue
    fresh
    cryptsetup reencrypt --encrypt --header "$HDR" --resilience $mode --hotzone-size $HZ "${FLAGS[@]}" "$IMG" ||
        fail "cryptsetup --encrypt --header ($mode)"
    check_plain "cryptsetup's encryption ($mode)"
done
# The init's metadata equals cryptsetup's (salts and digests aside, and the
# digests' PBKDF2 iterations, which cryptsetup benchmarks for the
# verification digest of a --decrypt).
norm() {
    cryptsetup luksDump --dump-json-metadata "$1" | python3 -c '
import json, sys
d = json.load(sys.stdin)
for v in d["digests"].values(): v.pop("salt"); v.pop("digest"); v.pop("iterations")
for v in d["keyslots"].values(): v.get("kdf", {}).pop("salt", None)
print(json.dumps(d, sort_keys=True))'
}
# cryptsetup resumes what a kill left, or meets one of 2.6.1's own end
# states: all steps done, where it completes the finish yet says "Device
# reencryption not in progress" and exits 1; or a decryption killed in its
# finish after the old keyslots were wiped, where no key is left and it
# cannot go on (blkcrypt finishes it, without a key). The data is checked
# after, as always.
cs_resume() {
    local rc=0
    cryptsetup reencrypt --resume-only --header "$HDR" "${FLAGS[@]}" "$IMG" 2>"$TMP/cs.err" || rc=$?
    [[ $rc == 0 ]] && return 0
    if grep -q "Device reencryption not in progress" "$TMP/cs.err" && ! cryptsetup luksDump "$HDR" | grep -q online-reencrypt; then
        cs_end=$((cs_end + 1))
    elif cryptsetup luksDump --dump-json-metadata "$HDR" | python3 -c '
import json, sys
d = json.load(sys.stdin)
sys.exit(0 if not any(k["type"] == "luks2" for k in d["keyslots"].values()) else 1)'; then
        cs_end=$((cs_end + 1))
        "$BLKCRYPT" reencrypt --resume-only --header "$HDR" --key-file "$TMP/pw" "$IMG" || fail "$1: blkcrypt finish"
    else
        fail "$1: cryptsetup resume: $(cat "$TMP/cs.err")"
    fi
}
cs_end=0
for mode in checksum journal; do
    fresh
    "$BLKCRYPT" reencrypt --encrypt --header "$HDR" --init-only --resilience $mode "${FLAGS[@]}" "$IMG" || fail "--init-only"
    cmp -s "$TMP/plain" "$IMG" || fail "--init-only wrote to the data"
    norm "$HDR" >"$TMP/ours.json"
    rm -f "$TMP/hdr.cs"
    cryptsetup reencrypt --encrypt --header "$TMP/hdr.cs" --init-only --resilience $mode "${FLAGS[@]}" "$IMG" ||
        fail "cs --init-only"
    norm "$TMP/hdr.cs" >"$TMP/theirs.json"
    diff "$TMP/theirs.json" "$TMP/ours.json" || fail "$mode: --init-only metadata differs from cryptsetup's"
    # Ours resumed by cryptsetup, theirs by us.
    cryptsetup reencrypt --resume-only --header "$HDR" "${FLAGS[@]}" "$IMG" || fail "cryptsetup resumes our --init-only"
    check_plain "our --init-only, cryptsetup's run"
    cp "$TMP/plain" "$IMG" && mv "$TMP/hdr.cs" "$HDR"
    "$BLKCRYPT" reencrypt --encrypt --resume-only --header "$HDR" "${FLAGS[@]}" "$IMG" || fail "we resume cryptsetup's"
    check_plain "cryptsetup's --init-only, our run"
done
# Refusals: datashift resilience, a reduction with a header.
fresh
expect_exit 1 "$BLKCRYPT" reencrypt --encrypt --header "$HDR" --resilience datashift "${FLAGS[@]}" "$IMG"
grep -q "cannot be applied" "$TMP/stderr" || fail "datashift with --header: $(cat "$TMP/stderr")"
cmp -s "$TMP/plain" "$IMG" || fail "a refused --encrypt wrote to the image"

# settle BY WHAT: a reencryption a kill left mid-way, repaired when its
# hotzone crashed, then resumed by BY (or by whom pick_resumer says).
settle() {
    local by=$1 what=$2
    repair_if_crashed "$by" "$HDR" "$what" --header "$HDR"
    pick_resumer "$by" "$HDR"
    case $RESUMER in
    cryptsetup) cs_resume "$what" ;;
    blkcrypt) "$BLKCRYPT" reencrypt --resume-only --header "$HDR" --key-file "$TMP/pw" "$IMG" || fail "$what: blkcrypt resume" ;;
    esac
}
runs=0 plain_left=0 midway=0 crashed=0
# kill_at's hook: keep what the kill left, for fail().
after_kill() {
    cp "$HDR" "$TMP/killed.hdr" 2>/dev/null || rm -f "$TMP/killed.hdr"
    cp "$IMG" "$TMP/killed.img" && echo "killed at ${1}s: ${*:2}" >"$TMP/killed.point"
}
# finish BY MODE WHAT: what a kill left, finished by BY, then checked.
finish() {
    local by=$1 mode=$2 what=$3
    runs=$((runs + 1))
    if ! cryptsetup isLuks --header "$HDR" "$IMG" 2>/dev/null ||
        { ! cryptsetup luksDump "$HDR" | grep -q online-reencrypt && cmp -s "$TMP/plain" "$IMG"; }; then
        # Killed before the reencryption metadata landed: the data is plain.
        cmp -s "$TMP/plain" "$IMG" || fail "$what: the plain image changed"
        plain_left=$((plain_left + 1))
        rm -f "$HDR"
        "$BLKCRYPT" reencrypt --encrypt --header "$HDR" --resilience $mode "${FLAGS[@]}" "$IMG" || fail "$what: again"
    elif cryptsetup luksDump "$HDR" | grep -q online-reencrypt; then
        midway=$((midway + 1))
        settle "$by" "$what"
    fi
    check_plain "$what"
}

for mode in checksum journal; do
    for ((i = 0; i < KILLS; i++)); do
        fresh
        t=$(delay 200)
        if ((i % 2 == 0)); then
            kill_at "$t" "$BLKCRYPT" reencrypt --encrypt --header "$HDR" --resilience $mode --hotzone-size $HZ "${FLAGS[@]}" "$IMG"
            finish cryptsetup $mode "blkcrypt --encrypt --header ($mode) killed at ${t}s, cryptsetup finished"
        else
            kill_at "$t" cryptsetup reencrypt --encrypt --header "$HDR" --resilience $mode --hotzone-size $HZ "${FLAGS[@]}" "$IMG"
            finish blkcrypt $mode "cryptsetup --encrypt --header ($mode) killed at ${t}s, blkcrypt finished"
        fi
    done
done
# --decrypt --header: each tool decrypts the other's encryption; the
# --init-only metadata equals cryptsetup's and each resumes the other's.
encrypted() {  # IMAGE and HDR: the plaintext encrypted by cryptsetup
    fresh
    cryptsetup reencrypt --encrypt --header "$HDR" "${FLAGS[@]}" "$IMG" || fail "cryptsetup --encrypt"
    cp "$IMG" "$TMP/img.enc" && cp "$HDR" "$TMP/hdr.enc"
}
encrypted
"$BLKCRYPT" reencrypt --decrypt --header "$HDR" --hotzone-size $HZ "${FLAGS[@]}" "$IMG" || fail "blkcrypt --decrypt"
cmp -s "$TMP/plain" "$IMG" || fail "our --decrypt of cryptsetup's is not the plaintext"
cryptsetup luksDump "$HDR" | grep -q online-reencrypt && fail "--decrypt left the requirement"
for mode in checksum journal; do
    cp "$TMP/img.enc" "$IMG" && cp "$TMP/hdr.enc" "$HDR" && cp "$TMP/hdr.enc" "$TMP/hdr.cs"
    "$BLKCRYPT" reencrypt --decrypt --header "$HDR" --init-only --resilience $mode "${FLAGS[@]}" "$IMG" || fail "dec --init-only"
    cmp -s "$TMP/img.enc" "$IMG" || fail "--decrypt --init-only wrote to the data"
    cryptsetup reencrypt --decrypt --header "$TMP/hdr.cs" --init-only --resilience $mode "${FLAGS[@]}" "$IMG" ||
        fail "cs --decrypt --init-only"
    diff <(norm "$TMP/hdr.cs") <(norm "$HDR") || fail "$mode: --decrypt --init-only metadata differs from cryptsetup's"
    cryptsetup reencrypt --resume-only --header "$HDR" "${FLAGS[@]}" "$IMG" || fail "cryptsetup resumes our decrypt"
    cmp -s "$TMP/plain" "$IMG" || fail "our --decrypt --init-only, cryptsetup's run: not the plaintext"
    cp "$TMP/img.enc" "$IMG"
    "$BLKCRYPT" reencrypt --resume-only --header "$TMP/hdr.cs" "${FLAGS[@]}" "$IMG" || fail "we resume cryptsetup's decrypt"
    cmp -s "$TMP/plain" "$IMG" || fail "cryptsetup's --decrypt --init-only, our run: not the plaintext"
done

echo "reencrypt --encrypt --header kill loop: $runs kills, $plain_left before the metadata, $midway left mid-way" \
    "($crashed in a hotzone, $repair_finished finished by blkcrypt's repair); $cs_end end states cryptsetup 2.6.1" \
    "could not take itself, $cs_all_converted its repair left to be converted again (finished by blkcrypt); all finished"

# The decryption killed by SIGKILL, finished by the other tool: DEC_KILLS
# times (default 8, the CI size), each tool killed alternately, checksum
# and journal in turn. Our whole run here takes ~0.5 s (the delay spans it,
# its end included, where cryptsetup's repair of the last hotzone leaves
# the map its resume would convert again: all_converted).
crashed=0 repair_finished=0 cs_end=0 cs_all_converted=0
dec_runs=0 dec_before=0 dec_midway=0
for ((i = 0; i < ${DEC_KILLS:-8}; i++)); do
    cp "$TMP/img.enc" "$IMG" && cp "$TMP/hdr.enc" "$HDR"
    mode=checksum
    ((i / 2 % 2)) && mode=journal
    if ((i % 2 == 0)); then
        by=cryptsetup t=$(delay 500)
        kill_at "$t" "$BLKCRYPT" reencrypt --decrypt --header "$HDR" --resilience $mode --hotzone-size $HZ "${FLAGS[@]}" "$IMG"
    else
        # cryptsetup benchmarks a PBKDF for its digest first (~1-2 s).
        by=blkcrypt t=$(delay 2500)
        kill_at "$t" cryptsetup reencrypt --decrypt --header "$HDR" --resilience $mode --hotzone-size $HZ "${FLAGS[@]}" "$IMG"
    fi
    what="--decrypt --header ($mode) killed at ${t}s, $by finished"
    dec_runs=$((dec_runs + 1))
    if cryptsetup luksDump "$HDR" | grep -q online-reencrypt; then
        dec_midway=$((dec_midway + 1))
        settle "$by" "$what"
    elif cryptsetup luksDump "$HDR" | grep -q "crypt$"; then
        # Killed before the metadata landed: nothing changed.
        cmp -s "$TMP/img.enc" "$IMG" || fail "$what: the data changed before the metadata"
        dec_before=$((dec_before + 1))
        "$BLKCRYPT" reencrypt --decrypt --header "$HDR" "${FLAGS[@]}" "$IMG" || fail "$what: again"
    fi
    cmp -s "$TMP/plain" "$IMG" || fail "$what: not the plaintext"
done

echo "reencrypt --decrypt --header kill loop: $dec_runs kills, $dec_before before the metadata, $dec_midway left" \
    "mid-way ($crashed in a hotzone, $repair_finished finished by blkcrypt's repair); $cs_end end states cryptsetup" \
    "2.6.1 could not take itself, $cs_all_converted its repair left to be converted again (finished by blkcrypt);" \
    "all finished"
