#!/bin/bash
# make-kernel-golden.sh - record what the real kernel (Debian 6.1 through the
# oracle in /work/shared/oracle, CONFIG_DM_VERITY_VERIFY_ROOTHASH_SIG=y with
# the secondary keyring) says about blkcrypt's root-hash signatures, into
# golden.txt. check.sh replays it without the oracle.
#
# Usage: tests/verity/kernel-sig/make-kernel-golden.sh BLKCRYPT
# One oracle boot (TCG: about two minutes). Needs gcc (a static add_key
# helper, addkey.c: the initramfs has no keyctl), openssl, tar.
#
# The image: 64 KiB of zeros through `openssl enc -aes-128-ctr -K <"blkcrypt-kernel!"> -iv 0..0ff`, formatted with --salt 00 --uuid below; the signatures
# (sigs.sh makes them, here and in check.sh) with the test key
# tests/verity/sig/rsa.key. The guest:
#   1. lists its trusted keyrings and tries to add rsa.pem to
#      .secondary_trusted_keys (restricted to keys signed by a trusted key);
#   2. runs `veritysetup open --root-hash-signature` with each signature;
#   3. loads blkcrypt's own table line (root_hash_sig_key_desc) with dmsetup,
#      the signature added as a user key under that description.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BLKCRYPT="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
ORACLE="${ORACLE:-/work/shared/oracle}"
W="$(mktemp -d)"
trap 'rm -rf "$W"' EXIT
"$ORACLE/build.sh" >&2
source "$HERE/sigs.sh"
make_sigs "$BLKCRYPT" "$W"
gcc -static -O2 -o "$W/files/addkey" "$HERE/addkey.c"
openssl x509 -in "$HERE/../sig/rsa.pem" -outform der -out "$W/files/rsa.der"
(cd "$W/files" && tar -cf "$W/files.tar" .)
table=$("$BLKCRYPT" verity table "$W/data" "$W/hash" "$ROOT" --root-hash-signature "$W/files/ours.sig" \
        --trusted-cert "$HERE/../sig/rsa.pem" --sig-key-desc blkcrypt:sig-test)
table=${table//"$W/data"//dev/vda}
table=${table//"$W/hash"//dev/vdb}
cat >"$W/guest.sh" <<GUEST
mkdir f && cd f && tar -xf /dev/vdc && chmod +x addkey
echo "KERNEL \$(uname -r)"
grep -E 'builtin_trusted|secondary_trusted|platform' /proc/keys | awk '{print "KEYRING", \$9, \$10, \$11}' | sed 's/ *\$//' | sort
sec=\$(grep secondary_trusted_keys /proc/keys | awk '{print \$1}')
echo "ADD-SECONDARY \$(./addkey asymmetric - rsa.der \$sec)"
# This case's kernel lines only (dmesg -c empties the buffer), joined.
last() { dmesg -c | grep -E 'verity|PKCS7|X.509|table' | grep -v -e 'error adding target' -e 'using implementation' | sed 's/^\[[^]]*\] //' | tr '\\n' '|' | sed 's/|\$//'; }
dmesg -c >/dev/null
for s in $SIG_NAMES; do
  rc=0; veritysetup open --debug /dev/vda v /dev/vdb $ROOT --root-hash-signature=\$s.sig >log 2>&1 || rc=\$?
  [ \$s = ours ] && grep -i 'signature' log | sed 's/^# //; s/^/VERITYSETUP-DEBUG /'
  echo "VERITYSETUP \$s rc=\$rc kernel=\$(last)"
  [ \$rc = 0 ] && veritysetup close v
done
echo "USER-KEY \$(./addkey user blkcrypt:sig-test ours.sig @u | sed 's/: key [0-9a-f]*\$/: added/')"
rc=0; dmsetup create t --readonly --table "$table" >/dev/null 2>&1 || rc=\$?
echo "DMSETUP ours rc=\$rc kernel=\$(last)"
./addkey user blkcrypt:sig-tampered tampered.sig @u >/dev/null
rc=0; dmsetup create t2 --readonly --table "${table/blkcrypt:sig-test/blkcrypt:sig-tampered}" >/dev/null 2>&1 || rc=\$?
echo "DMSETUP tampered rc=\$rc kernel=\$(last)"
GUEST
{
  echo "# tests/verity/kernel-sig/make-kernel-golden.sh; table: $table" | sed "s/$ROOT/ROOT/"
  echo "# sha256 of the signatures the kernel saw:"
  (cd "$W/files" && for s in $SIG_NAMES; do echo "# SIG $s $(sha256sum <$s.sig | cut -c1-64)"; done)
  ORACLE_QUIET=1 "$ORACLE/run-in-kernel.sh" -t 900 "$W/guest.sh" "ro:$W/data" "ro:$W/hash" "ro:$W/files.tar" | tr -d '\r'
} >"$HERE/golden.txt"
cat "$HERE/golden.txt"
