#!/usr/bin/env bash
# Installs everything blkcrypt needs to build and test on Debian 12.
# Idempotent: installs only what is missing; apt-get update only if needed.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config
  libcrypto++-dev libssl-dev libboost-program-options-dev
  catch2 libbenchmark-dev
  openssl python3 python3-cryptography coreutils xxd cryptsetup-bin xz-utils
  fsverity ccache
  man-db groff-base bsdextrautils
  clang-14 libclang-rt-14-dev
  libargon2-dev nlohmann-json3-dev
  qemu-utils libnbd-bin nbdkit fuse3
  # The NBD client (nbd:// images, docs/remote.md); nbdkit's curl plugin is in nbdkit.
  libnbd-dev
  # nbdinfo --json runs file(1) on the export; without it (file is only a
  # Recommends of libnbd-bin) "content" holds raw bytes and the JSON breaks.
  file
  libgnutls28-dev gnutls-bin
  python3-argon2
  dislocker
  # The C API's ABI check (abidw/abidiff), the Python package's tests, and
  # the Debian package (cpack's dpkg-shlibdeps).
  abigail-tools python3-pytest dpkg-dev
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
