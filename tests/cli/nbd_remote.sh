#!/usr/bin/env bash
# Images behind another NBD server (docs/remote.md): every command that reads
# an IMAGE, DATA, HASH or header takes nbd+unix:// and nbd:// URIs, and gives
# byte for byte what it gives on the local file. Servers: nbdkit's file,
# memory and curl plugins (curl over a local HTTP server with Range
# requests), and qemu-nbd. Images: made by cryptsetup and veritysetup here, and the shared TrueCrypt/VeraCrypt, BitLocker and
# FileVault 2 fixtures. Failures (EIO from the server, a server gone in the
# middle, an export shorter than its header says) exit nonzero with one
# message and leave no output file.
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SHARED=${BLKCRYPT_SHARED_DIR:-$SRC/../shared}
for tool in nbdkit qemu-nbd qemu-io nbdcopy cryptsetup veritysetup python3; do
    command -v $tool >/dev/null || { echo "$tool is missing (scripts/install-deps.sh installs it): NBD client tests skipped"; exit 0; }
done
# (Its output taken whole first: under pipefail, grep -q in a pipe would
# see blkcrypt's refusal exit instead of the match.)
probe=$("$BLKCRYPT" luks dump "nbd+unix:///?socket=$TMP/none" 2>&1 || true)
if grep -q "built without the NBD client" <<<"$probe"; then
    echo "this blkcrypt was built without the NBD client (libnbd-dev absent): NBD client tests skipped"
    exit 0
fi

PIDS=()
# A failing check exits with the servers running; they hold ctest's pipe.
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$TMP"' EXIT
# wait_socket PATH PID: until PATH is a socket (the server listens).
wait_socket() {
    for _ in $(seq 300); do
        [[ -S $1 ]] && return 0
        kill -0 "$2" 2>/dev/null || fail "server for $1 died: $(cat "$TMP/server.log")"
        sleep 0.1
    done
    fail "no server on $1"
}
# nbdkit_on NAME ARGS...: nbdkit ARGS on $TMP/NAME.sock; U is its URI.
nbdkit_on() {
    local name=$1
    shift
    nbdkit -f -U "$TMP/$name.sock" "$@" 2>>"$TMP/server.log" &
    PIDS+=($!)
    disown  # a server killed by its test is no job-status line in a command's stderr
    wait_socket "$TMP/$name.sock" $!
    U="nbd+unix:///?socket=$TMP/$name.sock"
}
# qemu_nbd_on NAME ARGS...: qemu-nbd ARGS on $TMP/NAME.sock (persistent: each
# command opens a store per argument, and more with multi-conn).
qemu_nbd_on() {
    local name=$1
    shift
    qemu-nbd --persistent --shared=16 -k "$TMP/$name.sock" "$@" 2>>"$TMP/server.log" &
    PIDS+=($!)
    disown  # a server killed by its test is no job-status line in a command's stderr
    wait_socket "$TMP/$name.sock" $!
    U="nbd+unix:///?socket=$TMP/$name.sock"
}
stop_last() {
    local p=${PIDS[-1]}
    kill "$p" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
    unset 'PIDS[-1]'
}
same() { cmp -s "$1" "$2" || fail "$3: differs from the local-file run"; }
# no_output FILE WHAT: a failed run left nothing under FILE's name.
no_output() {
    [[ ! -e $1 ]] || fail "$2: output left behind"
    local left
    left=$(find "$(dirname "$1")" -maxdepth 1 -name ".$(basename "$1")*" | head -1)
    [[ -z $left ]] || fail "$2: temporary file left behind: $left"
}

# The images, made by the real tools.
printf 'remote secret' >"$TMP/pw"
truncate -s 24M "$TMP/luks2.img"
cryptsetup luksFormat -q --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --key-file "$TMP/pw" \
    "$TMP/luks2.img" || fail "cryptsetup luksFormat luks2"
