#!/bin/bash
# make-kernel-accept-golden.sh - record that the real kernel (Debian 6.1, the
# oracle's vmlinuz and initramfs) ACCEPTS blkcrypt's dm-verity root-hash
# signature once the signer is trusted the way a distribution kernel's user
# gets a key trusted: enrolled in shim's MokList. Writes accept-golden.txt;
# check.sh replays it without the oracle or qemu.
#
# Usage: tests/verity/kernel-sig/make-kernel-accept-golden.sh BLKCRYPT
# One boot under TCG: 5-15 minutes on a loaded 2-core host.
#
# Why this boot chain (each fact from the source or a failed boot):
#  - dm-verity checks root_hash_sig against .secondary_trusted_keys
#    (CONFIG_DM_VERITY_VERIFY_ROOTHASH_SIG_SECONDARY_KEYRING=y); with
#    CONFIG_INTEGRITY_MACHINE_KEYRING=y the .machine keyring is linked into it
#    and holds the MokListRT certificates, but only when shim mirrored
#    MokListTrustedRT (machine_keyring.c trust_moklist()); shim 16.1 mirrors it
#    by default (MOK_VARIABLE_INVERSE: no MokListTrusted variable = trusted).
#  - load_uefi.c load_uefi_certs() returns before MokListXRT/MokListRT when
#    arch_ima_get_secureboot() is false ("the MOK/MOKx can not be trusted when
#    secure boot is disabled"): a boot with Secure Boot off gets an empty
#    .machine keyring. So: OVMF's Secure Boot build (q35, SMM) with the
#    Microsoft keys enrolled (OVMF_VARS_4M.ms.fd), Debian's Microsoft-signed
#    shim, Debian's signed grub, the oracle's Debian-signed kernel.
#  - shim only trusts a MokList that is non-volatile and boot-service-only
#    (mok.c yes_attr/no_attr); Linux can never write such a variable, so
#    efivar-add.py puts it into this run's private copy of the variable store
#    (the ESL made by efitools' cert-to-efi-sig-list), as MokManager would
#    after a `mokutil --import`.
# The guest is the oracle's initramfs (its /init, script over fw_cfg, disks
# as virtio); the EFI system partition is a FAT image made with mtools on an
# AHCI disk the guest never uses.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BLKCRYPT="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
ORACLE="${ORACLE:-/work/shared/oracle}"
# The oracle's own choice of cache folder (run-in-kernel.sh).
[ -n "${ORACLE_CACHE:-}" ] || { if [ -w "$ORACLE" ]; then ORACLE_CACHE="$ORACLE/cache"; else ORACLE_CACHE=/var/tmp/blkcrypt-oracle; fi; }
export ORACLE_CACHE
B="$ORACLE_CACHE/build"
DEBS="${SIGKERN_CACHE:-/var/tmp/blkcrypt-sigkern}"
OUT="${GOLDEN_OUT:-$HERE/accept-golden.txt}"
OVMF=/usr/share/OVMF

need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
[ -f "$OVMF/OVMF_CODE_4M.secboot.fd" ] && [ -f "$OVMF/OVMF_VARS_4M.ms.fd" ] || need+=(ovmf)
command -v mformat >/dev/null || need+=(mtools)
command -v cert-to-efi-sig-list >/dev/null || need+=(efitools)
command -v gcc >/dev/null || need+=(gcc libc6-dev)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}" >&2
fi
# The boot chain is guest payload, not a host tool: downloaded, not installed
# (shim-signed's postinst would run grub-install on this host).
mkdir -p "$DEBS"
for p in shim-signed grub-efi-amd64-signed; do
  ls "$DEBS/${p}_"*.deb >/dev/null 2>&1 || (cd "$DEBS" && apt-get download "$p" >&2)
done
SHIM_DEB=$(ls "$DEBS"/shim-signed_*.deb | tail -1)
GRUB_DEB=$(ls "$DEBS"/grub-efi-amd64-signed_*.deb | tail -1)
"$ORACLE/build.sh" >&2

