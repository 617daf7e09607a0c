#!/usr/bin/env bash
# NBD_CMD_BLOCK_STATUS and the base:allocation meta context against the real
# clients: nbdinfo --map and --json (libnbd), qemu-img map over NBD.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nbd_lib.sh"
need nbdinfo qemu-img python3

# A sparse image: data at 64 KiB (64 KiB) and at 2 MiB (12 KiB), holes elsewhere.
truncate -s 4M "$TMP/sparse"
dd if=/dev/urandom of="$TMP/sparse" bs=64K seek=1 count=1 conv=notrunc status=none
dd if=/dev/urandom of="$TMP/sparse" bs=4K seek=512 count=3 conv=notrunc status=none
# What the file system says (SEEK_DATA/SEEK_HOLE, independent of blkcrypt):
# the test needs a file system that keeps holes.
python3 - "$TMP/sparse" >"$TMP/want" <<'PY' || fail "the file system of $TMP keeps no holes (SEEK_HOLE)"
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
size, off, runs = os.fstat(fd).st_size, 0, []
while off < size:
    try:
        d = os.lseek(fd, off, os.SEEK_DATA)
    except OSError:
        d = size
    if d > off: runs.append((off, d - off, 3))
    if d >= size: break
    h = os.lseek(fd, d, os.SEEK_HOLE)
    runs.append((d, h - d, 0))
    off = h
assert len(runs) == 5, runs  # the file system kept both holes
for r in runs: print(*r)
PY

start_server serve --read-only --socket "$SOCK" "$TMP/sparse"
T nbdinfo --map "$URI" >"$TMP/map"
awk '{print $1, $2, $3}' "$TMP/map" >"$TMP/got"
diff "$TMP/want" "$TMP/got" || fail "nbdinfo --map: $(cat "$TMP/map")"
T nbdinfo --json "$URI" >"$TMP/info.json"
python3 - "$TMP/info.json" <<'PY' || fail "nbdinfo --json contexts: $(cat "$TMP/info.json")"
import json, sys
assert json.load(open(sys.argv[1]))["exports"][0]["contexts"] == ["base:allocation"]
PY
T qemu-img map --output=json -f raw "$URI" >"$TMP/qmap.json"
python3 - "$TMP/qmap.json" "$TMP/want" <<'PY' || fail "qemu-img map: $(cat "$TMP/qmap.json")"
import json, sys
got = [(m["start"], m["length"], 0 if m["data"] else 3) for m in json.load(open(sys.argv[1]))]
want = [tuple(map(int, l.split())) for l in open(sys.argv[2])]
assert got == want, (got, want)
assert all(m["zero"] != m["data"] for m in json.load(open(sys.argv[1])))
PY
# qemu-img convert skips the holes it is told about: the copy is sparse too.
T qemu-img convert -f raw -O raw "$URI" "$TMP/copy"
cmp "$TMP/sparse" "$TMP/copy" || fail "convert of the sparse image differs"
stop_server

# An encrypted view reports data everywhere: a hole in the ciphertext does
# not decrypt to zeros, so it must not be skipped as one.
KEY=$(head -c 64 /dev/urandom | xxd -p -c 64)
start_server crypt serve --read-only --table "aes-xts-plain64 $KEY 0" --socket "$SOCK" "$TMP/sparse"
T nbdinfo --map "$URI" >"$TMP/map"
[[ $(awk '{print $1, $2, $3}' "$TMP/map") == "0 4194304 0" ]] || fail "crypt view map: $(cat "$TMP/map")"
stop_server
echo "nbd_map: ok"
