#!/bin/bash
# make-golden.sh - regenerate the dm-crypt golden vectors in this directory
# with the REAL Linux kernel (Debian 6.1, via the qemu kernel oracle).
#
# Usage:
#   make-golden.sh [--per-case | --batch] [-j N] [--out DIR] [--only REGEX]
#                  [--check-per-case REGEX] [ORACLE_DIR]
#
#   ORACLE_DIR  the oracle (kernel-dmcrypt.sh, run-in-kernel.sh, build.sh);
#               default: ../../../../shared/oracle relative to this script.
#   --per-case  (default) for every case run
#                 kernel-dmcrypt.sh encrypt ... ptSIZE.bin CASE.ct
#                 kernel-dmcrypt.sh decrypt ... CASE.ct  CASE.dec
#               and require CASE.dec == ptSIZE.bin.  2 oracle calls per case,
#               one qemu boot each (about 8 s on an idle 2-core host, much
#               more on a busy one).
#   --batch     same tables, but one qemu boot per worker runs ALL of that
#               worker's cases (via run-in-kernel.sh): each case gets its own
#               dm-linear slice of an output disk and the crypt table is
#                 0 SECTORS crypt CIPHER KEY IV_OFFSET /dev/mapper/<slice> 0 [N OPTS]
#               i.e. the kernel-dmcrypt.sh table with another (offset 0)
#               device.  The write is the same dd as kernel-dmcrypt.sh; the
#               decrypt reads the ciphertext back through a fresh mapping and
#               the host compares it with the plaintext.  Much faster.
#   -j N        parallel workers (default 2: two qemu at once).
#   --out DIR   write into DIR instead of this script's directory.
#   --only RE   only cases whose name matches the extended regex RE (the
#               manifest then lists just those cases).
#   --check-per-case RE   after the run, redo the cases matching RE with the
#               per-case method (real kernel-dmcrypt.sh calls) and require
#               identical results (same ct_sha256, same refusals).  Meant for
#               --batch runs; the result is recorded in README.md.
#
# When python3-cryptography is installed, verify_python.py (next to this
# script) recomputes the cases it can in userspace; its summary goes into
# README.md (a mismatch is reported, but the kernel output is kept).
#
# Outputs (in DIR): plaintext.bin, CASE.ct, manifest.tsv (produced cases),
# refused.tsv (tables the kernel refused, with the dmesg error), README.md.
# Needs: bash, python3 (hashlib only), coreutils, the oracle (build.sh run).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ARGS="$*"
MODE=per-case; JOBS=2; OUT="$HERE"; ONLY=""; ORACLE=""; CHECK=""
while [ $# -gt 0 ]; do
  case "$1" in
    --per-case) MODE=per-case; shift ;;
    --batch) MODE=batch; shift ;;
    -j) JOBS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    --check-per-case) CHECK="$2"; shift 2 ;;
    -h|--help) awk 'NR>1 && !/^#/{exit} NR>1{sub(/^# ?/,""); print}' "$0"; exit 0 ;;
    -*) echo "make-golden.sh: unknown option $1" >&2; exit 2 ;;
    *) ORACLE="$1"; shift ;;
  esac
done
[ -n "$ORACLE" ] || ORACLE="$HERE/../../../../shared/oracle"
ORACLE="$(cd "$ORACLE" && pwd)"
[ -x "$ORACLE/kernel-dmcrypt.sh" ] || { echo "make-golden.sh: no kernel-dmcrypt.sh in $ORACLE" >&2; exit 2; }
mkdir -p "$OUT"; OUT="$(cd "$OUT" && pwd)"
"$ORACLE/build.sh" >&2

