#!/bin/bash
# blkcrypt reencrypt of LUKS2 containers with an integrity profile
# (luksFormat --integrity), which cryptsetup 2.6.1 refuses: a re-key
# (aes-xts-plain64 + hmac-sha256, then -s 256, then aes-cbc-plain64;
# aes-gcm-random with a new key size)
# rewrites every block's data and tag under the new key, keeps the
# dm-integrity superblock and journal byte for byte, and the result is
# checked block by block by python3-cryptography under the new volume key
# (not our code) and read back by `luks decrypt`; cryptsetup luksDump takes
# the header mid-way (with the requirement that stops an open) and at the
# end. Refusals: a tag layout the device cannot hold, a new sector
# size, checksum resilience; a tampered block stops the run before its
# step, naming its sector. Then a SIGKILL loop (KILLS kills, default 8)
# at random moments, each followed by blkcrypt repair + resume: the
# plaintext and every tag come back.
source "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
BLKCRYPT=$(readlink -f "$BLKCRYPT")
command -v cryptsetup >/dev/null || { echo "cryptsetup not installed: reencrypt integrity tests skipped"; exit 0; }
KILLS=${KILLS:-8}
CS=(cryptsetup reencrypt -q --disable-locks --force-offline-reencrypt)
KiB=1024 MiB=$((1024 * 1024))
printf pw >"$TMP/pw"
random_file "$TMP/plain" $((2 * MiB))
have_py=1
python3 -c 'import cryptography' 2>/dev/null || { have_py=0; echo "python3-cryptography missing: no independent tag check"; }

# make IMG KEYFILE FORMAT-ARGS...: a 6 MiB --integrity container with a 1 MiB
# keyslots area and the data at 2 MiB, $TMP/plain written at its start, under
# the volume key in KEYFILE.
make() {
    local img=$1 vk=$2
    shift 2
    rm -f "$img"
    truncate -s $((6 * MiB)) "$img"
    "$BLKCRYPT" luks format -q --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --luks2-metadata-size 16k \
        --luks2-keyslots-size 1m --offset 4096 --volume-key-file "$vk" --key-file "$TMP/pw" "$@" "$img" ||
        fail "luks format $*"
    "$BLKCRYPT" luks encrypt --key-file "$TMP/pw" "$TMP/plain" "$img" 2>/dev/null || fail "luks encrypt $*"
}
# The dm-integrity superblock and journal as stored (what must not change);
# with START INITIAL given, from those sectors without asking python again.
layout() {
    local start=${2:-} initial=${3:-}
    [[ -n $initial ]] || read -r start initial _ < <(python3 "$HERE/luks2_integrity_check.py" "$1" - - 0)
    [[ -n $initial ]] || fail "no dm-integrity layout in $1"
    dd if="$1" bs=512 skip="$start" count="$initial" status=none | sha256sum | cut -d' ' -f1
}
same() {  # same IMG WHAT: the whole plaintext device is the original one
    "$BLKCRYPT" luks decrypt --key-file "$TMP/pw" "$1" "$TMP/out" || fail "$2: luks decrypt"
    cmp -s "$TMP/orig" "$TMP/out" || fail "$2: the plaintext changed"
}
truth() {  # truth IMG VK WHAT: python3-cryptography opens the first blocks under VK
    ((have_py)) || return 0
    python3 "$HERE/luks2_integrity_check.py" "$1" "$2" "$TMP/plain" 16 || fail "$3: python3-cryptography disagrees"
}
vk() { head -c "$2" /dev/urandom >"$TMP/$1"; }

IMG=$TMP/img
# --- 1. aes-xts-plain64 + hmac-sha256 (96-byte key), journal by default.
vk old96 96
vk new96 96
make "$IMG" "$TMP/old96" --integrity hmac-sha256 --sector-size 4096
"$BLKCRYPT" luks decrypt --key-file "$TMP/pw" "$IMG" "$TMP/orig" || fail "decrypt before"
cmp -s -n $((2 * MiB)) "$TMP/plain" "$TMP/orig" || fail "luks encrypt did not write the plaintext"
truth "$IMG" "$TMP/old96" "before"
lay=$(layout "$IMG")
# cryptsetup still refuses, in its words, and writes nothing.
before=$(sha256sum <"$IMG")
"${CS[@]}" --key-file "$TMP/pw" "$IMG" 2>"$TMP/err" && fail "cryptsetup reencrypted an integrity profile"
grep -q "Reencryption of device with integrity profile is not supported." "$TMP/err" ||
    fail "cryptsetup's words changed: $(cat "$TMP/err")"
