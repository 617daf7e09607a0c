#!/bin/bash
# make-kernel-golden.sh - regenerate tests/verity/kernel/manifest.tsv with the
# real Linux dm-verity (the qemu kernel oracle in /work/shared/oracle).
#
# Usage: tests/verity/kernel/make-kernel-golden.sh [BLKCRYPT]
#   BLKCRYPT  the blkcrypt CLI (default: /tmp/build-main/cli/blkcrypt)
#   ORACLE=DIR       the oracle folder (default /work/shared/oracle)
#   KEEP_WORK=1      keep the work directory (images and oracle logs)
# Needs the oracle (runs ./build.sh, which is idempotent) and about 12 minutes
# of TCG emulation on 2 cores: one oracle boot per (case, variant), run one
# after the other.
#
# Data files (never committed; check.sh regenerates them):
#   openssl enc -aes-128-ctr -nosalt -K 626c6b63727970742d6b65726e656c21 \
#       -iv <IV> < /dev/zero | head -c SIZE
#   The key is the ASCII text "blkcrypt-kernel!". IV is 0x...00NN, NN = case
#   number (distinct per case). Recipe "zero=OFF+LEN,..." then overwrites those
#   byte ranges with zeros (runs of zero blocks for ignore_zero_blocks).
# For every case the hash image is built with `blkcrypt verity format` with a
# fixed --salt and --uuid, then the kernel checks:
#   ok               untampered: expect VERITY OK, verity-sha256 == sha256 of
#                    the data region (data_blocks * data_block_size bytes)
#   data-flip@OFF    byte OFF of the data file XOR 0xff: expect VERITY FAIL with
#                    "data block OFF/dbs is corrupted" (in the ignore_zero_blocks
#                    case a flip inside a zero block reads back as zeros: OK)
#   hash-flip@OFF    byte OFF of the hash image XOR 0xff: expect VERITY FAIL with
#                    "metadata block OFF/hbs is corrupted"
# and `blkcrypt verity verify` runs on the same copies; its block line is
# recorded. At the end check.sh is run on the new manifest.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BLKCRYPT="${1:-/tmp/build-main/cli/blkcrypt}"
ORACLE="${ORACLE:-/work/shared/oracle}"
KEY=626c6b63727970742d6b65726e656c21
MANIFEST="$HERE/manifest.tsv"
[ -x "$BLKCRYPT" ] || { echo "no blkcrypt binary at $BLKCRYPT" >&2; exit 2; }
BLKCRYPT="$(cd "$(dirname "$BLKCRYPT")" && pwd)/$(basename "$BLKCRYPT")"
for t in openssl sha256sum xxd dd; do command -v $t >/dev/null || { echo "needs $t" >&2; exit 2; }; done

W="$(mktemp -d "${TMPDIR:-/tmp}/verity-kernel-golden.XXXXXX")"
if [ "${KEEP_WORK:-0}" = 1 ]; then echo "work directory: $W" >&2; else trap 'rm -rf "$W"' EXIT; fi
log() { echo "[golden] $*" >&2; }

"$ORACLE/build.sh" >&2

