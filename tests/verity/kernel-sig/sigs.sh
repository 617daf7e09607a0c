# Sourced by make-kernel-golden.sh and check.sh: make_sigs BLKCRYPT DIR makes
# DIR/data, DIR/hash and DIR/files/<name>.sig, and sets ROOT and SIG_NAMES.
#   ours          blkcrypt verity sign ROOT (no certificates, as veritysetup's users sign)
#   tampered      ours with the last byte of the RSA signature value flipped
#   wrong-root    blkcrypt verity sign of another root hash
#   with-cert     openssl smime with the signer certificate inside, over ROOT
#   with-cert-wrong  the same over the other root hash
#   garbage       64 bytes that are no PKCS#7 message
SIG_NAMES="ours tampered wrong-root with-cert with-cert-wrong garbage"
make_sigs() {
  local b=$1 d=$2 keys
  keys="$(cd "$(dirname "${BASH_SOURCE[0]}")/../sig" && pwd)"
  mkdir -p "$d/files"
  install -m 600 "$keys/rsa.key" "$d/rsa.key"
  head -c 65536 /dev/zero | openssl enc -aes-128-ctr -nosalt -K 626c6b63727970742d6b65726e656c21 \
      -iv 000000000000000000000000000000ff >"$d/data"
  "$b" verity format "$d/data" "$d/hash" --salt 00 --uuid 5b1d2e3f-4a5b-4c6d-8e7f-0a1b2c3d4e5f >"$d/fmt"
  ROOT=$(awk '/^Root hash/ {print $3}' "$d/fmt")
  local other="0${ROOT:1}"
  [[ $other != "$ROOT" ]] || other="1${ROOT:1}"
  "$b" verity sign "$ROOT" --key "$d/rsa.key" --cert "$keys/rsa.pem" --out "$d/files/ours.sig"
  python3 -c 'import sys; b=bytearray(open(sys.argv[1],"rb").read()); b[-1]^=1; open(sys.argv[2],"wb").write(b)' \
      "$d/files/ours.sig" "$d/files/tampered.sig"
  "$b" verity sign "$other" --key "$d/rsa.key" --cert "$keys/rsa.pem" --out "$d/files/wrong-root.sig"
  printf %s "$ROOT" | openssl smime -sign -noattr -binary -outform der -inkey "$d/rsa.key" -signer "$keys/rsa.pem" -out "$d/files/with-cert.sig"
  printf %s "$other" | openssl smime -sign -noattr -binary -outform der -inkey "$d/rsa.key" -signer "$keys/rsa.pem" -out "$d/files/with-cert-wrong.sig"
  printf 'blkcrypt: not a signature%.0s' 1 2 3 | head -c 64 >"$d/files/garbage.sig"
}
# make-kernel-accept-golden.sh's set: make_sigs' plus
#   untrusted     blkcrypt verity sign ROOT with other.key (a signer the
#                 kernel's keyrings never hold)
ACCEPT_SIG_NAMES="ours tampered wrong-root with-cert untrusted garbage"
make_accept_sigs() {
  local keys
  keys="$(cd "$(dirname "${BASH_SOURCE[0]}")/../sig" && pwd)"
  make_sigs "$1" "$2"
  install -m 600 "$keys/other.key" "$2/other.key"
  "$1" verity sign "$ROOT" --key "$2/other.key" --cert "$keys/other.pem" --out "$2/files/untrusted.sig"
}
