#!/bin/bash
# Plugins from the command line: --plugin and BLKCRYPT_PLUGIN_PATH, the sm3
# driver against openssl, the offset64 IV mode through `blkcrypt crypt`
# against python3-cryptography's AES-XTS, and broken plugins refused without stopping.
# Usage: plugins.sh BLKCRYPT PLUGIN_DIR BROKEN_PLUGIN_DIR
source "$(dirname "$0")/lib.sh"
PLUGINS=${2:?plugin dir}
BROKEN=${3:?broken plugin dir}

# sm3 through --plugin equals openssl dgst -sm3.
random_file "$TMP/msg" 100000
ours=$("$BLKCRYPT" --plugin "$PLUGINS/sm3.so" hash --alg sm3 "$TMP/msg" | cut -d' ' -f1)
theirs=$(openssl dgst -sm3 -r "$TMP/msg" | cut -d' ' -f1)
[[ $ours == "$theirs" ]] || fail "sm3: $ours != openssl $theirs"
"$BLKCRYPT" --plugin="$PLUGINS/sm3.so" selftest sm3 >/dev/null || fail "selftest sm3 via --plugin="
expect_exit 2 "$BLKCRYPT" hash --alg sm3 "$TMP/msg"  # not loaded: unknown algorithm

# BLKCRYPT_PLUGIN_PATH loads both; list names their module.
BLKCRYPT_PLUGIN_PATH="/nonexistent:$PLUGINS" "$BLKCRYPT" list >"$TMP/list" 2>"$TMP/err"
grep -A2 '^driver *: sm3-plugin$' "$TMP/list" | grep_q "^module *: $PLUGINS/sm3.so$" || fail "list: sm3 module"
grep -q "plugin directory '/nonexistent'" "$TMP/err" || fail "a missing plugin directory is not reported"

# offset64 from a dm-crypt table: each 512-byte sector is AES-256-XTS with
# tweak = LE64(byte offset), here with iv_offset 8 (first byte offset 4096).
random_file "$TMP/plain" $((8 * 512))
key=$(head -c 64 /dev/urandom | xxd -p -c 64)
BLKCRYPT_PLUGIN_PATH="$PLUGINS" "$BLKCRYPT" crypt encrypt --table "aes-xts-offset64 $key 8" \
    "$TMP/plain" "$TMP/ct" || fail "crypt with offset64: exit $?"