# ----------------------------------------------------------------- helpers
hexiv() { printf '%032x' "$1"; }
salt_of() {  # deterministic salt of N bytes: sha256("blkcrypt-kernel-salt-<tag>-<i>") blocks
  local tag=$1 n=$2 s="" i=0
  while [ ${#s} -lt $((2 * n)) ]; do
    s+=$(printf 'blkcrypt-kernel-salt-%s-%d' "$tag" $i | sha256sum | cut -c1-64); i=$((i + 1))
  done
  printf '%s' "${s:0:$((2 * n))}"
}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# ----------------------------------------------------------------- guest info
printf 'uname -a\nveritysetup --version\n' > "$W/info.sh"
GUEST_INFO="$(ORACLE_QUIET=1 "$ORACLE/run-in-kernel.sh" "$W/info.sh" 2>/dev/null | tr -d '\r' | paste -sd';' -)"
log "guest: $GUEST_INFO"

# ----------------------------------------------------------------- cases
# no|name|data recipe (iv is added)|format args after DATA HASH ("@same" = tree in
# the data file)|open args (veritysetup open / blkcrypt verify,table)|kernel mode
# (veritysetup|table)|data-flip blocks ("auto" or list)|hash-flip level ("-" none, "top", N)
U=b1c0ffee-0000-4000-8000-0000000000
CASES=(
  "1|sha256-4k-salt32|size=4194304|--hash sha256 --data-block-size 4096 --hash-block-size 4096 --salt $(salt_of 1 32) --uuid ${U}01||veritysetup|auto|0"
  "2|sha1-512-1024|size=1048576|--hash sha1 --data-block-size 512 --hash-block-size 1024 --salt $(salt_of 2 32) --uuid ${U}02||veritysetup|auto|1"
  "3|sha512-format0-1k-4k|size=2097152|--format 0 --hash sha512 --data-block-size 1024 --hash-block-size 4096 --salt $(salt_of 3 32) --uuid ${U}03||veritysetup|auto|top"
  "4|no-superblock|size=3145728|--no-superblock --hash sha256 --data-block-size 4096 --hash-block-size 4096 --data-blocks 768 --salt $(salt_of 4 32)|--no-superblock --hash sha256 --data-block-size 4096 --hash-block-size 4096 --data-blocks 768 --salt $(salt_of 4 32)|veritysetup|auto|0"
  "5|same-file-hash-offset|size=2097152|@same --hash sha256 --data-blocks 512 --hash-offset 2105344 --salt $(salt_of 5 32) --uuid ${U}05|--hash-offset 2105344|veritysetup|auto|top"
  "6|salt-none|size=1048576|--salt - --uuid ${U}06||veritysetup|auto|0"
  "7|salt-256|size=1572864|--salt $(salt_of 7 256) --uuid ${U}07||veritysetup|auto|top"
  "8|one-block-no-tree|size=4096|--salt $(salt_of 8 32) --uuid ${U}08||veritysetup|auto|-"
  "9|many-levels-512|size=2097664|--hash sha256 --data-block-size 512 --hash-block-size 512 --salt $(salt_of 9 32) --uuid ${U}09||veritysetup|auto|2"
  "10|dbs1k-hbs4k-partial|size=3145728|--data-block-size 1024 --hash-block-size 4096 --data-blocks 3000 --salt $(salt_of 10 32) --uuid ${U}10||veritysetup|auto|0"
  "11|ignore-zero-blocks-table|size=4194304 zero=409600+819200,2457600+1736704|--salt $(salt_of 11 32) --uuid ${U}11|--ignore-zero-blocks|table|50 700|0"
)

COLS="case	data	format_args	open_args	kernel_mode	data_size	data_sha256	hash_sha256	root_hash	variant	kernel_result	kernel_verity_sha256	kernel_table	kernel_line	our_line"
ROWS="$W/rows.tsv"; : > "$ROWS"
START=$(date +%s)

for c in "${CASES[@]}"; do
  IFS='|' read -r no name recipe fargs oargs mode dflip hlevel <<< "$c"
  recipe="iv=$(hexiv "$no") $recipe"
  log "case $no $name"
  D="$W/c$no"; mkdir -p "$D"
  gen_data "$D/data" "$recipe"
  size=$(stat -c %s "$D/data"); dsha=$(sha "$D/data")
  read -r -a FA <<< "${fargs#@same}"
  read -r -a OA <<< "$oargs"
  VA=(); for w in "${OA[@]+"${OA[@]}"}"; do [ "$w" = --ignore-zero-blocks ] || VA+=("$w"); done
  if [ "${fargs#@same}" != "$fargs" ]; then
    same=1; fcol="DATA DATA ${fargs#@same }"; cp "$D/data" "$D/img"; DF="$D/img"; HF="$D/img"
  else
    same=0; fcol="DATA HASH $fargs"; DF="$D/data"; HF="$D/hash"; rm -f "$HF"
  fi
  fout=$("$BLKCRYPT" verity format "$DF" "$HF" "${FA[@]}")
  root=$(printf '%s\n' "$fout" | awk '/^Root hash:/{print $NF}')
  hsha=$(sha "$HF")
  geometry "$size" "${FA[@]}"
  region=$(head -c $((G_DB * G_DBS)) "$DF" | sha256sum | cut -c1-64)
  [ "$(stat -c %s "$HF")" = $((G_END * G_HBS)) ] \
    || log "WARNING: hash image size $(stat -c %s "$HF") != model $((G_END * G_HBS))"
  cp "$DF" "$D/orig-data"; [ $same = 1 ] || cp "$HF" "$D/orig-hash"

  variants=(ok)
  [ "$dflip" = auto ] && dflip=$(((no * 97 + 3) % G_DB))
  for b in $dflip; do variants+=("data-flip@$((b * G_DBS + (no * 131 + 7) % G_DBS))"); done
  if [ "$hlevel" != - ] && [ "$G_LEVELS" -gt 0 ]; then
    [ "$hlevel" = top ] && hlevel=$((G_LEVELS - 1))
    j=$(((no * 7) % G_BLOCKS[hlevel]))
    variants+=("hash-flip@$(((G_START[hlevel] + j) * G_HBS + (no * 53 + 11) % G_HBS))")
  fi

  for v in "${variants[@]}"; do
    cp "$D/orig-data" "$DF"; [ $same = 1 ] || cp "$D/orig-hash" "$HF"
    case $v in data-flip@*) flip "$DF" "${v#*@}" ;; hash-flip@*) flip "$HF" "${v#*@}" ;; esac
    klog="$D/kernel-$v.log"
    if [ "$mode" = table ]; then
      table=$("$BLKCRYPT" verity table "$DF" "$HF" "$root" "${OA[@]+"${OA[@]}"}" | awk '{ $5 = "/dev/vda"; $6 = "/dev/vdb"; print }')
      kargs=(--table "$table" "$DF" "$HF")
    else
      kargs=("$DF" "$HF" "$root" "${OA[@]+"${OA[@]}"}")
    fi
    t0=$(date +%s)
    set +e; "$ORACLE/kernel-verity.sh" "${kargs[@]}" > "$klog" 2>&1; krc=$?; set -e
    kout=$(tr -d '\r' < "$klog")
    if grep -q '^VERITY OK' <<< "$kout"; then kres=OK
    elif grep -q '^VERITY FAIL' <<< "$kout"; then kres=FAIL
    else kres="ERROR(rc=$krc)"; fi
    kvsha=$(sed -n 's/^verity-sha256: //p' <<< "$kout"); kvsha=${kvsha:--}
    ktable=$(sed -n 's/^kernel table: //p' <<< "$kout" | head -1 | norm_table); ktable=${ktable:--}
    kline=$(grep -E 'block [0-9]+ is corrupted' <<< "$kout" | sed -E 's/^\[ *[0-9.]+\] //; s/\[run-in-kernel\].*//' \
            | awk '!seen[$0]++' | paste -sd'|' - | sed 's/|/ | /g' || true); kline=${kline:--}
    set +e; oerr=$("$BLKCRYPT" verity verify "$DF" "$HF" "$root" "${VA[@]+"${VA[@]}"}" 2>&1 >/dev/null); orc=$?; set -e
    if [ $orc = 0 ]; then oline=OK
    else oline=$(grep -v 'verification failed' <<< "$oerr" | paste -sd'|' - | sed 's/|/ | /g' || true); oline="${oline:-exit $orc}"; fi
    log "  $v: kernel $kres ($(( $(date +%s) - t0 )) s) ${kline}; ours: $oline"
    [ "$kres" = OK ] && [ "$v" = ok ] && [ "$kvsha" != "$region" ] && log "  WARNING: kernel verity-sha256 $kvsha != data region $region"
    case $kres in OK|FAIL) ;; *) log "  kernel output:"; sed 's/^/    /' "$klog" >&2 ;; esac
    [ "$kres" = FAIL ] && [ "$v" = ok ] && { log "  KERNEL REJECTED AN UNTAMPERED IMAGE:"; sed 's/^/    /' "$klog" >&2; }
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
      "$name" "$recipe" "$fcol" "${oargs:--}" "$mode" "$size" "$dsha" "$hsha" "$root" "$v" \
      "$kres" "$kvsha" "$ktable" "$kline" "$oline" >> "$ROWS"
  done
