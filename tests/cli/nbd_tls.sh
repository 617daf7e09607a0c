#!/usr/bin/env bash
# TLS (NBD_OPT_STARTTLS) against the real clients: nbdinfo and nbdcopy
# (libnbd) with x509 certificates and PSK, qemu-img with tls-creds-x509 and
# tls-creds-psk; refusals (no TLS when required, wrong key, unknown user, no
# client certificate with --tls-verify-peer, open key files, non-loopback
# without TLS). Certificates and keys are made here with certtool and psktool.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nbd_lib.sh"
need nbdinfo nbdcopy qemu-img certtool psktool python3
# The probe's image is a regular file: the image is checked before --tls.
truncate -s 1M "$TMP/probe.img"
"$BLKCRYPT" serve --tls require --tls-psk /dev/null --socket "$TMP/x" "$TMP/probe.img" >"$TMP/probe" 2>&1 || true
if grep_q "built without TLS" <"$TMP/probe"; then
    echo "nbd_tls: built without TLS (BLKCRYPT_WITH_TLS=OFF): the refusal was checked, nothing else"
    exit 0
fi
# Built with TLS, the probe must have failed on its PSK file (/dev/null), not on TLS.
grep_q -F "/dev/null" <"$TMP/probe" || fail "TLS probe: $(cat "$TMP/probe")"
# GnuTLS is loaded by the commands that serve TLS and by no other (its load
# and its dependencies' were most of the start-up of a small fsverity digest).
LD_DEBUG=files "$BLKCRYPT" serve --tls require --tls-psk /dev/null --socket "$TMP/x" "$TMP/probe.img" >/dev/null 2>"$TMP/probe.ld" || true
grep_q 'file=libgnutls' <"$TMP/probe.ld" || fail "serve --tls did not load GnuTLS"
printf 'x' >"$TMP/one"
LD_DEBUG=files "$BLKCRYPT" fsverity digest "$TMP/one" >/dev/null 2>"$TMP/digest.ld" || fail "fsverity digest"
if grep -E 'file=lib(gnutls|p11-kit|nettle|gmp)' "$TMP/digest.ld"; then fail "fsverity digest loaded GnuTLS or its libraries"; fi
URI="nbds+unix:///?socket=$SOCK"

# --- credentials: a CA, a server and a client certificate (qemu's layout) --
C=$TMP/certs
mkdir -p "$TMP/noclient" "$TMP/psk"
make_test_certs "$C"
cp "$C/ca-cert.pem" "$TMP/noclient/"   # a client that trusts the server but has no certificate
psktool -u alice -p "$TMP/psk/keys.psk" >/dev/null 2>&1 || fail "psktool"
psktool -u alice -p "$TMP/wrong.psk" >/dev/null 2>&1 || fail "psktool"
chmod 600 "$TMP/psk/keys.psk"
# the image served, and what the clients must read
random_file "$TMP/img" $((2 << 20))
cp "$TMP/img" "$TMP/orig"

# --- x509: nbdinfo, nbdcopy both ways, qemu-img --------------------------
start_server serve --socket "$SOCK" --tls-certs "$C" "$TMP/img"   # credentials alone: require
X="$URI&tls-certificates=$C"
T nbdinfo "$X" >"$TMP/info" || fail "nbdinfo over TLS: $(cat "$TMP/info")"
grep_q "with TLS" <"$TMP/info" || fail "nbdinfo: not TLS: $(cat "$TMP/info")"
T nbdcopy --connections=2 "$X" "$TMP/out"
cmp "$TMP/orig" "$TMP/out" || fail "nbdcopy over TLS differs"
random_file "$TMP/new" $((2 << 20))
T nbdcopy "$TMP/new" "$X"
T qemu-img compare --object tls-creds-x509,id=t,dir="$C",endpoint=client --image-opts \
    "driver=nbd,path=$SOCK,tls-creds=t,tls-hostname=localhost" "driver=file,filename=$TMP/new" >/dev/null ||
    fail "qemu-img compare over TLS"
T qemu-img info --object tls-creds-x509,id=t,dir="$C",endpoint=client \
    --image-opts "driver=nbd,path=$SOCK,tls-creds=t,tls-hostname=localhost" >"$TMP/qinfo" ||
    fail "qemu-img info over TLS"
grep_q "2097152 bytes" <"$TMP/qinfo" || fail "qemu-img info: $(cat "$TMP/qinfo")"
# A client without TLS gets nothing: the server requires it.
expect_exit nonzero T nbdinfo "nbd+unix:///?socket=$SOCK"
expect_exit nonzero T qemu-img info "nbd+unix:///?socket=$SOCK"
stop_server
cmp "$TMP/new" "$TMP/img" || fail "what nbdcopy wrote over TLS is not in the image"
grep_q "export '' tls structured" <"$TMP/log" || fail "no TLS connection logged: $(cat "$TMP/log")"
grep_q "TLS required (x509)" <"$TMP/log" || fail "start line: $(cat "$TMP/log")"

