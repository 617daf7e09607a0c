#!/bin/bash
# Negative and garbage numbers on the options of blkcrypt verity and
# fsverity: one clear line naming the option, the value and what it takes
# (exit 2), nothing written. Boost alone would read "-1" as 2^64-1, or
# take it for an option.
source "$(dirname "$0")/lib.sh"
cd "$TMP"
random_file data $((64 * 4096))
root=$("$BLKCRYPT" verity format data hash --salt 00 | awk '/^Root hash:/{print $3}')
[[ $root =~ ^[0-9a-f]{64}$ ]] || fail "format: no root hash"

# refused MESSAGE CMD...: exit 2, exactly MESSAGE as the one line on stderr, no stdout.
refused() {
    local msg=$1
    shift
    expect_exit 2 "$BLKCRYPT" "$@"
    expect_one_error_line
    [[ $(cat "$TMP/stderr") == "blkcrypt: $msg" ]] || fail "$*: '$(cat "$TMP/stderr")', want 'blkcrypt: $msg'"
    [[ ! -s $TMP/stdout ]] || fail "$*: printed '$(cat "$TMP/stdout")'"
}

bs="is not a block size (a power of two such as 4096)"
for action in digest sign verify-sig; do
    extra=()
    [[ $action == digest ]] || extra=(sig --key k --cert c)
    [[ $action == verify-sig ]] && extra=(sig --cert c)
    refused "--block-size: '-1' $bs" fsverity "$action" data "${extra[@]}" --block-size -1
    refused "--block-size: '-1' $bs" fsverity "$action" data "${extra[@]}" --block-size=-1
    refused "--block-size: '4k' $bs" fsverity "$action" data "${extra[@]}" --block-size 4k
    refused "--block-size: ' 4096' $bs" fsverity "$action" data "${extra[@]}" "--block-size= 4096"
    refused "--block-size: '99999999999' $bs" fsverity "$action" data "${extra[@]}" --block-size 99999999999
    refused "--threads: '-2' is not a number from 0 to 256" fsverity "$action" data "${extra[@]}" --threads -2
done
refused "fs-verity: block size 1000 is not a power of two up to 2^30" fsverity digest data --block-size 1000
[[ ! -e sig ]] || fail "a refused fsverity command wrote SIG"

big=18446744073709551615
i64=9223372036854775807
refused "--data-block-size: '-1' is not a number from 512 to 524288" verity format data out --data-block-size -1
refused "--hash-block-size: '4096.0' is not a number from 512 to 524288" verity format data out --hash-block-size 4096.0
refused "--data-blocks: '-1' is not a number from 1 to $big" verity format data out --data-blocks -1
refused "--data-blocks: '0x10' is not a number from 1 to $big" verity format data out --data-blocks 0x10
refused "--hash-offset: '-4096' is not a number from 0 to $i64" verity format data out --hash-offset -4096
refused "--format: '-1' is not a number from 0 to 1" verity format data out --format -1
refused "--threads: '-1' is not a number from 0 to 256" verity format data out --threads -1
refused "--fec-roots: '-2' is not a number from 2 to 24" verity format data out --fec-device fec --fec-roots -2
refused "--fec-offset: '-512' is not a number from 0 to $i64" verity format data out --fec-device fec --fec-offset -512
refused "--fec-offset: '1e3' is not a number from 0 to $i64" verity format data out --fec-device fec --fec-offset 1e3
[[ ! -e out && ! -e fec ]] || fail "a refused format wrote an output"
refused "--max-errors: '-1' is not a number from 0 to $big" verity verify data hash "$root" --max-errors -1
refused "--hash-offset: '+0' is not a number from 0 to $i64" verity verify data hash "$root" --hash-offset +0
refused "--hash-offset: '-1' is not a number from 0 to $i64" verity dump hash --hash-offset -1
refused "--fec-roots: 'two' is not a number from 2 to 24" verity dump hash --fec-device hash --fec-roots two
refused "--data-block-size: '-4096' is not a number from 512 to 524288" \
    verity table data hash "$root" --no-superblock --data-block-size -4096
refused "--port: '-1' is not a number from 0 to 65535" verity serve data hash "$root" --port -1
refused "option '--threads' has an empty value (see blkcrypt verity --help)" verity read data hash "$root" --out o --threads=
[[ ! -e o ]] || fail "a refused read wrote its output"
echo "verity/fsverity numbers: ok"