dd if=/dev/urandom of="$TMP/luks2.img" bs=1M seek=16 count=8 conv=notrunc status=none
truncate -s 4M "$TMP/luks1.img"
cryptsetup luksFormat -q --type luks1 --pbkdf-force-iterations 1000 --key-file "$TMP/pw" "$TMP/luks1.img" ||
    fail "cryptsetup luksFormat luks1"
dd if=/dev/urandom of="$TMP/luks1.img" bs=1M seek=2 count=2 conv=notrunc status=none
# A detached header: the data alone goes behind the server.
truncate -s 4M "$TMP/hdr.img" "$TMP/detached.img"
cryptsetup luksFormat -q --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --key-file "$TMP/pw" \
    --header "$TMP/hdr.img" "$TMP/detached.img" || fail "cryptsetup luksFormat --header"
dd if=/dev/urandom of="$TMP/detached.img" bs=1M count=4 conv=notrunc status=none
random_file "$TMP/vdata" $((4 << 20))
veritysetup format "$TMP/vdata" "$TMP/vhash" >"$TMP/vformat" || fail "veritysetup format"
ROOT=$(awk '/^Root hash:/{print $3}' "$TMP/vformat")
VOPTS=(--salt "$(awk '/^Salt:/{print $2}' "$TMP/vformat")" --uuid "$(awk '/^UUID:/{print $2}' "$TMP/vformat")")
truncate -s 8M "$TMP/integ.img"
# (integritysetup format needs device-mapper; the format itself is compared
# with integritysetup's in integrity.sh.)
"$BLKCRYPT" integrity format -q "$TMP/integ.img" >/dev/null || fail "integrity format"

# The local-file runs: what every remote run must give.
luks_decrypt() { "$BLKCRYPT" luks decrypt --key-file "$TMP/pw" "$@"; }
luks_decrypt "$TMP/luks2.img" "$TMP/want2" || fail "local luks2 decrypt"
luks_decrypt "$TMP/luks1.img" "$TMP/want1" || fail "local luks1 decrypt"
luks_decrypt --header "$TMP/hdr.img" "$TMP/detached.img" "$TMP/wantd" || fail "local detached decrypt"
"$BLKCRYPT" luks dump "$TMP/luks2.img" >"$TMP/dump2" || fail "local luks dump"
"$BLKCRYPT" integrity dump "$TMP/integ.img" >"$TMP/idump" || fail "local integrity dump"
"$BLKCRYPT" fsverity digest "$TMP/vdata" | cut -d' ' -f1 >"$TMP/fsv" || fail "local fsverity digest"

# --- nbdkit file: every reading command.
nbdkit_on luks2 file "$TMP/luks2.img"
L2=$U
luks_decrypt "$L2" "$TMP/got" || fail "luks decrypt over nbdkit file"
same "$TMP/got" "$TMP/want2" "luks2 decrypt (nbdkit file)"
rm -f "$TMP/got"
"$BLKCRYPT" luks dump "$L2" >"$TMP/got" || fail "luks dump over nbdkit file"
same "$TMP/got" "$TMP/dump2" "luks dump (nbdkit file)"
"$BLKCRYPT" dump "$L2" >"$TMP/got" || fail "dump (detecting the format) over nbdkit file"
same "$TMP/got" "$TMP/dump2" "dump (nbdkit file)"
rm -f "$TMP/got"
nbdkit_on luks1 file "$TMP/luks1.img"
luks_decrypt "$U" "$TMP/got" || fail "luks1 decrypt over nbdkit file"
same "$TMP/got" "$TMP/want1" "luks1 decrypt (nbdkit file)"
rm -f "$TMP/got"
# Several connections where the server allows multi-conn (nbdkit's log
# filter numbers them), one where it does not.
nbdkit_on logged --filter=log file "$TMP/luks2.img" logfile="$TMP/conns.log"
luks_decrypt "$U" "$TMP/got" || fail "luks decrypt over nbdkit file (logged)"
same "$TMP/got" "$TMP/want2" "luks2 decrypt (multi-conn)"
n=$(grep -o 'connection=[0-9]*' "$TMP/conns.log" | sort -u | wc -l)
[[ $n -ge 2 ]] || fail "multi-conn: $n connection(s) used"
rm -f "$TMP/got" "$TMP/conns.log"
nbdkit_on single --filter=multi-conn --filter=log file "$TMP/luks2.img" multi-conn-mode=disable logfile="$TMP/conns.log"
luks_decrypt "$U" "$TMP/got" || fail "luks decrypt over nbdkit file (no multi-conn)"
same "$TMP/got" "$TMP/want2" "luks2 decrypt (no multi-conn)"
# One connection per store opened (the header and the data are one here).
n=$(grep -o 'connection=[0-9]*' "$TMP/conns.log" | sort -u | wc -l)
c=$(grep -c 'Connect' "$TMP/conns.log" || true)
[[ $n == "$c" ]] || fail "no multi-conn: $n connections for $c opens"
rm -f "$TMP/got"
# A server that takes only whole 4 KiB blocks of at most 64 KiB, and fails
# anything else: reads and writes are widened and cut to fit.
nbdkit_on policy --filter=blocksize-policy file "$TMP/luks1.img" blocksize-minimum=4096 \
    blocksize-preferred=4096 blocksize-maximum=65536 blocksize-error-policy=error
