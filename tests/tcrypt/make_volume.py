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

--legacy CHAIN writes a TrueCrypt 4.x/5.x legacy CBC volume instead (see
legacy_volume below): CHAIN is one of cryptsetup's legacy chains (LEGACY).
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


# ---- TrueCrypt 4.x/5.x legacy CBC volumes (--legacy) -------------------------
#
# cryptsetup's legacy rows (lib/tcrypt tcrypt_cipher): chain -> mode and, per
# cipher in chain order, (name, key bytes, block bytes, key offset in the
# header key and in the key area). Bytes 0..31 of both are the IV seed zone.
LEGACY = {
    "aes": ("cbc-tcw", [("aes", 32, 16, 32)]),
    "cast5": ("cbc-tcw", [("cast5", 16, 8, 32)]),
    "des3_ede": ("cbc-tcw", [("des3_ede", 24, 8, 32)]),
    "blowfish_le": ("cbc-tcrypt", [("blowfish_le", 56, 8, 32)]),
    "blowfish_le-aes": ("cbc-tcrypt", [("blowfish_le", 56, 8, 32), ("aes", 32, 16, 88)]),
    "serpent-blowfish_le-aes": ("cbc-tcrypt", [("serpent", 32, 16, 32), ("blowfish_le", 56, 8, 64),
                                               ("aes", 32, 16, 120)]),
    "twofish-aes": ("cbci-tcrypt", [("twofish", 32, 16, 32), ("aes", 32, 16, 64)]),
    "serpent-twofish-aes": ("cbci-tcrypt", [("serpent", 32, 16, 32), ("twofish", 32, 16, 64), ("aes", 32, 16, 96)]),
    "aes-serpent": ("cbci-tcrypt", [("aes", 32, 16, 32), ("serpent", 32, 16, 64)]),
    "aes-twofish-serpent": ("cbci-tcrypt", [("aes", 32, 16, 32), ("twofish", 32, 16, 64), ("serpent", 32, 16, 96)]),
    "serpent-twofish": ("cbci-tcrypt", [("serpent", 32, 16, 32), ("twofish", 32, 16, 64)]),
}


def _gcrypt_ecb(algo, key):
    """Serpent and Twofish, which python3-cryptography lacks: libgcrypt's
    ECB through ctypes (an implementation independent of blkcrypt's)."""
    import ctypes
    import ctypes.util
    lib = ctypes.CDLL(ctypes.util.find_library("gcrypt") or "libgcrypt.so.20")
    lib.gcry_check_version.restype = ctypes.c_char_p
    lib.gcry_check_version(None)
    h = ctypes.c_void_p()
    ids = {"twofish": 10, "serpent": 306}  # GCRY_CIPHER_TWOFISH, GCRY_CIPHER_SERPENT256
    if lib.gcry_cipher_open(ctypes.byref(h), ids[algo], 1, 0) or lib.gcry_cipher_setkey(h, key, len(key)):
        sys.exit("libgcrypt refused %s" % algo)

    def run(fn, block):
        out = ctypes.create_string_buffer(len(block))
        if fn(h, out, len(block), block, len(block)):
            sys.exit("libgcrypt %s failed" % algo)
        return out.raw
    return (lambda b: run(lib.gcry_cipher_encrypt, b)), (lambda b: run(lib.gcry_cipher_decrypt, b))


def ecb(name, key):
    """(encrypt, decrypt) of one block of cipher `name` under `key`."""
    if name in ("twofish", "serpent"):
        return _gcrypt_ecb(name, key)
    import warnings
    warnings.simplefilter("ignore")  # Blowfish, CAST5 and 3DES are deprecated
    try:
        from cryptography.hazmat.decrepit.ciphers import algorithms as old
    except ImportError:
        old = algorithms
    alg = {"aes": algorithms.AES, "cast5": old.CAST5, "des3_ede": old.TripleDES,
           "blowfish_le": old.Blowfish}[name](key)
    c = Cipher(alg, modes.ECB())
    e, d = c.encryptor(), c.decryptor()
    if name == "blowfish_le":
        # TrueCrypt's Blowfish reads the two 32-bit halves little-endian.
        sw = lambda b: b[3::-1] + b[7:3:-1]
        return (lambda b: sw(e.update(sw(b)))), (lambda b: sw(d.update(sw(b))))
    return e.update, d.update


def xor(a, b):
    return bytes(x ^ y for x, y in zip(a, b))


def cbc_encrypt(enc, bs, iv, data):
    out = bytearray()
    for i in range(0, len(data), bs):
        iv = enc(xor(data[i:i + bs], iv))
        out += iv
    return bytes(out)


