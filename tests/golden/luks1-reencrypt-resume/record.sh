#!/bin/sh
# Proof that cryptsetup 2.6.1 resumes a LUKS1 re-key blkcrypt started and
# interrupted: interrupt.cpp runs legacy::reencrypt on an image file and stops
# it after two 64 KiB blocks (LUKS\xde\xad mark, LUKS-<uuid>.log at offset
# 131072, .org, .new); then `cryptsetup reencrypt` as root in the kernel
# oracle finds the log ("resuming reencryption") and completes it with
# dm-crypt. The image must then open for cryptsetup with the passphrase and
# hold the original plaintext. The transcript goes to result.txt.
#   sh record.sh /path/to/worktree     (built in build/)
set -eu
SRC=$(realpath "$1")
OUT=$(cd "$(dirname "$0")" && pwd)
ORACLE=/work/shared/oracle
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$W"
g++ -std=c++20 -O1 -I"$SRC/crypto/include" -I"$SRC/luks/include" -I"$SRC/dmcrypt/include" "$OUT/interrupt.cpp" \
    -L"$SRC/build/crypto" -lblkcrypt -Wl,-rpath,"$SRC/build/crypto" -o interrupt
UUID=2c4e6a8b-0d1f-4352-8475-96a8b0c2d4e6
PAYLOAD=1032
printf 'resume-pass' > pw
truncate -s $((PAYLOAD * 512 + 262144)) img
cryptsetup luksFormat -q --type luks1 -c aes-cbc-essiv:sha256 -s 128 --align-payload 8 --iter-time 1 \
    --uuid "$UUID" --key-file pw img
python3 -c 'import hashlib,sys; sys.stdout.buffer.write(b"".join(hashlib.sha256(b"r" + i.to_bytes(4,"little")).digest() for i in range(262144 // 32)))' > plain
"$SRC/build/cli/blkcrypt" luks encrypt --key-file pw plain img
{
echo "# blkcrypt: legacy::reencrypt stopped after 2 blocks"
./interrupt img resume-pass 2 2>&1 || true
printf 'magic: '; head -c 6 img | od -An -tx1
tr -d '\000' < "LUKS-$UUID.log"
ls "LUKS-$UUID".*
} > result.txt
truncate -s 2M files
dd if="LUKS-$UUID.log" of=files bs=512 conv=notrunc 2>/dev/null
dd if="LUKS-$UUID.org" of=files bs=4096 seek=1 conv=notrunc 2>/dev/null
dd if="LUKS-$UUID.new" of=files bs=4096 seek=130 conv=notrunc 2>/dev/null
ORG=$(stat -c %s "LUKS-$UUID.org"); NEW=$(stat -c %s "LUKS-$UUID.new")
cat > guest.sh <<GUEST
cd /tmp
printf 'resume-pass' > pw
dd if=/dev/vdb of=LUKS-$UUID.log bs=512 count=1 2>/dev/null
dd if=/dev/vdb of=LUKS-$UUID.org bs=4096 skip=1 count=$((ORG / 4096)) 2>/dev/null
dd if=/dev/vdb of=LUKS-$UUID.new bs=4096 skip=130 count=$((NEW / 4096)) 2>/dev/null
# On a block device 2.6.1 does not see the reencryption in progress
# (reencrypt_luks1_in_progress wants st_size >= a page, and a block device's
# st_size is 0): it tries LUKS2 and fails with "wrong or missing parameters".
cryptsetup reencrypt -q --key-file pw /dev/vda > dbg 2>&1; echo "on /dev/vda: cryptsetup reencrypt rc=\$?"; tail -1 dbg
# On the image as a file (cryptsetup attaches a loop device itself) it resumes.
dd if=/dev/vda of=img.file bs=65536 2>/dev/null
modprobe loop 2>/dev/null; [ -e /dev/loop-control ] || mknod /dev/loop-control c 10 237
for i in 0 1 2 3; do [ -e /dev/loop\$i ] || mknod /dev/loop\$i b 7 \$i; done
cryptsetup reencrypt -q --key-file pw img.file; echo "on a file: cryptsetup reencrypt rc=\$?"
dd if=img.file of=/dev/vda bs=65536 conv=notrunc 2>/dev/null; sync
ls LUKS-* 2>/dev/null; echo "files left: \$(ls LUKS-* 2>/dev/null | wc -l)"
GUEST
echo "# cryptsetup (root, kernel oracle): reencrypt resumes" >> result.txt
"$ORACLE/run-in-kernel.sh" -t 120 guest.sh img files >> result.txt 2>&1
echo "# host: the result" >> result.txt
cat result.txt
cryptsetup open --test-passphrase --key-file pw img
echo "cryptsetup open --test-passphrase: ok" >> result.txt
"$SRC/build/cli/blkcrypt" luks decrypt --key-file pw img out
echo "plaintext sha256 before: $(sha256sum < plain | cut -d' ' -f1)" >> result.txt
echo "plaintext sha256 after:  $(sha256sum < out | cut -d' ' -f1)" >> result.txt
cmp plain out && echo "plaintext identical" >> result.txt
cp result.txt "$OUT/result.txt"
tail -4 result.txt
