#!/bin/bash
# make-kernel-golden.sh - regenerate tests/luks/kernel/ with the real Linux
# kernel and cryptsetup (the qemu kernel oracle, /work/shared/oracle).
#
# Usage: tests/luks/kernel/make-kernel-golden.sh [BLKCRYPT]
#   BLKCRYPT       the blkcrypt CLI (default: build/cli/blkcrypt of this tree)
#   ORACLE=DIR     the oracle folder (default /work/shared/oracle)
#   KEEP_WORK=1    keep the work directory (containers, guest logs)
#
# Two guest boots (run in parallel, each about 1-3 minutes under TCG):
#  (a) ours -> kernel: each "ours" container is made on the host by
#      `blkcrypt luks format` (test volume key from lib.sh, fixed UUID, forced
#      KDF costs) + `luks add-key`, and `luks encrypt` writes pattern A. In the
#      guest: cryptsetup luksDump, luksDump --dump-volume-key,
#      open --test-passphrase -v with every passphrase, open, size and sha256
#      of /dev/mapper/X (must be pattern A), the kernel writes pattern B
#      through the mapping, sha256 again. Back on the host, `luks decrypt`
#      must give pattern B. Recorded: the guest output and the sha256 of the
#      data segment before (our ciphertext of A) and after (the kernel's of B).
#  (b) theirs -> ours: each "theirs" container is made in the guest by
#      cryptsetup luksFormat (+ luksAddKey, token import), the kernel writes
#      pattern B through `cryptsetup open`; the guest records the same dumps.
#      The container is committed (xz), with the random filler of keyslot
#      areas that no keyslot uses (LUKS1 wipes all eight with random bytes)
#      zeroed first; `luks decrypt` of it must give pattern B.
#  (c) keyslot changes across, in a third boot (see below).
# Then tests/cli/luks_kernel.sh replays everything on the host.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
BLKCRYPT="${1:-$ROOT/build/cli/blkcrypt}"
ORACLE="${ORACLE:-/work/shared/oracle}"
[ -x "$BLKCRYPT" ] || { echo "no blkcrypt binary at $BLKCRYPT" >&2; exit 2; }
BLKCRYPT="$(cd "$(dirname "$BLKCRYPT")" && pwd)/$(basename "$BLKCRYPT")"
for t in openssl sha256sum sha512sum xxd xz python3; do
    command -v $t >/dev/null || { echo "needs $t" >&2; exit 2; }
done
source "$HERE/lib.sh"

W="$(mktemp -d "${TMPDIR:-/tmp}/luks-kernel-golden.XXXXXX")"
if [ "${KEEP_WORK:-0}" = 1 ]; then echo "work directory: $W" >&2; else trap 'rm -rf "$W"' EXIT; fi
log() { echo "[luks-golden] $*" >&2; }
sha() { sha256sum "$1" | cut -c1-64; }
"$ORACLE/build.sh" >&2
START=$(date +%s)

write_passphrases "$W"
pattern A "$W/A.bin"
pattern B "$W/B.bin"
# The guest's cryptsetup uses the host's libcrypto, whose whirlpool is in the
# legacy provider module, which the oracle's initramfs lacks: it goes in as
# a disk (zero-padded to a sector multiple), found through OPENSSL_MODULES.
LEGACY=$(openssl version -m | sed -n 's/^MODULESDIR: "\(.*\)"$/\1/p')/legacy.so
[ -f "$LEGACY" ] || { echo "needs OpenSSL's legacy provider ($LEGACY) for whirlpool" >&2; exit 2; }
cp "$LEGACY" "$W/legacy.disk"; truncate -s $(( ($(stat -c %s "$LEGACY") + 511) / 512 * 512 )) "$W/legacy.disk"

