#!/usr/bin/env bash
# README command (1): install dependencies, build, and run the main job on a
# built-in demo.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh -DBLKCRYPT_BUILD_TESTS=OFF -DBLKCRYPT_BUILD_BENCH=OFF >/dev/null
B=./build/cli/blkcrypt

echo "== blkcrypt list (first entries) =="
$B list | head -n 40
echo "..."
echo
echo "== blkcrypt selftest =="
$B selftest | tail -n 15
echo
echo "== one-shot operations =="
printf 'hello, blkcrypt\n' | $B hash --alg sha256
printf 'hello, blkcrypt\n' | sha256sum
printf '0123456789abcdef' | $B skcipher --alg aes --key 000102030405060708090a0b0c0d0e0f --encrypt | od -An -tx1
echo
echo "== dm-crypt image encryption (blkcrypt crypt) =="
DEMO=$(mktemp -d)
trap 'rm -rf "$DEMO"' EXIT
# Deterministic 16 MiB image and key, so every run shows the same bytes.
python3 -c 'import sys, hashlib
for i in range(16 * 1024 * 1024 // 32): sys.stdout.buffer.write(hashlib.sha256(i.to_bytes(8, "little")).digest())' >"$DEMO/disk.img"
python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(64)))' >"$DEMO/demo.key"
$B crypt encrypt --cipher aes-xts-plain64 --key-file "$DEMO/demo.key" --key-size 512 "$DEMO/disk.img" "$DEMO/disk.enc"
echo "ciphertext, first 32 bytes:"
head -c 32 "$DEMO/disk.enc" | od -An -tx1
$B crypt decrypt --cipher aes-xts-plain64 --key-file "$DEMO/demo.key" --key-size 512 "$DEMO/disk.enc" "$DEMO/disk.dec"
cmp "$DEMO/disk.img" "$DEMO/disk.dec" && echo "decrypted == original"
(cd "$DEMO" && sha256sum disk.img disk.dec)
echo "dm table line for the image on /dev/loop0 (as dmsetup table prints it, key hidden):"
$B crypt table --cipher aes-xts-plain64 --key-file "$DEMO/demo.key" --key-size 512 --device /dev/loop0 --size $((16 * 2048))
