#!/usr/bin/env python3
"""Writes a VeraCrypt aes-xts volume from first principles with
python3-cryptography, independently of blkcrypt: the test-side generator that
the oracle's cryptsetup (tcryptDump/tcryptOpen) proved (tests/tcrypt/kernel/
oracle-generated.txt), used for volumes no fixture has (a 1 GiB one for the
benchmark).

  make_volume.py OUT --size BYTES --password PW [--pim N] [--seed S]
                 [--kdf pbkdf2-sha512|argon2id] [--plain-out FILE]

Layout (VeraCrypt's, as cryptsetup reads it): the 512-byte header at 0, the
hidden header area at 64 KiB (random), the data area at 128 KiB (BYTES, a
multiple of 512), then the backup header and the hidden backup area (random),
128 KiB in all. The header: a 64-byte salt, then 448 bytes encrypted with
AES-256-XTS (data unit 0) under the first 64 bytes of PBKDF2-HMAC-SHA512
(500000 iterations, or 15000 + 1000 x PIM), or with --kdf argon2id of
VeraCrypt 1.26's Argon2id (python3-argon2: version 0x13, one lane, the salt,
192 bytes; memory and passes from the PIM as VeraCrypt documents them, no PIM
meaning PIM 2: 96 MiB, 3 passes); inside, "VERA", version 5,
minimum program version 1.11, the CRC-32 of the key area, the sizes, the
data offset, sector size 512, the CRC-32 of bytes 64..251, and the 256-byte
key area whose first 64 bytes are the AES-XTS volume key. Data sector n of
the device (counted from the start of the file) is AES-XTS with tweak n, as
dm-crypt's plain64 with cryptsetup's IV offset does.

The plaintext is a pseudo-random stream from --seed (SHAKE-256), written to
--plain-out when given; the last line printed is its sha256. Keys and salts
come from --seed too, so a seed gives the same volume every time.
"""
import argparse
import hashlib
import struct
import sys
import zlib

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

DATA_OFFSET = 131072
SECTOR = 512
CHUNK = 1 << 20


def stream(seed, label, n):
    """n deterministic bytes for `label` (salts, keys, filler)."""
    return hashlib.shake_256(("%s/%s" % (seed, label)).encode()).digest(n)


def xts(key, tweak, data, encrypt=True):
    c = Cipher(algorithms.AES(key), modes.XTS(tweak.to_bytes(16, "little")))
    op = c.encryptor() if encrypt else c.decryptor()
    return op.update(data) + op.finalize()


def argon2_costs(pim):
    """(passes, KiB) VeraCrypt's documentation gives for a PIM."""
    p = pim or 2
    mib = min(64 + (p - 1) * 32, 1024)
    passes = 3 + (p - 1) // 3 if p <= 31 else 13 + (p - 31)
    return passes, mib * 1024


def header_key(kdf, password, salt, pim):
    if kdf == "argon2id":
        from argon2.low_level import Type, hash_secret_raw
        passes, kib = argon2_costs(pim)
        return hash_secret_raw(password, salt, time_cost=passes, memory_cost=kib, parallelism=1,
                               hash_len=192, type=Type.ID, version=19)
    return hashlib.pbkdf2_hmac("sha512", password, salt, 15000 + 1000 * pim if pim else 500000, 192)


def header(kdf, password, salt, size, key_area, pim):
    body = bytearray(448)  # the header from byte 64 on
    body[0:4] = b"VERA"
    struct.pack_into(">HH", body, 4, 5, 0x010B)
    struct.pack_into(">I", body, 8, zlib.crc32(key_area))
    # 12..27: reserved (creation times); 28: hidden volume size 0
    struct.pack_into(">QQQ", body, 36, size, DATA_OFFSET, size)
    struct.pack_into(">II", body, 60, 0, SECTOR)  # flags, sector size
    struct.pack_into(">I", body, 188, zlib.crc32(bytes(body[0:188])))
    body[192:448] = key_area
    hk = header_key(kdf, password, salt, pim)
    return salt + xts(hk[:64], 0, bytes(body))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--size", type=int, required=True, help="data area bytes (a multiple of 512)")
    ap.add_argument("--password", required=True)
    ap.add_argument("--pim", type=int, default=0)
    ap.add_argument("--seed", default="blkcrypt")
    ap.add_argument("--kdf", choices=("pbkdf2-sha512", "argon2id"), default="pbkdf2-sha512")
    ap.add_argument("--plain-out")
    a = ap.parse_args()
    if a.size <= 0 or a.size % SECTOR:
        sys.exit("--size must be a positive multiple of 512")
    password = a.password.encode()
    key_area = stream(a.seed, "keys", 256)
    vk = key_area[:64]
    with open(a.out, "wb") as f:
        f.write(header(a.kdf, password, stream(a.seed, "salt", 64), a.size, key_area, a.pim))
        f.write(stream(a.seed, "filler", DATA_OFFSET - 512))
        plain = open(a.plain_out, "wb") if a.plain_out else None
        digest = hashlib.sha256()
        shake = hashlib.shake_256(("%s/plain" % a.seed).encode())
        # SHAKE's output for a large size at once would not fit in memory:
        # each chunk is its own stream, keyed by its index.
        for at in range(0, a.size, CHUNK):
            n = min(CHUNK, a.size - at)
            p = hashlib.shake_256(shake.digest(32) + at.to_bytes(8, "little")).digest(n)
            digest.update(p)
            if plain:
                plain.write(p)
            first = (DATA_OFFSET + at) // SECTOR
            f.write(b"".join(xts(vk, first + i, p[i * SECTOR:(i + 1) * SECTOR]) for i in range(n // SECTOR)))
        if plain:
            plain.close()
        backup = header(a.kdf, password, stream(a.seed, "backup-salt", 64), a.size, key_area, a.pim)
        f.write(backup + stream(a.seed, "backup-filler", 65536 - 512) + stream(a.seed, "hidden-backup", 65536))
    print(digest.hexdigest())


if __name__ == "__main__":
    main()
