#!/bin/bash
# blkcrypt reencrypt's LUKS2 options beyond a plain re-key, against
# cryptsetup 2.6.1 live (skipped without it):
# 1. --device-size: only the first SIZE bytes re-encrypted, the segment maps
#    in cryptsetup's "fixed size mode" (the old rest a fixed-size segment),
#    the data area byte for byte cryptsetup's with the same new volume key,
#    each tool resuming a run the other stopped mid-way; its refusals.
# 2. --keep-key: the volume key and its keyslots kept, the metadata of
#    --init-only equal to cryptsetup's, the data area byte for byte
#    cryptsetup's, each tool resuming the other's init and mid-way stop; the
#    combinations cryptsetup refuses, refused in its words.
# 3. --resilience on --resume-only: the reencrypt keyslot rewritten and its
#    digest made again (cryptsetup resumes it, so it verifies), for a run
#    started by either tool; refused for a data shift, in cryptsetup's words.
# 4. --encrypt with --volume-key-file (the data as cryptsetup's with the same
#    key), and with a detached header --luks2-keyslots-size, --offset (the
#    init equal to cryptsetup's) and --device-size (only that much encrypted).
# 5. luks decrypt of an image mid-way through a reencryption names
#    `blkcrypt reencrypt --resume-only`, and not cryptsetup when the device
#    has an integrity profile (cryptsetup cannot reencrypt those).
source "$(dirname "$0")/lib.sh"
BLKCRYPT=$(readlink -f "$BLKCRYPT")
command -v cryptsetup >/dev/null || { echo "cryptsetup not installed: reencrypt option tests skipped"; exit 0; }
# The KDF costs forced: cryptsetup otherwise benchmarks PBKDF2 (about a
# second) for each new keyslot and reencryption digest.
CS=(cryptsetup reencrypt -q --disable-locks --force-offline-reencrypt --key-file "$TMP/pw" --pbkdf pbkdf2
    --pbkdf-force-iterations 1000)
BC=("$BLKCRYPT" reencrypt -q --key-file "$TMP/pw")
# The interpreter itself: a version manager's python3 shim costs a quarter
# of a second a call, and the header is read dozens of times.
PY=$(python3 -c 'import sys; print(sys.executable)')
MiB=$((1024 * 1024))
DATA=$((16 * MiB))  # where cryptsetup's default LUKS2 header puts the data
printf pw >"$TMP/pw"
random_file "$TMP/plain" $((8 * MiB))
head -c 64 /dev/urandom >"$TMP/vk_old"
head -c 64 /dev/urandom >"$TMP/vk_new"

