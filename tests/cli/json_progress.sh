#!/usr/bin/env bash
# --json on every command that prints a result (one object per line, the
# fields of docs/json.md), options refused by the actions that do not honour
# them, and the one progress display (--progress, --no-progress,
# --progress-json in cryptsetup's format).
source "$(dirname "$0")/lib.sh"
cd "$TMP"

random_file data $((3 * 1024 * 1024))
random_file key 64
key_hex=$(xxd -p -c 64 key)

# check_lines FILE SCRIPT: every line of FILE is one JSON object; SCRIPT
# (python, with `objs` the parsed lines) asserts on them.
check_lines() {
    python3 - "$1" "$2" <<'PY' || fail "$2 on: $(cat "$1")"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
objs = [json.loads(l) for l in lines]
assert lines and all(isinstance(o, dict) for o in objs), "not one object per line"
exec(sys.argv[2])
PY
}

echo "== options outside their actions are refused (exit 2, one line)"
root=$("$BLKCRYPT" verity format --salt 01 data hash | sed -n 's/^Root hash: *\t*//p' | tr -d '\t ')
[[ $root =~ ^[0-9a-f]{64}$ ]] || fail "no root hash"
refused() {
    expect_exit 2 "$@"
    expect_one_error_line
    grep -q 'does not apply to' "$TMP/stderr" || fail "not refused as out of scope: $* ($(cat "$TMP/stderr"))"
}
refused "$BLKCRYPT" verity dump hash --threads 2
refused "$BLKCRYPT" verity dump hash --hash sha1
refused "$BLKCRYPT" verity format data hash --ignore-zero-blocks
refused "$BLKCRYPT" verity format data hash --out x
refused "$BLKCRYPT" verity verify data hash "$root" --table x
refused "$BLKCRYPT" verity table data hash "$root" --threads 2
refused "$BLKCRYPT" verity table data hash "$root" --progress-json
refused "$BLKCRYPT" crypt table --cipher aes-xts-plain64 --key-file key -s 512 --device data --threads 2
refused "$BLKCRYPT" crypt table --cipher aes-xts-plain64 --key-file key -s 512 --device data --progress
refused "$BLKCRYPT" crypt encrypt --cipher aes-xts-plain64 --key-file key -s 512 --show-key data ct
refused "$BLKCRYPT" crypt decrypt --cipher aes-xts-plain64 --key-file key -s 512 --device x data pt
[[ ! -e ct && ! -e pt && ! -e x ]] || fail "a refused command wrote an output"
# Parameters that contradict the superblock (or that the --table line gives) are refused, not ignored.
for o in "--hash sha1" "--data-block-size 512" "--salt 02" "--format 0"; do
    # shellcheck disable=SC2086  # option and value
    expect_exit 2 "$BLKCRYPT" verity verify data hash "$root" $o
    expect_one_error_line
    grep -q -- "$o contradicts the superblock, which records" "$TMP/stderr" || fail "verify $o: $(cat "$TMP/stderr")"
done
expect_exit 2 "$BLKCRYPT" verity read --table "$(cat table.txt 2>/dev/null || echo x)" --hash sha1
grep -q 'the --table line gives the parameters' "$TMP/stderr" || fail "read --table --hash: $(cat "$TMP/stderr")"
# Still honoured where they apply.
expect_exit 0 "$BLKCRYPT" verity verify data hash "$root" --threads 2

echo "== --json: one object per line with the documented fields"
"$BLKCRYPT" verity table data hash "$root" >table.txt
"$BLKCRYPT" verity table data hash "$root" --json >out
check_lines out "
o = objs[0]; assert len(objs) == 1
assert o['table'] == open('table.txt').read().strip()
assert o['data_device'] == 'data' and o['hash_device'] == 'hash' and o['root_hash'] == '$root'
assert o['hash_algorithm'] == 'sha256' and o['data_blocks'] == 768 and o['data_block_size'] == 4096"

for action in format verify dump; do
    case $action in
    format) args=(data hash2 --salt 01) ;;
    verify) args=(data hash "$root") ;;
    dump) args=(hash) ;;
    esac
    "$BLKCRYPT" verity $action "${args[@]}" --json >out
    [[ $(wc -l <out) == 1 ]] || fail "verity $action --json is not one line: $(cat out)"
    check_lines out "assert len(objs) == 1"
done

"$BLKCRYPT" crypt encrypt --cipher aes-xts-plain64 --key-file key -s 512 data ct --json >out
check_lines out "
o = objs[0]; assert len(objs) == 1
assert o['action'] == 'encrypt' and o['input'] == 'data' and o['output'] == 'ct'
assert o['cipher'] == 'aes-xts-plain64' and o['key_bits'] == 512 and o['sector_size'] == 512
assert o['sectors'] == 6144 and o['bytes'] == 3 * 1024 * 1024 and o['offset'] == 0 and o['iv_offset'] == 0
assert isinstance(o['seconds'], float) and o['seconds'] >= 0"
grep -qi "${key_hex:0:16}" out && fail "crypt --json shows the key"
"$BLKCRYPT" crypt decrypt --cipher aes-xts-plain64 --key-file key -s 512 ct pt --json >out
check_lines out "assert objs[0]['action'] == 'decrypt' and objs[0]['input'] == 'ct'"
cmp data pt || fail "round trip"

"$BLKCRYPT" crypt table --cipher aes-xts-plain64 --key-file key -s 512 --device ct >table.txt
"$BLKCRYPT" crypt table --cipher aes-xts-plain64 --key-file key -s 512 --device ct --json >out
check_lines out "
o = objs[0]
assert o['table'] == open('table.txt').read().strip() and o['device'] == 'ct' and o['length'] == 6144
assert o['cipher'] == 'aes-xts-plain64' and o['key_bits'] == 512"
grep -qi "${key_hex:0:16}" out && fail "crypt table --json shows the key without --show-key"

