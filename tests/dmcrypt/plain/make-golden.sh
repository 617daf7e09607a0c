#!/bin/bash
# Records what the real kernel writes through `cryptsetup open --type plain`
# for each case of cases.tsv: boots Debian's kernel with cryptsetup 2.6 in
# qemu (the oracle, ../shared/oracle next to the project, or $ORACLE), writes
# gen.py's plaintext through each mapping onto its own zeroed disk, and
# stores the SHA-256 of every disk in golden.tsv. tests/cli/plain.sh then
# checks blkcrypt against golden.tsv without the oracle.
# Usage: make-golden.sh   (takes about a minute under TCG)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
oracle=${ORACLE:-$(cd "$here/../../../.." && pwd)/shared/oracle}
[[ -x $oracle/run-in-kernel.sh ]] || oracle=/work/shared/oracle
[[ -x $oracle/run-in-kernel.sh ]] || { echo "no oracle (set ORACLE=DIR)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 "$here/gen.py" plaintext "$tmp/plain.img"
keyfile_printf=$(python3 "$here/gen.py" keyfile-printf)
size=$(stat -c %s "$tmp/plain.img")

names=() disks=()
{
    echo 'set -u'
    echo "printf '$keyfile_printf' > /tmp/kf"
    echo 'cryptsetup --version'
} >"$tmp/guest.sh"
i=0
letters=(b c d e f g h i j k l m n o p q r s t)
while IFS=$'\t' read -r name opts input sectors; do
    [[ -z $name || $name == \#* ]] && continue
    dev=/dev/vd${letters[$i]}
    truncate -s "$size" "$tmp/$name.img"
    names+=("$name")
    disks+=("$tmp/$name.img")
    [[ $opts == - ]] && opts=
    opts=${opts//KEYFILE//tmp/kf}
    case $input in
        line:*) feed="printf '%s\\n' '${input#line:}'" ;;
        keyfile) feed="cat /tmp/kf" ;;
        none) feed="cat /dev/null" ;;
        *) echo "bad input '$input' for $name" >&2; exit 1 ;;
    esac
    cat >>"$tmp/guest.sh" <<G
if $feed | cryptsetup open --type plain $opts $dev c$i; then
    dd if=/dev/vda of=/dev/mapper/c$i bs=512 count=$sectors conv=fsync 2>/dev/null
    cryptsetup close c$i
    echo "case $name: ok"
else
    echo "case $name: cryptsetup failed"
fi
G
    i=$((i + 1))
done <"$here/cases.tsv"

ORACLE_QUIET=1 "$oracle/run-in-kernel.sh" -t 600 "$tmp/guest.sh" "ro:$tmp/plain.img" "${disks[@]}" | tee "$tmp/guest.out"
if grep -q 'cryptsetup failed' "$tmp/guest.out"; then
    echo "some case failed in the guest" >&2
    exit 1
fi
version=$(grep -m1 '^cryptsetup ' "$tmp/guest.out")
{
    echo "# SHA-256 of each disk after writing the plaintext through cryptsetup open --type plain"
    echo "# ($version, kernel of the oracle; made by make-golden.sh from cases.tsv)"
    for j in "${!names[@]}"; do
        printf '%s\t%s\n' "${names[$j]}" "$(sha256sum "${disks[$j]}" | cut -d' ' -f1)"
    done
} >"$here/golden.tsv"
cat "$here/golden.tsv"