# ---------------------------------------------------------------------------
# Cases: name | cipher (exact table word) | key bytes | iv_offset | sector_size | opts [| keyfrom]
# (opts = extra optional table words after sector_size, or -; keyfrom = derive
# the key from that case's name instead, so that equivalent tables -- capi vs
# legacy grammar, keycount 4 with 4096-byte sectors vs keycount 1, plain vs
# plain64 around 2^32 -- can be compared byte for byte)
# Cases the kernel refuses are kept in the list on purpose: they end up in
# refused.tsv with the kernel's error message.
CASES='
aes-cbc-plain-512|aes-cbc-plain|32|0|512|-
aes-cbc-plain64-512|aes-cbc-plain64|32|0|512|-
aes-cbc-plain64be-512|aes-cbc-plain64be|32|0|512|-
aes-cbc-essiv_sha256-512|aes-cbc-essiv:sha256|32|0|512|-
aes128-cbc-essiv_sha256-512|aes-cbc-essiv:sha256|16|0|512|-
aes-cbc-benbi-512|aes-cbc-benbi|32|0|512|-
aes-cbc-null-512|aes-cbc-null|32|0|512|-
aes-cbc-eboiv-512|aes-cbc-eboiv|32|0|512|-
aes-xts-plain64-512|aes-xts-plain64|64|0|512|-
aes128-xts-plain64-512|aes-xts-plain64|32|0|512|-
aes-xts-plain-512|aes-xts-plain|64|0|512|-
aes-xts-plain64be-512|aes-xts-plain64be|64|0|512|-
aes-cbc-lmk-v2-512|aes:64-cbc-lmk|1024|0|512|-
aes-cbc-lmk-v3-512|aes:64-cbc-lmk|1040|0|512|-
aes256-cbc-lmk-v3-512|aes:64-cbc-lmk|2080|0|512|-
aes-cbc-lmk-single-512|aes-cbc-lmk|32|0|512|-
capi-cbc_aes-lmk-v3-512|capi:cbc(aes)-lmk|1040|0|512|-|aes-cbc-lmk-v3-512
aes-cbc-tcw-512|aes-cbc-tcw|64|0|512|-
aes128-cbc-tcw-512|aes-cbc-tcw|48|0|512|-
aes-cbc-elephant-512|aes-cbc-elephant|64|0|512|-
aes128-cbc-elephant-512|aes-cbc-elephant|32|0|512|-
capi-cbc_aes-elephant-512|capi:cbc(aes)-elephant|64|0|512|-|aes-cbc-elephant-512
aes-ecb-512|aes-ecb|32|0|512|-
aes-lrw-benbi-512|aes-lrw-benbi|48|0|512|-
aes-ctr-plain64-512|aes-ctr-plain64|32|0|512|-
aes-cbc-plain64-4096|aes-cbc-plain64|32|0|4096|-
aes-cbc-plain64-4096-large|aes-cbc-plain64|32|0|4096|iv_large_sectors
aes-cbc-essiv_sha256-4096|aes-cbc-essiv:sha256|32|0|4096|-
aes-cbc-essiv_sha256-4096-large|aes-cbc-essiv:sha256|32|0|4096|iv_large_sectors
aes-xts-plain64-4096|aes-xts-plain64|64|0|4096|-
aes-xts-plain64-4096-large|aes-xts-plain64|64|0|4096|iv_large_sectors
aes-cbc-benbi-4096|aes-cbc-benbi|32|0|4096|-
aes-cbc-benbi-4096-large|aes-cbc-benbi|32|0|4096|iv_large_sectors
aes-cbc-eboiv-4096|aes-cbc-eboiv|32|0|4096|-
aes-cbc-eboiv-4096-large|aes-cbc-eboiv|32|0|4096|iv_large_sectors
aes-cbc-plain-4096|aes-cbc-plain|32|0|4096|-
aes-cbc-plain-4096-large|aes-cbc-plain|32|0|4096|iv_large_sectors
aes-cbc-plain64be-4096|aes-cbc-plain64be|32|0|4096|-
aes-cbc-plain64be-4096-large|aes-cbc-plain64be|32|0|4096|iv_large_sectors
aes-cbc-null-4096|aes-cbc-null|32|0|4096|-
aes-cbc-null-4096-large|aes-cbc-null|32|0|4096|iv_large_sectors
aes-cbc-elephant-4096|aes-cbc-elephant|64|0|4096|-
aes-cbc-elephant-4096-large|aes-cbc-elephant|64|0|4096|iv_large_sectors
capi-cbc_aes-elephant-4096-large|capi:cbc(aes)-elephant|64|0|4096|iv_large_sectors|aes-cbc-elephant-4096-large
aes-cbc-tcw-4096|aes-cbc-tcw|64|0|4096|-
aes-cbc-lmk-v3-4096|aes:64-cbc-lmk|1040|0|4096|-
aes-xts-plain64-512-off7|aes-xts-plain64|64|7|512|-
aes-cbc-essiv_sha256-512-off7|aes-cbc-essiv:sha256|32|7|512|-
aes-cbc-eboiv-512-off7|aes-cbc-eboiv|32|7|512|-
aes-cbc-benbi-512-off7|aes-cbc-benbi|32|7|512|-
aes-cbc-lmk-v3-512-off7|aes:64-cbc-lmk|1040|7|512|-
aes-cbc-tcw-512-off7|aes-cbc-tcw|64|7|512|-
aes-cbc-elephant-512-off7|aes-cbc-elephant|64|7|512|-
aes-xts-plain64-512-off2p40|aes-xts-plain64|64|1099511627779|512|-
aes-xts-plain64-4096-off8|aes-xts-plain64|64|8|4096|-
aes-xts-plain64-4096-large-off8|aes-xts-plain64|64|8|4096|iv_large_sectors
aes-xts-plain64-4096-off16|aes-xts-plain64|64|16|4096|-
aes-xts-plain64-4096-large-off16|aes-xts-plain64|64|16|4096|iv_large_sectors
aes-cbc-essiv_sha256-4096-large-off8|aes-cbc-essiv:sha256|32|8|4096|iv_large_sectors
aes-cbc-eboiv-4096-large-off8|aes-cbc-eboiv|32|8|4096|iv_large_sectors
aes-cbc-elephant-4096-large-off8|aes-cbc-elephant|64|8|4096|iv_large_sectors
aes-xts-plain64-4096-off7|aes-xts-plain64|64|7|4096|-
aes-xts-plain64-4096-large-off7|aes-xts-plain64|64|7|4096|iv_large_sectors
aes-cbc-plain-512-offwrap|aes-cbc-plain|32|4294967290|512|-
aes-cbc-plain64-512-offwrap|aes-cbc-plain64|32|4294967290|512|-|aes-cbc-plain-512-offwrap
aes-xts-plain-512-offwrap|aes-xts-plain|64|4294967290|512|-
aes-xts-plain-4096-offwrap|aes-xts-plain|64|4294967288|4096|-
aes_4-cbc-essiv_sha256-512|aes:4-cbc-essiv:sha256|128|0|512|-
aes_2-xts-plain64-512|aes:2-xts-plain64|128|0|512|-
aes_4-cbc-plain64-512-off7|aes:4-cbc-plain64|128|7|512|-
aes_4-cbc-plain64-4096|aes:4-cbc-plain64|128|0|4096|-|aes-cbc-plain64-4096
aes_4-cbc-plain64-4096-large|aes:4-cbc-plain64|128|0|4096|iv_large_sectors|aes-cbc-plain64-4096-large
aes_3-cbc-plain64-512|aes:3-cbc-plain64|96|0|512|-
capi-xts_aes-plain64-512|capi:xts(aes)-plain64|64|0|512|-|aes-xts-plain64-512
capi-cbc_aes-essiv_sha256-512|capi:cbc(aes)-essiv:sha256|32|0|512|-|aes-cbc-essiv_sha256-512
capi-cbc_aes-plain64-512|capi:cbc(aes)-plain64|32|0|512|-|aes-cbc-plain64-512
capi-xts_aes-plain64-4096-large|capi:xts(aes)-plain64|64|0|4096|iv_large_sectors|aes-xts-plain64-4096-large
serpent-xts-plain64-512|serpent-xts-plain64|64|0|512|-
twofish-xts-plain64-512|twofish-xts-plain64|64|0|512|-
camellia-xts-plain64-512|camellia-xts-plain64|64|0|512|-
serpent-cbc-essiv_sha256-512|serpent-cbc-essiv:sha256|32|0|512|-
twofish-cbc-essiv_sha256-512|twofish-cbc-essiv:sha256|32|0|512|-
cast5-cbc-plain-512|cast5-cbc-plain|16|0|512|-
blowfish-cbc-plain-512|blowfish-cbc-plain|32|0|512|-
blowfish-cbc-benbi-512|blowfish-cbc-benbi|32|0|512|-
serpent-cbc-lmk-v3-512|serpent:64-cbc-lmk|2080|0|512|-
twofish-cbc-tcw-512|twofish-cbc-tcw|64|0|512|-
des3_ede-cbc-essiv_sha256-512|des3_ede-cbc-essiv:sha256|24|0|512|-
des3_ede-cbc-plain64-512|des3_ede-cbc-plain64|24|0|512|-
serpent-xts-plain64-4096-large|serpent-xts-plain64|64|0|4096|iv_large_sectors
twofish-xts-plain64-4096-large|twofish-xts-plain64|64|0|4096|iv_large_sectors
twofish-cbc-essiv_sha256-4096|twofish-cbc-essiv:sha256|32|0|4096|-
adiantum-xchacha12-aes-plain64-512|xchacha12,aes-adiantum-plain64|32|0|512|-
capi-adiantum_xchacha12_aes-plain64-512|capi:adiantum(xchacha12,aes)-plain64|32|0|512|-|adiantum-xchacha12-aes-plain64-512
capi-adiantum_xchacha20_aes-plain64-4096-large|capi:adiantum(xchacha20,aes)-plain64|32|0|4096|iv_large_sectors
cipher_null-ecb-512|cipher_null-ecb|0|0|512|-
'

