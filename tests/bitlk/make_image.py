#!/usr/bin/env python3
"""Writes a BitLocker volume image and the plaintext `cryptsetup bitlkOpen` maps from it.

An independent writer (python3-cryptography), so tests can have what the Windows fixtures
cannot give: 4096-byte sectors, non-ASCII passwords, any size, partially encrypted volumes.
It is proven against the real peers (tests/bitlk/gen-golden/): the host's `cryptsetup
bitlkDump` parses its images and prints its key, and the kernel's `bitlkOpen` reads back its
plaintext. Everything is derived from --seed, so an image is the same on every run.

Layout as Windows writes an NTFS volume (or a FAT one for To Go): a BitLocker boot sector
(BPB, the FVE GUID and the three FVE metadata offsets), three 64 KiB FVE metadata areas at
1/4, 2/4 and 3/4 of the volume, each holding the same metadata block, the volume header area
(the first 8 KiB of the plaintext, encrypted there with the IV of where it is stored) right
after the first FVE area, and every other sector encrypted in place.

  make_image.py [options] IMAGE PLAINTEXT
The FVEK (cryptsetup's volume key) is printed in hex on stdout.
"""
import argparse
import hashlib
import struct
import sys
import zlib

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESCCM

FVE_AREA = 64 * 1024
BOOT_REGION = 8192  # the NTFS boot sectors BitLocker relocates
FVE_GUID = bytes.fromhex("3bd66749292ed84a8399f6a339e3d001")  # 4967d63b-2e29-4ad8-8399-f6a339e3d001
# Encryption methods: cryptsetup's names and the FVEK length.
METHODS = {"cbc-elephant-128": (0x8000, 64), "cbc-elephant-256": (0x8001, 64),
           "cbc-128": (0x8002, 16), "cbc-256": (0x8003, 32),
           "xts-128": (0x8004, 32), "xts-256": (0x8005, 64)}
PROT_CLEAR, PROT_RECOVERY, PROT_PASSPHRASE = 0x0000, 0x0800, 0x2000
STRETCH_ROUNDS = 1 << 20
CREATED = 134090784000000000  # 2025-11-30 00:00:00 UTC as a FILETIME


class Rand:
    """Deterministic bytes per label from the seed."""

    def __init__(self, seed):
        self.seed = seed.encode()

    def bytes(self, label, n):
        out = b""
        i = 0
        while len(out) < n:
            out += hashlib.sha256(self.seed + b"\0" + label.encode() + struct.pack("<I", i)).digest()
            i += 1
        return out[:n]

    def stream(self, label, n):
        enc = Cipher(algorithms.AES(self.bytes(label, 32)), modes.CTR(bytes(16))).encryptor()
        return enc.update(bytes(n))


def datum(value, payload, dtype=0):
    """An FVE datum / entry header: size, type, value, version 1."""
    return struct.pack("<HHHH", 8 + len(payload), dtype, value, 1) + payload


def key_datum(method, key):
    """The plaintext of a wrapped key: size, type, value 1 (key), version, method, key."""
    return struct.pack("<HHHHI", 12 + len(key), 0, 1, 1, method) + key


class Nonces:
    """AES-CCM nonces as Windows makes them: the creation FILETIME and a counter."""

    def __init__(self):
        self.n = 0

    def next(self):
        self.n += 1
        return struct.pack("<QI", CREATED, self.n)


def ccm_datum(nonces, wrap_key, plain):
    nonce = nonces.next()
    sealed = AESCCM(wrap_key, tag_length=16).encrypt(nonce, plain, None)
    return datum(5, nonce + sealed[-16:] + sealed[:-16])


def stretch(initial, salt):
    """BitLocker's key stretch: 2^20 SHA-256 rounds over (last, initial, salt, count)."""
    last = bytes(32)
    for i in range(STRETCH_ROUNDS):
        last = hashlib.sha256(last + initial + salt + struct.pack("<Q", i)).digest()
    return last


