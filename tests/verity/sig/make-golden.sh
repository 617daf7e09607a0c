#!/usr/bin/env bash
# Signatures made by the peers (openssl 3.0, fsverity-utils 1.5) with the
# certificates of make-certs.sh, which the unit tests compare with or check.
set -euo pipefail
cd "$(dirname "$0")"
root=$(cat root.hex)
smime() {  # OUT SIGNER [extra openssl options]
    local out=$1 who=$2; shift 2
    printf %s "$root" | openssl smime -sign -noattr -binary -outform der -inkey "$who.key" -signer "$who.pem" "$@" -out "$out"
}
smime rsa.sig rsa -nocerts
smime ec.sig ec -nocerts
smime expired.sig expired -nocerts
smime leaf-nocerts.sig leaf -nocerts
smime leaf-chain.sig leaf                       # carries leaf.pem
smime attached.sig rsa -nocerts -nodetach       # content inside: refused
printf %s "$root" | openssl smime -sign -binary -outform der -inkey rsa.key -signer rsa.pem -nocerts -out attrs.sig  # with authenticated attributes
head -c 12345 /dev/zero | tr '\0' 'b' >fsverity.data
fsverity sign fsverity.data fsverity.sig --key rsa.key --cert rsa.pem >/dev/null
fsverity sign fsverity.data fsverity-sha512.sig --key ec.key --cert ec.pem --hash-alg sha512 --block-size 1024 --salt 0102 >/dev/null