# fresh IMG [luksFormat args]: the 8 MiB of $TMP/plain under the volume key vk_old.
fresh() {
    local img=$1
    shift
    rm -f "$img"
    truncate -s $((24 * MiB)) "$img"
    cryptsetup luksFormat -q --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
        --volume-key-file "$TMP/vk_old" "$@" "$img" "$TMP/pw" || fail "luksFormat $*"
    "$BLKCRYPT" luks encrypt --key-file "$TMP/pw" "$TMP/plain" "$img" 2>/dev/null || fail "luks encrypt"
}
# data IMG: the sha256 of the data area (everything after the header).
data() { tail -c +$((DATA + 1)) "$1" | sha256sum | cut -d' ' -f1; }
# json IMG: the header's JSON, through cryptsetup.
json() { cryptsetup luksDump --disable-locks --dump-json-metadata "$1"; }
# shape IMG: the JSON without salts, digests and iterations (random or
# benchmarked), for comparing two tools' metadata.
shape() {
    json "$1" | "$PY" -c 'import json, sys
j = json.load(sys.stdin)
for d in j["digests"].values():
    for k in ("salt", "digest", "iterations"): d.pop(k, None)
for k in j["keyslots"].values():
    k.pop("kdf", None)
print(json.dumps(j, sort_keys=True))'
}
# live IMG: "offset:size" of each live (non-backup) segment, in order.
live() {
    json "$1" | "$PY" -c 'import json, sys
s = json.load(sys.stdin)["segments"]
print(" ".join(v["offset"] + ":" + v["size"] for k, v in sorted(s.items(), key=lambda e: int(e[0])) if not v.get("flags")))'
}
# stop_midway IMG CMD...: runs CMD in the background and SIGINTs it once a
# step of its own has landed (the live segments changed, two of them), then
# waits: the header is left mid-way. Returns 1 when the run ended first.
stop_midway() {
    local img=$1 pid rc was now
    shift
    was=$(live "$img" 2>/dev/null || true)
    "$@" >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 2000); do
        kill -0 $pid 2>/dev/null || break
        now=$(live "$img" 2>/dev/null || true)
        [[ $now != "$was" && $(wc -w <<<"$now") -ge 2 ]] && break
        sleep 0.005
    done
    kill -INT $pid 2>/dev/null || true
    rc=0
    wait $pid || rc=$?
    json "$img" | grep -q online-reencrypt || return 1
    [[ $(live "$img" | wc -w) -ge 2 ]] || fail "stop_midway: no step landed before the stop: $*"
}
# midway IMG CMD...: stop_midway, up to three times from IMG as it was.
midway() {
    local img=$1
    shift
    cp "$img" "$TMP/midway.orig"
    for _ in 1 2 3; do
        stop_midway "$img" "$@" && return 0
        cp "$TMP/midway.orig" "$img"
    done
    fail "midway: the run always ended before the interrupt: $*"
}
# same IMG WHAT [BYTES]: the first BYTES (all) of the plaintext are $TMP/plain's.
same() {
    "$BLKCRYPT" luks decrypt --key-file "$TMP/pw" "$1" "$TMP/out" || fail "$2: luks decrypt"
    cmp -s -n "${3:-$((8 * MiB))}" "$TMP/plain" "$TMP/out" || fail "$2: the plaintext changed"
}
IMG=$TMP/img