WORK="$(mktemp -d "${TMPDIR:-/tmp}/make-golden.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# ---------------------------------------------------------------------------
# Deterministic plaintext: byte i = byte i of
#   SHA-256(b"blkcrypt-golden-0") || SHA-256(b"blkcrypt-golden-1") || ...
python3 - "$OUT/plaintext.bin" <<'EOF'
import hashlib, sys
out = bytearray(); k = 0
while len(out) < 16384:
    out += hashlib.sha256(b"blkcrypt-golden-" + str(k).encode()).digest(); k += 1
open(sys.argv[1], "wb").write(bytes(out[:16384]))
EOF
head -c 8192 "$OUT/plaintext.bin" > "$WORK/pt8192.bin"
cp "$OUT/plaintext.bin" "$WORK/pt16384.bin"

# Deterministic test key of N bytes for case NAME (hex; "-" when N = 0):
#   SHA-512(b"blkcrypt-key-" + NAME) || SHA-512(b"blkcrypt-key-" + NAME + b"#1")
#   || SHA-512(... + b"#2") || ...   truncated to N bytes.
# (For N <= 64 this is simply the first N bytes of SHA-512(b"blkcrypt-key-" + NAME).)
keyhex() {
  python3 - "$1" "$2" <<'EOF'
import hashlib, sys
name, n = sys.argv[1].encode(), int(sys.argv[2])
if n == 0:
    print("-"); sys.exit()
k = hashlib.sha512(b"blkcrypt-key-" + name).digest(); j = 1
while len(k) < n:
    k += hashlib.sha512(b"blkcrypt-key-" + name + b"#" + str(j).encode()).digest(); j += 1
print(k[:n].hex())
EOF
}