def whiten(data, w8):
    return xor(data, w8 * (len(data) // 8))


def crc32_word(b):
    """The kernel's crc32(0, b, 4) (no inversions), as LE32 bytes."""
    return ((zlib.crc32(b, 0xFFFFFFFF) ^ 0xFFFFFFFF)).to_bytes(4, "little")


def tcw_sector(enc, bs, seed_zone, sector, data):
    """One 512-byte sector in TrueCrypt's legacy CBC (dm-crypt's tcw): IV =
    seed XOR the LE64 sector number, CBC, then the sector's 8-byte whitening
    (from the 16 whitening bytes after the seed) over the ciphertext."""
    s = sector.to_bytes(8, "little")
    iv = xor(seed_zone[:bs], s * (bs // 8))
    w = xor(seed_zone[bs:bs + 16], s + s)
    c = [crc32_word(w[i:i + 4]) for i in range(0, 16, 4)]
    return whiten(cbc_encrypt(enc, bs, iv, data), xor(c[0], c[3]) + xor(c[1], c[2]))


def legacy_stages(chain, key):
    """The chain's encryption stages over `key` (header key or key area):
    a list of (encrypt one block, block size). Outer CBC (cbci) is one stage
    whose block function runs every cipher in chain order."""
    mode, parts = LEGACY[chain]
    fns = [(ecb(n, key[off:off + ks])[0], bs) for n, ks, bs, off in parts]
    if mode != "cbci-tcrypt":
        return fns

    def chained(b):
        for f, _ in fns:
            b = f(b)
        return b
    return [(chained, 16)]


def legacy_volume(a, password):
    """A TrueCrypt 4.x/5.x volume with a legacy CBC chain, as cryptsetup reads
    it: the header at 0 (salt, then 448 bytes under PBKDF2-HMAC-SHA1 2000,
    cryptsetup's legacy KDF), no backup header, the data from sector 1.
    The header is CBC-encrypted per stage (or once over the cascade for outer
    CBC) with IV = header key bytes 0..bs and whitened with bytes 8..15, as
    cryptsetup's TCRYPT_decrypt_hdr undoes it; data sector n (of the device)
    is tcw_sector per stage with the key area's seed zone. The plaintext is
    a FAT12 filesystem, volume ID DEAD-BABE, then pseudo-random clusters."""
    mode, parts = LEGACY[a.legacy]
    size = a.size
    if size // SECTOR > 4084 or size < 8 * SECTOR:
        sys.exit("--legacy: --size must be 4 KiB to 2 MiB (a FAT12 volume)")
    key_area = stream(a.seed, "keys", 256)
    salt = stream(a.seed, "salt", 64)
    body = bytearray(448)
    body[0:4] = b"TRUE"
    struct.pack_into(">HH", body, 4, 2, 0x0100)  # header version 2, as TrueCrypt 4.x
    struct.pack_into(">I", body, 8, zlib.crc32(key_area))
    struct.pack_into(">Q", body, 36, size)  # no mk_offset: the data starts at 512
    body[192:448] = key_area
    hk = hashlib.pbkdf2_hmac("sha1", password, salt, 2000, 192)
    enc = bytes(body)
    for f, bs in legacy_stages(a.legacy, hk):
        enc = whiten(cbc_encrypt(f, bs, hk[:bs], enc), hk[8:16])
    n = size // SECTOR
    plain = bytearray(fat12(n)) + hashlib.shake_256(("%s/plain" % a.seed).encode()).digest(size - 4 * SECTOR)
    stages = legacy_stages(a.legacy, key_area)
    with open(a.out, "wb") as f:
        f.write(salt + enc)
        for i in range(n):
            c = bytes(plain[i * SECTOR:(i + 1) * SECTOR])
            for fn, bs in stages:
                c = tcw_sector(fn, bs, key_area, 1 + i, c)
            f.write(c)
    if a.plain_out:
        with open(a.plain_out, "wb") as p:
            p.write(plain)
    print(hashlib.sha256(plain).hexdigest())


def fat12(sectors):
    """Boot sector, two one-sector FATs and a 16-entry root directory of a
    FAT12 filesystem of `sectors` sectors, volume ID DEAD-BABE."""
    boot = bytearray(SECTOR)
    boot[0:3] = b"\xeb\x3c\x90"
    boot[3:11] = b"MSWIN4.1"
    struct.pack_into("<HBHBHHBHHHII", boot, 11, SECTOR, 1, 1, 2, 16, sectors, 0xF8, 1, 32, 1, 0, 0)
    struct.pack_into("<BBBI", boot, 36, 0x80, 0, 0x29, 0xDEADBABE)
    boot[43:54] = b"TCLEGACY   "
    boot[54:62] = b"FAT12   "
    boot[510:512] = b"\x55\xaa"
    fat = b"\xf8\xff\xff" + bytes(SECTOR - 3)
    return bytes(boot) + fat + fat + bytes(SECTOR)
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
    ap.add_argument("--legacy", choices=sorted(LEGACY), help="a TrueCrypt 4.x/5.x legacy CBC volume")
    ap.add_argument("--system-disk", choices=("mbr", "gpt"))
    a = ap.parse_args()
    if a.size <= 0 or a.size % SECTOR:
        sys.exit("--size must be a positive multiple of 512")
    password = a.password.encode()
    if a.legacy:
        return legacy_volume(a, password)
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