# --- 1. --device-size
fresh "$TMP/base"
SIZE=$((5 * MiB))
# cryptsetup's full run with the new key vk_new is the reference: only the
# first SIZE bytes change, and the finished header is one dynamic segment.
cp "$TMP/base" "$TMP/cs"
"${CS[@]}" --volume-key-file "$TMP/vk_new" --device-size $SIZE "$TMP/cs" || fail "cryptsetup --device-size"
REF=$(data "$TMP/cs")
cp "$TMP/base" "$IMG"
"${BC[@]}" --volume-key-file "$TMP/vk_new" --device-size $SIZE --hotzone-size 1M "$IMG" || fail "--device-size"
[[ $(data "$IMG") == "$REF" ]] || fail "--device-size: the data area is not cryptsetup's"
[[ $(live "$IMG") == "$DATA:dynamic" ]] || fail "--device-size: finished header $(live "$IMG")"
cmp -s -i $DATA -n $SIZE "$TMP/base" "$IMG" && fail "--device-size: nothing was re-encrypted"
cmp -s -i $((DATA + SIZE)) "$TMP/base" "$IMG" || fail "--device-size: bytes beyond SIZE changed"
same "$IMG" "--device-size" $SIZE
# Ours stopped mid-way: cryptsetup's fixed-size map (new | old, their sizes
# summing to SIZE), which cryptsetup resumes to the same bytes.
cp "$TMP/base" "$IMG"
midway "$IMG" "${BC[@]}" --volume-key-file "$TMP/vk_new" --device-size $SIZE --hotzone-size 64K "$IMG"
read -r a b <<<"$(live "$IMG")"
[[ ${a#*:} != dynamic && ${b#*:} != dynamic && $((${a#*:} + ${b#*:})) == "$SIZE" ]] ||
    fail "--device-size: our mid-way map is not fixed-size: $a $b"
"${CS[@]}" --resume-only --device-size $SIZE "$IMG" || fail "cryptsetup resumes our --device-size run"
[[ $(data "$IMG") == "$REF" ]] || fail "--device-size: cryptsetup's resume of ours differs"
# cryptsetup's stopped mid-way, resumed by us.
cp "$TMP/base" "$IMG"
midway "$IMG" "${CS[@]}" --volume-key-file "$TMP/vk_new" --device-size $SIZE --hotzone-size 64K "$IMG"
"${BC[@]}" --resume-only --device-size $SIZE "$IMG" || fail "we resume cryptsetup's --device-size run"
[[ $(data "$IMG") == "$REF" ]] || fail "--device-size: our resume of cryptsetup's differs"
# Refusals, nothing written: past the data, not a sector multiple.
cp "$TMP/base" "$IMG"
before=$(sha256sum <"$IMG")
expect_exit 1 "${BC[@]}" --device-size $((DATA + 4096)) "$IMG"
grep -q "Reduced data size is larger than real device size." "$TMP/stderr" || fail "too large: $(cat "$TMP/stderr")"
expect_exit 1 "${BC[@]}" --device-size 6144 "$IMG"
grep -q "not aligned to encryption sector size (4096 bytes)" "$TMP/stderr" || fail "unaligned: $(cat "$TMP/stderr")"
[[ $(sha256sum <"$IMG") == "$before" ]] || fail "a refused --device-size wrote"

# --- 2. --keep-key
cp "$TMP/base" "$TMP/cs"
"${CS[@]}" --keep-key --sector-size 512 "$TMP/cs" || fail "cryptsetup --keep-key"
REF=$(data "$TMP/cs")
cp "$TMP/base" "$IMG"
"${BC[@]}" --keep-key --sector-size 512 --hotzone-size 2M "$IMG" || fail "--keep-key"
[[ $(data "$IMG") == "$REF" ]] || fail "--keep-key: the data area is not cryptsetup's"
cryptsetup luksDump -q --disable-locks --dump-volume-key --volume-key-file "$TMP/vk_out" --key-file "$TMP/pw" "$IMG" \
    >/dev/null || fail "--keep-key: luksDump --dump-volume-key"
cmp -s "$TMP/vk_old" "$TMP/vk_out" || fail "--keep-key: the volume key changed"
json "$IMG" | "$PY" -c 'import json, sys
j = json.load(sys.stdin)
assert list(j["keyslots"]) == ["0"] and j["segments"]["0"]["sector_size"] == 512, j
assert "requirements" not in j["config"], j' || fail "--keep-key: finished header"
same "$IMG" "--keep-key"
# --init-only: cryptsetup's metadata, and either tool resumes the other's.
cp "$TMP/base" "$IMG"
"${BC[@]}" --keep-key --sector-size 512 --init-only "$IMG" || fail "--keep-key --init-only"
cp "$TMP/base" "$TMP/cs_init"
"${CS[@]}" --keep-key --sector-size 512 --init-only "$TMP/cs_init" || fail "cryptsetup --keep-key --init-only"
[[ $(shape "$IMG") == "$(shape "$TMP/cs_init")" ]] ||
    fail "--keep-key --init-only differs from cryptsetup's: $(shape "$IMG") vs $(shape "$TMP/cs_init")"
"${BC[@]}" --resume-only "$TMP/cs_init" || fail "we resume cryptsetup's --keep-key init"
[[ $(data "$TMP/cs_init") == "$REF" ]] || fail "--keep-key: our resume of cryptsetup's init differs"
# Mid-way stops, each resumed by the other tool.
cp "$TMP/base" "$IMG"
midway "$IMG" "${BC[@]}" --keep-key --sector-size 512 --hotzone-size 64K "$IMG"
"${CS[@]}" --resume-only "$IMG" || fail "cryptsetup resumes our mid-way --keep-key run"
[[ $(data "$IMG") == "$REF" ]] || fail "--keep-key: cryptsetup's resume of our mid-way run differs"
cp "$TMP/base" "$IMG"
midway "$IMG" "${CS[@]}" --keep-key --sector-size 512 --hotzone-size 64K "$IMG"
"${BC[@]}" --resume-only "$IMG" || fail "we resume cryptsetup's mid-way --keep-key run"
[[ $(data "$IMG") == "$REF" ]] || fail "--keep-key: our resume of cryptsetup's mid-way run differs"
# Refusals in cryptsetup's words, nothing written.
cp "$TMP/base" "$IMG"
for args in "--keep-key" "--keep-key --cipher aes-xts-plain64 --sector-size 4096"; do
    # shellcheck disable=SC2086
    expect_exit 1 "${BC[@]}" $args "$IMG"
    grep -q "No data segment parameters changed. Reencryption aborted." "$TMP/stderr" || fail "$args: $(cat "$TMP/stderr")"
done
expect_exit 1 "${BC[@]}" --keep-key --cipher aes-cbc-essiv:sha256 "$IMG"
grep -q "Unable to use cipher specification aes-cbc-essiv:sha256 for LUKS2." "$TMP/stderr" ||
    fail "--keep-key with a cipher the key does not fit: $(cat "$TMP/stderr")"
expect_exit 1 "${BC[@]}" --keep-key --sector-size 512 -s 256 "$IMG"
grep -q "keeps the 512-bit volume key" "$TMP/stderr" || fail "--keep-key -s: $(cat "$TMP/stderr")"
[[ $(sha256sum <"$IMG") == "$before" ]] || fail "a refused --keep-key wrote"

# --- 3. another --resilience on --resume-only
area() { json "$1" | "$PY" -c 'import json, sys
print(" ".join(k["area"]["type"] + ":" + str(k["area"].get("hash", "")) for k in json.load(sys.stdin)["keyslots"].values() if k["type"] == "reencrypt"))'; }
# cryptsetup's init: ours switches to journal and is stopped, then to
# checksum with sha512 and is stopped; cryptsetup's resume verifies the
# digest we made (it refuses metadata that does not match it).
cp "$TMP/base" "$IMG"
"${CS[@]}" --init-only "$IMG" || fail "cryptsetup init"
[[ $(area "$IMG") == checksum:sha256 ]] || fail "cryptsetup init: area $(area "$IMG")"
midway "$IMG" "${BC[@]}" --resume-only --resilience journal --hotzone-size 64K "$IMG"
[[ $(area "$IMG") == "journal:" ]] || fail "--resilience journal: area $(area "$IMG")"
midway "$IMG" "${BC[@]}" --resume-only --resilience checksum --resilience-hash sha512 --hotzone-size 64K "$IMG"
[[ $(area "$IMG") == checksum:sha512 ]] || fail "--resilience-hash sha512: area $(area "$IMG")"
"${CS[@]}" --resume-only "$IMG" || fail "cryptsetup resumes after our resilience changes"
same "$IMG" "resilience changes"
# Our init; cryptsetup switches it to journal mid-way, we resume with none.
cp "$TMP/base" "$IMG"
"${BC[@]}" --init-only "$IMG" || fail "init"
midway "$IMG" "${CS[@]}" --resume-only --resilience journal --hotzone-size 64K "$IMG"
[[ $(area "$IMG") == "journal:" ]] || fail "cryptsetup's journal switch: area $(area "$IMG")"
"${BC[@]}" --resume-only --resilience none "$IMG" || fail "our resume with --resilience none"
same "$IMG" "resilience none after cryptsetup's journal"
# Refusals: datashift asked for a re-key; any change of a data shift.
cp "$TMP/base" "$IMG"
"${BC[@]}" --volume-key-file "$TMP/vk_new" --init-only "$IMG" || fail "init"
before=$(sha256sum <"$IMG")
expect_exit 1 "${BC[@]}" --resume-only --resilience datashift "$IMG"
grep -q "Requested --resilience option cannot be applied to current reencryption operation." "$TMP/stderr" ||
    fail "datashift on a re-key: $(cat "$TMP/stderr")"
[[ $(sha256sum <"$IMG") == "$before" ]] || fail "a refused --resilience wrote"
rm -f "$IMG"
truncate -s $((40 * MiB)) "$IMG"
dd if="$TMP/plain" of="$IMG" conv=notrunc status=none
"${BC[@]}" --encrypt --reduce-device-size 32M --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --init-only "$IMG" ||
    fail "--encrypt --init-only"
before=$(sha256sum <"$IMG")
for by in blkcrypt cryptsetup; do
    if [[ $by == blkcrypt ]]; then
        expect_exit 1 "${BC[@]}" --resume-only --resilience journal "$IMG"
    else
        expect_exit 1 "${CS[@]}" --resume-only --resilience journal "$IMG"
    fi
    grep -q "Device is in reencryption using datashift resilience. Requested --resilience option cannot be applied." \
        "$TMP/stderr" || fail "$by, journal on a data shift: $(cat "$TMP/stderr")"
done
[[ $(sha256sum <"$IMG") == "$before" ]] || fail "a refused datashift change wrote"

# --- 4. --encrypt with --volume-key-file, --luks2-keyslots-size, --device-size
ENC=(--encrypt --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --volume-key-file "$TMP/vk_new")
# A detached header: the init equals cryptsetup's (keyslots area, reencrypt
# area), and the data is byte for byte cryptsetup's: the first 4 MiB
# encrypted with vk_new, the rest as it was.
cp "$TMP/plain" "$TMP/cs"
"${CS[@]}" "${ENC[@]}" --header "$TMP/cs.hdr" --luks2-keyslots-size 1M --device-size 4M "$TMP/cs" ||
    fail "cryptsetup --encrypt --header with the options"
cmp -s -n $((4 * MiB)) "$TMP/plain" "$TMP/cs" && fail "cryptsetup encrypted nothing"
cmp -s -i $((4 * MiB)) "$TMP/plain" "$TMP/cs" || fail "cryptsetup --device-size 4M wrote past it"
cp "$TMP/plain" "$IMG"
rm -f "$TMP/our.hdr" "$TMP/cs_init.hdr"
"${BC[@]}" "${ENC[@]}" --header "$TMP/our.hdr" --luks2-keyslots-size 1M --device-size 4M --init-only "$IMG" ||
    fail "--encrypt --header with the options, --init-only"
cp "$TMP/plain" "$TMP/cs_init"
"${CS[@]}" "${ENC[@]}" --header "$TMP/cs_init.hdr" --luks2-keyslots-size 1M --init-only "$TMP/cs_init" ||
    fail "cryptsetup --encrypt --header --init-only"
[[ $(shape "$TMP/our.hdr") == "$(shape "$TMP/cs_init.hdr")" ]] ||
    fail "--encrypt --luks2-keyslots-size init differs: $(shape "$TMP/our.hdr") vs $(shape "$TMP/cs_init.hdr")"
cp "$TMP/plain" "$IMG"
rm -f "$TMP/our.hdr"
"${BC[@]}" "${ENC[@]}" --header "$TMP/our.hdr" --luks2-keyslots-size 1M --device-size 4M "$IMG" ||
    fail "--encrypt --header with the options"
cmp -s "$TMP/cs" "$IMG" || fail "--encrypt --header --device-size: the data is not cryptsetup's"
[[ $(json "$TMP/our.hdr" | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["config"]["keyslots_size"])') == 1048576 ]] ||
    fail "--luks2-keyslots-size not in the finished header"
expect_exit 1 "${BC[@]}" "${ENC[@]}" --header "$TMP/new.hdr" --device-size $((9 * MiB)) "$IMG"
grep -q "Reduced data size is larger than real device size." "$TMP/stderr" || fail "encrypt too large: $(cat "$TMP/stderr")"
# --offset with a detached header: the data starts there in IMAGE (the
# keyslots area up to it); init and result as cryptsetup's.
cp "$TMP/plain" "$TMP/cs"
rm -f "$TMP/cs.hdr" "$TMP/cs_init.hdr" "$TMP/our.hdr"
"${CS[@]}" "${ENC[@]}" --header "$TMP/cs.hdr" --offset 4096 "$TMP/cs" || fail "cryptsetup --encrypt --header --offset"
cp "$TMP/plain" "$TMP/cs_init"
"${CS[@]}" "${ENC[@]}" --header "$TMP/cs_init.hdr" --offset 4096 --init-only "$TMP/cs_init" ||
    fail "cryptsetup --encrypt --header --offset --init-only"
cp "$TMP/plain" "$IMG"
"${BC[@]}" "${ENC[@]}" --header "$TMP/our.hdr" --offset 4096 --init-only "$IMG" || fail "--encrypt --header --offset --init-only"
[[ $(shape "$TMP/our.hdr") == "$(shape "$TMP/cs_init.hdr")" ]] ||
    fail "--encrypt --header --offset init differs: $(shape "$TMP/our.hdr") vs $(shape "$TMP/cs_init.hdr")"
"${BC[@]}" --resume-only --header "$TMP/our.hdr" "$IMG" || fail "--encrypt --header --offset"
cmp -s "$TMP/cs" "$IMG" || fail "--encrypt --header --offset: the data is not cryptsetup's"
cmp -s -n $((2 * MiB)) "$TMP/plain" "$IMG" || fail "--encrypt --header --offset wrote before the offset"
# In place with a data shift and --volume-key-file: the data as cryptsetup's
# (from the new data offset, 4 MiB, to the end of the 8 MiB plaintext kept).
for who in cs ours; do
    rm -f "$TMP/$who"
    truncate -s $((16 * MiB)) "$TMP/$who"
    dd if="$TMP/plain" of="$TMP/$who" conv=notrunc status=none
done
"${CS[@]}" "${ENC[@]}" --reduce-device-size 8M "$TMP/cs" || fail "cryptsetup --encrypt --reduce-device-size --volume-key-file"
"${BC[@]}" "${ENC[@]}" --reduce-device-size 8M "$TMP/ours" || fail "--encrypt --reduce-device-size --volume-key-file"
cmp -s -i $((4 * MiB)) -n $((8 * MiB)) "$TMP/cs" "$TMP/ours" ||
    fail "--encrypt --reduce-device-size --volume-key-file: the data is not cryptsetup's"

# --- 5. the message of luks decrypt mid-way through a reencryption
cp "$TMP/base" "$IMG"
"${BC[@]}" --volume-key-file "$TMP/vk_new" --init-only "$IMG" || fail "init"
expect_exit 1 "$BLKCRYPT" luks decrypt --key-file "$TMP/pw" "$IMG" "$TMP/out"
grep -q "blkcrypt reencrypt --resume-only or cryptsetup reencrypt --resume-only" "$TMP/stderr" ||
    fail "decrypt mid-way: $(cat "$TMP/stderr")"
rm -f "$IMG"
truncate -s $((6 * MiB)) "$IMG"
"$BLKCRYPT" luks format -q --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --luks2-metadata-size 16k \
    --luks2-keyslots-size 1m --offset 4096 --integrity hmac-sha256 --key-file "$TMP/pw" "$IMG" ||
    fail "luks format --integrity"
"${BC[@]}" --init-only "$IMG" || fail "integrity init"
expect_exit 1 "$BLKCRYPT" luks decrypt --key-file "$TMP/pw" "$IMG" "$TMP/out"
grep -q "finish it first with blkcrypt reencrypt --resume-only (cryptsetup cannot reencrypt" "$TMP/stderr" ||
    fail "integrity decrypt mid-way: $(cat "$TMP/stderr")"
! grep -q "cryptsetup reencrypt" "$TMP/stderr" || fail "integrity decrypt mid-way names cryptsetup: $(cat "$TMP/stderr")"
"${BC[@]}" --resume-only "$IMG" || fail "integrity resume as the message says"
echo "reencrypt options: ok"