# ------------------------------------------------------------------ cases
# (a) name|type|key bits|format args (blkcrypt luks format)|add-keys|detached[|token]
#     add-keys: space-separated SLOT:PASSFILE:KDF (KDF = P2, A2I, A2ID); token 1:
#     the host's cryptsetup imports TOKEN (lib.sh) before our add-keys
OURS=(
  "o1-serpent-xts-plain64-512|luks1|512|-c serpent-xts-plain64 --align-payload 8 $P2||0"
  "o1-serpent-xts-plain64-256-sha512|luks1|256|-c serpent-xts-plain64 -h sha512 --align-payload 8 $P2||0"
  "o1-serpent-cbc-essiv-whirlpool|luks1|256|-c serpent-cbc-essiv:sha256 -h whirlpool --align-payload 8 $P2|5:p2:P2|0"
  "o1-twofish-xts-plain64-ripemd160|luks1|512|-c twofish-xts-plain64 -h ripemd160 $P2||0"
  "o1-twofish-cbc-plain64-sha1|luks1|256|-c twofish-cbc-plain64 -h sha1 --align-payload 8 $P2|1:p2:P2 7:p3:P2|0"
  "o1-camellia-xts-plain64-512|luks1|512|-c camellia-xts-plain64 --align-payload 8 $P2||0"
  "o1-aes-xts-plain-detached|luks1|256|-c aes-xts-plain $P2||1"
  "o2-serpent-xts-plain64-argon2i|luks2|512|-c serpent-xts-plain64 --sector-size 512 --offset 4096 --label kernel-oracle $A2I||0"
  "o2-twofish-xts-plain64-4096-sha512|luks2|256|-c twofish-xts-plain64 -h sha512 --sector-size 4096 --offset 2048 --pbkdf pbkdf2 $P2|3:p2:P2|0"
  "o2-camellia-xts-plain64-argon2id|luks2|512|-c camellia-xts-plain64 $A2ID||0"
  "o2-aes-cbc-essiv-4096-detached|luks2|256|-c aes-cbc-essiv:sha256 -h whirlpool --sector-size 4096 --pbkdf pbkdf2 $P2||1"
  "o2-serpent-cbc-essiv-ripemd160|luks2|256|-c serpent-cbc-essiv:sha256 -h ripemd160 --sector-size 512 --offset 4096 --luks2-keyslots-size 1048576 --subsystem blkcrypt-test --pbkdf pbkdf2 $P2||0"
  "o2-twofish-cbc-plain64-argon2id-token|luks2|256|-c twofish-cbc-plain64 --offset 2048 $A2ID|2:p2:A2I 31:p3:P2|0|1"
  "o2-aes-xts-plain-512|luks2|512|-c aes-xts-plain --sector-size 512 --offset 2048 --luks2-metadata-size 65536 --pbkdf pbkdf2 $P2||0"
)
# (b) name|type|luksFormat args|add-keys|detached|token|data disk bytes|header disk bytes
#     LUKS1 with --align-payload 8: payload = 8 + 8 * (key area in sectors, rounded
#     up to 8); LUKS2: --offset; data disk = payload + DATA_SIZE.
THEIRS=(
  "t1-serpent-xts-plain64-256-sha512|luks1|-c serpent-xts-plain64 -s 256 -h sha512 --align-payload 8 $P2||0|0|1069056|0"
  "t1-twofish-cbc-plain64-128-whirlpool|luks1|-c twofish-cbc-plain64 -s 128 -h whirlpool --align-payload 8 $P2|3:p2:P2|0|0|544768|0"
  "t1-camellia-xts-plain64-256-ripemd160|luks1|-c camellia-xts-plain64 -s 256 -h ripemd160 --align-payload 8 $P2||0|0|1069056|0"
  "t1-serpent-cbc-essiv-128-detached|luks1|-c serpent-cbc-essiv:sha256 -s 128 $P2||1|0|16384|528384"
  "t2-twofish-xts-plain64-argon2i-token|luks2|-c twofish-xts-plain64 -s 256 --sector-size 512 --luks2-keyslots-size 131072 --offset 320 --label theirs-kernel $A2I||0|1|180224|0"
  "t2-serpent-cbc-essiv-sha512-2slots|luks2|-c serpent-cbc-essiv:sha256 -s 128 -h sha512 --sector-size 512 --luks2-keyslots-size 131072 --offset 320 --pbkdf pbkdf2 $P2|4:p2:P2|0|0|180224|0"
  "t2-camellia-xts-plain64-argon2id-4096|luks2|-c camellia-xts-plain64 -s 256 --sector-size 4096 --luks2-keyslots-size 131072 --offset 320 $A2ID||0|0|180224|0"
  "t2-aes-cbc-essiv-4096-detached|luks2|-c aes-cbc-essiv:sha256 -s 128 -h whirlpool --sector-size 4096 --luks2-keyslots-size 65536 --pbkdf pbkdf2 $P2||1|0|16384|98304"
  "t2-aes-xts-plain-ripemd160|luks2|-c aes-xts-plain -s 256 -h ripemd160 --sector-size 512 --luks2-keyslots-size 131072 --offset 320 --pbkdf pbkdf2 $P2||0|0|180224|0"
)