[[ $(sha256sum <"$IMG") == "$before" ]] || fail "cryptsetup's refusal wrote"
# Stopped after init: luksDump takes it, cryptsetup will not open it.
expect_exit 0 "$BLKCRYPT" reencrypt --init-only --key-file "$TMP/pw" --volume-key-file "$TMP/new96" "$IMG"
cryptsetup luksDump "$IMG" >"$TMP/dump" || fail "luksDump mid-way"
grep -q "online-reencrypt-v2" "$TMP/dump" && grep -q "reencrypt (unbound)" "$TMP/dump" &&
    grep -q "journal" "$TMP/dump" || fail "mid-way dump: $(cat "$TMP/dump")"
# The requirement stops an open (ours here: cryptsetup's needs root); cryptsetup
# does not resume it either.
"$BLKCRYPT" luks decrypt --key-file "$TMP/pw" "$IMG" "$TMP/out" 2>"$TMP/err" && fail "opened mid-way"
grep -q "online-reencrypt" "$TMP/err" || fail "mid-way open: $(cat "$TMP/err")"
# (it gets as far as its storage wrapper, which has no userspace AEAD, and
# fails there, having written nothing).
before=$(sha256sum <"$IMG")
"${CS[@]}" --resume-only --key-file "$TMP/pw" "$IMG" 2>"$TMP/err" && fail "cryptsetup resumed it"
[[ $(sha256sum <"$IMG") == "$before" ]] || fail "cryptsetup's failed resume wrote"
expect_exit 0 "$BLKCRYPT" reencrypt --resume-only --key-file "$TMP/pw" "$IMG"
cryptsetup luksDump "$IMG" >"$TMP/dump" || fail "luksDump after"
grep -q "reencrypt\|online-reencrypt" "$TMP/dump" && fail "reencryption metadata left: $(cat "$TMP/dump")"
grep -q "integrity: hmac(sha256)" "$TMP/dump" || fail "the integrity profile is gone: $(cat "$TMP/dump")"
[[ $(layout "$IMG") == "$lay" ]] || fail "the dm-integrity superblock or journal changed"
same "$IMG" "xts+hmac re-key"
truth "$IMG" "$TMP/new96" "xts+hmac re-key"
((have_py)) && python3 "$HERE/luks2_integrity_check.py" "$IMG" "$TMP/old96" "$TMP/plain" 1 2>/dev/null &&
    fail "the old volume key still opens the data"
# A new key size with the same tag layout (aes-xts 256 + hmac: 64 bytes), no journal.
vk new64 64
expect_exit 0 "$BLKCRYPT" reencrypt --key-file "$TMP/pw" -s 256 --resilience none --volume-key-file "$TMP/new64" "$IMG"
same "$IMG" "xts 256 re-key"
truth "$IMG" "$TMP/new64" "xts 256 re-key"
# A new cipher with the same tags: authenc(hmac(sha256),cbc(aes))-plain64.
expect_exit 0 "$BLKCRYPT" reencrypt --key-file "$TMP/pw" -c aes-cbc-plain64 -s 256 "$IMG"
cryptsetup luksDump "$IMG" | grep -q "cipher: aes-cbc-plain64" || fail "cbc: luksDump"
same "$IMG" "cbc re-key"

# --- 2. Refused, nothing written: tags of another size, a new sector size, checksums.
before=$(sha256sum <"$IMG")
expect_exit 1 "$BLKCRYPT" reencrypt --key-file "$TMP/pw" -c aes-xts-random "$IMG"
grep -q "needs 48-byte tags; the dm-integrity device keeps 32-byte ones" "$TMP/stderr" ||
    fail "xts-random: $(cat "$TMP/stderr")"
expect_exit 1 "$BLKCRYPT" reencrypt --key-file "$TMP/pw" --sector-size 512 "$IMG"
grep -q "dm-integrity block size, fixed at format" "$TMP/stderr" || fail "sector size: $(cat "$TMP/stderr")"
expect_exit 1 "$BLKCRYPT" reencrypt --key-file "$TMP/pw" --resilience checksum "$IMG"
grep -q "Resilience checksum cannot protect a device with an integrity profile" "$TMP/stderr" ||
    fail "checksum: $(cat "$TMP/stderr")"