# Parse the case list into $WORK/cases.tsv: name cipher key ivoff ssize opts size
: > "$WORK/cases.tsv"
while IFS='|' read -r name cipher klen ivoff ssize opts keyfrom; do
  [ -n "$name" ] || continue
  if [ -n "$ONLY" ] && ! [[ "$name" =~ $ONLY ]]; then continue; fi
  if [ "$ssize" = 512 ]; then size=8192; else size=16384; fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$cipher" "$(keyhex "${keyfrom:-$name}" "$klen")" \
    "$ivoff" "$ssize" "$opts" "$size" >> "$WORK/cases.tsv"
done <<< "$CASES"
NCASES=$(wc -l < "$WORK/cases.tsv")
echo "make-golden.sh: $NCASES cases, mode $MODE, $JOBS workers, oracle $ORACLE" >&2

# kernel-dmcrypt.sh option words for a case (one per line, for mapfile)
kd_args() { # ssize opts
  if [ "$1" != 512 ]; then printf '%s\n' --sector-size "$1"; fi
  if [ "$2" != - ]; then printf '%s\n' --opt "$2"; fi
}
# the command as written in the manifest (key replaced by $KEY)
kd_cmdline() { # cipher ivoff ssize opts size name
  local c="kernel-dmcrypt.sh encrypt --table-args '$1 \$KEY $2'"
  [ "$3" = 512 ] || c="$c --sector-size $3"
  [ "$4" = - ] || c="$c --opt '$4'"
  printf '%s pt%s.bin %s.ct' "$c" "$5" "$6"
}
# the dm-crypt optional-argument suffix of the table (as kernel-dmcrypt.sh builds it)
opt_suffix() { # ssize opts
  local w=()
  [ "$1" = 512 ] || w+=("sector_size:$1")
  if [ "$2" != - ]; then for x in $2; do w+=("$x"); done; fi
  [ ${#w[@]} -eq 0 ] || printf ' %s %s' "${#w[@]}" "${w[*]}"
}

RES="$WORK/results"; mkdir -p "$RES"   # per case: NAME.status (OK | REFUSED <msg>) + NAME.ct + NAME.dec

# ---------------------------------------------------------------------------
# kernel-dmcrypt.sh with its stderr in LOG; a guest that never reported an exit
# code (rc 125: e.g. the TCG boot panic "IO-APIC + timer doesn't work" on an
# overloaded host) is retried up to 3 times in all.
kd() { # LOG kernel-dmcrypt.sh-args...
  local log="$1" a rc; shift
  for a in 1 2 3; do
    ORACLE_QUIET=1 "$ORACLE/kernel-dmcrypt.sh" "$@" 2> "$log"; rc=$?
    [ "$rc" -eq 125 ] || return "$rc"
    echo "  (guest boot failed, attempt $a/3)" >&2
  done
  return "$rc"
}

run_one_case() { # one line of cases.tsv -> $RES/NAME.{ct,dec,status}
  local name cipher key ivoff ssize opts size extra log
  IFS=$'\t' read -r name cipher key ivoff ssize opts size <<< "$1"
  mapfile -t extra < <(kd_args "$ssize" "$opts")
  log="$RES/$name.log"
  if kd "$log" encrypt --table-args "$cipher $key $ivoff" "${extra[@]}" "$WORK/pt$size.bin" "$RES/$name.ct"; then
    if kd "$log.dec" decrypt --table-args "$cipher $key $ivoff" "${extra[@]}" "$RES/$name.ct" "$RES/$name.dec"; then
      echo OK > "$RES/$name.status"
    else
      echo "FAILED decrypt" > "$RES/$name.status"
    fi
  elif grep -q 'GUEST-ERROR: dmsetup create failed' "$log"; then
    # the kernel refused the table: keep the device-mapper error line(s)
    msg=$(grep -E 'device-mapper: (table|crypt)|crypt: ' "$log" | grep -v 'ioctl: .*initialised' \
          | sed -e 's/^\[ *[0-9.]*\] //' -e 's/ [0-9]*:[0-9]*: / /' | tr '\n' ' ' | sed 's/ *$//')
    echo "REFUSED ${msg:-"(no dmesg line)"}" > "$RES/$name.status"
  else
    echo "FAILED encrypt (see log)" > "$RES/$name.status"
  fi
  echo "  $name: $(cut -c1-150 "$RES/$name.status")" >&2
}

run_batch_worker() { # worker index -> runs cases i where i % JOBS == w, in one boot
  local w="$1" d="$WORK/w$1" off=0 i=0 line name cipher key ivoff ssize opts size sec
  mkdir -p "$d"
  : > "$d/list.tsv"
  {
    echo 'fail() { echo "GUEST-ERROR: $*"; exit 1; }'
    echo 'echo "KERNEL $(uname -r) | $(cat /proc/version)"'
    echo 'run() { # name slice-offset size "cipher key iv_offset" " n opts..."'
    echo '  n=$1; off=$2; size=$3; sec=$(($3 / 512)); set -- "$4" "$5"'
    echo '  dmsetup create ct-$n --table "0 $sec linear /dev/vdb $off" || fail "linear $n"'
    echo '  dmsetup create pt-$n --table "0 $sec linear /dev/vdc $off" || fail "linear $n"'
    echo '  dmesg -c > /dev/null'
    echo '  if ! dmsetup create x-$n --table "0 $sec crypt $1 /dev/mapper/ct-$n 0$2" 2>/tmp/err; then'
    echo '    echo "CASE $n REFUSED $(cat /tmp/err | tr "\n" " ") | $(dmesg | grep -E "device-mapper: (table|crypt)|crypt: " | tr "\n" " ")"'
    echo '    dmsetup remove ct-$n; dmsetup remove pt-$n; return; fi'
    echo '  dd if=/dev/vda of=/dev/mapper/x-$n bs=$size count=1 conv=fsync 2>/tmp/dd.err || { cat /tmp/dd.err; fail "dd write $n"; }'
    echo '  sync; dmsetup remove x-$n || fail "remove $n"'
    echo '  dmsetup create y-$n --table "0 $sec crypt $1 /dev/mapper/ct-$n 0$2" || fail "recreate $n"'
    echo '  dd if=/dev/mapper/y-$n of=/dev/mapper/pt-$n bs=$size count=1 conv=fsync 2>/tmp/dd.err || { cat /tmp/dd.err; fail "dd read $n"; }'
    echo '  sync; dmsetup remove y-$n && dmsetup remove ct-$n && dmsetup remove pt-$n || fail "remove $n"'
    echo '  echo "CASE $n OK"'
    echo '}'
  } > "$d/guest.sh"
  while IFS= read -r line; do
    if [ $((i % JOBS)) -eq "$w" ]; then
      IFS=$'\t' read -r name cipher key ivoff ssize opts size <<< "$line"
      printf '%s\t%s\t%s\n' "$name" "$off" "$size" >> "$d/list.tsv"
      printf "run '%s' %s %s '%s %s %s' '%s'\n" "$name" "$off" "$size" "$cipher" "$key" "$ivoff" \
        "$(opt_suffix "$ssize" "$opts")" >> "$d/guest.sh"
      off=$((off + size / 512))
    fi
    i=$((i + 1))
  done < "$WORK/cases.tsv"
  echo 'blockdev --flushbufs /dev/vdb; blockdev --flushbufs /dev/vdc; echo BATCH-DONE' >> "$d/guest.sh"
  [ "$off" -gt 0 ] || return 0
  truncate -s $((off * 512)) "$d/ct.img" "$d/pt.img"
  local a rc
  for a in 1 2 3; do   # retry a guest that never reported an exit code (see kd)
    rc=0
    ORACLE_LOG="$d/console" ORACLE_QUIET=1 "$ORACLE/run-in-kernel.sh" -t 3600 "$d/guest.sh" \
       "ro:$OUT/plaintext.bin" "$d/ct.img" "$d/pt.img" > "$d/out" 2> "$d/err" || rc=$?
    [ "$rc" -eq 125 ] || break
    echo "  (batch worker $w: guest boot failed, attempt $a/3)" >&2
  done
  grep -q '^BATCH-DONE$' "$d/out" || { echo "make-golden.sh: batch worker $w failed:" >&2; cat "$d/out" "$d/err" >&2; return 1; }
  grep -a -m1 '^KERNEL ' "$d/out" | sed 's/^KERNEL [^|]*| //' > "$RES/kernel-version" || true
  while IFS=$'\t' read -r name off size; do
    st=$(grep "^CASE $name " "$d/out" | head -1 | cut -d' ' -f3- || true)
    case "$st" in
      OK) dd if="$d/ct.img" of="$RES/$name.ct" bs=512 skip="$off" count=$((size / 512)) status=none
          dd if="$d/pt.img" of="$RES/$name.dec" bs=512 skip="$off" count=$((size / 512)) status=none
          echo OK > "$RES/$name.status" ;;
      REFUSED*) m="${st#* | }"; [ -n "${m// /}" ] || m="${st#REFUSED }"
                echo "REFUSED $m" | sed -e 's/\[ *[0-9.]*\] //g' -e 's/ [0-9]*:[0-9]*: / /g' \
                  -e 's/  */ /g' -e 's/ *$//' > "$RES/$name.status" ;;
      *) echo "FAILED (no result line)" > "$RES/$name.status" ;;
    esac
    echo "  $name: $(cut -c1-150 "$RES/$name.status")" >&2
  done < "$d/list.tsv"
}