def password_key(password, salt, cryptsetup261=False):
    # The password as Windows hashes it: its UTF-16LE code units, no terminator.
    units = password.encode("utf-16-le")
    if cryptsetup261:
        # cryptsetup 2.6.1 hashes twice the UTF-8 length: the units, zero padded. Only to
        # show that this is all it does differently (the same for ASCII).
        units = units.ljust(2 * len(password.encode()), b"\0")
    initial = hashlib.sha256(hashlib.sha256(units).digest()).digest()
    return stretch(initial, salt)


def recovery_words(rand, label):
    words = struct.unpack("<8H", rand.bytes(label, 16))
    text = "-".join("%06d" % (w * 11) for w in words)
    return text, struct.pack("<8H", *words)


def guid_text(b):
    a, b1, c = struct.unpack("<IHH", b[:8])
    return "%08x-%04x-%04x-%s-%s" % (a, b1, c, b[8:10].hex(), b[10:16].hex())


def vmk_entry(guid, protection, datums):
    # VMK entry: GUID, modification time, 2 unknown bytes, protection, then its datums.
    body = guid + struct.pack("<QHH", CREATED, 0, protection) + b"".join(datums)
    return datum(8, body, dtype=2)


class Volume:
    def __init__(self, a):
        self.a = a
        self.ss = a.sector_size
        self.size = a.size
        if self.size % 65536 or self.size < 1024 * 1024:
            sys.exit("make_image.py: --size must be a multiple of 64 KiB, at least 1 MiB")
        self.method, self.key_len = METHODS[a.cipher]
        if a.cipher.startswith("cbc-elephant"):
            sys.exit("make_image.py: the elephant diffuser is not written (the fixtures cover it)")
        self.rand = Rand(a.seed)
        self.fvek = self.rand.bytes("fvek", self.key_len)
        self.fve = [self.size * k // 4 // 65536 * 65536 for k in (1, 2, 3)]
        self.vh_offset = self.fve[0] + FVE_AREA
        self.encrypted = self.size if a.encrypted_size is None else a.encrypted_size
        if self.encrypted % self.ss or self.encrypted > self.size:
            sys.exit("make_image.py: --encrypted-size must be whole sectors within the volume")

    # --- data -------------------------------------------------------------------------------
    def zero_areas(self):
        return [(o, FVE_AREA) for o in self.fve] + [(self.vh_offset, BOOT_REGION)]

    def encrypt_sector(self, data, offset):
        """One encryption sector stored at byte `offset` (its IV's position)."""
        if self.a.cipher.startswith("xts"):
            tweak = struct.pack("<Q", offset // self.ss) + bytes(8)
            enc = Cipher(algorithms.AES(self.fvek), modes.XTS(tweak)).encryptor()
        else:
            # eboiv: the IV is the byte offset, encrypted with the key.
            ecb = Cipher(algorithms.AES(self.fvek), modes.ECB()).encryptor()
            iv = ecb.update(struct.pack("<Q", offset) + bytes(8))
            enc = Cipher(algorithms.AES(self.fvek), modes.CBC(iv)).encryptor()
        return enc.update(data) + enc.finalize()

    def plaintext(self, offset, n):
        """The plaintext view's bytes [offset, offset + n): random, zeros over the FVE and
        volume header areas (bitlkOpen maps dm-zero there)."""
        buf = bytearray(self.rand.stream("plain%d" % (offset // (1 << 20)), n)) if n else bytearray()
        for start, length in self.zero_areas():
            lo, hi = max(start, offset), min(start + length, offset + n)
            if lo < hi:
                buf[lo - offset:hi - offset] = bytes(hi - lo)
        return bytes(buf)

    def stored(self, offset, plain):
        """`plain` (whole sectors) as stored on disk at `offset`: encrypted below the
        encrypted size (a partially encrypted volume has converted that much, from the
        start), as it is above."""
        out = bytearray()
        for i in range(0, len(plain), self.ss):
            at = offset + i
            sector = plain[i:i + self.ss]
            out += self.encrypt_sector(sector, at) if at < self.encrypted else sector
        return bytes(out)

    # --- metadata ---------------------------------------------------------------------------
    def metadata(self):
        nonces = Nonces()
        vmk = self.rand.bytes("vmk", 32)
        entries = []
        desc = (self.a.description + "\0").encode("utf-16-le")
        entries.append(datum(2, desc, dtype=7))
        self.vmk_guids = []
        n = 0
        for pw in self.a.password:
            salt = self.rand.bytes("salt%d" % n, 16)
            guid = self.rand.bytes("guid%d" % n, 16)
            n += 1
            stretch_datum = datum(3, struct.pack("<I", 0x1001) + salt)
            wrapped = ccm_datum(nonces, password_key(pw, salt, self.a.cryptsetup261), key_datum(0x2000, vmk))
            entries.append(vmk_entry(guid, PROT_PASSPHRASE, [stretch_datum, wrapped]))
            self.vmk_guids.append(("passphrase", guid_text(guid)))
        if self.a.recovery:
            text, key16 = recovery_words(self.rand, "recovery")
            self.recovery_text = text
            salt = self.rand.bytes("rsalt", 16)
            guid = self.rand.bytes("rguid", 16)
            initial = hashlib.sha256(key16).digest()
            stretch_datum = datum(3, struct.pack("<I", 0x1000) + salt)
            wrapped = ccm_datum(nonces, stretch(initial, salt), key_datum(0x2000, vmk))
            entries.append(vmk_entry(guid, PROT_RECOVERY, [stretch_datum, wrapped]))
            self.vmk_guids.append(("recovery", guid_text(guid)))
        if self.a.clear_key:
            clear = self.rand.bytes("clear", 32)
            guid = self.rand.bytes("cguid", 16)
            key = datum(1, struct.pack("<I", 0x2000) + clear)
            wrapped = ccm_datum(nonces, clear, key_datum(0x2000, vmk))
            entries.append(vmk_entry(guid, PROT_CLEAR, [key, wrapped]))
            self.vmk_guids.append(("clear", guid_text(guid)))
        fvek_plain = key_datum(self.method, self.fvek)
        fvek = ccm_datum(nonces, vmk, fvek_plain)
        entries.append(fvek[:2] + struct.pack("<H", 3) + fvek[4:])  # the FVEK entry: type 3
        entries.append(datum(15, struct.pack("<QQ", self.vh_offset, BOOT_REGION), dtype=15))
        body = b"".join(entries)
        msize = 48 + len(body)
        self.guid = self.rand.bytes("volume-guid", 16)
        curr, nxt = self.a.state
        block = b"-FVE-FS-" + struct.pack("<HHHH", (64 + msize + 15) // 16, 2, curr, nxt)
        block += struct.pack("<QII", self.encrypted, 0, BOOT_REGION // self.ss)
        block += struct.pack("<QQQQ", *self.fve, self.vh_offset)
        block += struct.pack("<IIII", msize, 1, 48, msize) + self.guid
        block += struct.pack("<IHHQ", nonces.n + 2, self.method, self.method, CREATED)
        block += body
        block += bytes(-len(block) % 16)
        # The validation after the block (what dislocker checks, picking the first copy
        # that passes): its size, version 2, the CRC32 of the block, and the SHA-256 of
        # the block as a key datum wrapped by the VMK.
        check = ccm_datum(nonces, vmk, key_datum(0x2005, hashlib.sha256(block).digest()))
        return block + struct.pack("<HHI", 8 + len(check), 2, zlib.crc32(block)) + check

    def boot_sector(self):
        """The boot sector Windows writes in place of the filesystem's (whose copy is in the
        volume header area): FAT32-style BPB, the FVE GUID and the metadata offsets."""
        ss = self.ss
        b = bytearray(ss)
        togo = self.a.togo
        b[0:3] = b"\xeb\x58\x90"
        b[3:11] = b"MSWIN4.1" if togo else b"-FVE-FS-"
        struct.pack_into("<HBHBHHBHHHI", b, 11, ss, 8 if ss == 512 else 1, 0 if not togo else 0x21,
                         0 if not togo else 1, 0, 0, 0xf8, 0, 0x3f, 0xff, 0x800)
        struct.pack_into("<IIHHI", b, 32, 0 if not togo else self.size // ss, 0x1fe0, 0, 0, 2 if togo else 0)
        struct.pack_into("<HH", b, 48, 1, 6)
        b[64:67] = b"\x80\x00\x29"
        b[71:82] = b"NO NAME    "
        b[82:90] = b"FAT32   "
        at = 424 if togo else 160
        b[at:at + 16] = FVE_GUID
        struct.pack_into("<QQQ", b, at + 16, *self.fve)
        b[510:512] = b"\x55\xaa"
        return bytes(b)

    def write(self, image, plain_path):
        meta = self.metadata()
        chunk = 1 << 20
        with open(image, "wb") as img, open(plain_path, "wb") as pl:
            img.truncate(self.size)
            pl.truncate(self.size)
            for off in range(0, self.size, chunk):
                n = min(chunk, self.size - off)
                p = self.plaintext(off, n)
                pl.seek(off)
                pl.write(p)
                c = bytearray(self.stored(off, p))
                # The boot region is stored in the volume header area; in place only the
                # BitLocker boot sector and zeros.
                for start, length in self.zero_areas():
                    lo, hi = max(start, off), min(start + length, off + n)
                    if lo < hi:
                        c[lo - off:hi - off] = bytes(hi - lo)
                if off == 0:
                    c[0:BOOT_REGION] = bytes(BOOT_REGION)
                img.seek(off)
                img.write(c)
            img.seek(self.vh_offset)
            img.write(self.stored(self.vh_offset, self.plaintext(0, BOOT_REGION)))
            img.seek(0)
            img.write(self.boot_sector())
            for o in self.fve:
                img.seek(o)
                img.write(meta)



def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=4 << 20, help="volume size in bytes (64 KiB multiple)")
    p.add_argument("--sector-size", type=int, choices=(512, 4096), default=512)
    p.add_argument("--cipher", choices=sorted(METHODS), default="xts-128")
    p.add_argument("--password", action="append", default=[], help="a passphrase protector (UTF-8)")
    p.add_argument("--cryptsetup261", action="store_true",
                   help="hash passwords as cryptsetup 2.6.1 does (not as Windows does)")
    p.add_argument("--recovery", action="store_true", help="add a recovery password protector")
    p.add_argument("--clear-key", action="store_true", help="add a clear key protector (suspended)")
    p.add_argument("--togo", action="store_true", help="BitLocker To Go boot sector (MSWIN4.1)")
    p.add_argument("--encrypted-size", type=int, help="bytes encrypted from the start (partial)")
    p.add_argument("--state", type=lambda s: tuple(int(x) for x in s.split(",")), default=(4, 4),
                   help="current,next state (4,4: fully encrypted)")
    p.add_argument("--description", default="BLKCRYPT-GEN C: 30/11/2025")
    p.add_argument("--seed", default="blkcrypt")
    p.add_argument("--info", help="write the recovery password and VMK GUIDs here")
    p.add_argument("image")
    p.add_argument("plaintext")
    a = p.parse_args()
    v = Volume(a)
    v.write(a.image, a.plaintext)
    if a.info:
        with open(a.info, "w") as f:
            f.write("GUID=%s\n" % guid_text(v.guid))
            if a.recovery:
                f.write("RP=%s\n" % v.recovery_text)
            for kind, g in v.vmk_guids:
                f.write("VMK=%s %s\n" % (kind, g))
    print(v.fvek.hex())


if __name__ == "__main__":
    main()
