#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz with clang into build-fuzz
# (ASan + UBSan, every library target instrumented), then
#   replay: runs every seed (tests/fuzz/corpus/<h>/) and every committed crash
#           input (tests/fuzz/crashes/<h>/) once through its harness;
#   run:    fuzzes each harness for FUZZ_SECONDS (default 20) from its seeds.
# Usage: scripts/fuzz.sh [all|replay|run] [HARNESS...]   (default: all, every harness)
# A crash leaves its input in build-fuzz/artifacts/<h>/; see docs/fuzzing.md.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
[ $# -gt 0 ] && shift
case $mode in all | replay | run) ;; *) echo "usage: $0 [all|replay|run] [HARNESS...]" >&2; exit 2 ;; esac
# Absolute paths: the cli harness works in a directory of its own.
BUILD_DIR=$(realpath -m "${FUZZ_BUILD_DIR:-build-fuzz}")
FUZZ_SECONDS=${FUZZ_SECONDS:-20}
src=$PWD/tests/fuzz

cxx=${FUZZ_CXX:-$(command -v clang++ || command -v clang++-14 || true)}
[ -n "$cxx" ] || { echo "fuzz.sh: clang++ not found (scripts/install-deps.sh installs clang-14)" >&2; exit 1; }
. scripts/ccache.sh
cmake -S . -B "$BUILD_DIR" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
  -DBLKCRYPT_FUZZ=ON -DBLKCRYPT_BUILD_TESTS=OFF -DBLKCRYPT_BUILD_BENCH=OFF >/dev/null

harnesses=("$@")
if [ ${#harnesses[@]} -eq 0 ]; then
  for f in "$src"/*.cpp; do harnesses+=("$(basename "$f" .cpp)"); done
fi
targets=()
for h in "${harnesses[@]}"; do targets+=("fuzz_$h"); done
cmake --build "$BUILD_DIR" -j"$(nproc)" --target "${targets[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=0
for h in "${harnesses[@]}"; do
  bin=$BUILD_DIR/fuzz/fuzz_$h
  # Bounded resources: 2 GiB, 10 s per input, inputs up to 4 KiB (16 KiB for
  # hash images and .vec files, whose seeds are larger).
  maxlen=4096
  case $h in verity_superblock | vec) maxlen=16384 ;; luks2_header | fvault2_header) maxlen=40000 ;; fs_probe) maxlen=69632 ;; esac
  common=(-rss_limit_mb=2048 -timeout=10 -max_len=$maxlen)
  dict=()
  [ -f "$src/$h.dict" ] && dict=(-dict="$src/$h.dict")
  if [ "$mode" != run ]; then
    files=()
    for d in "$src/corpus/$h" "$src/crashes/$h"; do
      [ -d "$d" ] && while IFS= read -r -d '' f; do files+=("$f"); done < <(find "$d" -type f -print0 | sort -z)
    done
    echo "=== replay $h: ${#files[@]} inputs ==="
    if [ ${#files[@]} -gt 0 ] && ! "$bin" "${common[@]}" "${files[@]}" >"$BUILD_DIR/replay-$h.log" 2>&1; then
      echo "fuzz.sh: replay of $h failed; see $BUILD_DIR/replay-$h.log" >&2
      tail -n 30 "$BUILD_DIR/replay-$h.log" >&2
      failed=1
    fi
  fi
  if [ "$mode" != replay ]; then
    work=$BUILD_DIR/corpus/$h art=$BUILD_DIR/artifacts/$h/
    mkdir -p "$work" "$art"
    echo "=== fuzz $h for ${FUZZ_SECONDS}s ==="
    if ! "$bin" "${common[@]}" "${dict[@]}" -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 \
        -artifact_prefix="$art" "$work" "$src/corpus/$h" >"$BUILD_DIR/fuzz-$h.log" 2>&1; then
      echo "fuzz.sh: $h found a crash: $(ls -t "$art" | head -n 1) in $art (add it to $src/crashes/$h/ and fix)" >&2
      grep -m 5 -E "ERROR|runtime error|SUMMARY" "$BUILD_DIR/fuzz-$h.log" >&2 || true
      failed=1
    else
      grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$BUILD_DIR/fuzz-$h.log" | tr '\n' ' ' ; echo
    fi
  fi
done
exit $failed
