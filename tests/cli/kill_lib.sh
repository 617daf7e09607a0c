# The loop machinery of the reencryption kill loops (reencrypt_kill.sh,
# reencrypt_shift_kill.sh, reencrypt_header_kill.sh), sourced after lib.sh.
# They use $TMP/pw as the passphrase and $IMG as the image.

# kill_at SECONDS CMD...: runs CMD in the background and SIGKILLs it then;
# a script's after_kill SECONDS CMD..., if defined, runs after.
kill_at() {
    local t=$1
    shift
    "$@" >/dev/null 2>&1 &
    local pid=$!
    sleep "$t"
    kill -KILL $pid 2>/dev/null || true
    wait $pid 2>/dev/null || true
    if declare -F after_kill >/dev/null; then after_kill "$t" "$@"; fi
}

# delay MS: a random delay under MS milliseconds, as seconds for sleep.
delay() {
    local r=$((RANDOM % $1))
    printf '%d.%03d' $((r / 1000)) $((r % 1000))
}

# repair_if_crashed BY HEADER WHAT [OPTION...]: when HEADER's metadata says a
# hotzone crashed, counts it in $crashed and repairs $IMG with BY
# (cryptsetup or blkcrypt), the OPTIONs (--header FILE) added.
repair_if_crashed() {
    local by=$1 header=$2 what=$3
    shift 3
    cryptsetup luksDump "$header" | grep -q "in-reencryption" || return 0
    crashed=$((crashed + 1))
    if [[ $by == cryptsetup ]]; then
        cryptsetup repair -q --disable-locks "$@" --key-file "$TMP/pw" "$IMG" || fail "$what: cryptsetup repair"
    else
        "$BLKCRYPT" repair "$@" --key-file "$TMP/pw" "$IMG" || fail "$what: blkcrypt repair"
    fi
}

# all_converted HEADER: the map "every sector converted, not yet finished"
# (one live segment, the final one, the requirement still set). cryptsetup 2.6.1's own run
# writes it before its finish and its repair of a crash in the last hotzone
# leaves it; its resume reads it as "nothing done" (_offset_forward,
# _offset_backward) and converts the whole device a second time, destroying
# the data (docs/luks.md). blkcrypt never writes it and finishes it.
all_converted() {
    cryptsetup luksDump --dump-json-metadata "$1" | python3 -c '
import json, sys
d = json.load(sys.stdin)
if not any(r.startswith("online-reencrypt") for r in d["config"].get("requirements", {}).get("mandatory", [])): sys.exit(1)
segs = d["segments"]
live = [k for k, s in segs.items() if not any(f.startswith("backup-") for f in s.get("flags", []))]
final = [k for k, s in segs.items() if "backup-final" in s.get("flags", [])]
if len(live) != 1 or len(final) != 1: sys.exit(1)
# The one live segment is the final one (not the initial map, where it is
# the previous one): linear both, or on the digest of the final one.
l, f = live[0], final[0]
same = segs[l]["type"] == segs[f]["type"] == "linear" or \
    any(l in g["segments"] and f in g["segments"] for g in d["digests"].values())
sys.exit(0 if same else 1)'
}

# pick_resumer BY HEADER: after repair_if_crashed, sets RESUMER to who
# resumes $IMG: none when the repair finished the reencryption (blkcrypt's
# repair of the last hotzone does), blkcrypt where cryptsetup would convert
# everything again (all_converted), else BY. Both cases are counted.
repair_finished=0 cs_all_converted=0
pick_resumer() {
    RESUMER=$1
    if ! cryptsetup luksDump "$2" | grep -q online-reencrypt; then
        RESUMER=none
        repair_finished=$((repair_finished + 1))
    elif [[ $1 == cryptsetup ]] && all_converted "$2"; then
        RESUMER=blkcrypt
        cs_all_converted=$((cs_all_converted + 1))
    fi
}
