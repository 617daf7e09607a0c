# Sourced by the CLI test scripts. $1 of the script is the blkcrypt binary.
set -euo pipefail

BLKCRYPT=${1:?usage: $0 path/to/blkcrypt}
TMP=$(mktemp -d)
# Only in the script's own shell: a signal that reaches a child forked for
# `cmd &` before it execs runs this trap there too, and would remove $TMP
# under the script (outputs_faults.sh's SIGHUP loop then saw exit 1, no stderr).
trap '[[ $BASHPID != "$$" ]] || rm -rf "$TMP"' EXIT

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# expect_exit WANT CMD...: runs CMD, keeping its output in $TMP/stdout and
# $TMP/stderr. WANT is an exit code or "nonzero".
expect_exit() {
    local want=$1 rc=0
    shift
    "$@" >"$TMP/stdout" 2>"$TMP/stderr" || rc=$?
    if [[ $want == nonzero ]]; then
        [[ $rc != 0 ]] || fail "exit 0, want non-zero: $*"
    else
        [[ $rc == "$want" ]] || fail "exit $rc, want $want: $* (stderr: $(cat "$TMP/stderr"))"
    fi
}

# After expect_exit: stderr is exactly one "blkcrypt: ..." line.
expect_one_error_line() {
    [[ $(wc -l <"$TMP/stderr") == 1 ]] && grep -q '^blkcrypt: ' "$TMP/stderr" ||
        fail "stderr is not one 'blkcrypt: ...' line: $(cat "$TMP/stderr")"
}

# have_driver NAME: whether `blkcrypt list` names the driver NAME (the
# OpenSSL drivers exist only in a build with BLKCRYPT_WITH_OPENSSL; tested by
# providers.sh). Through a file: grep -q may close a pipe before list ends.
have_driver() {
    "$BLKCRYPT" list >"$TMP/.list" && grep -qE "^driver +: $1\$" "$TMP/.list"
}

# random_file PATH BYTES
random_file() {
    head -c "$2" /dev/urandom >"$1"
}

# flip_byte FILE OFFSET: inverts one byte in place (a fixed byte written over
# random data is no change one time in 256).
flip_byte() {
    python3 -c 'import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2])); b = f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0xff]))' "$1" "$2"
}

# grep_q ARGS...: grep -q that reads all of its input first. Under pipefail,
# `producer | grep -q` fails whenever grep exits on the first match before the
# producer has finished writing (SIGPIPE): a race, not a test result.
grep_q() {
    local all
    all=$(cat)
    grep -q "$@" <<<"$all"
}

# make_test_certs DIR: a CA, a server (localhost, 127.0.0.1) and a client
# certificate made with certtool in qemu's and nbdkit's layout
# (ca-cert.pem, server-cert.pem, server-key.pem, client-*.pem); the CA's
# key stays in $TMP.
make_test_certs() {
    local dir=$1 who
    mkdir -p "$dir"
    printf 'cn = blkcrypt test CA\nca\ncert_signing_key\nexpiration_days = 2\n' >"$TMP/ca.info"
    printf 'cn = localhost\ndns_name = localhost\nip_address = 127.0.0.1\ntls_www_server\nencryption_key\nsigning_key\nexpiration_days = 2\n' >"$TMP/server.info"
    printf 'cn = client\ntls_www_client\nencryption_key\nsigning_key\nexpiration_days = 2\n' >"$TMP/client.info"
    ct() { certtool "$@" >/dev/null 2>&1 || fail "certtool $*"; }
    ct --generate-privkey --outfile "$TMP/ca-key.pem"
    ct --generate-self-signed --load-privkey "$TMP/ca-key.pem" --template "$TMP/ca.info" --outfile "$dir/ca-cert.pem"
    for who in server client; do
        ct --generate-privkey --outfile "$dir/$who-key.pem"
        ct --generate-certificate --load-privkey "$dir/$who-key.pem" --load-ca-certificate "$dir/ca-cert.pem" \
            --load-ca-privkey "$TMP/ca-key.pem" --template "$TMP/$who.info" --outfile "$dir/$who-cert.pem"
    done
    chmod 600 "$dir"/*-key.pem
}