luks_decrypt "$U" "$TMP/got" || fail "luks decrypt under a 4 KiB minimum block size"
same "$TMP/got" "$TMP/want1" "luks1 decrypt (4 KiB blocks)"
rm -f "$TMP/got"
stop_last
# HEADER local, DATA remote; and the header remote too.
nbdkit_on detached file "$TMP/detached.img"
DU=$U
luks_decrypt --header "$TMP/hdr.img" "$DU" "$TMP/got" || fail "detached decrypt (data over NBD)"
same "$TMP/got" "$TMP/wantd" "detached decrypt (data over NBD)"
rm -f "$TMP/got"
nbdkit_on hdr file "$TMP/hdr.img"
luks_decrypt --header "$U" "$DU" "$TMP/got" || fail "detached decrypt (header and data over NBD)"
same "$TMP/got" "$TMP/wantd" "detached decrypt (header over NBD)"
rm -f "$TMP/got"

# verity: verify DATA and HASH remote; format a remote DATA into a local HASH.
nbdkit_on vdata file "$TMP/vdata"
VD=$U
nbdkit_on vhash file "$TMP/vhash"
VH=$U
"$BLKCRYPT" verity verify "$VD" "$VH" "$ROOT" || fail "verity verify over NBD: $(cat "$TMP/server.log" | tail -3)"
"$BLKCRYPT" verity format "${VOPTS[@]}" "$VD" "$TMP/hash2" >"$TMP/vformat2" || fail "verity format of NBD DATA"
grep_q "$ROOT" <"$TMP/vformat2" || fail "verity format over NBD: another root hash: $(cat "$TMP/vformat2")"
"$BLKCRYPT" verity format "${VOPTS[@]}" "$TMP/vdata" "$TMP/hash3" >/dev/null || fail "local verity format"
same "$TMP/hash2" "$TMP/hash3" "verity format (DATA over NBD)"
same "$TMP/hash2" "$TMP/vhash" "verity format (DATA over NBD) against veritysetup's"
# HASH written into an export: veritysetup's tree, byte for byte.
nbdkit_on vhashout memory "$(stat -c %s "$TMP/vhash")"
"$BLKCRYPT" verity format "${VOPTS[@]}" "$VD" "$U" >/dev/null || fail "verity format into an NBD HASH"
nbdcopy "$U" "$TMP/hash4" || fail "nbdcopy out of the HASH export"
same "$TMP/hash4" "$TMP/vhash" "verity format (HASH into nbdkit memory) against veritysetup's"
stop_last
wrong=$(printf '%064d' 0)
expect_exit nonzero "$BLKCRYPT" verity verify "$VD" "$VH" "$wrong"
"$BLKCRYPT" fsverity digest "$VD" | cut -d' ' -f1 >"$TMP/got" || fail "fsverity digest over NBD"
same "$TMP/got" "$TMP/fsv" "fsverity digest (nbdkit file)"
rm -f "$TMP/got"
nbdkit_on integ file "$TMP/integ.img"
"$BLKCRYPT" integrity dump "$U" | sed "s|$U|IMAGE|" >"$TMP/got" || fail "integrity dump over NBD"
sed -i "s|$TMP/integ.img|IMAGE|" "$TMP/idump"
same "$TMP/got" "$TMP/idump" "integrity dump (nbdkit file)"
rm -f "$TMP/got"