done

{
  echo "# dm-verity kernel golden manifest: images built by 'blkcrypt verity format', checked by the real Linux dm-verity."
  echo "# generated: $(date -u +%Y-%m-%dT%H:%M:%SZ) in $(( $(date +%s) - START )) s by: tests/verity/kernel/make-kernel-golden.sh $BLKCRYPT"
  echo "# blkcrypt: $(git -C "$HERE" describe --always --dirty 2>/dev/null || echo unknown)"
  echo "# kernel: Debian $(cat "$ORACLE/cache/build/KERNEL_VERSION" 2>/dev/null || echo '?') via $ORACLE/kernel-verity.sh (qemu, accel $(cat "$ORACLE/cache/build/ACCEL" 2>/dev/null || echo '?'))"
  echo "# guest: $GUEST_INFO"
  echo "# data: openssl enc -aes-128-ctr -nosalt -K $KEY -iv IV < /dev/zero | head -c SIZE, then the zero=OFF+LEN byte ranges are zeroed"
  echo "# format: blkcrypt verity format DATA HASH <format_args> (DATA DATA: the tree is in the data file); flips XOR the byte with 0xff"
  echo "# kernel_mode veritysetup: kernel-verity.sh DATA HASH ROOT <open_args>; table: kernel-verity.sh --table \"\$(blkcrypt verity table DATA HASH ROOT <open_args>)\" DATA HASH"
  echo "# kernel_table: as the kernel reports it, devices replaced by DATA HASH; kernel_line: distinct dmesg corruption lines; our_line: blkcrypt verity verify DATA HASH ROOT <open_args minus --ignore-zero-blocks>"
  echo "$COLS"
  cat "$ROWS"
} > "$MANIFEST"
log "wrote $MANIFEST ($(wc -l < "$ROWS") rows) in $(( $(date +%s) - START )) s"

log "running check.sh on the new manifest"
bash "$HERE/check.sh" "$BLKCRYPT"
