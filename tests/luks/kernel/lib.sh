# Sourced by make-kernel-golden.sh (the generator, needs the kernel oracle) and
# tests/cli/luks_kernel.sh (the CI replay, needs no kernel): the data patterns,
# the test keys and passphrases, and how dumps are compared.

# The data segment of every container is DATA_SIZE bytes: 32 sectors of 512,
# 4 of 4096 (small: the (b) containers are committed).
DATA_SIZE=16384

# pattern A|B FILE: pattern A is what blkcrypt writes into its containers,
# pattern B what the kernel writes through `cryptsetup open`. AES-128-CTR
# keystreams under the ASCII key "blkcrypt-luks-k!", IV 0...0a / 0...0b.
# (head reads /dev/zero, openssl reads all of its input: no SIGPIPE.)
pattern() {
    local iv
    case $1 in A) iv=0000000000000000000000000000000a ;; B) iv=0000000000000000000000000000000b ;; *) return 2 ;; esac
    head -c "$DATA_SIZE" /dev/zero |
        openssl enc -aes-128-ctr -nosalt -K 626c6b63727970742d6c756b732d6b21 -iv "$iv" >"$2"
}

# volume_key_hex CASE BYTES: the test volume key of an (a) case,
# SHA-512("blkcrypt-luks-vk-" CASE) truncated (keys are at most 64 bytes).
volume_key_hex() {
    printf 'blkcrypt-luks-vk-%s' "$1" | sha512sum | cut -c1-$(($2 * 2))
}

# hex_to_file HEX FILE
hex_to_file() { printf '%s' "$1" | xxd -r -p >"$2"; }

# The passphrases (test values): p1 opens every container, p2 and p3 the
# extra keyslots.
write_passphrases() {  # DIR
    printf 'kernel oracle, passphrase one' >"$1/p1"
    printf 'second keyslot: p2' >"$1/p2"
    printf 'p3 / the third' >"$1/p3"
}

# unify_device: a LUKS1 dump names the device in its first line
# (/dev/vdX in the guest, a file name here); LUKS2 dumps have no device.
unify_device() { sed -E '1s/^(LUKS header information for ).*/\1DEVICE/'; }

# mask_random: salts, digests and the MK digest come from the random number
# generator, so an (a) container rebuilt in CI differs there, and only there,
# from the one the kernel read: every run of 4 or more hex bytes becomes HEX.
mask_random() { unify_device | sed -E 's/([0-9a-f]{2} ){4,}/HEX /g'; }
# mask_random_json: the same for --dump-json-metadata (base64 salts, digests).
mask_random_json() { sed -E 's/"(salt|digest)":"[^"]*"/"\1":"B64"/'; }

# guest_section FILE NAME: the exact output the guest recorded under
# "@@BEGIN NAME" (NAME: the part after CASE/, as "luksDump", or a whole name,
# as "guest"). The guest's "@@END rc=N" follows the output directly, so when
# the output has no final newline (--dump-json-metadata) the marker ends its
# last line. guest_rc FILE NAME prints "rc=N".
guest_section() { _guest_scan "$1" "$2" out; }
guest_rc() { _guest_scan "$1" "$2" rc; }
_guest_scan() {
    awk -v n="$2" -v want="$3" '
        /^@@BEGIN / && !on { s = $2; sub(/.*\//, "", s); if (s == n || $2 == n) on = 1; next }
        on {
            i = index($0, "@@END rc=")
            if (i > 0 && $0 ~ /@@END rc=[0-9]+$/) {
                if (want == "out") printf "%s", substr($0, 1, i - 1); else print substr($0, i + 6)
                exit
            }
            if (want == "out") print
        }' "$1"
}

# data_offset_bytes DUMPFILE: the data segment's offset from a luksDump.
data_offset_bytes() {
    awk '/^Payload offset:/ { print $3 * 512; exit }
         /^\toffset: [0-9]+ \[bytes\]/ { print $2; exit }' "$1"
}

# Forced KDF costs (cryptsetup's minimums: fast under TCG). In the manifest's
# add_keys column a keyslot is SLOT:PASSFILE:KDF with KDF one of these names.
P2="--pbkdf-force-iterations 1000"
A2I="--pbkdf argon2i --pbkdf-force-iterations 4 --pbkdf-memory 32 --pbkdf-parallel 1"
A2ID="--pbkdf argon2id --pbkdf-force-iterations 4 --pbkdf-memory 32 --pbkdf-parallel 1"
kdf_args() {  # TYPE KDF: the options of one keyslot (LUKS1 takes no --pbkdf)
    case $2 in
    P2) if [ "$1" = luks1 ]; then echo "$P2"; else echo "--pbkdf pbkdf2 $P2"; fi ;;
    A2I) echo "$A2I" ;;
    A2ID) echo "$A2ID" ;;
    *) return 2 ;;
    esac
}

