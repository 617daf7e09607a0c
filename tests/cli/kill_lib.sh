# The loop machinery of the reencryption kill loops (reencrypt_kill.sh,
# reencrypt_shift_kill.sh, reencrypt_header_kill.sh), sourced after lib.sh.
# They use $TMP/pw as the passphrase and $IMG as the image.

# kill_at SECONDS CMD...: runs CMD in the background and SIGKILLs it then.
kill_at() {
    local t=$1
    shift
    "$@" >/dev/null 2>&1 &
    local pid=$!
    sleep "$t"
    kill -KILL $pid 2>/dev/null || true
    wait $pid 2>/dev/null || true
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
