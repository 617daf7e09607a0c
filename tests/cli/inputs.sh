#!/bin/bash
# Inputs and numbers: range-checked numeric options, option
# errors that never hang or show Boost's texts, verity read's two table
# forms, verify's conflicts, error list and exit statuses, thread creation
# that fails (LD_PRELOAD shim), and inputs that shrink while being read.
# $2 is the thread-limit shim (tests/cli/thread_limit_shim.cpp).
source "$(dirname "$0")/lib.sh"
SHIM=${2:?usage: $0 blkcrypt thread_limit_shim.so}
cd "$TMP"
# ASan/TSan builds: their runtime must be the first library loaded (no
# LD_PRELOAD shim) and they reserve terabytes of address space (no ulimit -v).
sanitized=0
ldd "$BLKCRYPT" | grep_q 'lib[at]san' && sanitized=1

# usage_error PATTERN CMD...: exit 2 within 10 s, one line matching PATTERN
# (fixed string). timeout catches the Boost placeholder loop (exit 124).
usage_error() {
    local pattern=$1
    shift
    expect_exit 2 timeout 10 "$BLKCRYPT" "$@"
    expect_one_error_line
    grep -qF -- "$pattern" stderr || fail "$*: message '$(cat stderr)' lacks '$pattern'"
    grep -q "terminate\|std::\|unrecognised option\|the option '\|required but missing" stderr &&
        fail "$*: internals in '$(cat stderr)'"
    true
}

random_file img $((1024 * 1024))
random_file key.bin 64
key=$(xxd -p -c 256 key.bin)
T="aes-xts-plain64 $key 0"

# --- 1. every numeric option is range-checked; nothing negative is a count
usage_error "--threads: '-1' is not a number from 0 to 256" crypt encrypt --table "$T" --threads -1 img out
usage_error "--threads: '100000' is not a number from 0 to 256" crypt encrypt --table "$T" --threads 100000 img out
usage_error "--threads: '-1' is not a number" crypt encrypt --table "$T" -t -1 img out
usage_error "--skip: '-1' is not a number from 0 to 18446744073709551615" \
    crypt encrypt -c aes-xts-plain64 --key-file key.bin --skip -1 img out
usage_error "--size: '-1' is not a number from 1 to" crypt encrypt --table "$T" --size -1 img out
usage_error "--offset: '-1' is not a number from 0 to" crypt decrypt --table "$T" --offset -1 img out
usage_error "--offset: '36028797018963968' is not a number" crypt decrypt --table "$T" --offset 36028797018963968 img out
usage_error "--sector-size: '8192' is not a number from 512 to 4096" \
    crypt encrypt -c aes-xts-plain64 --key-file key.bin --sector-size 8192 img out
usage_error "--key-size: '-512' is not a number" crypt encrypt -c aes-xts-plain64 --key-file key.bin --key-size -512 img out
usage_error "--size: '+5' is not a number" crypt table --table "$T" --device img --size +5
usage_error "--size: ' 5' is not a number" crypt table --table "$T" --device img --size " 5"
[[ ! -e out ]] || fail "a refused command created its output"
usage_error "--threads: '-1' is not a number from 0 to 256" verity format img hash --threads -1
usage_error "--threads: '100000' is not a number from 0 to 256" verity verify img hash 00 --threads 100000
usage_error "--hash-offset: '-1' is not a number" verity format img hash --hash-offset -1
usage_error "--data-blocks: '-1' is not a number" verity format img hash --data-blocks -1
usage_error "--data-blocks: '0' is not a number from 1" verity format img hash --data-blocks 0
usage_error "--format: '2' is not a number from 0 to 1" verity format img hash --format 2
usage_error "--hash-block-size: '-4096' is not a number from 512 to 524288" verity format img hash --hash-block-size -4096
usage_error "--max-errors: '-1' is not a number" verity verify img hash 00 --max-errors -1
[[ ! -e hash ]] || fail "a refused verity format created HASH"
usage_error "--threads: '-1' is not a number from 0 to 256" fsverity digest img --threads=-1
usage_error "--threads: '100000' is not a number from 0 to 256" fsverity digest img --threads 100000
usage_error "--request: '-16' is not a number from 16 to" bench --hash sha256 --request -16
usage_error "--time: '-1' is not a number from 0.001 to 60" bench --hash sha256 --time -1
usage_error "--time: 'inf' is not a number" bench --hash sha256 --time inf
usage_error "--time: '1e3' is not a number" bench --hash sha256 --time 1e3
usage_error "--authsize: '-1' is not a number from 0 to 255" aead --alg "gcm(aes)" --key 00 --authsize -1 -e
# In range still works.
"$BLKCRYPT" crypt encrypt --table "$T" --threads 256 img out || fail "--threads 256 refused"
"$BLKCRYPT" crypt decrypt --table "$T" --threads 0 out back || fail "--threads 0 refused"
cmp -s img back || fail "--threads 256/0 round trip differs"
rm -f out back

