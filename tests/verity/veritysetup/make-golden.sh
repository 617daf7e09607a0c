#!/usr/bin/env bash
# Regenerates golden.tsv: for every case in cases.tsv, the data file is made
# deterministically (AES-128-CTR keystream, key 000102..0f, the case's IV:
#   head -c N /dev/zero | openssl enc -aes-128-ctr -nosalt -K 000102030405060708090a0b0c0d0e0f -iv IV)
# and `veritysetup format DATA HASH --uuid FIXED OPTIONS` builds the tree.
# golden.tsv records veritysetup's root hash and the sha256 of its hash file.
# Usage: make-golden.sh   (needs veritysetup from cryptsetup-bin, openssl)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
uuid=00000000-1111-4222-8333-444444444444
{
  echo "# made by make-golden.sh with $(veritysetup --version) on $(date -u +%Y-%m-%d)"
  echo "# name	root_hash	sha256_of_hash_file	hash_file_bytes"
  grep -v '^#' "$here/cases.tsv" | while IFS=$'\t' read -r name size iv opts; do
    head -c "$size" /dev/zero |
      openssl enc -aes-128-ctr -nosalt -K 000102030405060708090a0b0c0d0e0f -iv "$iv" >"$tmp/data"
    rm -f "$tmp/hash"
    # shellcheck disable=SC2086  # opts is a list of words on purpose
    root=$(veritysetup format "$tmp/data" "$tmp/hash" --uuid "$uuid" $opts </dev/null | awk '/^Root hash:/{print $3}')
    printf '%s\t%s\t%s\t%s\n' "$name" "$root" "$(sha256sum <"$tmp/hash" | cut -d' ' -f1)" "$(stat -c %s "$tmp/hash")"
  done
} >"$here/golden.tsv"
echo "wrote $here/golden.tsv"