# serve: the plaintext of a container another NBD server holds, to nbdcopy.
"$BLKCRYPT" serve --socket "$TMP/plain.sock" --read-only --key-file "$TMP/pw" "$L2" 2>>"$TMP/server.log" &
PIDS+=($!)
disown
wait_socket "$TMP/plain.sock" $!
nbdcopy "nbd+unix:///?socket=$TMP/plain.sock" "$TMP/got" || fail "nbdcopy from serve of an NBD container"
same "$TMP/got" "$TMP/want2" "serve of an NBD-held container"
stop_last
rm -f "$TMP/got"

# The fixtures made by TrueCrypt/VeraCrypt, Windows and macOS.
if [[ -f $SHARED/fixtures/tcrypt-images.tar.xz ]]; then
    mkdir "$TMP/fx"
    tar xSJf "$SHARED/fixtures/tcrypt-images.tar.xz" -C "$TMP/fx"
    tar xSJf "$SHARED/fixtures/bitlk-images.tar.xz" -C "$TMP/fx"
    tar xSJf "$SHARED/fixtures/fvault2-images.tar.xz" -C "$TMP/fx"
    vc=$TMP/fx/tcrypt/vc_1-sha256-xts-aes
    printf 'aaaaaaaaaaaa\n' | "$BLKCRYPT" tcrypt decrypt -h sha256 "$vc" "$TMP/wantvc" || fail "local tcrypt decrypt"
    # The kernel's tcryptOpen readback (tests/tcrypt/kernel/golden.tsv).
    [[ $(sha256sum <"$TMP/wantvc" | cut -d' ' -f1) == 1cf12d77dd266a1855a34477a740b0aff9a7441bc6b889e0af05518ac5177fa5 ]] ||
        fail "vc_1-sha256-xts-aes: not the kernel's plaintext"
    qemu_nbd_on vc -f raw -r "$vc"
    printf 'aaaaaaaaaaaa\n' | "$BLKCRYPT" tcrypt decrypt -h sha256 "$U" "$TMP/got" || fail "tcrypt decrypt over qemu-nbd"
    same "$TMP/got" "$TMP/wantvc" "VeraCrypt decrypt (qemu-nbd)"
    rm -f "$TMP/got"
    bl=$TMP/fx/bitlk/bitlk-aes-xts-128.img
    echo anaconda | "$BLKCRYPT" bitlk decrypt "$bl" "$TMP/wantbl" || fail "local bitlk decrypt"
    nbdkit_on bl file "$bl"
    echo anaconda | "$BLKCRYPT" bitlk decrypt "$U" "$TMP/got" || fail "bitlk decrypt over nbdkit"
    same "$TMP/got" "$TMP/wantbl" "BitLocker decrypt (nbdkit file)"
    "$BLKCRYPT" bitlk dump "$bl" | sed "s|$bl|IMAGE|" >"$TMP/want" || fail "bitlk dump"
    "$BLKCRYPT" bitlk dump "$U" | sed "s|$U|IMAGE|" >"$TMP/got" || fail "bitlk dump over NBD"
    same "$TMP/got" "$TMP/want" "BitLocker dump (nbdkit file)"
    rm -f "$TMP/got" "$TMP/wantbl"
    fv=$TMP/fx/fvault2-images/small
    echo heslo123 | "$BLKCRYPT" fvault2 decrypt "$fv" "$TMP/wantfv" || fail "local fvault2 decrypt"
    nbdkit_on fv file "$fv"
    echo heslo123 | "$BLKCRYPT" fvault2 decrypt "$U" "$TMP/got" || fail "fvault2 decrypt over nbdkit"
    same "$TMP/got" "$TMP/wantfv" "FileVault 2 decrypt (nbdkit file)"
    rm -rf "$TMP/got" "$TMP/wantfv" "$TMP/fx"