# --- 2. Boost placeholders in names or values never hang; messages are ours
usage_error "--data-block-size: '%value%' is not a number from 512 to 524288" \
    verity format img hash --data-block-size %value%
usage_error "unknown option '--%canonical_option%' (see blkcrypt hash --help)" hash --%canonical_option%
usage_error "unknown option '--%value%' (see blkcrypt verity --help)" verity verify img hash 00 --%value%=1
usage_error "unknown option '--%prefix%%option%'" crypt --%prefix%%option%
usage_error "unknown option '--kye' (see blkcrypt skcipher --help)" skcipher --kye=00112233 --alg aes -e
grep -q 00112233 stderr && fail "an unknown option's value was echoed"
usage_error "--threads: '%canonical_option%' is not a number" fsverity digest img --threads %canonical_option%
usage_error "option '--alg' given more than once" hash --alg %value% --alg %canonical_option%
usage_error "option '--alg' is required (see blkcrypt hash --help)" hash img
usage_error "option '--alg' needs a value (see blkcrypt hash --help)" hash img --alg
usage_error "missing action: encrypt, decrypt, table or serve (see blkcrypt crypt --help)" crypt
usage_error "missing action: format, verify, dump, table, read, serve or sign (see blkcrypt verity --help)" verity --hash sha1
usage_error "unknown option '-z' (see blkcrypt fsverity digest --help)" fsverity digest img -z
usage_error "option '--json' takes no value" list --json=%value%

