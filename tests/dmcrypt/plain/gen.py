#!/usr/bin/env python3
"""Deterministic inputs of the plain-mode golden cases (make-golden.sh, plain.sh).

  gen.py plaintext OUT   65536 bytes: SHA-256("blkcrypt plain-mode plaintext <i>") for i = 0, 1, ...
  gen.py keyfile OUT     100 bytes: SHA-512 of two fixed strings, cut to 100
  gen.py keyfile-printf  the key file as a printf(1) format of octal escapes
"""
import hashlib
import sys

PLAINTEXT_SIZE = 65536


def plaintext():
    out = b"".join(hashlib.sha256(b"blkcrypt plain-mode plaintext %d" % i).digest()
                   for i in range(PLAINTEXT_SIZE // 32))
    assert len(out) == PLAINTEXT_SIZE
    return out


def keyfile():
    return (hashlib.sha512(b"blkcrypt plain-mode key file 0").digest() +
            hashlib.sha512(b"blkcrypt plain-mode key file 1").digest())[:100]


def main():
    what = sys.argv[1]
    if what == "plaintext":
        open(sys.argv[2], "wb").write(plaintext())
    elif what == "keyfile":
        open(sys.argv[2], "wb").write(keyfile())
    elif what == "keyfile-printf":
        sys.stdout.write("".join("\\%03o" % b for b in keyfile()))
    else:
        sys.exit("usage: gen.py plaintext OUT | keyfile OUT | keyfile-printf")


if __name__ == "__main__":
    main()
