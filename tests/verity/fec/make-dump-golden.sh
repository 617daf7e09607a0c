#!/usr/bin/env bash
# Regenerates dump/NAME.txt: `veritysetup dump HASH --fec-device FEC` with the
# case's --fec-roots, --fec-offset and --hash-offset, for each case of
# cases.tsv that has a superblock (lib.sh's fec_case formats it first; dump
# prints the names as given, so it runs in the case's directory).
# Usage: make-dump-golden.sh   (needs veritysetup from cryptsetup-bin, openssl)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$here/dump"
grep -v '^#' "$here/cases.tsv" | while IFS=$'\t' read -r name size iv layout opts; do
  [[ $opts == *--no-superblock* ]] && continue
  # shellcheck disable=SC2086  # opts is a list of words on purpose
  fec_case veritysetup "$tmp/c" "$size" "$iv" "$layout" $opts
  dopts=$(fec_dump_options "$opts")
  # shellcheck disable=SC2086
  (cd "$tmp/c" && veritysetup dump hash --fec-device fec $dopts) >"$here/dump/$name.txt"
done
echo "made with $(veritysetup --version) on $(date -u +%Y-%m-%d)" >"$here/dump/VERSION"
echo "wrote $here/dump/"
