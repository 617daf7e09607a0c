#!/bin/bash
# check.sh - CI test (no kernel needed) against the kernel golden manifest.
# Usage: tests/verity/kernel/check.sh BLKCRYPT [MANIFEST]
#
# manifest.tsv (written by make-kernel-golden.sh) records, per case, images
# that the real Linux dm-verity accepted, and per tampered copy the block the
# kernel named. For every case this script:
#   - regenerates the data file (openssl aes-128-ctr stream, see the manifest
#     header) and checks its size and sha256;
#   - runs `blkcrypt verity format` with the recorded arguments and checks the
#     hash image sha256 and the root hash (so the image is byte-identical to
#     the one the kernel accepted), and the image size against an independent
#     model of the tree geometry (kernel rules, top level first);
#   - checks `blkcrypt verity table` equals the table the kernel loaded;
#   - ok: the kernel read back sha256(data region); `verity verify` passes and
#     `verity read --table` returns the same bytes as the kernel did;
#   - data-flip@OFF: `verity verify` fails naming data block OFF/dbs, as
#     recorded, and so did the kernel ("data block N is corrupted"), or, with
#     ignore_zero_blocks on a zero block, the kernel read zeros and
#     `verity read` returns the same bytes;
#   - hash-flip@OFF: the kernel said "metadata block N" with N = OFF/hbs (it
#     numbers hash blocks by their index on the hash device, superblock and
#     --hash-offset included); ours must name the same absolute block N, with
#     the tree level the geometry gives (the top block as a root mismatch).
# Prints one PASS/FAIL line per case; exits 1 on any mismatch.
set -uo pipefail

BLKCRYPT="${1:?usage: check.sh BLKCRYPT [MANIFEST]}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MANIFEST="${2:-$HERE/manifest.tsv}"
KEY=626c6b63727970742d6b65726e656c21
[ -x "$BLKCRYPT" ] || { echo "FAIL: no blkcrypt binary at $BLKCRYPT"; exit 1; }
[ -f "$MANIFEST" ] || { echo "FAIL: no manifest $MANIFEST"; exit 1; }
for t in openssl sha256sum xxd dd; do command -v $t >/dev/null || { echo "FAIL: needs $t"; exit 1; }; done
KEY_IN_HEADER=$(sed -n 's/^# data: .* -K \([0-9a-f]*\) .*/\1/p' "$MANIFEST")
[ "$KEY_IN_HEADER" = "$KEY" ] || { echo "FAIL: manifest key '$KEY_IN_HEADER' != $KEY"; exit 1; }

W="$(mktemp -d "${TMPDIR:-/tmp}/verity-kernel-check.XXXXXX")"
trap 'rm -rf "$W"' EXIT

source "$HERE/lib.sh"
# the block numbers named in a line like "... data block 7 is corrupted | ..."
named_blocks() { grep -oE '(data|metadata) block [0-9]+' <<< "$1" | sort -u | paste -sd, -; }

ERRS=()
bad() { ERRS+=("$*"); }