else
    echo "$SHARED/fixtures absent: the TrueCrypt/BitLocker/FileVault 2 fixtures skipped"
fi

# --- qemu-nbd on a Unix socket.
qemu_nbd_on q2 -f raw -r "$TMP/luks2.img"
luks_decrypt "$U" "$TMP/got" || fail "luks decrypt over qemu-nbd"
same "$TMP/got" "$TMP/want2" "luks2 decrypt (qemu-nbd)"
rm -f "$TMP/got"
# A read-only export refuses a writable open, saying so.
expect_exit nonzero "$BLKCRYPT" serve --socket "$TMP/rw.sock" --key-file "$TMP/pw" "$U"
grep_q "read-only" <"$TMP/stderr" || fail "writable open of a read-only export: $(cat "$TMP/stderr")"

# --- nbdkit memory: a writable export, written through blkcrypt serve.
nbdkit_on mem memory 24M
MEM=$U
nbdcopy "$TMP/luks2.img" "$MEM" || fail "nbdcopy into nbdkit memory"
luks_decrypt "$MEM" "$TMP/got" || fail "luks decrypt over nbdkit memory"
same "$TMP/got" "$TMP/want2" "luks2 decrypt (nbdkit memory)"
rm -f "$TMP/got"
random_file "$TMP/newplain" $((8 << 20))
"$BLKCRYPT" serve --socket "$TMP/w.sock" --key-file "$TMP/pw" "$MEM" 2>>"$TMP/server.log" &
PIDS+=($!)
disown
wait_socket "$TMP/w.sock" $!
nbdcopy "$TMP/newplain" "nbd+unix:///?socket=$TMP/w.sock" || fail "nbdcopy into serve of an NBD container"
stop_last
nbdcopy "$MEM" "$TMP/back.img" || fail "nbdcopy out of nbdkit memory"
luks_decrypt "$TMP/back.img" "$TMP/got" || fail "decrypt of what serve wrote"
same "$TMP/got" "$TMP/newplain" "plaintext written through serve into nbdkit memory"
rm -f "$TMP/got" "$TMP/back.img"

# encrypt into an export: the container on it written in place.
nbdkit_on mem2 memory 24M
nbdcopy "$TMP/luks2.img" "$U" || fail "nbdcopy into nbdkit memory"
"$BLKCRYPT" luks encrypt --key-file "$TMP/pw" "$TMP/newplain" "$U" || fail "luks encrypt into an NBD export"
nbdcopy "$U" "$TMP/back.img" || fail "nbdcopy out of nbdkit memory"
luks_decrypt "$TMP/back.img" "$TMP/got" || fail "decrypt of what encrypt wrote over NBD"
same "$TMP/got" "$TMP/newplain" "luks encrypt into nbdkit memory"
"$BLKCRYPT" luks encrypt --key-file "$TMP/pw" "$TMP/newplain" "$TMP/back.img" || fail "local luks encrypt"
nbdcopy "$U" "$TMP/back2.img" || fail "nbdcopy out of nbdkit memory"
same "$TMP/back2.img" "$TMP/back.img" "luks encrypt into nbdkit memory (ciphertext)"
rm -f "$TMP/got" "$TMP/back.img" "$TMP/back2.img"
stop_last
# encrypt --format: a new container made on the export, read back locally.
nbdkit_on mem3 memory 24M
"$BLKCRYPT" luks encrypt --format --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --key-file "$TMP/pw" \
    "$TMP/newplain" "$U" || fail "luks encrypt --format into an NBD export"