W="$(mktemp -d)"
QPID=""
cleanup() { [ -z "$QPID" ] || kill "$QPID" 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT
dpkg-deb -x "$SHIM_DEB" "$W/x"
dpkg-deb -x "$GRUB_DEB" "$W/x"

source "$HERE/sigs.sh"
make_accept_sigs "$BLKCRYPT" "$W"
gcc -static -O2 -o "$W/files/addkey" "$HERE/addkey.c"
gcc -static -O2 -o "$W/files/listring" "$HERE/listring.c"
(cd "$W/files" && tar -cf "$W/files.tar" .)
table=$("$BLKCRYPT" verity table "$W/data" "$W/hash" "$ROOT" --root-hash-signature "$W/files/ours.sig" \
        --trusted-cert "$HERE/../sig/rsa.pem" --sig-key-desc blkcrypt:sig-test)
table=${table//"$W/data"//dev/vda}
table=${table//"$W/hash"//dev/vdb}

# MokList: our test certificate, owner GUID shim's own (any GUID works).
SHIM_GUID=605dab50-e046-4300-abb6-3dd810dd8b23
cert-to-efi-sig-list -g "$SHIM_GUID" "$HERE/../sig/rsa.pem" "$W/mok.esl" >&2
python3 "$HERE/efivar-add.py" "$OVMF/OVMF_VARS_4M.ms.fd" "$W/vars.fd" MokList "$SHIM_GUID" 0x3 "$W/mok.esl"

# ESP: shim as the removable-media loader, grub next to it (shim's default
# second stage), grub.cfg wherever Debian's signed grub may look for it.
cat >"$W/grub.cfg" <<'CFG'
set timeout=0
menuentry oracle {
  linux /vmlinuz console=ttyS0 loglevel=4 panic=-1 oracle.ndisks=3
  initrd /initrd.gz
}
CFG
truncate -s 40M "$W/esp.img"
mformat -i "$W/esp.img" -F ::
mmd -i "$W/esp.img" ::/EFI ::/EFI/BOOT ::/EFI/debian ::/boot ::/boot/grub
mcopy -i "$W/esp.img" "$W/x/usr/lib/shim/shimx64.efi.signed" ::/EFI/BOOT/BOOTX64.EFI
mcopy -i "$W/esp.img" "$W/x/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed" ::/EFI/BOOT/grubx64.efi
for d in EFI/BOOT EFI/debian boot/grub; do mcopy -i "$W/esp.img" "$W/grub.cfg" "::/$d/grub.cfg"; done
mcopy -i "$W/esp.img" "$B/vmlinuz" ::/vmlinuz
mcopy -i "$W/esp.img" "$B/initramfs.cpio.gz" ::/initrd.gz

cat >"$W/guest.sh" <<GUEST
mkdir f && cd f && tar -xf /dev/vdc && chmod +x addkey listring
echo "KERNEL \$(uname -r)"
dmesg | sed -n 's/^\[[^]]*\] secureboot: /SECUREBOOT /p'
for v in MokListRT MokListTrustedRT; do [ -e /sys/firmware/efi/mok-variables/\$v ] && echo "MOKVAR \$v"; done
dmesg | grep -E "integrity: .*(blkcrypt|keyring)" | sed 's/^\[[^]]*\] /DMESG /'
grep -E 'builtin_trusted|secondary_trusted|\.machine|\.platform' /proc/keys | awk '{print "KEYRING", \$9, \$10, \$11}' | sed 's/ *\$//' | sort
for r in .secondary_trusted_keys .machine; do
  id=\$(grep " \$r:" /proc/keys | awk '{print \$1}')
  ./listring \$id | grep -E 'keyring|blkcrypt' | sed "s/^/IN \$r /" | sort
done
last() { dmesg -c | grep -E 'verity|PKCS7|X.509|table' | grep -v -e 'error adding target' -e 'using implementation' | sed 's/^\[[^]]*\] //' | tr '\\n' '|' | sed 's/|\$//'; }
dmesg -c >/dev/null
for s in $ACCEPT_SIG_NAMES; do
  rc=0; veritysetup open /dev/vda v /dev/vdb $ROOT --root-hash-signature=\$s.sig >log 2>&1 || rc=\$?
  echo "VERITYSETUP \$s rc=\$rc kernel=\$(last)"
  if [ \$rc = 0 ]; then
    echo "READ \$s \$(sha256sum </dev/mapper/v | cut -c1-64)"
    veritysetup close v
  fi
done
for s in ours tampered untrusted; do
  echo "USER-KEY \$s \$(./addkey user blkcrypt:sig-\$s \$s.sig @u | sed 's/: key [0-9a-f]*\$/: added/')"
  rc=0; dmsetup create t --readonly --table "${table% *} blkcrypt:sig-\$s" >/dev/null 2>&1 || rc=\$?
  echo "DMSETUP \$s rc=\$rc kernel=\$(last)"
  if [ \$rc = 0 ]; then
    echo "READ dmsetup-\$s \$(sha256sum </dev/mapper/t | cut -c1-64)"
    dmsetup table t | sed 's/^/TABLE /'
    dmsetup remove t
  fi
done
GUEST

# One boot, as run-in-kernel.sh does it but through the firmware: console on
# ttyS0 (markers), the script's output on ttyS1.
: >"$W/console.log"; : >"$W/out.bin"
timeout -k 5 "${ORACLE_TIMEOUT:-2400}" qemu-system-x86_64 \
  -nodefaults -nographic -monitor none -no-reboot \
  -machine q35,smm=on -global driver=cfi.pflash01,property=secure,value=on \
  -accel tcg,thread=multi -cpu max -smp "${ORACLE_SMP:-2}" -m "${ORACLE_MEM:-1G}" \
  -drive "if=pflash,format=raw,unit=0,readonly=on,file=$OVMF/OVMF_CODE_4M.secboot.fd" \
  -drive "if=pflash,format=raw,unit=1,file=$W/vars.fd" \
  -drive "if=none,id=esp,format=raw,file=$W/esp.img" -device ide-hd,drive=esp,bus=ide.0,bootindex=0 \
  -serial "file:$W/console.log" -serial "file:$W/out.bin" \
  -fw_cfg "name=opt/oracle/script,file=$W/guest.sh" \
  -drive "if=none,id=d0,format=raw,file=$W/data,readonly=on" -device virtio-blk-pci,drive=d0,serial=oracle-disk0 \
  -drive "if=none,id=d1,format=raw,file=$W/hash,readonly=on" -device virtio-blk-pci,drive=d1,serial=oracle-disk1 \
  -drive "if=none,id=d2,format=raw,file=$W/files.tar,readonly=on" -device virtio-blk-pci,drive=d2,serial=oracle-disk2 \
  </dev/null >"$W/qemu.out" 2>&1 &
QPID=$!
wait "$QPID" || true
QPID=""
[ -z "${ORACLE_LOG:-}" ] || cp "$W/console.log" "$ORACLE_LOG"
if ! tr -d '\r' <"$W/console.log" | grep -a -q '===ORACLE-GUEST-END rc=0==='; then
  echo "make-kernel-accept-golden.sh: the guest did not finish:" >&2
  cat "$W/qemu.out" >&2; tr -d '\r' <"$W/console.log" | tail -n 40 >&2; cat "$W/out.bin" >&2
  exit 1
fi
{
  echo "# tests/verity/kernel-sig/make-kernel-accept-golden.sh; table: $table" | sed "s/$ROOT/ROOT/"
  echo "# boot: OVMF_CODE_4M.secboot.fd + OVMF_VARS_4M.ms.fd (ovmf $(dpkg-query -W -f '${Version}' ovmf)) + MokList=rsa.pem,"
  echo "#   $(basename "$SHIM_DEB"), $(basename "$GRUB_DEB"), the oracle's kernel"
  echo "# sha256 of the data device and of the signatures the kernel saw:"
  echo "# DATA $(sha256sum <"$W/data" | cut -c1-64)"
  (cd "$W/files" && for s in $ACCEPT_SIG_NAMES; do echo "# SIG $s $(sha256sum <$s.sig | cut -c1-64)"; done)
  # The script's own lines only: the firmware paints the console, not ttyS1,
  # but grub's and the kernel's early lines can reach it too.
  tr -d '\r' <"$W/out.bin" | grep -a -E '^(KERNEL|SECUREBOOT|MOKVAR|DMESG|KEYRING|IN|VERITYSETUP|READ|USER-KEY|DMSETUP|TABLE) '
} >"$OUT"
cat "$OUT"
