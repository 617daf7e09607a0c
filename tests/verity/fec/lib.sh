# The FEC case runner shared by make-golden.sh (veritysetup) and
# tests/cli/verity_fec.sh (blkcrypt, and veritysetup live when installed).
# fec_case TOOL DIR SIZE IV LAYOUT OPTS...: makes DIR/data, then runs
# `TOOL format` with the case's devices; the summary goes to DIR/summary.
# Afterwards DIR/hash and DIR/fec name the files holding the tree and parity.
fec_uuid=00000000-1111-4222-8333-444444444444
fec_case() {
    local tool=$1 dir=$2 size=$3 iv=$4 layout=$5
    shift 5
    rm -rf "$dir" && mkdir -p "$dir"
    head -c "$size" /dev/zero |
        openssl enc -aes-128-ctr -nosalt -K 000102030405060708090a0b0c0d0e0f -iv "$iv" >"$dir/data"
    local uuid=(--uuid "$fec_uuid")
    [[ " $* " == *" --no-superblock "* ]] && uuid=()
    case $layout in
    sep)
        $tool format "$dir/data" "$dir/hashfile" --fec-device "$dir/fecfile" "${uuid[@]}" "$@" </dev/null >"$dir/summary"
        ln -s hashfile "$dir/hash" && ln -s fecfile "$dir/fec" ;;
    hash)
        truncate -s 1M "$dir/hashfile"
        $tool format "$dir/data" "$dir/hashfile" --fec-device "$dir/hashfile" "${uuid[@]}" "$@" </dev/null >"$dir/summary"
        ln -s hashfile "$dir/hash" && ln -s hashfile "$dir/fec" ;;
    one)
        truncate -s 8M "$dir/data"
        $tool format "$dir/data" "$dir/data" --fec-device "$dir/data" "${uuid[@]}" "$@" </dev/null >"$dir/summary"
        ln -s data "$dir/hash" && ln -s data "$dir/fec" ;;
    *) echo "unknown layout $layout" >&2; return 1 ;;
    esac
}
# The options of a case that `verity dump --fec-device` needs besides the devices.
fec_dump_options() {
    { grep -oE -- '--(fec-roots|fec-offset|hash-offset) [^ ]+' <<<"$1" || true; } | tr '\n' ' '
}
