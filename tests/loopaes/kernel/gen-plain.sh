#!/bin/sh
# The known plaintext written through every loop-AES mapping: SECTORS (default
# 72, more than the 64 keys of multi-key mode) sectors of 512 bytes, each 8
# distinct 64-byte text lines. POSIX awk only, so CI regenerates it.
awk -v n="${1:-72}" 'BEGIN { for (s = 0; s < n; s++) for (l = 0; l < 8; l++)
    printf "%-63s\n", sprintf("blkcrypt loop-AES golden plaintext, sector %04d line %d", s, l) }'