python3 - "$key" "$TMP/plain" "$TMP/want" <<'PY'
import sys
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
key, plain = bytes.fromhex(sys.argv[1]), open(sys.argv[2], "rb").read()
with open(sys.argv[3], "wb") as out:
    for s in range(len(plain) // 512):
        tweak = ((s + 8) * 512).to_bytes(8, "little") + bytes(8)
        enc = Cipher(algorithms.AES(key), modes.XTS(tweak)).encryptor()
        out.write(enc.update(plain[s * 512:(s + 1) * 512]) + enc.finalize())
PY
cmp -s "$TMP/ct" "$TMP/want" || fail "offset64 ciphertext differs from python3-cryptography AES-XTS"
BLKCRYPT_PLUGIN_PATH="$PLUGINS" "$BLKCRYPT" crypt decrypt --table "aes-xts-offset64 $key 8" "$TMP/ct" "$TMP/back"
cmp -s "$TMP/back" "$TMP/plain" || fail "offset64 round trip"
expect_exit 2 "$BLKCRYPT" crypt encrypt --table "aes-xts-offset64 $key 8" "$TMP/plain" "$TMP/ct2"
grep -q "offset64" "$TMP/stderr" || fail "missing IV mode not named: $(cat "$TMP/stderr")"

# Broken plugins named by --plugin: one line each, exit 1 (asked for, so fatal).
for f in broken_no_entry broken_bad_abi broken_dup_driver broken_bad_selftest broken_init_fails \
         broken_vec_no_key broken_vec_short_iv; do
    expect_exit 1 "$BLKCRYPT" --plugin "$BROKEN/$f.so" hash --alg sha256 "$TMP/msg"
    expect_one_error_line
    grep -q "plugin '$BROKEN/$f.so' refused: " "$TMP/stderr" || fail "$f: $(cat "$TMP/stderr")"
done
expect_exit 1 "$BLKCRYPT" --plugin "$TMP/nonexistent.so" hash --alg sha256 "$TMP/msg"
expect_one_error_line
# A plugin from a directory refused for its malformed vectors is a warning and
# leaves nothing behind: the same process then builds cmac(camellia) afresh.
mkdir "$TMP/vecdir" && ln -s "$BROKEN/broken_vec_no_key.so" "$TMP/vecdir/"
BLKCRYPT_PLUGIN_PATH="$TMP/vecdir" "$BLKCRYPT" hash --alg 'cmac(camellia)' \
    --key 000102030405060708090a0b0c0d0e0f "$TMP/msg" >"$TMP/out" 2>"$TMP/stderr" ||
    fail "cmac(camellia) after a refused plugin: $(cat "$TMP/stderr")"
grep -q "malformed vector" "$TMP/stderr" || fail "vec_no_key: $(cat "$TMP/stderr")"
[[ -s $TMP/out ]] || fail "no digest after the refused plugin"
expect_exit 2 "$BLKCRYPT" list --plugin

# The default directory of an installed layout: PREFIX/bin/blkcrypt loads the
# plugins of the directory its --help names, without any option.
mkdir -p "$TMP/inst/bin"
cp "$BLKCRYPT" "$TMP/inst/bin/blkcrypt"
IB=$TMP/inst/bin/blkcrypt
defdir=$("$IB" --help | sed -n 's/^  \(\/.*\)$/\1/p')
[[ $defdir == "$TMP/inst/"*/blkcrypt/plugins ]] || fail "default plugin directory: '$defdir'"
expect_exit 2 "$IB" hash --alg sm3 "$TMP/msg"  # no directory yet: nothing, quietly
grep -q warning "$TMP/stderr" && fail "a missing default directory warns"
mkdir -p "$defdir"
cp "$PLUGINS/sm3.so" "$defdir/"
ours=$("$IB" hash --alg sm3 "$TMP/msg" | cut -d' ' -f1)
[[ $ours == "$theirs" ]] || fail "sm3 from the default directory: $ours"
# Named again with --plugin (or through BLKCRYPT_PLUGIN_PATH): loaded once, no error.
expect_exit 0 "$IB" --plugin "$defdir/sm3.so" hash --alg sm3 "$TMP/msg"
[[ ! -s $TMP/stderr ]] || fail "sm3 loaded twice: $(cat "$TMP/stderr")"
BLKCRYPT_PLUGIN_PATH=$defdir expect_exit 0 "$IB" hash --alg sm3 "$TMP/msg"
[[ ! -s $TMP/stderr ]] || fail "sm3 loaded twice via BLKCRYPT_PLUGIN_PATH: $(cat "$TMP/stderr")"
# Turned off.
BLKCRYPT_NO_DEFAULT_PLUGINS=1 expect_exit 2 "$IB" hash --alg sm3 "$TMP/msg"
BLKCRYPT_NO_DEFAULT_PLUGINS=1 "$IB" --help | grep_q '(disabled)' || fail "--help: disabled"
# A broken plugin in the default directory: a warning, and the command goes on.
cp "$BROKEN/broken_bad_abi.so" "$defdir/"
expect_exit 0 "$IB" hash --alg sm3 "$TMP/msg"
[[ $(wc -l <"$TMP/stderr") == 1 ]] && grep -q "^blkcrypt: warning: plugin '$defdir/broken_bad_abi.so' refused: " "$TMP/stderr" ||
    fail "broken default plugin: $(cat "$TMP/stderr")"
echo "plugins CLI: ok"