[[ $(sha256sum <"$IMG") == "$before" ]] || fail "a refusal wrote"
# A block whose tag fails under the old key (block 5's data flipped): the
# run stops before its step, naming the sector, the header left resumable.
read -r _ _ data < <(python3 "$HERE/luks2_integrity_check.py" "$IMG" - - 0)
cp "$IMG" "$TMP/tampered"
flip_byte "$TMP/tampered" $((data + 5 * 4096 + 10))
expect_exit 1 "$BLKCRYPT" reencrypt --key-file "$TMP/pw" "$TMP/tampered"
grep -q "sector 40 of the dm-integrity device fails its integrity check" "$TMP/stderr" ||
    fail "tampered: $(cat "$TMP/stderr")"
cryptsetup luksDump "$TMP/tampered" | grep -q "in-reencryption" && fail "tampered: a step was marked"

# --- 3. aes-gcm-random (random IVs in the tags), 128-bit key to 256-bit.
vk old16 16
vk new32 32
make "$IMG" "$TMP/old16" --cipher aes-gcm-random --integrity aead --key-size 128 --sector-size 4096
"$BLKCRYPT" luks decrypt --key-file "$TMP/pw" "$IMG" "$TMP/orig" || fail "decrypt gcm before"
truth "$IMG" "$TMP/old16" "gcm before"
lay=$(layout "$IMG")
expect_exit 0 "$BLKCRYPT" reencrypt --key-file "$TMP/pw" --key-size 256 --volume-key-file "$TMP/new32" \
    --hotzone-size 256k "$IMG"
[[ $(layout "$IMG") == "$lay" ]] || fail "gcm: the dm-integrity superblock or journal changed"
same "$IMG" "gcm re-key"
truth "$IMG" "$TMP/new32" "gcm re-key"
cryptsetup luksDump "$IMG" | grep -q "cipher: aes-gcm-random" || fail "gcm: luksDump"

# --- 4. SIGKILL at random moments; blkcrypt repair + resume gives back the
# plaintext with valid tags (luks decrypt checks every tag).
make "$TMP/template" "$TMP/old96" --integrity hmac-sha256 --sector-size 4096
"$BLKCRYPT" luks decrypt --key-file "$TMP/pw" "$TMP/template" "$TMP/orig" || fail "decrypt template"
read -r start initial _ < <(python3 "$HERE/luks2_integrity_check.py" "$TMP/template" - - 0)
lay=$(layout "$TMP/template" "$start" "$initial")
runs=0 midway=0 crashed=0
for ((i = 0; i < KILLS; i++)); do
    cp "$TMP/template" "$IMG"
    t=$(printf '0.%03d' $((RANDOM % 500)))
    "$BLKCRYPT" reencrypt --key-file "$TMP/pw" --hotzone-size 256k "$IMG" >/dev/null 2>&1 &
    pid=$!
    sleep "$t"
    kill -KILL $pid 2>/dev/null || true
    wait $pid 2>/dev/null || true
    runs=$((runs + 1))
    if cryptsetup luksDump "$IMG" | grep -q "online-reencrypt"; then
        midway=$((midway + 1))
        if cryptsetup luksDump "$IMG" | grep -q "in-reencryption"; then
            crashed=$((crashed + 1))
            "$BLKCRYPT" repair --key-file "$TMP/pw" "$IMG" || fail "kill at ${t}s: repair"
        fi
        # A repair of the last hotzone finishes the reencryption.
        if cryptsetup luksDump "$IMG" | grep -q "online-reencrypt"; then
            "$BLKCRYPT" reencrypt --resume-only --key-file "$TMP/pw" "$IMG" || fail "kill at ${t}s: resume"
        fi
    fi
    [[ $(layout "$IMG" "$start" "$initial") == "$lay" ]] ||
        fail "kill at ${t}s: the dm-integrity superblock or journal changed"
    same "$IMG" "kill at ${t}s"
done
((crashed > 0 || KILLS < 5)) || echo "note: no kill landed inside a step this time"
echo "reencrypt integrity kill loop: $runs kills, $midway left mid-way, $crashed with a crashed hotzone; all recovered"