# --- --tls on: both kinds of client ------------------------------------
start_server serve --read-only --socket "$SOCK" --tls on --tls-certs "$C" "$TMP/img"
T nbdinfo "$X" | grep_q "with TLS" || fail "--tls on: TLS client"
T nbdinfo "nbd+unix:///?socket=$SOCK" | grep_q "without TLS" || fail "--tls on: plain client"
stop_server

# --- --tls-verify-peer: a client certificate signed by the CA is needed ---
start_server serve --read-only --socket "$SOCK" --tls-certs "$C" --tls-verify-peer "$TMP/img"
T nbdinfo "$X" | grep_q "with TLS" || fail "verify-peer: the client with a certificate"
expect_exit nonzero T nbdinfo "$URI&tls-certificates=$TMP/noclient"
stop_server

# --- PSK: libnbd's tls-psk-file and user, qemu's tls-creds-psk -------------
start_server serve --read-only --socket "$SOCK" --tls require --tls-psk "$TMP/psk/keys.psk" "$TMP/img"
P="nbds+unix://alice@/?socket=$SOCK&tls-psk-file=$TMP/psk/keys.psk"
T nbdcopy "$P" "$TMP/out2"
cmp "$TMP/new" "$TMP/out2" || fail "nbdcopy over TLS-PSK differs"
T qemu-img compare --object tls-creds-psk,id=t,dir="$TMP/psk",endpoint=client,username=alice --image-opts \
    "driver=nbd,path=$SOCK,tls-creds=t" "driver=file,filename=$TMP/new" >/dev/null || fail "qemu-img over TLS-PSK"
expect_exit nonzero T nbdinfo "nbds+unix://alice@/?socket=$SOCK&tls-psk-file=$TMP/wrong.psk"  # wrong key
expect_exit nonzero T nbdinfo "nbd+unix:///?socket=$SOCK"                                     # no TLS
stop_server
grep_q "TLS handshake failed" <"$TMP/log" || fail "the wrong key's handshake is not logged: $(cat "$TMP/log")"

# --- TCP: loopback, and anything else only with --tls require ---------------
start_server serve --read-only --port 0 --tls-certs "$C" "$TMP/img"
port=$(sed -n 's/.*on 127\.0\.0\.1:\([0-9]*\), TLS.*/\1/p' "$TMP/log" | tail -n 1)
[[ -n $port ]] || fail "no port in the log: $(cat "$TMP/log")"
T nbdinfo "nbds://127.0.0.1:$port/?tls-certificates=$C" | grep_q "with TLS" || fail "TLS over TCP"
stop_server
expect_exit 2 "$BLKCRYPT" serve --port 0 --bind 0.0.0.0 --tls on --tls-certs "$C" "$TMP/img"
grep_q "needs --tls require" <"$TMP/stderr" || fail "0.0.0.0 with --tls on: $(cat "$TMP/stderr")"
start_server serve --read-only --port 0 --bind 0.0.0.0 --tls-certs "$C" "$TMP/img"
stop_server
expect_exit 2 "$BLKCRYPT" serve --port 0 --bind 0.0.0.0 "$TMP/img"
grep_q "not a loopback address: serving it needs --tls require" <"$TMP/stderr" || fail "0.0.0.0: $(cat "$TMP/stderr")"

# --- refusals of the configuration ------------------------------------------
chmod 640 "$C/server-key.pem"
expect_exit 2 "$BLKCRYPT" serve --socket "$SOCK" --tls-certs "$C" "$TMP/img"
grep_q "server-key.pem: permissions 0640 are too open" <"$TMP/stderr" || fail "open key: $(cat "$TMP/stderr")"
chmod 600 "$C/server-key.pem"
chmod 604 "$TMP/psk/keys.psk"
expect_exit 2 "$BLKCRYPT" serve --socket "$SOCK" --tls-psk "$TMP/psk/keys.psk" "$TMP/img"
grep_q "keys.psk: permissions 0604 are too open" <"$TMP/stderr" || fail "open psk: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" serve --socket "$SOCK" --tls require "$TMP/img"
grep_q "needs --tls-certs DIR or --tls-psk FILE" <"$TMP/stderr" || fail "no credentials: $(cat "$TMP/stderr")"
expect_exit 2 "$BLKCRYPT" serve --socket "$SOCK" --tls maybe --tls-certs "$C" "$TMP/img"
expect_exit 2 "$BLKCRYPT" serve --socket "$SOCK" --tls-psk "$TMP/wrong.psk" --tls-verify-peer "$TMP/img"
expect_exit 2 "$BLKCRYPT" serve --socket "$SOCK" --tls off --tls-certs "$C" "$TMP/img"
printf 'alice:zz\n' >"$TMP/bad.psk" && chmod 600 "$TMP/bad.psk"
expect_exit 2 "$BLKCRYPT" serve --socket "$SOCK" --tls-psk "$TMP/bad.psk" "$TMP/img"
grep_q "line 1: the key is not hex" <"$TMP/stderr" || fail "bad psk: $(cat "$TMP/stderr")"
[[ ! -e $SOCK ]] || fail "a refused configuration left its socket"
echo "nbd_tls: ok"