"$BLKCRYPT" hash --alg sha256 data key --json >out
check_lines out "
assert [o['file'] for o in objs] == ['data', 'key']
assert objs[0]['digest'] == '$(sha256sum data | cut -d' ' -f1)' and objs[0]['algorithm'] == 'sha256'
assert all(o['driver'] for o in objs)"

"$BLKCRYPT" fsverity digest data --json >out
want=$("$BLKCRYPT" fsverity digest data --compact)
check_lines out "
o = objs[0]
assert o['file'] == 'data' and o['algorithm'] == 'sha256' and o['digest'] == '$want'
assert o['block_size'] == 4096 and o['salt'] == '' and o['size'] == 3 * 1024 * 1024 and o['tree_size'] > 0"
expect_exit 2 "$BLKCRYPT" fsverity digest data --json --compact

"$BLKCRYPT" selftest sha256 --json >out
check_lines out "
assert all(o['result'] == 'pass' and o['name'] == 'sha256' and o['driver'] for o in objs[:-1])
assert objs[-1] == {'passed': len(objs) - 1, 'failed': 0, 'untested': 0}"

echo "== --progress-json: cryptsetup's lines on stdout"
# check_progress FILE DEVICE SIZE: the progress lines of FILE (those with
# device_bytes) have cryptsetup's fields, in its order, all strings, and end
# with the whole size and eta 0.
check_progress() {
    python3 - "$1" "$2" "$3" <<'PY' || fail "progress lines of $2: $(cat "$1")"
import json, sys
objs = [json.loads(l) for l in open(sys.argv[1]).read().splitlines() if l.startswith('{')]
prog = [o for o in objs if 'device_bytes' in o]
assert prog, "no progress line"
for o in prog:
    assert list(o) == ['device', 'device_bytes', 'device_size', 'speed', 'eta_ms', 'time_ms'], list(o)
    assert all(isinstance(v, str) for v in o.values())
    assert all(v.isdigit() for k, v in o.items() if k != 'device')
last = prog[-1]
assert last['device'] == sys.argv[2] and last['device_bytes'] == last['device_size'] == sys.argv[3]
assert last['eta_ms'] == '0'
PY
}
size=$((3 * 1024 * 1024))
"$BLKCRYPT" crypt encrypt --cipher aes-xts-plain64 --key-file key -s 512 data ct --progress-json >out 2>err
check_progress out ct $size
[[ ! -s err ]] || fail "progress-json wrote to stderr: $(cat err)"
"$BLKCRYPT" crypt decrypt --cipher aes-xts-plain64 --key-file key -s 512 ct pt --progress-json >out
check_progress out ct $size
"$BLKCRYPT" verity format data hash3 --progress-json --json >out
check_progress out data $size
check_lines out "assert 'root_hash' in objs[-1]"
"$BLKCRYPT" verity verify data hash "$root" --progress-json >out
check_progress out data $size
"$BLKCRYPT" verity read data hash "$root" --out rd --progress-json >out
check_progress out data $size
cmp data rd || fail "verity read output"
"$BLKCRYPT" fsverity digest data --progress-json >out
check_progress out data $size
grep -q '^sha256:' out || fail "fsverity digest line missing"
# --progress-frequency: periodic lines (a slow hash makes the run long enough).
"$BLKCRYPT" verity format data hash3 --hash sha512 --threads 1 --progress-json --progress-frequency 0.001 >out
check_progress out data $size

echo "== text progress: off unless asked on a non-terminal, whole lines when asked"
"$BLKCRYPT" verity verify data hash "$root" >out 2>err
[[ ! -s err ]] || fail "progress drawn on a non-terminal by default: $(cat err)"
"$BLKCRYPT" verity verify data hash "$root" --progress >out 2>err
grep -qE '^\[#+\] 100\.0% .* MiB/s  time [0-9]{2}m[0-9]{2}s$' err || fail "no final progress line: $(cat -A err)"
"$BLKCRYPT" crypt encrypt --cipher aes-xts-plain64 --key-file key -s 512 data ct --progress 2>err
grep -q '100\.0%' err || fail "crypt --progress: $(cat err)"
"$BLKCRYPT" fsverity digest data --progress >out 2>err
grep -q '100\.0%' err || fail "fsverity --progress: $(cat err)"
"$BLKCRYPT" verity verify data hash "$root" --progress --no-progress >out 2>err && fail "--progress with --no-progress accepted"
"$BLKCRYPT" verity verify data hash "$root" --progress-frequency -1 >out 2>err && fail "--progress-frequency -1 accepted"

echo "== on a terminal the bar is drawn and ended before the summary"
# script(1) gives the command a pseudo-terminal for stdout and stderr.
if script -qec true /dev/null >/dev/null 2>&1; then
    script -qec "'$BLKCRYPT' verity format data hash4 --salt 01" /dev/null >tty.out
    grep -q $'\r\e\[2K\[' tty.out || fail "no bar on a terminal: $(cat -A tty.out)"
    # The summary starts on a line of its own (the terminal turns \n into \r\n).
    grep -q $'time [0-9][0-9]m[0-9][0-9]s\r$' tty.out || fail "bar not ended: $(cat -A tty.out)"
    grep -q $'^VERITY header information for hash4\r$' tty.out || fail "summary runs into the bar: $(cat -A tty.out)"
else
    echo "SKIP: script(1) cannot make a pseudo-terminal here"
fi
echo "json/progress tests passed"