nbdcopy "$U" "$TMP/back.img" || fail "nbdcopy out of nbdkit memory"
cryptsetup isLuks "$TMP/back.img" || fail "encrypt --format over NBD: cryptsetup sees no LUKS header"
luks_decrypt "$TMP/back.img" "$TMP/got" || fail "decrypt of what encrypt --format wrote over NBD"
cmp -s -n $((8 << 20)) "$TMP/got" "$TMP/newplain" || fail "encrypt --format over NBD: another plaintext"
rm -f "$TMP/got" "$TMP/back.img"
stop_last
# Unaligned writes through serve into a server of 4 KiB blocks.
nbdkit_on mem4k --filter=blocksize-policy memory 4M blocksize-minimum=4096 blocksize-error-policy=error
nbdcopy "$TMP/luks1.img" "$U" || fail "nbdcopy into nbdkit memory (4 KiB blocks)"
"$BLKCRYPT" serve --socket "$TMP/w4.sock" --key-file "$TMP/pw" "$U" 2>>"$TMP/server.log" &
PIDS+=($!)
disown
wait_socket "$TMP/w4.sock" $!
cp "$TMP/want1" "$TMP/model"
python3 - "$TMP/model" "$TMP/pat" <<'PY'
import sys
m = bytearray(open(sys.argv[1], "rb").read())
m[1000:4000] = b"\x07" * 3000
m[5000:5001] = b"\x09"
open(sys.argv[1], "wb").write(m)
PY
qemu-io -f raw -c "write -P 7 1000 3000" -c "write -P 9 5000 1" -c flush "nbd+unix:///?socket=$TMP/w4.sock" >/dev/null ||
    fail "unaligned writes through serve"
stop_last
nbdcopy "$U" "$TMP/back.img" || fail "nbdcopy out of nbdkit memory (4 KiB blocks)"
luks_decrypt "$TMP/back.img" "$TMP/got" || fail "decrypt after unaligned writes"
same "$TMP/got" "$TMP/model" "unaligned writes into a 4 KiB-block export"
rm -f "$TMP/got" "$TMP/back.img"
stop_last

# --- nbdkit curl over HTTP with Range requests (read-only, no download).
cat >"$TMP/range_http.py" <<'PY'
# A static file server answering Range requests (206), which
# http.server.SimpleHTTPRequestHandler does not.
import http.server, os, re, sys
root = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def send_file(self, body):
        path = os.path.join(root, os.path.basename(self.path))
        if not os.path.isfile(path):
            self.send_error(404); return
        size = os.path.getsize(path)
        m = re.match(r"bytes=(\d+)-(\d*)$", self.headers.get("Range", ""))
        first, last = (int(m.group(1)), int(m.group(2) or size - 1)) if m else (0, size - 1)
        last = min(last, size - 1)
        self.send_response(206 if m else 200)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(last - first + 1))
        if m: self.send_header("Content-Range", "bytes %d-%d/%d" % (first, last, size))
        self.end_headers()
        if body:
            with open(path, "rb") as f:
                f.seek(first); left = last - first + 1
                while left:
                    b = f.read(min(left, 1 << 20)); self.wfile.write(b); left -= len(b)
    def do_HEAD(self): self.send_file(False)
    def do_GET(self): self.send_file(True)
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[2], "w").write(str(s.server_address[1]))
s.serve_forever()
PY
python3 "$TMP/range_http.py" "$TMP" "$TMP/port" &
PIDS+=($!)
disown
for _ in $(seq 100); do [[ -s $TMP/port ]] && break; sleep 0.1; done
[[ -s $TMP/port ]] || fail "the HTTP server did not start"
nbdkit_on curl curl "url=http://127.0.0.1:$(cat "$TMP/port")/luks2.img"
luks_decrypt "$U" "$TMP/got" || fail "luks decrypt over nbdkit curl: $(tail -3 "$TMP/server.log")"
same "$TMP/got" "$TMP/want2" "luks2 decrypt (nbdkit curl over HTTP)"
rm -f "$TMP/got"

# --- nbds://: nbdkit over TCP on the loopback with TLS required, by X.509
# certificates (tls-certificates=DIR) and by a pre-shared key
# (alice@...?tls-psk-file=FILE); a client without TLS or with the wrong key
# gets one message and no output.
if ! command -v certtool >/dev/null || ! command -v psktool >/dev/null; then
    echo "certtool/psktool missing (gnutls-bin; scripts/install-deps.sh installs it): nbds:// tests skipped"
