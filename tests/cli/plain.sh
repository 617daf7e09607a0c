#!/bin/bash
# cryptsetup plain mode in `blkcrypt crypt`: the ciphertext of every case of
# tests/dmcrypt/plain/cases.tsv equals what the kernel wrote through
# `cryptsetup open --type plain` (golden.tsv, made by make-golden.sh with the
# oracle); the terminal prompt (no echo, --verify-passphrase, the 512-byte
# read, the terminal restored after a signal) through a pty; the limits and
# refusals of key files and piped passphrases.
source "$(dirname "$0")/lib.sh"
PLAIN="$(cd "$(dirname "$0")/../dmcrypt/plain" && pwd)"

python3 "$PLAIN/gen.py" plaintext "$TMP/plain.img"
python3 "$PLAIN/gen.py" keyfile "$TMP/kf"

# run_case OPTS INPUT SECTORS ACTION IN OUT: blkcrypt crypt with the case's stdin.
run_case() {
    local opts=$1 input=$2 action=$3 in=$4 out=$5
    [[ $opts == - ]] && opts=
    opts=${opts//KEYFILE/$TMP/kf}
    # shellcheck disable=SC2086  # the options are meant to split
    case $input in
        line:*) printf '%s\n' "${input#line:}" | "$BLKCRYPT" crypt "$action" $opts "$in" "$out" ;;
        keyfile) "$BLKCRYPT" crypt "$action" $opts "$in" "$out" <"$TMP/kf" ;;
        none) "$BLKCRYPT" crypt "$action" $opts "$in" "$out" </dev/null ;;
    esac
}

