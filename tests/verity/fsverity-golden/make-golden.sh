#!/bin/bash
# Recreates manifest.tsv with the real `fsverity digest` (Debian package
# fsverity, fsverity-utils 1.5). Each case's file holds the first SIZE bytes
# of the pattern of fsverity-utils' test_compute_digest.c:
#     byte i = (i % 11 + i % 439 + i % 1103) mod 256
# The manifest keeps only digests and the sha256 of the --out-merkle-tree and
# --out-descriptor outputs, so no large file is committed.
# Usage: tests/verity/fsverity-golden/make-golden.sh   (rewrites manifest.tsv)
set -euo pipefail
cd "$(dirname "$0")"
command -v fsverity >/dev/null || { echo "needs fsverity (apt-get install fsverity)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# name size hash block_size salt_hex ("-" = none)
CASES=(
  "tcd-large       1000000 sha256 4096 -"
  "tcd-small       100000  sha256 4096 -"
  "tcd-one-block   4096    sha256 4096 -"
  "tcd-tiny        1       sha256 4096 -"
  "tcd-empty       0       sha256 4096 -"
  "tcd-salt        1000000 sha256 4096 61626364"
  "tcd-salt32      1000000 sha256 4096 303132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f"
  "tcd-1k          1000000 sha256 1024 -"
  "tcd-512         1000000 sha256 512 -"
  "tcd-64k         1000000 sha256 65536 -"
  "tcd-sha512      1000000 sha512 4096 61626364"
  "block-minus-1   4095    sha256 4096 -"
  "block-plus-1    4097    sha256 4096 -"
  "two-blocks      8192    sha256 4096 -"
  "one-level-full  524288  sha256 4096 -"
  "two-levels      524289  sha256 4096 -"
  "two-levels-odd  1577000 sha256 4096 -"
  "1k-4-levels     1048577 sha256 1024 -"
  "1k-exact        32768   sha256 1024 -"
  "1k-salt1        70001   sha256 1024 ab"
  "salt16          300000  sha256 4096 000102030405060708090a0b0c0d0e0f"
  "salt32-small    5000    sha256 4096 ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"
  "min-block       5000    sha256 64 -"
  "64k-exact       131072  sha256 65536 -"
  "64k-plus-1      65537   sha256 65536 42"
  "sha512-empty    0       sha512 4096 -"
  "sha512-tiny     1       sha512 4096 -"
  "sha512-1k       1000000 sha512 1024 -"
  "sha512-salt32   200000  sha512 4096 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
  "sha512-min      3000    sha512 128 -"
)

python3 - "$TMP/pattern" <<'PY'
import sys
n = 1577000  # the largest SIZE above
open(sys.argv[1], "wb").write(bytes((i % 11 + i % 439 + i % 1103) & 0xFF for i in range(n)))
PY

{
  printf '# name\tsize\thash\tblock_size\tsalt\tdigest\ttree_size\ttree_sha256\tdescriptor_sha256\tcommand\n'
  for c in "${CASES[@]}"; do
    read -r name size hash bs salt <<<"$c"
    f="data-$size"
    head -c "$size" "$TMP/pattern" >"$TMP/$f"
    args=(--hash-alg="$hash" --block-size="$bs")
    [[ $salt != - ]] && args+=(--salt="$salt")
    args+=(--out-merkle-tree=tree --out-descriptor=desc --compact)
    digest=$(cd "$TMP" && fsverity digest "$f" "${args[@]}")
    tree_size=$(stat -c %s "$TMP/tree")
    tree_sha=$(sha256sum <"$TMP/tree" | cut -d' ' -f1)
    desc_sha=$(sha256sum <"$TMP/desc" | cut -d' ' -f1)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$size" "$hash" "$bs" "$salt" \
      "$digest" "$tree_size" "$tree_sha" "$desc_sha" "fsverity digest $f ${args[*]}"
  done
} >manifest.tsv
echo "wrote $(grep -vc '^#' manifest.tsv) cases to $PWD/manifest.tsv ($(fsverity --version))"