START=$(date +%s)
if [ "$MODE" = per-case ]; then
  export -f run_one_case kd_args kd; export ORACLE WORK RES
  tr '\n' '\0' < "$WORK/cases.tsv" | xargs -0 -n1 -P "$JOBS" bash -c 'run_one_case "$1"' _
else
  pids=()
  for w in $(seq 0 $((JOBS - 1))); do run_batch_worker "$w" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p"; done
fi
ELAPSED=$(( $(date +%s) - START ))

# ---------------------------------------------------------------------------
# Collect: check round trips, write .ct, manifest.tsv, refused.tsv
[ -z "${MAKE_GOLDEN_KVER:-}" ] || echo "$MAKE_GOLDEN_KVER" > "$RES/kernel-version"
if [ ! -s "$RES/kernel-version" ]; then   # per-case mode: ask the guest once
  echo 'cat /proc/version' > "$WORK/kv.sh"
  ORACLE_QUIET=1 "$ORACLE/run-in-kernel.sh" "$WORK/kv.sh" > "$RES/kernel-version" 2>/dev/null || true
fi
KVER=$(grep -a -m1 -o 'Linux version .*' "$RES/kernel-version" | tr -d '\r' || true)
MAN="$OUT/manifest.tsv"; REF="$OUT/refused.tsv"
printf 'case\tcipher\tkey_hex\tiv_offset\tsector_size\topts\tsize\tct_file\tct_sha256\tcommand\n' > "$MAN.tmp"
printf 'case\tcipher\tkey_bytes\tiv_offset\tsector_size\topts\tkernel_error\n' > "$REF.tmp"
nok=0; nref=0; bad=0
while IFS=$'\t' read -r name cipher key ivoff ssize opts size; do
  st=$(cat "$RES/$name.status" 2>/dev/null || echo "FAILED (no status)")
  case "$st" in
    OK)
      if ! cmp -s "$RES/$name.dec" "$WORK/pt$size.bin"; then
        echo "make-golden.sh: $name: kernel decrypt does not give the plaintext back" >&2; bad=1; continue
      fi
      if cmp -s "$RES/$name.ct" "$WORK/pt$size.bin" && [ "$cipher" != cipher_null-ecb ]; then
        echo "make-golden.sh: $name: ciphertext equals plaintext" >&2; bad=1; continue
      fi
      cp "$RES/$name.ct" "$OUT/$name.ct"
      sha=$(sha256sum "$OUT/$name.ct" | cut -d' ' -f1)
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$cipher" "$key" "$ivoff" "$ssize" "$opts" \
        "$size" "$name.ct" "$sha" "$(kd_cmdline "$cipher" "$ivoff" "$ssize" "$opts" "$size" "$name")" >> "$MAN.tmp"
      nok=$((nok + 1)) ;;
    REFUSED*)
      rm -f "$OUT/$name.ct"
      if [ "$key" = - ]; then kb=0; else kb=$(( ${#key} / 2 )); fi
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$cipher" "$kb" "$ivoff" "$ssize" "$opts" "${st#REFUSED }" >> "$REF.tmp"
      nref=$((nref + 1)) ;;
    *) echo "make-golden.sh: $name: $st" >&2; sed -n '1,40p' "$RES/$name.log" >&2 2>/dev/null || true; bad=1 ;;
  esac
done < "$WORK/cases.tsv"
[ "$bad" = 0 ] || { echo "make-golden.sh: ABORT (failures above); manifest not written" >&2; exit 1; }
mv "$MAN.tmp" "$MAN"; mv "$REF.tmp" "$REF"
if [ -z "$ONLY" ]; then   # full run: drop .ct files of cases that no longer exist
  for f in "$OUT"/*.ct; do
    [ -e "$f" ] || continue
    grep -q -P "\t\Q$(basename "$f")\E\t" "$MAN" || rm -f "$f"
  done
fi

# ---------------------------------------------------------------------------
# Optional: redo some cases with real per-case kernel-dmcrypt.sh calls
CHECKNOTE=""
if [ -n "$CHECK" ]; then
  echo "make-golden.sh: cross-checking /$CHECK/ with --per-case" >&2
  MAKE_GOLDEN_KVER="$KVER" "$0" --per-case -j "$JOBS" --out "$WORK/check" --only "$CHECK" "$ORACLE"
  nchk=0
  while IFS=$'\t' read -r name rest; do
    [ "$name" = case ] && continue
    want=$(grep -P "^\Q$name\E\t" "$MAN" | cut -f1-9 || true)
    got=$(grep -P "^\Q$name\E\t" "$WORK/check/manifest.tsv" | cut -f1-9 || true)
    [ -n "$want" ] && [ "$want" = "$got" ] || { echo "make-golden.sh: per-case check differs for $name" >&2; exit 1; }
    nchk=$((nchk + 1))
  done < "$WORK/check/manifest.tsv"
  while IFS=$'\t' read -r name rest; do
    [ "$name" = case ] && continue
    want=$(grep -P "^\Q$name\E\t" "$REF" | cut -f1-6 || true)
    got=$(grep -P "^\Q$name\E\t" "$WORK/check/refused.tsv" | cut -f1-6 || true)
    [ -n "$want" ] && [ "$want" = "$got" ] || { echo "make-golden.sh: per-case refusal differs for $name" >&2; exit 1; }
    nchk=$((nchk + 1))
  done < "$WORK/check/refused.tsv"
  [ "$nchk" -gt 0 ] || { echo "make-golden.sh: --check-per-case matched nothing" >&2; exit 1; }
  CHECKNOTE="Cross-check: these $nchk cases were redone with real per-case \`kernel-dmcrypt.sh encrypt/decrypt\` calls (one qemu boot per call) and gave identical results: $(tail -n +2 "$WORK/check/manifest.tsv" | cut -f1 | tr '\n' ' ' || true)$(tail -n +2 "$WORK/check/refused.tsv" | cut -f1 | sed 's/$/ (refused)/' | tr '\n' ' ' || true)"
fi

# Optional: independent userspace recomputation
PYNOTE="python3-cryptography not available: no userspace cross-check was run."
if python3 -c 'import cryptography' 2>/dev/null; then
  python3 "$HERE/verify_python.py" "$OUT" > "$WORK/verify.txt" 2>&1 || echo "make-golden.sh: WARNING: verify_python.py reports mismatches" >&2
  PYNOTE="\`verify_python.py\` (python3-cryptography $(python3 -c 'import cryptography; print(cryptography.__version__)')): $(tail -n1 "$WORK/verify.txt"). Skipped (no python implementation): $(grep '^SKIP' "$WORK/verify.txt" | awk '{print $2}' | tr '\n' ' ' || true)"; PYNOTE="${PYNOTE%Skipped (no python implementation): }"
  grep '^MISMATCH' "$WORK/verify.txt" >&2 || true
fi

# ---------------------------------------------------------------------------
# README.md
{
cat <<EOF
# dm-crypt golden vectors from the real Linux kernel

Ciphertexts produced by the Linux kernel's own dm-crypt (Debian's kernel,
booted under qemu by the kernel oracle in \`shared/oracle\`), for checking
blkcrypt's dm-crypt reimplementation byte for byte.

- Kernel: \`${KVER:-unknown}\`
- Generated: $(date -u '+%Y-%m-%d %H:%M UTC') by \`make-golden.sh $ARGS\`
  (mode \`$MODE\`, $JOBS workers, ${ELAPSED} s), $nok cases produced, $nref tables refused by the kernel.
- Regenerate: \`tests/dmcrypt/golden/make-golden.sh [--per-case|--batch] [ORACLE_DIR]\`
  (default oracle: \`../../../../shared/oracle\` relative to the script; it runs the oracle's
  \`build.sh\` first). The output is deterministic: a rerun must give the same bytes.

## Files

- \`plaintext.bin\` (16384 bytes): byte i = byte i of
  SHA-256(b"blkcrypt-golden-0") || SHA-256(b"blkcrypt-golden-1") || ...
  Each case encrypts its first \`size\` bytes: 8192 for 512-byte sectors
  (16 sectors), 16384 for 4096-byte sectors (4 sectors). \`pt8192.bin\` /
  \`pt16384.bin\` in the commands are these prefixes.
- \`<case>.ct\`: the ciphertext the kernel wrote (the whole mapped device, \`size\` bytes;
  the mapping starts at device sector 0).
- \`manifest.tsv\`: one line per produced case, tab separated:
  \`case cipher key_hex iv_offset sector_size opts size ct_file ct_sha256 command\`.
  \`cipher\` is the exact \`<cipher>\` word of the dm table; \`key_hex\` the exact \`<key>\`
  (\`-\` = empty key); \`opts\` the optional table words besides \`sector_size:N\`
  (\`-\` = none). The kernel table was
  \`0 <size/512> crypt <cipher> <key_hex> <iv_offset> <dev> 0 [<n> [sector_size:<sector_size>] <opts>]\`
  (no \`sector_size\` word when it is 512). \`command\` is the equivalent oracle call
  with the key replaced by \`\$KEY\`.
- \`refused.tsv\`: tables the kernel refused (\`dmsetup create\` failed), with the
  kernel's error from dmesg. Listed below too.
- \`make-golden.sh\`: the generator (case list, plaintext and key derivation).
- \`verify_python.py\`: independent userspace recomputation (python3-cryptography plus
  pure-python MD5 compression, CRC32, GF(2^128) and Elephant diffusers) of every case
  whose cipher python3-cryptography has (aes, camellia, cast5, blowfish, des3_ede,
  cipher_null), from plaintext.bin + manifest.tsv: all IV modes incl. lmk, tcw,
  elephant, eboiv, benbi, lrw, ctr, keycount, iv_offset, iv_large_sectors.
  Run: \`python3 verify_python.py [DIR] [CASE_REGEX]\`.

Keys (test keys, not secrets): for a key of N bytes,
SHA-512(b"blkcrypt-key-" + case) || SHA-512(b"blkcrypt-key-" + case + b"#1") ||
SHA-512(... + b"#2") || ... truncated to N bytes (so for N <= 64: the first N bytes of
SHA-512(b"blkcrypt-key-" + case)). Every case has its own key, except that some
cases reuse another case's key derivation on purpose (\`keyfrom\` in the script) so
that tables that must agree can be compared; see "Identical ciphertexts" below.

Every produced ciphertext was decrypted again by the kernel (a fresh mapping
reading it back) and compared with the plaintext; the script aborts on a mismatch.

How the oracle was driven: \`--per-case\` (the default) makes two
\`kernel-dmcrypt.sh\` calls per case (encrypt, then decrypt), one qemu boot each.
\`--batch\` boots one guest per worker (via the oracle's \`run-in-kernel.sh\`) and
runs all of that worker's cases in it, each on its own dm-linear slice of an
output disk, with the same crypt table as kernel-dmcrypt.sh except the device
name (\`... <iv_offset> /dev/mapper/<slice> 0 ...\`); IVs depend only on the
target-relative sector and iv_offset, so the bytes are the same (checked, see
"Checks"). Under TCG on a busy 2-core host one boot took 60-120 s, hence
\`--batch\` (about 5 minutes for everything instead of hours).

Notes on a few cases: \`aes-cbc-plain-512-offwrap\` and \`aes-cbc-plain64-512-offwrap\`
share a key; their first 6 sectors (IV sector < 2^32) are identical and the last 10
differ (plain wraps to 0). \`aes_4-cbc-plain64-4096*\` equal \`aes-cbc-plain64-4096*\`:
with 4096-byte sectors the key index (cc_sector & 3, in 512-byte units) is always 0.
\`aes-cbc-elephant-4096\` (no iv_large_sectors) is accepted by the kernel, but
BitLocker itself always uses iv_large_sectors with 4096-byte sectors.

## Cases

| case | cipher | key bytes | iv_offset | sector_size | opts |
|---|---|---|---|---|---|
EOF
tail -n +2 "$MAN" | while IFS=$'\t' read -r name cipher key ivoff ssize opts rest; do
  if [ "$key" = - ]; then kb=0; else kb=$(( ${#key} / 2 )); fi
  echo "| $name | \`$cipher\` | $kb | $ivoff | $ssize | $opts |"
done
cat <<EOF

## Identical ciphertexts

Groups of cases with the same ct_sha256 (same key bytes, equivalent tables):

EOF
tail -n +2 "$MAN" | cut -f1,9 | sort -k2,2 | awk -F'\t' '{g[$2]=g[$2] (g[$2]?", ":"") $1; n[$2]++}
  END{for (h in g) if (n[h] > 1) print "- " g[h]}' | sort
cat <<EOF

## Checks

- Every produced ciphertext was decrypted again by the kernel and compared with the plaintext.
- $PYNOTE
${CHECKNOTE:+- $CHECKNOTE}

## Refused by the kernel

These tables were tried and the kernel refused them (\`dmsetup create\` failed);
they have no \`.ct\` file. Error = the kernel's dmesg line(s).

| case | cipher | key bytes | iv_offset | sector_size | opts | kernel error |
|---|---|---|---|---|---|---|
EOF
tail -n +2 "$REF" | while IFS=$'\t' read -r name cipher kb ivoff ssize opts err; do
  echo "| $name | \`$cipher\` | $kb | $ivoff | $ssize | $opts | $(echo "$err" | sed 's/|/\\|/g') |"
done
} > "$OUT/README.md"
echo "make-golden.sh: done: $nok cases, $nref refused, ${ELAPSED} s; output in $OUT" >&2
