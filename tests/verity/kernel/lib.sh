# Shared by make-kernel-golden.sh and check.sh (sourced; needs KEY set):
# deterministic data, byte flips, and the tree geometry as the kernel has it.
gen_data() {  # FILE RECIPE   recipe: iv=HEX size=N [zero=OFF+LEN,...]
  local f=$1 iv="" size="" zero="" w r
  for w in $2; do
    case $w in iv=*) iv=${w#iv=} ;; size=*) size=${w#size=} ;; zero=*) zero=${w#zero=} ;; esac
  done
  { openssl enc -aes-128-ctr -nosalt -K "$KEY" -iv "$iv" < /dev/zero 2>/dev/null || true; } | head -c "$size" > "$f"
  for r in ${zero//,/ }; do
    dd if=/dev/zero of="$f" bs="${r#*+}" count=1 seek="${r%+*}" oflag=seek_bytes conv=notrunc status=none
  done
  [ "$(stat -c %s "$f")" = "$size" ] || { echo "data generation failed for $2" >&2; return 1; }
}
flip() {  # FILE OFFSET: XOR one byte with 0xff
  local b; b=$(xxd -s "$2" -l 1 -p "$1")
  printf "$(printf '\\x%02x' $((0x$b ^ 0xff)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
sha() { sha256sum "$1" | cut -c1-64; }
# geometry from format arguments (kernel/veritysetup rules):
# sets G_DBS G_HBS G_DB G_LEVELS G_START[] (top level first on disk) G_BLOCKS[]
geometry() {  # DATA_SIZE ARGS...
  local size=$1; shift
  local hname=sha256 dbs=4096 hbs=4096 db="" hoff=0 sb=1 ds hpb bits=0 i next
  while [ $# -gt 0 ]; do
    case $1 in
      --hash) hname=$2; shift ;; --data-block-size) dbs=$2; shift ;;
      --hash-block-size) hbs=$2; shift ;; --data-blocks) db=$2; shift ;;
      --hash-offset) hoff=$2; shift ;; --no-superblock) sb=0 ;;
      --salt|--uuid|--format) shift ;;
    esac; shift
  done
  case $hname in sha1) ds=20 ;; sha256) ds=32 ;; sha512) ds=64 ;; *) echo "unknown hash $hname" >&2; return 1 ;; esac
  [ -n "$db" ] || db=$((size / dbs))
  hpb=1; while [ $((hpb * 2 * ds)) -le "$hbs" ]; do hpb=$((hpb * 2)); bits=$((bits + 1)); done
  G_DBS=$dbs G_HBS=$hbs G_DB=$db G_LEVELS=0 G_START=() G_BLOCKS=()
  if [ $sb = 1 ]; then G_HSTART=$(((hoff + 512 + hbs - 1) / hbs)); else G_HSTART=$((hoff / hbs)); fi
  while [ $(((db - 1) >> (G_LEVELS * bits))) -ne 0 ]; do
    G_BLOCKS[G_LEVELS]=$((((db - 1) >> ((G_LEVELS + 1) * bits)) + 1)); G_LEVELS=$((G_LEVELS + 1))
  done
  next=$G_HSTART
  for ((i = G_LEVELS - 1; i >= 0; i--)); do G_START[i]=$next; next=$((next + G_BLOCKS[i])); done
  G_END=$next
}
norm_table() { awk '{ $5 = "DATA"; $6 = "HASH"; print }'; }