# The token of the token cases: a type nobody knows, which every rewrite of
# the header must keep as it is.
TOKEN='{"type":"blkcrypt-test","keyslots":["0"],"note":"an unknown token type, kept intact"}'

# build_ours BLKCRYPT DIR PASSDIR NAME TYPE BITS DETACHED UUID FORMAT_ARGS ADD_KEYS TOKEN:
# an (a) container as the manifest describes it: `luks format` with the test
# volume key into DIR/data (and DIR/hdr when detached), with TOKEN 1 the
# token imported as token 2 by the host's cryptsetup (blkcrypt has no token
# command; the add-keys after it are our header rewrites that must keep it),
# then `luks add-key` for each keyslot of ADD_KEYS; DIR/data is cut to the
# data offset + DATA_SIZE. Writes DIR/vk and DIR/offset (the data offset in bytes).
build_ours() {
    local bin=$1 dir=$2 pd=$3 name=$4 type=$5 bits=$6 detached=$7 uuid=$8 fargs=$9 addkeys=${10} token=${11}
    local fa ka hdropt=() ak slot pf kdf off
    mkdir -p "$dir"
    hex_to_file "$(volume_key_hex "$name" $((bits / 8)))" "$dir/vk"
    read -r -a fa <<<"$fargs"
    rm -f "$dir/data" "$dir/hdr"
    if [ "$detached" = 1 ]; then
        truncate -s "$DATA_SIZE" "$dir/data" && : >"$dir/hdr" && hdropt=(--header "$dir/hdr")
    else
        truncate -s 24M "$dir/data"  # room for any layout; cut below
    fi
    "$bin" luks format -q --type "$type" -s "$bits" --uuid "$uuid" --volume-key-file "$dir/vk" \
        --key-file "$pd/p1" "${hdropt[@]}" "${fa[@]}" "$dir/data" || return 1
    if [ "$token" = 1 ]; then
        printf '%s' "$TOKEN" >"$dir/token.json"
        cryptsetup token import --json-file "$dir/token.json" --token-id 2 "${hdropt[@]}" "$dir/data" || return 1
    fi
    for ak in $addkeys; do
        [ "$ak" = - ] && continue
        IFS=: read -r slot pf kdf <<<"$ak"
        read -r -a ka <<<"$(kdf_args "$type" "$kdf")"
        "$bin" luks add-key --key-file "$pd/p1" --key-slot "$slot" "${ka[@]}" "${hdropt[@]}" \
            "$dir/data" "$pd/$pf" || return 1
    done
    "$bin" luks dump "${hdropt[@]}" "$dir/data" >"$dir/our-dump" || return 1
    off=$(data_offset_bytes "$dir/our-dump")
    [ -n "$off" ] || return 1
    [ "$detached" = 1 ] || truncate -s $((off + DATA_SIZE)) "$dir/data"
    echo "$off" >"$dir/offset"
}
