#!/bin/bash
# Records the LUKS2 headers cryptsetup 2.6.1 writes at `reencrypt
# --init-only` (run as a plain user on image files), for
# tests/unit/luks2_reencrypt_test.cpp. Passphrase "pass"; PBKDF2 1000
# iterations; 16 KiB metadata, 1 MiB keyslots area; the old volume key is 64
# bytes of 'A', the new one 64 of 'B' (--volume-key-file). Each .hdr.gz holds
# the two header copies only (32 KiB): the keys are known, so the keyslot
# areas are not needed to check the metadata and its digest.
set -euo pipefail
out=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
printf 'A%.0s' $(seq 64) >old.key
printf 'B%.0s' $(seq 64) >new.key
P=(--pbkdf pbkdf2 --pbkdf-force-iterations 1000)
F=(--disable-locks --force-offline-reencrypt)
fmt() {
    truncate -s 32M "$1"
    printf pass | cryptsetup luksFormat -q --type luks2 "${P[@]}" --luks2-metadata-size 16k \
        --luks2-keyslots-size 1M --volume-key-file old.key "$1" -d - 2>/dev/null
}
keep() { head -c "$2" "$1" | gzip -9n >"$out/$3.hdr.gz"; }
for m in checksum journal none; do
    fmt $m.img
    printf pass | cryptsetup reencrypt -q "${F[@]}" "${P[@]}" --init-only --resilience $m \
        --volume-key-file new.key $m.img -d -
    keep $m.img 32768 $m
done
# encrypt in place: datashift (data offset 4 MiB, half the reduction).
truncate -s 32M enc.img
printf pass | cryptsetup reencrypt -q --encrypt --type luks2 "${F[@]}" "${P[@]}" --reduce-device-size 8M \
    --init-only --volume-key-file new.key enc.img -d -
keep enc.img 32768 encrypt-datashift
# decrypt with a new detached header: datashift-checksum, online-reencrypt-v3.
fmt dec.img
printf pass | cryptsetup reencrypt -q --decrypt "${F[@]}" "${P[@]}" --header dec.hdr --init-only dec.img -d -
keep dec.hdr 32768 decrypt-datashift-checksum
cryptsetup --version >"$out/VERSION"
