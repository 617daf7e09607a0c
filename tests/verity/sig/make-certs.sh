#!/usr/bin/env bash
# Makes the test keys and certificates of tests/unit/signature_test.cpp and
# tests/cli/verity_sig.sh, fsverity_sig.sh (test keys only, never trust them
# anywhere). Run once in this directory; the outputs are committed.
#   rsa.key/rsa.pem      RSA 2048, self-signed, valid 2026..2126
#   ec.key/ec.pem        P-256, self-signed
#   ca.key/ca.pem        RSA CA; leaf.key/leaf.pem signed by it
#   expired.key/expired.pem  self-signed, valid 2020-01-01..2021-01-01
#   other.key/other.pem  an unrelated self-signed RSA certificate
set -euo pipefail
cd "$(dirname "$0")"
selfsigned() {  # NAME KEYOPTS...
    local name=$1; shift
    openssl req -x509 -new "$@" -nodes -keyout "$name.key" -out "$name.pem" -days 36500 \
        -subj "/CN=blkcrypt test $name" -addext keyUsage=digitalSignature 2>/dev/null
}
selfsigned rsa -newkey rsa:2048
selfsigned ec -newkey ec -pkeyopt ec_paramgen_curve:P-256
selfsigned other -newkey rsa:2048
openssl req -x509 -new -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 36500 \
    -subj "/CN=blkcrypt test ca" -addext basicConstraints=critical,CA:TRUE 2>/dev/null
openssl req -new -newkey rsa:2048 -nodes -keyout leaf.key -out leaf.csr -subj "/CN=blkcrypt test leaf" 2>/dev/null
openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -set_serial 4660 -days 36500 -out leaf.pem 2>/dev/null
rm -f leaf.csr
# openssl x509 has no start date option before 3.4: openssl ca sets both dates.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
openssl req -new -newkey rsa:2048 -nodes -keyout expired.key -out "$tmp/req.csr" -subj "/CN=blkcrypt test expired" 2>/dev/null
touch "$tmp/index.txt"
echo 1000 >"$tmp/serial"
cat >"$tmp/ca.cnf" <<CNF
[ca]
default_ca = d
[d]
database = $tmp/index.txt
serial = $tmp/serial
new_certs_dir = $tmp
default_md = sha256
policy = p
[p]
commonName = supplied
CNF
openssl ca -batch -config "$tmp/ca.cnf" -selfsign -keyfile expired.key -in "$tmp/req.csr" \
    -startdate 20200101000000Z -enddate 20210101000000Z -out "$tmp/expired.pem" 2>/dev/null
openssl x509 -in "$tmp/expired.pem" -out expired.pem