elif ! nbdkit --dump-config | grep -qx 'tls=yes'; then
    echo "this nbdkit was built without TLS: nbds:// tests skipped"
else
    C=$TMP/certs
    make_test_certs "$C"
    psktool -u alice -p "$TMP/keys.psk" >/dev/null 2>&1 || fail "psktool"
    psktool -u alice -p "$TMP/wrong.psk" >/dev/null 2>&1 || fail "psktool"
    # nbdkit_tls NAME ARGS...: nbdkit with TLS required on a free loopback
    # port (its pid file is written once it listens); PORT is that port.
    nbdkit_tls() {
        local name=$1
        shift
        PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        nbdkit -f -i 127.0.0.1 -p "$PORT" -P "$TMP/$name.pid" --tls=require "$@" 2>>"$TMP/server.log" &
        PIDS+=($!)
        disown
        for _ in $(seq 300); do
            [[ -s $TMP/$name.pid ]] && return 0
            kill -0 "${PIDS[-1]}" 2>/dev/null || fail "nbdkit $name died: $(tail -3 "$TMP/server.log")"
            sleep 0.1
        done
        fail "no nbdkit $name"
    }
    nbdkit_tls x509 --tls-certificates="$C" file "$TMP/luks2.img"
    luks_decrypt "nbds://localhost:$PORT/?tls-certificates=$C" "$TMP/got" ||
        fail "luks decrypt over nbds:// (x509): $(tail -3 "$TMP/server.log")"
    same "$TMP/got" "$TMP/want2" "luks2 decrypt (nbds://, x509)"
    "$BLKCRYPT" luks dump "nbds://localhost:$PORT/?tls-certificates=$C" >"$TMP/got" || fail "luks dump over nbds://"
    grep -qE "^Version:[[:space:]]+2$" "$TMP/got" || fail "luks dump over nbds://: $(head -3 "$TMP/got")"
    rm -f "$TMP/got"
    # The same server without TLS on the client's side: refused.
    expect_exit nonzero luks_decrypt "nbd://localhost:$PORT/" "$TMP/out"
    expect_one_error_line
    no_output "$TMP/out" "plain NBD to a TLS-only server"
    # A client that does not trust the server's CA: refused.
    mkdir -p "$TMP/othertrust"
    ct --generate-privkey --outfile "$TMP/other-key.pem"
    ct --generate-self-signed --load-privkey "$TMP/other-key.pem" --template "$TMP/ca.info" --outfile "$TMP/othertrust/ca-cert.pem"
    expect_exit nonzero luks_decrypt "nbds://localhost:$PORT/?tls-certificates=$TMP/othertrust" "$TMP/out"
    expect_one_error_line
    no_output "$TMP/out" "nbds:// with an untrusted server certificate"
    stop_last
    nbdkit_tls psk --tls-psk="$TMP/keys.psk" file "$TMP/luks2.img"
    luks_decrypt "nbds://alice@localhost:$PORT/?tls-psk-file=$TMP/keys.psk" "$TMP/got" ||
        fail "luks decrypt over nbds:// (PSK): $(tail -3 "$TMP/server.log")"
    same "$TMP/got" "$TMP/want2" "luks2 decrypt (nbds://, PSK)"
    rm -f "$TMP/got"
    expect_exit nonzero luks_decrypt "nbds://alice@localhost:$PORT/?tls-psk-file=$TMP/wrong.psk" "$TMP/out"
    expect_one_error_line
    no_output "$TMP/out" "nbds:// with the wrong pre-shared key"
    stop_last
fi

