#!/usr/bin/env bash
# README command (1): install dependencies, build, and run the main job on a
# built-in demo.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh -DBLKCRYPT_BUILD_TESTS=OFF -DBLKCRYPT_BUILD_BENCH=OFF >/dev/null
B=./build/cli/blkcrypt

DEMO=$(mktemp -d)
trap 'rm -rf "$DEMO"' EXIT

echo "== blkcrypt list (first entries) =="
# Not "list | head": head closing the pipe early would end blkcrypt with
# SIGPIPE, which pipefail reports as a failure.
$B list >"$DEMO/list.txt"
head -n 40 "$DEMO/list.txt"
echo "... ($(grep -c '^name' "$DEMO/list.txt") entries in all)"
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
echo
echo "== dm-verity: hash tree, verification, tamper detection (blkcrypt verity) =="
# Fixed salt and UUID so every run prints the same root hash.
$B verity format "$DEMO/disk.img" "$DEMO/disk.hash" --salt "$(printf '5a%.0s' {1..32})" \
    --uuid 00000000-1111-4222-8333-444444444444 --root-hash-file "$DEMO/root.txt"
ROOT=$(cat "$DEMO/root.txt")
$B verity verify "$DEMO/disk.img" "$DEMO/disk.hash" "$ROOT" && echo "verify: the untouched image passes"
if command -v veritysetup >/dev/null; then
    veritysetup verify "$DEMO/disk.img" "$DEMO/disk.hash" "$ROOT" && echo "veritysetup verify accepts it too"
fi
cp "$DEMO/disk.img" "$DEMO/tampered.img"
printf 'X' | dd of="$DEMO/tampered.img" bs=1 seek=$((1234 * 4096 + 99)) conv=notrunc status=none
echo "one byte changed in data block 1234 of a copy; verify says:"
rc=0
$B verity verify "$DEMO/tampered.img" "$DEMO/disk.hash" "$ROOT" || rc=$?
if [ "$rc" -ne 2 ]; then
    echo "ERROR: tampering not reported as corruption (exit status $rc)" >&2
    exit 1
fi
echo "(exit status 2 for corrupted blocks, as veritysetup verify gives)"
echo "reading the copy through the verity read path, as a /dev/mapper device would:"
$B verity read "$DEMO/tampered.img" "$DEMO/disk.hash" "$ROOT" --out "$DEMO/read.img" || echo "(read refused)"
echo
echo "== fs-verity file digest (blkcrypt fsverity digest) =="
$B fsverity digest "$DEMO/disk.img"
if command -v fsverity >/dev/null; then fsverity digest "$DEMO/disk.img"; fi
