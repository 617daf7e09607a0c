#!/usr/bin/env python3
"""Writes a VeraCrypt aes-xts volume from first principles with
python3-cryptography, independently of blkcrypt: the test-side generator that
the oracle's cryptsetup (tcryptDump/tcryptOpen) proved (tests/tcrypt/kernel/
oracle-generated.txt), used for volumes no fixture has (a 1 GiB one for the
benchmark).

  make_volume.py OUT --size BYTES --password PW [--pim N] [--seed S]
                 [--kdf pbkdf2-sha512|argon2id] [--plain-out FILE]
                 [--system-disk mbr|gpt]

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

--system-disk writes instead a whole disk with VeraCrypt system encryption of
one partition (what VeraCrypt's "encrypt the system partition" leaves): an
MBR (or a protective MBR and GPT, primary and backup) with partition 1 at
sector 2048 (1 MiB, not encrypted) and partition 2 at sector 6144 (BYTES,
encrypted), then 1 MiB of free space; the header at sector 62 (system flag,
the encrypted area's start and length = partition 2's), no backup header.
Each sector of partition 2 is AES-XTS with tweak = its sector on the disk.
The sha256 printed is that of partition 2's plaintext.

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


def header(kdf, password, salt, size, key_area, pim, offset=DATA_OFFSET, flags=0):
    body = bytearray(448)  # the header from byte 64 on
    body[0:4] = b"VERA"
    struct.pack_into(">HH", body, 4, 5, 0x010B)
    struct.pack_into(">I", body, 8, zlib.crc32(key_area))
    # 12..27: reserved (creation times); 28: hidden volume size 0
    struct.pack_into(">QQQ", body, 36, size, offset, size)
    struct.pack_into(">II", body, 60, flags, SECTOR)  # flags, sector size
    struct.pack_into(">I", body, 188, zlib.crc32(bytes(body[0:188])))
    body[192:448] = key_area
    hk = header_key(kdf, password, salt, pim)
    return salt + xts(hk[:64], 0, bytes(body))


def plain_chunks(seed, size):
    """The plaintext in chunks: SHAKE's output for a large size at once would
    not fit in memory, so each chunk is its own stream, keyed by its index."""
    shake = hashlib.shake_256(("%s/plain" % seed).encode())
    for at in range(0, size, CHUNK):
        n = min(CHUNK, size - at)
        yield at, hashlib.shake_256(shake.digest(32) + at.to_bytes(8, "little")).digest(n)


def encrypt_sectors(vk, first, p):
    return b"".join(xts(vk, first + i, p[i * SECTOR:(i + 1) * SECTOR]) for i in range(len(p) // SECTOR))


SYS_P1, SYS_P1_LEN, SYS_P2 = 2048, 2048, 6144  # sectors
SYS_TAIL = 2048  # free sectors after partition 2 (the backup GPT at the very end)
GPT_ENTRIES = 128


def mbr_entry(ptype, start, count):
    # status, CHS first (unused), type, CHS last (unused), LBA start, sectors
    return struct.pack("<B3sB3sII", 0, b"\xfe\xff\xff", ptype, b"\xfe\xff\xff", start, count)


def mbr(entries):
    sector = bytearray(SECTOR)
    for i, e in enumerate(entries):
        sector[446 + 16 * i:462 + 16 * i] = e
    sector[510:512] = b"\x55\xaa"
    return bytes(sector)


def gpt(seed, total, parts):
    """(primary header + entries, backup entries + header): UEFI's layout, the
    CRC-32s the kernel checks, GUIDs from the seed."""
    basic_data = bytes.fromhex("a2a0d0ebe5b9334487c068b6b72699c7")  # EBD0A0A2-B9E5-4433-87C0-68B6B72699C7
    entries = bytearray(GPT_ENTRIES * 128)
    for i, (start, count) in enumerate(parts):
        struct.pack_into("<16s16sQQQ", entries, 128 * i, basic_data, stream(seed, "gpt-part%d" % i, 16),
                         start, start + count - 1, 0)
        entries[128 * i + 56:128 * i + 56 + 72] = ("part%d" % (i + 1)).encode("utf-16-le").ljust(72, b"\0")
    ecrc = zlib.crc32(entries)

    def head(mine, other, entries_lba):
        h = bytearray(struct.pack("<8sIIIIQQQQ16sQIII", b"EFI PART", 0x10000, 92, 0, 0, mine, other, 34,
                                  total - 34, stream(seed, "gpt-disk", 16), entries_lba, GPT_ENTRIES, 128, ecrc))
        struct.pack_into("<I", h, 16, zlib.crc32(bytes(h)))
        return bytes(h).ljust(SECTOR, b"\0")

    return head(1, total - 1, 2) + bytes(entries), bytes(entries) + head(total - 1, 1, total - 33)


def system_disk(a, password, key_area):
    vk = key_area[:64]
    total = SYS_P2 + a.size // SECTOR + SYS_TAIL
    parts = [(SYS_P1, SYS_P1_LEN), (SYS_P2, a.size // SECTOR)]
    hdr = header(a.kdf, password, stream(a.seed, "salt", 64), a.size, key_area, a.pim, SYS_P2 * SECTOR, 1)
    if a.system_disk == "mbr":
        first = mbr([mbr_entry(0x0C, *parts[0]), mbr_entry(0x07, *parts[1])])
        tables, backup = b"", b""
    else:
        first = mbr([mbr_entry(0xEE, 1, min(total - 1, 0xFFFFFFFF))])
        tables, backup = gpt(a.seed, total, parts)
    digest = hashlib.sha256()
    plain = open(a.plain_out, "wb") if a.plain_out else None
    with open(a.out, "wb") as f:
        track = first + tables
        track += stream(a.seed, "track", 62 * SECTOR - len(track))
        f.write(track + hdr + stream(a.seed, "gap", (SYS_P1 - 63) * SECTOR))
        f.write(stream(a.seed, "partition1", SYS_P1_LEN * SECTOR))
        f.write(stream(a.seed, "gap2", (SYS_P2 - SYS_P1 - SYS_P1_LEN) * SECTOR))
        for at, p in plain_chunks(a.seed, a.size):
            digest.update(p)
            if plain:
                plain.write(p)
            f.write(encrypt_sectors(vk, SYS_P2 + at // SECTOR, p))
        f.write(stream(a.seed, "tail", SYS_TAIL * SECTOR - len(backup)) + backup)
    if plain:
        plain.close()
    print(digest.hexdigest())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--size", type=int, required=True, help="data area bytes (a multiple of 512)")
    ap.add_argument("--password", required=True)
    ap.add_argument("--pim", type=int, default=0)
    ap.add_argument("--seed", default="blkcrypt")
    ap.add_argument("--kdf", choices=("pbkdf2-sha512", "argon2id"), default="pbkdf2-sha512")
    ap.add_argument("--plain-out")
    ap.add_argument("--system-disk", choices=("mbr", "gpt"))
    a = ap.parse_args()
    if a.size <= 0 or a.size % SECTOR:
        sys.exit("--size must be a positive multiple of 512")
    password = a.password.encode()
    key_area = stream(a.seed, "keys", 256)
    vk = key_area[:64]
    if a.system_disk:
        return system_disk(a, password, key_area)
    with open(a.out, "wb") as f:
        f.write(header(a.kdf, password, stream(a.seed, "salt", 64), a.size, key_area, a.pim))
        f.write(stream(a.seed, "filler", DATA_OFFSET - 512))
        plain = open(a.plain_out, "wb") if a.plain_out else None
        digest = hashlib.sha256()
        for at, p in plain_chunks(a.seed, a.size):
            digest.update(p)
            if plain:
                plain.write(p)
            f.write(encrypt_sectors(vk, (DATA_OFFSET + at) // SECTOR, p))
        if plain:
            plain.close()
        backup = header(a.kdf, password, stream(a.seed, "backup-salt", 64), a.size, key_area, a.pim)
        f.write(backup + stream(a.seed, "backup-filler", 65536 - 512) + stream(a.seed, "hidden-backup", 65536))
    print(digest.hexdigest())


if __name__ == "__main__":
    main()