# --- Failures: one message, nonzero, no output.
# EIO on every data read (the detached header stays local and good).
nbdkit_on eio --filter=error file "$TMP/detached.img" error-pread-rate=100%
expect_exit 1 luks_decrypt --header "$TMP/hdr.img" "$U" "$TMP/out"
expect_one_error_line
no_output "$TMP/out" "EIO from the server"
# EIO on half of all reads, header included.
nbdkit_on eio50 --filter=error file "$TMP/luks2.img" error-pread-rate=50%
expect_exit nonzero luks_decrypt "$U" "$TMP/out"
# When one header copy's read failed and the other's did not, the header
# loader says which copy it uses before the error: that a read failed, never
# that the copy is damaged (it may well be intact).
! grep -q "damaged\|repair" "$TMP/stderr" || fail "EIO on half the reads: a failed read called damage: $(cat "$TMP/stderr")"
sed -i '/^blkcrypt: WARNING: reading the \(primary\|secondary\) LUKS2 header failed (cannot read the LUKS2 [^)]*: I\/O error); using the \(primary\|secondary\) header\.$/d' \
    "$TMP/stderr"
expect_one_error_line
no_output "$TMP/out" "EIO on half the reads"
# EIO on the primary header's JSON area alone: the command goes on with the
# secondary copy, and its one warning says the read failed.
nbdkit_on eiohdr eval get_size="echo $(stat -c %s "$TMP/luks2.img")" \
    pread="if [ \$4 -lt 16384 ] && [ \$((\$4 + \$3)) -gt 4096 ]; then echo 'EIO injected' >&2; exit 1; fi; dd if='$TMP/luks2.img' skip=\$4 count=\$3 iflag=skip_bytes,count_bytes status=none"
expect_exit 0 "$BLKCRYPT" luks dump "$U"
same "$TMP/stdout" "$TMP/dump2" "luks dump (the primary header unreadable)"
[[ $(cat "$TMP/stderr") == "blkcrypt: WARNING: reading the primary LUKS2 header failed (cannot read the LUKS2 JSON area at byte 4096: I/O error); using the secondary header." ]] ||
    fail "the primary header's read failed: warning '$(cat "$TMP/stderr")'"
stop_last
# The server goes away once the data is being read.
nbdkit_on gone eval get_size="echo $(stat -c %s "$TMP/luks2.img")" \
    pread="if [ \$4 -ge $((16 << 20)) ]; then kill -9 \$PPID; sleep 5; fi; dd if='$TMP/luks2.img' skip=\$4 count=\$3 iflag=skip_bytes,count_bytes status=none"
expect_exit 1 luks_decrypt "$U" "$TMP/out"
expect_one_error_line
no_output "$TMP/out" "server disconnect"
# An export shorter than the header says: what the same short file gives.
head -c $((12 << 20)) "$TMP/luks2.img" >"$TMP/short.img"
rc=0
luks_decrypt "$TMP/short.img" "$TMP/out" 2>"$TMP/want_err" || rc=$?
[[ $rc != 0 ]] || fail "a short local image decrypted"
nbdkit_on short file "$TMP/short.img"
expect_exit $rc luks_decrypt "$U" "$TMP/out"
expect_one_error_line
sed "s|$TMP/short.img|IMAGE|g" "$TMP/want_err" >"$TMP/a"
sed "s|$U|IMAGE|g" "$TMP/stderr" >"$TMP/b"
cmp -s "$TMP/a" "$TMP/b" || fail "short export: '$(cat "$TMP/b")', the local file's '$(cat "$TMP/a")'"
no_output "$TMP/out" "short export"
# encrypt into an export whose writes fail: one message; the export keeps
# what was written before (docs/remote.md).
nbdkit_on weio --filter=error memory 24M error-pwrite-rate=100% error-pwrite-file="$TMP/weio.on"
nbdcopy "$TMP/luks2.img" "$U" || fail "nbdcopy into nbdkit memory (error filter)"
touch "$TMP/weio.on"
expect_exit 1 "$BLKCRYPT" luks encrypt --key-file "$TMP/pw" "$TMP/newplain" "$U"
expect_one_error_line
grep_q -E "writing|write error" <"$TMP/stderr" || fail "failed remote write: $(cat "$TMP/stderr")"
# No server at all.
expect_exit nonzero luks_decrypt "nbd+unix:///?socket=$TMP/nothing.sock" "$TMP/out"
expect_one_error_line
no_output "$TMP/out" "no server"
echo "NBD client: OK"