letter() { printf "\\$(printf '%03o' $((97 + $1)))"; }

# ------------------------------------------------------------------ guest script pieces
guest_prologue() {  # the passphrases and helpers, written into each guest script
    cat <<EOF
mkdir -p /run/cryptsetup /tmp/ossl-modules
head -c $(stat -c %s "$LEGACY") /dev/vda > /tmp/ossl-modules/legacy.so
export OPENSSL_MODULES=/tmp/ossl-modules
printf '%s' '$(cat "$W/p1")' > /tmp/p1
printf '%s' '$(cat "$W/p2")' > /tmp/p2
printf '%s' '$(cat "$W/p3")' > /tmp/p3
printf '%s' '$TOKEN' > /tmp/token.json
rec() { n=\$1; shift; echo "@@BEGIN \$n"; "\$@" 2>&1; r=\$?; echo "@@END rc=\$r"; }
shaof() { sha256sum < "\$1" | cut -c1-64; }
echo "@@BEGIN guest"; uname -a; cryptsetup --version; echo "@@END rc=0"
EOF
}
# guest_checks CASE DEV HDROPT TYPE PASSFILES...: the checks both directions share.
guest_checks() {
    local c=$1 dev=$2 hdr=$3 type=$4 m; shift 4
    m=lk$(printf '%s' "$c" | cksum | cut -d' ' -f1)
    cat <<EOF
rec $c/luksDump cryptsetup luksDump $hdr $dev
rec $c/vkdump cryptsetup luksDump -q --dump-volume-key --key-file /tmp/p1 $hdr $dev
EOF
    [ "$type" = luks2 ] && echo "rec $c/json cryptsetup luksDump --dump-json-metadata $hdr $dev"
    local p
    for p in "$@"; do echo "rec $c/test-$p cryptsetup open -v --test-passphrase --key-file /tmp/$p $hdr $dev"; done
    cat <<EOF
rec $c/wrong-passphrase cryptsetup open --test-passphrase --key-file /tmp/token.json $hdr $dev
rec $c/open cryptsetup open --key-file /tmp/p1 $hdr $dev $m
if [ -b /dev/mapper/$m ]; then
rec $c/size blockdev --getsize64 /dev/mapper/$m
rec $c/table sh -c "dmsetup table $m | sed -E 's/ [0-9a-f]{32,} / KEY /'"
rec $c/read-sha shaof /dev/mapper/$m
rec $c/write dd if=\$PAT of=/dev/mapper/$m bs=4096 conv=fsync
rec $c/reread-sha sh -c "echo 3 > /proc/sys/vm/drop_caches; sha256sum < /dev/mapper/$m | cut -c1-64"
rec $c/close cryptsetup close $m
fi
EOF
}