# --- 3. verity read --table: the full dmsetup line or the arguments, real errors
"$BLKCRYPT" verity format img hash >fmt.txt || fail "verity format"
root=$(awk '/^Root hash:/{print $3}' fmt.txt)
line=$("$BLKCRYPT" verity table img hash "$root") || fail "verity table"
args=${line#* * verity }
[[ $line == "0 2048 verity $args" ]] || fail "unexpected table line '$line'"
"$BLKCRYPT" verity read --table "$line" --out r1 || fail "read --table LINE"
"$BLKCRYPT" verity read --table "$args" --out r2 || fail "read --table ARGS"
cmp -s img r1 && cmp -s img r2 || fail "read --table returned other data"
usage_error "--table: verity table: invalid salt" verity read --table "${line% *} zz"
usage_error "--table: verity table: invalid salt" verity read --table "${args% *} zz"
usage_error "--table: verity table: invalid root digest" verity read --table "${line/$root/xyz}"
usage_error "covers 4096 sectors" verity read --table "0 4096 verity $args"
usage_error "--table: verity table: invalid hash device block size 'x'" verity read --table "${line/4096 4096/4096 x}"

# --- 4. ROOT_HEX and --root-hash-file together are refused
echo "$root" >root.txt
usage_error "give the root hash as ROOT_HEX or with --root-hash-file, not both" \
    verity verify img hash "$root" --root-hash-file root.txt
usage_error "not both" verity table img hash "$root" --root-hash-file root.txt
"$BLKCRYPT" verity verify img hash --root-hash-file root.txt || fail "verify --root-hash-file alone"

# --- 5 and 8. a wrong image: the first 10 blocks and a count; veritysetup's status
random_file wrong $((1024 * 1024))
expect_exit 2 "$BLKCRYPT" verity verify wrong hash "$root"
[[ $(grep -c "^blkcrypt: data block [0-9]* is corrupted$" stderr) == 10 ]] || fail "not 10 blocks named: $(cat stderr)"
grep -q "^blkcrypt: \.\.\. and 246 more corrupted blocks" stderr || fail "no count of the rest: $(cat stderr)"
[[ $(wc -l <stderr) == 12 ]] || fail "verify printed $(wc -l <stderr) lines"
expect_exit 2 "$BLKCRYPT" verity verify wrong hash "$root" --max-errors 0
[[ $(grep -c "is corrupted$" stderr) == 256 ]] || fail "--max-errors 0 does not list all"
grep -q "more corrupted" stderr && fail "--max-errors 0 still summarises"
expect_exit 2 "$BLKCRYPT" verity verify wrong hash "$root" --max-errors 3
[[ $(grep -c "is corrupted$" stderr) == 3 ]] || fail "--max-errors 3: $(cat stderr)"
grep -q "and 253 more" stderr || fail "--max-errors 3 count: $(cat stderr)"
other=$(printf '%064x' 1)
expect_exit 1 "$BLKCRYPT" verity verify img hash "$other"  # only the root differs
grep -q "root hash does not match" stderr || fail "wrong root: $(cat stderr)"
if command -v veritysetup >/dev/null; then
    rc=0; veritysetup verify wrong hash "$root" 2>/dev/null || rc=$?
    [[ $rc == 2 ]] || fail "veritysetup exits $rc for corrupted data; we exit 2"
    rc=0; veritysetup verify img hash "$other" 2>/dev/null || rc=$?
    [[ $rc == 1 ]] || fail "veritysetup exits $rc for a wrong root hash; we exit 1"
fi

# --- 6. thread creation fails after the first thread (and from the start)
if ((sanitized)); then echo "sanitizer build: thread-limit and memory-limit checks skipped"; else
"$BLKCRYPT" crypt encrypt --table "$T" img ct.want || fail "encrypt"
"$BLKCRYPT" fsverity digest img >fsv.want || fail "fsverity"
UUID=00000000-1111-4222-8333-444444444444
"$BLKCRYPT" verity format img hash.want --salt - --uuid $UUID >/dev/null || fail "verity format"
# "SHIM_FAIL=2": only the second creation fails (the issue's reproducer);
# "SHIM_THREADS=n": only n threads can ever be created.
for limit in SHIM_FAIL=2 SHIM_FAIL=1 SHIM_THREADS=1 SHIM_THREADS=2; do
    n=$limit
    run() { env "BLKCRYPT_$limit" LD_PRELOAD="$SHIM" "$BLKCRYPT" "$@" >stdout 2>stderr ||
            fail "$* under $limit: exit $? ($(cat stderr))"; }
    run verity verify img hash "$root" --threads 4
    run verity read img hash "$root" --threads 4 --out rd
    cmp -s img rd || fail "verity read with $n thread(s) returned other data"
    run crypt encrypt --table "$T" --threads 4 img ct
    cmp -s ct.want ct || fail "crypt encrypt with $n thread(s) differs"
    run fsverity digest img --threads 4
    cmp -s fsv.want stdout || fail "fsverity digest with $n thread(s) differs"
    run verity format img hash2 --threads 4 --salt - --uuid $UUID
    cmp -s hash.want hash2 || fail "verity format with $n thread(s) differs"
    rm -f rd ct hash2
done
# No thread at all: hashing and verity read run on the main thread; the
# dm-crypt engine needs a worker and says so.
BLKCRYPT_SHIM_THREADS=0 LD_PRELOAD=$SHIM expect_exit 0 "$BLKCRYPT" verity verify img hash "$root" --threads 4
BLKCRYPT_SHIM_THREADS=0 LD_PRELOAD=$SHIM expect_exit 0 "$BLKCRYPT" verity read img hash "$root" --threads 4 --out rd
cmp -s img rd || fail "verity read without threads returned other data"
BLKCRYPT_SHIM_THREADS=0 LD_PRELOAD=$SHIM expect_exit 0 "$BLKCRYPT" fsverity digest img --threads 4
cmp -s fsv.want stdout || fail "fsverity digest without threads differs"
BLKCRYPT_SHIM_THREADS=0 LD_PRELOAD=$SHIM expect_exit 1 "$BLKCRYPT" crypt encrypt --table "$T" --threads 4 img ct
expect_one_error_line
grep -q "cannot start any crypt worker thread" stderr || fail "crypt without threads: $(cat stderr)"
[[ ! -e ct ]] || fail "crypt encrypt without threads left its output"
rm -f rd

# --- 9. no internals: out of memory is named, never "std::bad_alloc"
for t in 1 2; do
    rc=0
    (ulimit -v 300000 && "$BLKCRYPT" crypt encrypt --table "$T" --threads 256 img ct >stdout 2>stderr) || rc=$?
    [[ $rc == 1 ]] || fail "out of address space: exit $rc ($(cat stderr))"
    expect_one_error_line
    grep -q "std::\|terminate" stderr && fail "internals: $(cat stderr)"
    [[ ! -e ct ]] || fail "a failed encrypt left its output"
done

# An allocation failing outside any library Result reaches main: one named line.
rc=0
(ulimit -v 300000 && head -c $((400 * 1024 * 1024)) /dev/zero |
    "$BLKCRYPT" skcipher --alg "ecb(aes)" --key "${key:0:32}" -e >/dev/null 2>stderr) || rc=$?
[[ $rc == 1 ]] || fail "skcipher out of memory: exit $rc ($(cat stderr))"
expect_one_error_line
grep -q "^blkcrypt: out of memory$" stderr || fail "skcipher out of memory: $(cat stderr)"

fi  # not sanitized

# --- 10. an input shrinking while it is read is an error, never SIGBUS
head -c $((384 * 1024 * 1024)) /dev/zero >big  # allocated, not sparse
seen=0
for try in 1 2 3 4 5 6; do
    for cmd in "fsverity digest big --threads 1" "crypt encrypt --table T --threads 1 big ct" \
               "verity format big bighash --threads 1"; do
        read -ra words <<<"$cmd"
        [[ ${words[3]:-} == T ]] && words[3]=$T
        head -c $((384 * 1024 * 1024)) /dev/zero >big
        rc=0
        "$BLKCRYPT" "${words[@]}" >stdout 2>stderr &
        pid=$!
        sleep 0.0$((try + 1))
        truncate -s 4096 big
        wait $pid || rc=$?
        ((rc != 135)) || fail "$cmd: killed by SIGBUS"
        if ((rc != 0)); then
            [[ $rc == 1 ]] || fail "$cmd on a shrinking input: exit $rc ($(cat stderr))"
            expect_one_error_line
            grep -q "shrank\|changed size" stderr || fail "$cmd: $(cat stderr)"
            seen=$((seen + 1))
        fi
        [[ -z $(find . -maxdepth 1 -name '.*.??????' -print -quit) ]] || fail "$cmd left a temporary file"
        rm -f ct bighash
    done
done
((seen > 0)) || echo "note: the truncation never hit a read in progress (fast machine); unit tests cover it"
rm -f big
# Growing is an error too (fs-verity: a byte past the size read at the end).
# A truncated container: its data offset comes from the header, so the error
# names no --offset nobody gave, and exits 1 (a damaged input), not 2.
printf pw >"$TMP/pw"
head -c 1M /dev/urandom >"$TMP/in.bin"
"$BLKCRYPT" luks encrypt --format -q --key-file "$TMP/pw" --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
    "$TMP/in.bin" "$TMP/trunc.img"
truncate -s -1000 "$TMP/trunc.img"
expect_exit 1 "$BLKCRYPT" luks decrypt --key-file "$TMP/pw" "$TMP/trunc.img" "$TMP/out.bin"
grep_q "a truncated or damaged container" <"$TMP/stderr" || fail "truncated container: $(cat "$TMP/stderr")"
! grep -q -- "--offset" "$TMP/stderr" || fail "truncated container names --offset: $(cat "$TMP/stderr")"
echo "inputs.sh: all passed"
