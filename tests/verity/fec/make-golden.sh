#!/usr/bin/env bash
# Regenerates golden.tsv: each case of cases.tsv formatted by veritysetup
# (lib.sh's fec_case: deterministic AES-128-CTR data, fixed UUID), and the
# sha256 of the file holding the FEC parity, the hash file and the root hash.
# Usage: make-golden.sh   (needs veritysetup from cryptsetup-bin, openssl)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
  echo "# made by make-golden.sh with $(veritysetup --version) on $(date -u +%Y-%m-%d)"
  echo "# name	root_hash	sha256_of_fec_file	sha256_of_hash_file"
  grep -v '^#' "$here/cases.tsv" | while IFS=$'\t' read -r name size iv layout opts; do
    # shellcheck disable=SC2086  # opts is a list of words on purpose
    fec_case veritysetup "$tmp/c" "$size" "$iv" "$layout" $opts
    printf '%s\t%s\t%s\t%s\n' "$name" "$(awk '/^Root hash:/{print $3}' "$tmp/c/summary")" \
      "$(sha256sum <"$tmp/c/fec" | cut -d' ' -f1)" "$(sha256sum <"$tmp/c/hash" | cut -d' ' -f1)"
  done
} >"$here/golden.tsv"
echo "wrote $here/golden.tsv"