# ------------------------------------------------------------------ (a) ours
log "(a) building ${#OURS[@]} containers with $BLKCRYPT"
mkdir -p "$W/ours"
GA="$W/guest-ours.sh"; DISKS_A=("ro:$W/legacy.disk"); guest_prologue > "$GA"
for spec in "${OURS[@]}"; do
    IFS='|' read -r name type bits fargs addkeys detached token <<< "$spec"
    token=${token:-0}
    D="$W/ours/$name"
    uuid="b1c0ffee-1111-4000-8000-$(printf '%012x' ${#DISKS_A[@]})"
    build_ours "$BLKCRYPT" "$D" "$W" "$name" "$type" "$bits" "$detached" "$uuid" "$fargs" "${addkeys:--}" "$token"
    off=$(cat "$D/offset"); hdropt=(); gh=""
    [ "$detached" = 1 ] && hdropt=(--header "$D/hdr")
    passes=(p1); for ak in $addkeys; do passes+=("$(cut -d: -f2 <<< "$ak")"); done
    "$BLKCRYPT" luks encrypt --key-file "$W/p1" "${hdropt[@]}" "$W/A.bin" "$D/data"
    ctA=$(tail -c "$DATA_SIZE" "$D/data" | sha256sum | cut -c1-64)
    if [ "$detached" = 1 ]; then
        hdisk=$(letter ${#DISKS_A[@]}); DISKS_A+=("$D/hdr"); gh="--header /dev/vd$hdisk"
    fi
    ddisk=$(letter ${#DISKS_A[@]}); DISKS_A+=("$D/data")
    echo "$name	$type	$bits	$detached	$uuid	$off	$ctA	${passes[*]}	$fargs	${addkeys:--}	$token" > "$D/row"
    guest_checks "$name" "/dev/vd$ddisk" "$gh" "$type" "${passes[@]}" >> "$GA"
done
PA=$(letter ${#DISKS_A[@]}); DISKS_A+=("ro:$W/B.bin")
sed -i "/^shaof()/a PAT=/dev/vd$PA" "$GA"

# ------------------------------------------------------------------ (b) theirs
mkdir -p "$W/theirs"
GB="$W/guest-theirs.sh"; DISKS_B=("ro:$W/legacy.disk"); guest_prologue > "$GB"
for spec in "${THEIRS[@]}"; do
    IFS='|' read -r name type fargs addkeys detached token dbytes hbytes <<< "$spec"
    D="$W/theirs/$name"; mkdir -p "$D"
    uuid="b1c0ffee-2222-4000-8000-$(printf '%012x' ${#DISKS_B[@]})"
    truncate -s "$dbytes" "$D/data"
    gh=""
    if [ "$detached" = 1 ]; then
        truncate -s "$hbytes" "$D/hdr"; hdisk=$(letter ${#DISKS_B[@]}); DISKS_B+=("$D/hdr"); gh="--header /dev/vd$hdisk"
    fi
    ddisk=$(letter ${#DISKS_B[@]}); DISKS_B+=("$D/data")
    dev=/dev/vd$ddisk
    echo "rec $name/luksFormat cryptsetup luksFormat -q --type $type $fargs --uuid $uuid --key-file /tmp/p1 $gh $dev" >> "$GB"
    passes=(p1)
    for ak in $addkeys; do
        IFS=: read -r slot pf kdf <<< "$ak"
        ka=$(kdf_args "$type" "$kdf")
        echo "rec $name/luksAddKey cryptsetup luksAddKey -q $ka --key-slot $slot --key-file /tmp/p1 $gh $dev /tmp/$pf" >> "$GB"
        passes+=("$pf")
    done
    [ "$token" = 1 ] && echo "rec $name/token cryptsetup token import --json-file /tmp/token.json --token-id 2 $gh $dev" >> "$GB"
    guest_checks "$name" "$dev" "$gh" "$type" "${passes[@]}" >> "$GB"
    echo "$name	$type	$detached	$uuid	${passes[*]}	$fargs	${addkeys:--}	$token" > "$D/row"
done
PB=$(letter ${#DISKS_B[@]}); DISKS_B+=("ro:$W/B.bin")
sed -i "/^shaof()/a PAT=/dev/vd$PB" "$GB"

# ------------------------------------------------------------------ the two guest runs
log "booting 2 guests (${#DISKS_A[@]} and ${#DISKS_B[@]} disks)"
# no_timer_check: under TCG on a loaded host the kernel's IO-APIC timer check
# can fail and panic at boot. A boot that still panics (125, before the
# script ran, disks untouched) is retried once.
boot() {  # NAME SCRIPT DISKS...
    local n=$1 g=$2 rc=0; shift 2
    for try in 1 2; do
        rc=0
        ORACLE_APPEND=no_timer_check ORACLE_LOG="$W/console-$n.log" "$ORACLE/run-in-kernel.sh" -t 1500 "$g" "$@" \
            > "$W/out-$n.raw" 2> "$W/err-$n" || rc=$?
        [ $rc = 125 ] && ! grep -q ORACLE-GUEST-BEGIN "$W/console-$n.log" || break
        echo "[luks-golden] $n: the guest panicked at boot; once more" >&2
    done
    return $rc
}
boot ours "$GA" "${DISKS_A[@]}" &
pa=$!
boot theirs "$GB" "${DISKS_B[@]}" &
pb=$!
rca=0; rcb=0; wait $pa || rca=$?; wait $pb || rcb=$?
cat "$W/err-ours" "$W/err-theirs" >&2
[ $rca = 0 ] && [ $rcb = 0 ] || { log "guest failed (ours rc=$rca, theirs rc=$rcb)"; exit 1; }
tr -d '\r' < "$W/out-ours.raw" > "$W/out-ours"
tr -d '\r' < "$W/out-theirs.raw" > "$W/out-theirs"
GUEST=$(guest_section "$W/out-ours" guest | paste -sd';' -)

# case_sections OUT CASE: every "@@BEGIN CASE/..." block, verbatim.
case_sections() {
    awk -v p="@@BEGIN $2/" 'index($0, p) == 1 { on = 1 } on { print } on && /@@END rc=[0-9]+$/ { on = 0 }' "$1"
}
# expect CASEFILE SECTION VALUE: a guest result the golden file may not hold otherwise.
expect() {
    local got; got=$(guest_section "$1" "$2")
    [ "$got" = "$3" ] || { log "$(basename "$1" .txt) $2: got '$got', want '$3'"; exit 1; }
}
expect_rc() {
    local got; got=$(guest_rc "$1" "$2")
    [ "$got" = "rc=$3" ] || { log "$(basename "$1" .txt) $2: $got, want rc=$3"; exit 1; }
}
check_common() {  # CASEFILE PASSES...: what the kernel must have said in either direction
    local f=$1 p n=0; shift
    expect_rc "$f" luksDump 0; expect_rc "$f" vkdump 0; expect_rc "$f" open 0
    for p in "$@"; do
        expect_rc "$f" "test-$p" 0
        guest_section "$f" "test-$p" | grep_q -E '^Key slot [0-9]+ unlocked\.$' || { log "$f test-$p"; exit 1; }
    done
    expect_rc "$f" wrong-passphrase 2
    expect "$f" size "$DATA_SIZE"
    expect "$f" reread-sha "$(sha "$W/B.bin")"
}
grep_q() { local all; all=$(cat); grep -q "$@" <<< "$all"; }

# ------------------------------------------------------------------ collect
rm -rf "$HERE/guest" "$HERE/theirs"; mkdir -p "$HERE/guest" "$HERE/theirs"
MANIFEST="$HERE/manifest.tsv"
{
    echo "# LUKS kernel golden manifest, written by tests/luks/kernel/make-kernel-golden.sh"
    echo "# generated: $(date -u +%Y-%m-%dT%H:%M:%SZ) in SECONDS s by: tests/luks/kernel/make-kernel-golden.sh $BLKCRYPT"
    echo "# blkcrypt: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
    echo "# oracle: $ORACLE/run-in-kernel.sh (qemu, accel $(cat "${ORACLE_CACHE:-$ORACLE/cache}/build/ACCEL" 2>/dev/null || cat /var/tmp/blkcrypt-oracle/build/ACCEL 2>/dev/null || echo '?'))"
    echo "# guest: $GUEST"
    echo "# data segment: $DATA_SIZE bytes; pattern A sha256 $(sha "$W/A.bin"), pattern B sha256 $(sha "$W/B.bin")"
} > "$MANIFEST.new"
echo "#ours	case	type	key_bits	detached	uuid	data_offset	ct_sha256_A	ct_sha256_B	passphrases	format_args	add_keys	token" >> "$MANIFEST.new"
for spec in "${OURS[@]}"; do
    name=${spec%%|*}; D="$W/ours/$name"; f="$HERE/guest/$name.txt"
    case_sections "$W/out-ours" "$name" > "$f"
    IFS=$'\t' read -r _ type bits detached uuid off ctA passes fargs addkeys token < "$D/row"
    read -r -a PS <<< "$passes"
    check_common "$f" "${PS[@]}"
    expect "$f" read-sha "$(sha "$W/A.bin")"
    guest_section "$f" vkdump | sed -n '/^MK dump:/,$p' | sed 's/^MK dump://' | tr -d ' \t\n' > "$D/kvk"
    [ "$(cat "$D/kvk")" = "$(xxd -p "$D/vk" | tr -d '\n')" ] || { log "$name: kernel's volume key differs from ours"; exit 1; }
    ctB=$(tail -c "$DATA_SIZE" "$D/data" | sha256sum | cut -c1-64)
    [ "$detached" = 1 ] && hdropt=(--header "$D/hdr") || hdropt=()
    "$BLKCRYPT" luks decrypt --key-file "$W/p1" "${hdropt[@]}" "$D/data" "$D/out"
    cmp -s "$D/out" "$W/B.bin" || { log "$name: luks decrypt of the kernel's writes is not pattern B"; exit 1; }
    printf 'ours\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$type" "$bits" "$detached" "$uuid" "$off" "$ctA" "$ctB" "$passes" "$fargs" "$addkeys" "$token" >> "$MANIFEST.new"
    log "ours   $name: kernel read pattern A, wrote B; we decrypt B"
done
echo "#theirs	case	type	detached	uuid	passphrases	token	original_sha256	container_sha256	header_sha256	luksFormat_args	add_keys" >> "$MANIFEST.new"
zero_unused="$W/zero-unused.py"
cat > "$zero_unused" <<'PY'
# zero-unused.py HEADER_FILE: zeroes the keyslot area bytes no active keyslot
# uses (cryptsetup fills them with random bytes at format time), so that xz
# can compress the container; every byte cryptsetup reads is kept.
import json, struct, sys
f = open(sys.argv[1], "r+b"); h = f.read(4096)
def zero(a, b):
    if b > a: f.seek(a); f.write(bytes(b - a))
if h[:6] == b"LUKS\xba\xbe" and struct.unpack(">H", h[6:8])[0] == 1:
    kb = struct.unpack(">I", h[108:112])[0]
    for i in range(8):
        act, = struct.unpack(">I", h[208 + 48 * i:212 + 48 * i])
        off, stripes = struct.unpack(">II", h[208 + 48 * i + 40:208 + 48 * i + 48])
        area = -(-kb * stripes // 512); area = -(-area // 8) * 8
        if act != 0x00AC71F3: zero(off * 512, (off + area) * 512)
else:
    hs = struct.unpack(">Q", h[8:16])[0]; f.seek(4096)
    md = json.loads(f.read(hs - 4096).rstrip(b"\0"))
    start, end = 2 * hs, 2 * hs + int(md["config"]["keyslots_size"])
    used = sorted((int(k["area"]["offset"]), int(k["area"]["offset"]) + int(k["area"]["size"])) for k in md["keyslots"].values())
    pos = start
    for a, b in used: zero(pos, a); pos = max(pos, b)
    zero(pos, end)
PY
for spec in "${THEIRS[@]}"; do
    name=${spec%%|*}; D="$W/theirs/$name"; f="$HERE/guest/$name.txt"
    case_sections "$W/out-theirs" "$name" > "$f"
    IFS=$'\t' read -r _ type detached uuid passes fargs addkeys token < "$D/row"
    read -r -a PS <<< "$passes"
    expect_rc "$f" luksFormat 0
    check_common "$f" "${PS[@]}"
    hdrfile="$D/data"; hdropt=()
    [ "$detached" = 1 ] && { hdrfile="$D/hdr"; hdropt=(--header "$D/hdr"); }
    orig=$(sha "$D/data"); [ "$detached" = 1 ] && orig="$(sha "$D/hdr")+$orig"
    python3 "$zero_unused" "$hdrfile"
    "$BLKCRYPT" luks decrypt --key-file "$W/p1" "${hdropt[@]}" "$D/data" "$D/out"
    cmp -s "$D/out" "$W/B.bin" || { log "$name: luks decrypt is not the pattern B the kernel wrote"; exit 1; }
    xz -9e -T1 -c "$D/data" > "$HERE/theirs/$name.img.xz"
    hsha=-
    if [ "$detached" = 1 ]; then xz -9e -T1 -c "$D/hdr" > "$HERE/theirs/$name.hdr.xz"; hsha=$(sha "$D/hdr"); fi
    printf 'theirs\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$type" "$detached" "$uuid" "$passes" "$token" "$orig" "$(sha "$D/data")" "$hsha" "$fargs" "${addkeys:--}" >> "$MANIFEST.new"
    log "theirs $name: kernel wrote B; we decrypt B"
done

# ------------------------------------------------------------------ (c) keyslot changes across
# A third boot, after the first two: on copies of two of cryptsetup's
# containers, blkcrypt kills the p2 keyslot and adds p3 in slot 6, and the
# guest's cryptsetup must open p1 and p3 (slot 6) and refuse p2; on copies of
# two of ours, the guest's cryptsetup kills the p2 keyslot and adds p3 in
# slot 4, and blkcrypt must open p3 (slot 4), refuse p2 and decrypt pattern B.
# Recorded in guest/keys-<case>.txt; checked here only (it needs the kernel).
KEYS_THEIRS=(t1-twofish-cbc-plain64-128-whirlpool:3 t2-serpent-cbc-essiv-sha512-2slots:4)
KEYS_OURS=(o1-twofish-cbc-plain64-sha1:1 o2-twofish-xts-plain64-4096-sha512:3)
GC="$W/guest-keys.sh"; DISKS_C=("ro:$W/legacy.disk"); guest_prologue > "$GC"
mkdir -p "$W/keys"
for e in "${KEYS_THEIRS[@]}" "${KEYS_OURS[@]}"; do
    name=${e%%:*}; slot=${e#*:}; k="keys-$name"
    src="$W/theirs/$name"; [ -d "$src" ] || src="$W/ours/$name"
    type=$(cut -f2 "$src/row")
    cp "$src/data" "$W/keys/$name.img"
    dev=/dev/vd$(letter ${#DISKS_C[@]}); DISKS_C+=("$W/keys/$name.img")
    if [ "$src" = "$W/theirs/$name" ]; then
        "$BLKCRYPT" luks kill-slot -q "$W/keys/$name.img" "$slot" "$W/p1"
        read -r -a KA <<< "$(kdf_args "$type" P2)"
        "$BLKCRYPT" luks add-key --key-file "$W/p1" --key-slot 6 "${KA[@]}" "$W/keys/$name.img" "$W/p3"
    else
        echo "rec $k/luksKillSlot cryptsetup luksKillSlot -q --key-file /tmp/p1 $dev $slot" >> "$GC"
        echo "rec $k/luksAddKey cryptsetup luksAddKey -q $(kdf_args "$type" P2) --key-slot 4 --key-file /tmp/p1 $dev /tmp/p3" >> "$GC"
    fi
    cat >> "$GC" <<EOF
rec $k/luksDump cryptsetup luksDump $dev
rec $k/test-p1 cryptsetup open -v --test-passphrase --key-file /tmp/p1 $dev
rec $k/test-p2 cryptsetup open --test-passphrase --key-file /tmp/p2 $dev
rec $k/test-p3 cryptsetup open -v --test-passphrase --key-file /tmp/p3 $dev
EOF
done
log "booting the keyslot-change guest (${#DISKS_C[@]} disks)"
boot keys "$GC" "${DISKS_C[@]}" || { cat "$W/err-keys" >&2; log "keys guest failed"; exit 1; }
cat "$W/err-keys" >&2
tr -d '\r' < "$W/out-keys.raw" > "$W/out-keys"
for e in "${KEYS_THEIRS[@]}" "${KEYS_OURS[@]}"; do
    name=${e%%:*}; k="keys-$name"; f="$HERE/guest/$k.txt"; img="$W/keys/$name.img"
    case_sections "$W/out-keys" "$k" > "$f"
    expect_rc "$f" luksDump 0; expect_rc "$f" test-p1 0; expect_rc "$f" test-p2 2; expect_rc "$f" test-p3 0
    want=4
    if [ -d "$W/theirs/$name" ]; then want=6; else expect_rc "$f" luksKillSlot 0; expect_rc "$f" luksAddKey 0; fi
    guest_section "$f" test-p3 | grep_q -Fx "Key slot $want unlocked." || { log "$k: cryptsetup: p3 not in slot $want"; exit 1; }
    set +e; "$BLKCRYPT" luks test-passphrase --key-file "$W/p2" "$img" 2>/dev/null; rc=$?; set -e
    [ $rc = 2 ] || { log "$k: blkcrypt opened the killed p2 keyslot (exit $rc)"; exit 1; }
    [ "$("$BLKCRYPT" luks test-passphrase -v --key-file "$W/p3" "$img")" = "Key slot $want unlocked." ] \
        || { log "$k: blkcrypt: p3 not in slot $want"; exit 1; }
    "$BLKCRYPT" luks dump "$img" | unify_device > "$W/keys/$name.ours"
    guest_section "$f" luksDump | unify_device > "$W/keys/$name.theirs"
    cmp -s "$W/keys/$name.ours" "$W/keys/$name.theirs" \
        || { log "$k: dumps differ"; diff "$W/keys/$name.ours" "$W/keys/$name.theirs" >&2; exit 1; }
    rm -f "$W/keys/$name.out"
    "$BLKCRYPT" luks decrypt --key-file "$W/p3" "$img" "$W/keys/$name.out"
    cmp -s "$W/keys/$name.out" "$W/B.bin" || { log "$k: decrypt with p3 is not pattern B"; exit 1; }
    log "keys   $name: keyslot changes seen both ways"
done
sed -i "2s/SECONDS/$(( $(date +%s) - START ))/" "$MANIFEST.new"
mv "$MANIFEST.new" "$MANIFEST"
log "done in $(( $(date +%s) - START )) s; now running the replay"
bash "$ROOT/tests/cli/luks_kernel.sh" "$BLKCRYPT"