# --- the kernel's ciphertext for every case
n=0
while IFS=$'\t' read -r name opts input sectors; do
    [[ -z $name || $name == \#* ]] && continue
    want=$(awk -F'\t' -v n="$name" '$1 == n {print $2}' "$PLAIN/golden.tsv")
    [[ -n $want ]] || fail "$name: not in golden.tsv"
    head -c $((sectors * 512)) "$TMP/plain.img" >"$TMP/pt"
    rm -f "$TMP/ct"  # a new OUT: zeros (a hole) before --offset, as the kernel's fresh device
    run_case "$opts" "$input" encrypt "$TMP/pt" "$TMP/ct" 2>"$TMP/err" || fail "$name: encrypt exit $? ($(cat "$TMP/err"))"
    got=$(sha256sum "$TMP/ct" | cut -d' ' -f1)
    [[ $got == "$want" ]] || fail "$name: ciphertext differs from the kernel's"
    run_case "$opts" "$input" decrypt "$TMP/ct" "$TMP/back" 2>"$TMP/err" || fail "$name: decrypt exit $?"
    cmp -s "$TMP/back" "$TMP/pt" || fail "$name: round trip differs"
    n=$((n + 1))
done <"$PLAIN/cases.tsv"
((n >= 10)) || fail "only $n golden cases ran"

# cryptsetup's warnings where a key file makes an option moot (stderr, not stdout).
head -c 8192 "$TMP/plain.img" >"$TMP/pt8k"
"$BLKCRYPT" crypt encrypt -h sha256 -l 10 -d "$TMP/kf" "$TMP/pt8k" "$TMP/w" >"$TMP/out" 2>"$TMP/err"
grep -q 'WARNING: The --hash parameter is being ignored in plain mode with keyfile specified.' "$TMP/err" ||
    fail "no --hash warning: $(cat "$TMP/err")"
grep -q 'WARNING: The --keyfile-size option is being ignored' "$TMP/err" || fail "no --keyfile-size warning"
[[ ! -s $TMP/out ]] || fail "warnings on stdout"

# -h is --hash, not --help: a crypt table line with the hashed key.
line=$(printf 'pass\n' | "$BLKCRYPT" crypt table -c aes-xts-plain64 -s 512 -h sha256 --device /dev/x --size 8 --show-key)
k1=$(printf 'pass' | sha256sum | cut -d' ' -f1)
k2=$(printf 'Apass' | sha256sum | cut -d' ' -f1)
[[ $line == "0 8 crypt aes-xts-plain64 $k1$k2 0 /dev/x 0" ]] || fail "crypt table -h sha256: '$line'"
"$BLKCRYPT" crypt --help | grep_q -- '--hash' || fail "crypt --help"

# --- refusals: one line, exit 2, no OUT
expect_exit 2 "$BLKCRYPT" crypt encrypt -d "$TMP/kf" -s 1024 "$TMP/pt8k" "$TMP/bad"  # 100-byte key file, 128-byte key
expect_one_error_line
expect_exit 2 "$BLKCRYPT" crypt encrypt -d "$TMP/kf" --keyfile-offset 80 "$TMP/pt8k" "$TMP/bad"
expect_one_error_line
expect_exit 2 "$BLKCRYPT" crypt encrypt -d "$TMP/kf" --keyfile-offset 101 "$TMP/pt8k" "$TMP/bad"
expect_one_error_line
expect_exit 2 "$BLKCRYPT" crypt encrypt -h sha256 "$TMP/pt8k" "$TMP/bad" </dev/null
expect_one_error_line
grep -q 'nothing to read' "$TMP/stderr" || fail "empty stdin: $(cat "$TMP/stderr")"
# --keyfile-size counts exactly: a shorter line is refused, as cryptsetup does.
printf 'short\n' >"$TMP/line"
expect_exit 2 "$BLKCRYPT" crypt encrypt -l 20 "$TMP/pt8k" "$TMP/bad" <"$TMP/line"
expect_one_error_line
expect_exit 2 "$BLKCRYPT" crypt encrypt -h nosuchhash "$TMP/pt8k" "$TMP/bad" <"$TMP/line"
expect_one_error_line
expect_exit 2 "$BLKCRYPT" crypt encrypt -h plain:16 "$TMP/pt8k" "$TMP/bad" <"$TMP/line"
expect_one_error_line
expect_exit 2 "$BLKCRYPT" crypt encrypt -s 100 "$TMP/pt8k" "$TMP/bad" <"$TMP/line"
expect_one_error_line
expect_exit 2 "$BLKCRYPT" crypt encrypt --table "aes-xts-plain64 $(printf '0%.0s' $(seq 64)) 0" -h sha256 \
    "$TMP/pt8k" "$TMP/bad"
[[ ! -e $TMP/bad ]] || fail "a refused run left OUT"
# Key files and piped input: 8 MiB at most, as cryptsetup.
head -c $((8 * 1024 * 1024)) /dev/zero >"$TMP/big"
"$BLKCRYPT" crypt encrypt -d - "$TMP/pt8k" "$TMP/ok" <"$TMP/big" || fail "an 8 MiB key input is refused"
printf 'x' >>"$TMP/big"
expect_exit 2 "$BLKCRYPT" crypt encrypt -d - "$TMP/pt8k" "$TMP/bad" <"$TMP/big"
expect_one_error_line

# --- the terminal prompt, through a pty
# Reference: the same passphrase piped.
printf 'tty secret\n' | "$BLKCRYPT" crypt encrypt -c aes-xts-plain64 -s 512 -h sha256 "$TMP/pt8k" "$TMP/ref"
long=$(printf 'x%.0s' $(seq 600))
printf '%s\n' "${long:0:511}" | "$BLKCRYPT" crypt encrypt -h sha256 "$TMP/pt8k" "$TMP/ref511"
PYTHONPATH=$(dirname "$0") python3 - "$BLKCRYPT" "$TMP" <<'PY' || fail "terminal prompt"
import os, signal, sys, time
import pty_session

blk, tmp = sys.argv[1], sys.argv[2]

def spawn(args):
    """blkcrypt step by step on a pty, its slave kept open for echo_on()."""
    return pty_session.Session([blk] + args)

base = ["crypt", "encrypt", "-c", "aes-xts-plain64", "-s", "512", "-h", "sha256", tmp + "/pt8k"]

# 1. prompt, no echo, same key as piped; echo back on afterwards.
t = spawn(base + [tmp + "/tty1"])
t.read_until("Enter passphrase for %s/tty1: " % tmp)
time.sleep(pty_session.REPLY_DELAY)
assert not t.echo_on(), "echo is on at the prompt"
t.send("tty secret", 0)
rc, out = t.drain()
assert rc == 0, "prompt: exit %d %r" % (rc, out)
assert b"tty secret" not in out, "the passphrase was echoed"
assert t.echo_on(), "echo not restored"
assert open(tmp + "/tty1", "rb").read() == open(tmp + "/ref", "rb").read(), "prompted key differs from piped"

# 2. --verify-passphrase: a mismatch is refused, a match works.
def verified(option, out, first, second):
    t = spawn(base + [option, out])
    t.read_until("Enter passphrase for ")
    t.send(first)
    t.read_until("Verify passphrase: ")
    t.send(second)
    return t.drain()

rc, out = verified("-y", tmp + "/tty2", "one", "two")
assert rc == 2 and b"Passphrases do not match." in out, "mismatch: %d %r" % (rc, out)
assert not os.path.exists(tmp + "/tty2")
rc, out = verified("--verify-passphrase", tmp + "/tty3", "tty secret", "tty secret")
assert rc == 0, "verify: %d %r" % (rc, out)
assert open(tmp + "/tty3", "rb").read() == open(tmp + "/ref", "rb").read()

# 3. a 600-character line: cryptsetup's single 512-byte read keeps 511.
t = spawn(["crypt", "encrypt", "-h", "sha256", tmp + "/pt8k", tmp + "/tty4"])
t.read_until("Enter passphrase for ")
t.send("x" * 600)
rc, out = t.drain()
assert rc == 0, "long line: %d %r" % (rc, out)
assert open(tmp + "/tty4", "rb").read() == open(tmp + "/ref511", "rb").read(), "long line: not the first 511"

# 4. a signal at the prompt: the terminal gets its echo back, no OUT.
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    t = spawn(base + [tmp + "/tty5"])
    t.read_until("Enter passphrase for ")
    time.sleep(pty_session.REPLY_DELAY)
    assert not t.echo_on()
    t.proc.send_signal(sig)
    rc, out = t.drain()
    assert rc != 0, "%s: exit 0" % sig
    assert t.echo_on(), "%s: echo not restored" % sig
    assert not os.path.exists(tmp + "/tty5"), "%s left OUT" % sig

# 5. --keyfile-offset makes no sense at a terminal.
t = spawn(base + ["--keyfile-offset", "1", tmp + "/tty6"])
rc, out = t.drain()
assert rc == 2 and b"terminal" in out, "offset at a tty: %d %r" % (rc, out)
PY
echo "plain mode: ok ($n kernel cases)"
