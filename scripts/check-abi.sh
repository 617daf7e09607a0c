#!/usr/bin/env bash
# The C API's ABI against the committed baseline (capi/abi/libblkcrypt-c.so.1.abi):
# abidiff (Debian: abigail-tools) fails on any change that breaks callers
# built against the baseline (a removed or retyped function, a changed enum
# value, a symbol version moved). Added functions pass. Exit 77 (skipped)
# without abidiff.
# Usage: check-abi.sh LIBRARY BASELINE PUBLIC_HEADER_DIR
#        check-abi.sh --update LIBRARY BASELINE PUBLIC_HEADER_DIR  (after an intended change)
set -euo pipefail
update=0
if [[ ${1:-} == --update ]]; then update=1; shift; fi
lib=${1:?usage: $0 [--update] LIBRARY BASELINE HEADER_DIR}
baseline=${2:?usage: $0 [--update] LIBRARY BASELINE HEADER_DIR}
headers=${3:?usage: $0 [--update] LIBRARY BASELINE HEADER_DIR}
if ! command -v abidw >/dev/null || ! command -v abidiff >/dev/null; then
    echo "SKIP: abidw/abidiff not installed (Debian: abigail-tools)"
    exit 77
fi
if [[ $update == 1 ]]; then
    # Neither the build folder nor the types of the C++ library behind the
    # API (private: not in HEADER_DIR) go into the baseline.
    abidw --no-corpus-path --no-comp-dir-path --short-locs --drop-private-types --headers-dir "$headers" \
        --out-file "$baseline" "$lib"
    echo "wrote $baseline"
    exit 0
fi
rc=0
abidiff "$baseline" "$lib" || rc=$?
# abidiff's status is a bit field: 4 = ABI change, 8 = incompatible change;
# 1 and 2 are its own errors. Any of them fails; an addition alone gives 4
# only with --no-added-syms off, so it is reported separately below.
if (( rc & 8 )); then
    echo "FAIL: $lib breaks the ABI of $baseline (above)" >&2
    exit 1
fi
if (( rc & 3 )); then
    echo "FAIL: abidiff could not compare (status $rc)" >&2
    exit 1
fi
if (( rc & 4 )); then
    # abidiff calls only removals incompatible; a changed parameter or enum
    # value is "a change" (4) too, and breaks callers as surely. Only an
    # addition is compatible: it needs a new version node and a new baseline.
    echo "FAIL: $lib differs from the ABI of $baseline (above): a changed function or type needs a new" \
         "SONAME; an intended addition a new version node (capi/blkcrypt.map) and $0 --update" >&2
    exit 1
fi
echo "ABI of $(basename "$lib") matches $(basename "$baseline")"