check_case() {  # rows of one case in ROWS[]
  local row name recipe fargs oargs mode size dsha hsha root v kres kvsha ktable kline oline
  IFS=$'\t' read -r name recipe fargs oargs mode size dsha hsha root v kres kvsha ktable kline oline <<< "${ROWS[0]}"
  local D="$W/$name" DF HF same=0 FA OA VA fout r_root r_hsha region
  mkdir -p "$D"
  gen_data "$D/orig-data" "$recipe"
  [ "$(stat -c %s "$D/orig-data")" = "$size" ] || bad "data size $(stat -c %s "$D/orig-data") != $size"
  [ "$(sha "$D/orig-data")" = "$dsha" ] || { bad "data sha256 $(sha "$D/orig-data") != $dsha"; return; }
  read -r -a FA <<< "$fargs"
  [ "${FA[0]}" = DATA ] || { bad "format_args must start with DATA"; return; }
  DF="$D/data"; cp "$D/orig-data" "$DF"
  if [ "${FA[1]}" = DATA ]; then same=1; HF="$DF"; else HF="$D/hash"; fi
  FA=("${FA[@]:2}")
  OA=(); [ "$oargs" = - ] || read -r -a OA <<< "$oargs"
  VA=(); local w; for w in "${OA[@]+"${OA[@]}"}"; do [ "$w" = --ignore-zero-blocks ] || VA+=("$w"); done
  local izb=0; [[ " $oargs " == *" --ignore-zero-blocks "* ]] && izb=1

  fout=$("$BLKCRYPT" verity format "$DF" "$HF" "${FA[@]}" 2>&1) || { bad "format failed: $fout"; return; }
  r_root=$(awk '/^Root hash:/{print $NF}' <<< "$fout")
  r_hsha=$(sha "$HF")
  [ "$r_root" = "$root" ] || bad "root hash $r_root != recorded $root"
  [ "$r_hsha" = "$hsha" ] || bad "hash image sha256 $r_hsha != recorded $hsha (not the image the kernel accepted)"
  geometry "$size" "${FA[@]}" || { bad "geometry"; return; }
  [ "$(stat -c %s "$HF")" = $((G_END * G_HBS)) ] \
    || bad "hash image size $(stat -c %s "$HF") != model $((G_END * G_HBS)) ($G_LEVELS levels)"
  region=$(head -c $((G_DB * G_DBS)) "$DF" | sha256sum | cut -c1-64)
  cp "$DF" "$D/fmt-data"; [ $same = 1 ] || cp "$HF" "$D/fmt-hash"

  local table; table=$("$BLKCRYPT" verity table "$DF" "$HF" "$root" "${OA[@]+"${OA[@]}"}" 2>&1)
  local ntable; ntable=$(norm_table <<< "$table")

  for row in "${ROWS[@]}"; do
    IFS=$'\t' read -r name recipe fargs oargs mode size dsha hsha root v kres kvsha ktable kline oline <<< "$row"
    cp "$D/fmt-data" "$DF"; [ $same = 1 ] || cp "$D/fmt-hash" "$HF"
    [ "$ktable" = - ] || [ "$ktable" = "$ntable" ] || bad "$v: our table '$ntable' != kernel table '$ktable'"
    local off=${v#*@} n exp_our exp_k="" out orc got
    case $v in
      ok) exp_our=OK ;;
      data-flip@*)
        flip "$DF" "$off"; n=$((off / G_DBS))
        [ "$n" -lt "$G_DB" ] || bad "$v: offset past the data region"
        exp_our="blkcrypt: data block $n is corrupted"; exp_k="data block $n" ;;
      hash-flip@*)
        flip "$HF" "$off"; n=$((off / G_HBS))
        local l=-1 i
        for ((i = 0; i < G_LEVELS; i++)); do
          [ "$n" -ge "${G_START[i]}" ] && [ "$n" -lt $((G_START[i] + G_BLOCKS[i])) ] && l=$i
        done
        [ $l -ge 0 ] || { bad "$v: hash block $n is not a tree block"; continue; }
        # The top-level block too: a flip makes it disagree with its children (exit 2, as veritysetup).
        exp_our="blkcrypt: hash block $n (tree level $l) is corrupted"
        exp_k="metadata block $n" ;;
      *) bad "unknown variant $v"; continue ;;
    esac
    # ours, now
    out=$("$BLKCRYPT" verity verify "$DF" "$HF" "$root" "${VA[@]+"${VA[@]}"}" 2>&1 >/dev/null); orc=$?
    if [ $orc = 0 ]; then got=OK; else got=$(grep -v 'verification failed' <<< "$out" | paste -sd'|' - | sed 's/|/ | /g'); fi
    [ "$got" = "$oline" ] || bad "$v: verify now says '$got', manifest has '$oline'"
    [ "$oline" = "$exp_our" ] || bad "$v: manifest our_line '$oline' != expected '$exp_our'"
    # the kernel's verdict (recorded) against the offset and against ours
    if [ "$kres" = OK ]; then
      [ "$kline" = - ] || bad "$v: kernel OK but logged '$kline'"
      [ "$kvsha" = "$region" ] || bad "$v: kernel read sha256 $kvsha != data region $region"
      if [ "$v" != ok ]; then
        # only legal case: ignore_zero_blocks and a flip inside a zero data block
        [ "${v%%@*}" = data-flip ] && [ $izb = 1 ] \
          && cmp -s <(head -c "$G_DBS" /dev/zero) <(tail -c +$((n * G_DBS + 1)) "$D/fmt-data" | head -c "$G_DBS") \
          || bad "$v: the kernel accepted a tampered image"
      fi
      # our read path returns what the kernel returned
      local rt; rt=$("$BLKCRYPT" verity table "$DF" "$HF" "$root" "${OA[@]+"${OA[@]}"}" 2>/dev/null)
      rm -f "$D/read.out"
      if "$BLKCRYPT" verity read --table "$rt" --out "$D/read.out" >/dev/null 2>"$D/read.err"; then
        [ "$(sha "$D/read.out")" = "$kvsha" ] || bad "$v: verity read sha256 $(sha "$D/read.out") != kernel $kvsha"
      else
        bad "$v: verity read failed where the kernel succeeded: $(head -2 "$D/read.err" | paste -sd' ' -)"
      fi
    elif [ "$kres" = FAIL ]; then
      [ "$v" != ok ] || bad "ok: the kernel rejected the untampered image"
      got=$(named_blocks "$kline")
      [ "$got" = "$exp_k" ] || bad "$v: kernel named '${got:-nothing}' ($kline), expected '$exp_k' (ours: $oline)"
    else
      bad "$v: kernel result '$kres'"
    fi
  done
}

declare -a ALL=()
while IFS= read -r line; do
  case $line in '#'*|'case	'*|'') continue ;; esac
  ALL+=("$line")
done < "$MANIFEST"
[ ${#ALL[@]} -gt 0 ] || { echo "FAIL: empty manifest"; exit 1; }

T0=$(date +%s%N)
fails=0 ncase=0 i=0
while [ $i -lt ${#ALL[@]} ]; do
  cname=${ALL[i]%%$'\t'*}; ROWS=()
  while [ $i -lt ${#ALL[@]} ] && [ "${ALL[i]%%$'\t'*}" = "$cname" ]; do ROWS+=("${ALL[i]}"); i=$((i + 1)); done
  ERRS=(); ncase=$((ncase + 1))
  check_case
  vs=$(for r in "${ROWS[@]}"; do IFS=$'\t' read -r -a f <<< "$r"; printf '%s=%s ' "${f[9]}" "${f[10]}"; done)
  if [ ${#ERRS[@]} = 0 ]; then
    echo "PASS $cname: ${vs% }"
  else
    fails=$((fails + 1)); echo "FAIL $cname: ${vs% }"
    printf '     %s\n' "${ERRS[@]}"
  fi
  rm -rf "${W:?}/$cname"
done
ms=$((($(date +%s%N) - T0) / 1000000))
if [ $fails = 0 ]; then echo "PASS: all $ncase cases match the kernel golden manifest (${ms} ms)"; exit 0; fi
echo "FAIL: $fails of $ncase cases (${ms} ms)"; exit 1
