#!/usr/bin/env python3
"""Recompute dm-crypt golden vectors independently with python3-cryptography.

Usage: verify_python.py [DIR] [CASE_REGEX]

Reads DIR/manifest.tsv and DIR/plaintext.bin (DIR defaults to this script's
folder), re-encrypts every case it knows how to compute in userspace and
compares the result with DIR/<case>.ct.  Ciphers without a python3-cryptography
implementation (serpent, twofish, adiantum) are reported as SKIP.  The algorithms follow drivers/md/dm-crypt.c (Linux 6.1):

  cc_sector  = iv_offset + 512-byte index of the unit
  iv_sector  = cc_sector >> (log2(sector_size) - 9) if iv_large_sectors else cc_sector
  key index  = cc_sector & (keycount - 1)
  subkey     = (key minus IV-generator extra bytes) split into keycount parts
  IV modes   : plain plain64 plain64be essiv:HASH benbi null eboiv lmk tcw elephant

Exit status 0 when no computed case mismatches.
"""
import hashlib
import os
import re
import struct
import sys
import zlib

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

try:  # cryptography >= 43 keeps the old ciphers here
    from cryptography.hazmat.decrepit.ciphers import algorithms as old_alg
except ImportError:  # pragma: no cover
    old_alg = algorithms

MASK64 = (1 << 64) - 1


def algo(name, key):
    if name == "aes":
        return algorithms.AES(key)
    if name == "camellia":
        return old_alg.Camellia(key)
    if name == "cast5":
        return old_alg.CAST5(key)
    if name == "blowfish":
        return old_alg.Blowfish(key)
    if name == "des3_ede":
        return old_alg.TripleDES(key)
    raise NotImplementedError(name)


BLOCK = {"aes": 16, "camellia": 16, "cast5": 8, "blowfish": 8, "des3_ede": 8, "cipher_null": 1}


def ecb(name, key, data):
    if name == "cipher_null":
        return data
    e = Cipher(algo(name, key), modes.ECB()).encryptor()
    return e.update(data) + e.finalize()


def cbc(name, key, iv, data):
    e = Cipher(algo(name, key), modes.CBC(iv)).encryptor()
    return e.update(data) + e.finalize()


def xor(a, b):
    return bytes(x ^ y for x, y in zip(a, b))


def gf128_double_le(t):  # XTS: multiply by x, little-endian block convention
    v = int.from_bytes(t, "little")
    v = ((v << 1) ^ (0x87 if v >> 127 else 0)) & ((1 << 128) - 1)
    return v.to_bytes(16, "little")


def xts(name, key, tweak, data):
    if name == "aes":  # python3-cryptography's own XTS
        e = Cipher(algorithms.AES(key), modes.XTS(tweak)).encryptor()
        return e.update(data) + e.finalize()
    half = len(key) // 2  # generic XTS from ECB (no ciphertext stealing needed)
    k1, k2 = key[:half], key[half:]
    t = ecb(name, k2, tweak)
    out = bytearray()
    for i in range(0, len(data), 16):
        out += xor(ecb(name, k1, xor(data[i:i + 16], t)), t)
        t = gf128_double_le(t)
    return bytes(out)


def gf128_mul_bbe(a, b):  # LRW: GF(2^128), big-endian bytes and bits, x^128+x^7+x^2+x+1
    r = 0
    for i in range(128):
        if (b >> i) & 1:
            r ^= a << i
    for i in range(255, 127, -1):
        if (r >> i) & 1:
            r ^= ((1 << 128) | 0x87) << (i - 128)
    return r


def lrw(key, iv, data):  # lrw(aes): key = aes key || 16-byte tweak key
    k1, k2 = key[:-16], int.from_bytes(key[-16:], "big")
    idx = int.from_bytes(iv, "big")
    out = bytearray()
    for i in range(0, len(data), 16):
        t = gf128_mul_bbe(k2, idx).to_bytes(16, "big")
        out += xor(ecb("aes", k1, xor(data[i:i + 16], t)), t)
        idx = (idx + 1) % (1 << 128)
    return bytes(out)


# ---- MD5 compression without finalisation (for lmk) ------------------------
_S = [7, 12, 17, 22] * 4 + [5, 9, 14, 20] * 4 + [4, 11, 16, 23] * 4 + [6, 10, 15, 21] * 4
_K = [int(abs(__import__("math").sin(i + 1)) * 2 ** 32) & 0xFFFFFFFF for i in range(64)]


def md5_raw_state(msg):
    assert len(msg) % 64 == 0
    a0, b0, c0, d0 = 0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476
    for off in range(0, len(msg), 64):
        m = struct.unpack("<16I", msg[off:off + 64])
        a, b, c, d = a0, b0, c0, d0
        for i in range(64):
            if i < 16:
                f, g = (b & c) | (~b & d), i
            elif i < 32:
                f, g = (d & b) | (~d & c), (5 * i + 1) % 16
            elif i < 48:
                f, g = b ^ c ^ d, (3 * i + 5) % 16
            else:
                f, g = c ^ (b | ~d), (7 * i) % 16
            f = (f + a + _K[i] + m[g]) & 0xFFFFFFFF
            a, d, c = d, c, b
            b = (b + ((f << _S[i]) | (f >> (32 - _S[i])))) & 0xFFFFFFFF
        a0, b0, c0, d0 = [(x + y) & 0xFFFFFFFF for x, y in zip((a0, b0, c0, d0), (a, b, c, d))]
    return struct.pack("<4I", a0, b0, c0, d0)


def crc32_le_seed0(data):  # kernel "crc32" shash: crc32_le(0, data), no final inversion
    return zlib.crc32(data, 0xFFFFFFFF) ^ 0xFFFFFFFF


# ---- Elephant diffusers (BitLocker) -----------------------------------------
def rotl(x, n):
    return ((x << n) | (x >> (32 - n))) & 0xFFFFFFFF


def diffuser_a_encrypt(d):
    n = len(d)
    for _ in range(5):
        i1, i2, i3 = n - 1, n - 3, n - 6
        while i1 > 0:
            d[i1] = (d[i1] - (d[i2] ^ d[i3])) & 0xFFFFFFFF
            i1 -= 1; i2 -= 1; i3 -= 1
            d[i1] = (d[i1] - (d[i2] ^ rotl(d[i3], 13))) & 0xFFFFFFFF
            i1 -= 1; i2 -= 1; i3 -= 1
            if i2 < 0:
                i2 += n
            d[i1] = (d[i1] - (d[i2] ^ d[i3])) & 0xFFFFFFFF
            i1 -= 1; i2 -= 1; i3 -= 1
            if i3 < 0:
                i3 += n
            d[i1] = (d[i1] - (d[i2] ^ rotl(d[i3], 9))) & 0xFFFFFFFF
            i1 -= 1; i2 -= 1; i3 -= 1


def diffuser_b_encrypt(d):
    n = len(d)
    for _ in range(3):
        i1, i2, i3 = n - 1, 1, 4
        while i1 > 0:
            d[i1] = (d[i1] - (d[i2] ^ rotl(d[i3], 25))) & 0xFFFFFFFF
            i1 -= 1; i2 -= 1; i3 -= 1
            if i3 < 0:
                i3 += n
            d[i1] = (d[i1] - (d[i2] ^ d[i3])) & 0xFFFFFFFF
            i1 -= 1; i2 -= 1; i3 -= 1
            if i2 < 0:
                i2 += n
            d[i1] = (d[i1] - (d[i2] ^ rotl(d[i3], 10))) & 0xFFFFFFFF
            i1 -= 1; i2 -= 1; i3 -= 1
            d[i1] = (d[i1] - (d[i2] ^ d[i3])) & 0xFFFFFFFF
            i1 -= 1; i2 -= 1; i3 -= 1


# ---- cipher spec parsing (crypt_ctr_cipher_old / _new) ----------------------
def parse_spec(spec):
    if spec.startswith("capi:"):
        s = spec[5:]
        ivopts = None
        if ":" in s:
            s, ivopts = s.rsplit(":", 1)
        api, ivmode = s.rsplit("-", 1)
        m = re.fullmatch(r"(\w+)\((\w+)\)", api)
        if not m:
            raise NotImplementedError(api)
        chain, cipher = m.groups()
        return cipher, (64 if ivmode == "lmk" else 1), chain, ivmode, ivopts
    cipher, _, rest = spec.partition("-")
    keycount = 1
    if ":" in cipher:
        cipher, kc = cipher.split(":")
        keycount = int(kc)
    chain, _, ivpart = rest.partition("-")
    ivmode, _, ivopts = ivpart.partition(":")
    return cipher, keycount, chain, ivmode or None, ivopts or None


def encrypt_case(spec, key, iv_offset, sector_size, opts, pt):
    cipher, tfms, chain, ivmode, ivopts = parse_spec(spec)
    if cipher not in BLOCK:
        raise NotImplementedError(cipher)
    bs = BLOCK[cipher]
    iv_size = max(bs, 8)
    large = "iv_large_sectors" in opts
    shift = sector_size.bit_length() - 10
    key_parts, extra = tfms, 0
    seed = None
    if ivmode == "lmk":
        if len(key) % key_parts:
            key_parts += 1
            extra = len(key) // key_parts
            seed = key[-extra:][:16] + bytes(48)
    elif ivmode == "tcw":
        extra = iv_size + 16
        tcw_seed, whitening = key[len(key) - extra:len(key) - 16], key[-16:]
    elif ivmode == "elephant":
        extra = len(key) // 2
        ks_key = key[len(key) - extra:]
    sub = (len(key) - extra) // tfms
    subkeys = [key[i * sub:(i + 1) * sub] for i in range(tfms)]

    out = bytearray()
    for u in range(len(pt) // sector_size):
        data = pt[u * sector_size:(u + 1) * sector_size]
        cc = iv_offset + u * (sector_size // 512)
        s = (cc >> shift) if large else cc
        k = subkeys[cc & (tfms - 1)]
        iv = bytes(iv_size)
        if ivmode == "plain":
            iv = struct.pack("<I", s & 0xFFFFFFFF) + bytes(iv_size - 4)
        elif ivmode in ("plain64", "essiv"):
            iv = struct.pack("<Q", s & MASK64) + bytes(iv_size - 8)
            if ivmode == "essiv":
                iv = ecb(cipher, hashlib.new(ivopts, k).digest(), iv)
        elif ivmode == "plain64be":
            iv = bytes(iv_size - 8) + struct.pack(">Q", s & MASK64)
        elif ivmode == "benbi":
            iv = bytes(iv_size - 8) + struct.pack(">Q", ((s << (9 - (bs.bit_length() - 1))) + 1) & MASK64)
        elif ivmode in ("eboiv", "elephant"):
            iv = ecb(cipher, subkeys[0], struct.pack("<Q", (s * sector_size) & MASK64) + bytes(iv_size - 8))
        elif ivmode == "lmk":
            tail = struct.pack("<4I", s & 0xFFFFFFFF, ((s >> 32) & 0x00FFFFFF) | 0x80000000, 4024, 0)
            iv = md5_raw_state((seed or b"") + data[16:512] + tail)
        elif ivmode == "tcw":
            le = struct.pack("<Q", s & MASK64)
            iv = xor(tcw_seed[:8], le) + xor(tcw_seed[8:], le[:iv_size - 8])
        elif ivmode not in (None, "null"):
            raise NotImplementedError(ivmode)

        if ivmode == "elephant":
            es = struct.pack("<Q", (s * sector_size) & MASK64) + bytes(8)
            ks = ecb("aes", ks_key, es) + ecb("aes", ks_key, es[:15] + b"\x80")
            data = xor(data, ks * (sector_size // 32))
            d = list(struct.unpack("<%dI" % (sector_size // 4), data))
            diffuser_a_encrypt(d)
            diffuser_b_encrypt(d)
            data = struct.pack("<%dI" % (sector_size // 4), *d)

        if chain == "cbc":
            ct = cbc(cipher, k, iv, data)
        elif chain == "xts":
            ct = xts(cipher, k, iv, data)
        elif chain == "ecb":
            ct = ecb(cipher, k, data)
        elif chain == "ctr" and cipher == "aes":
            e = Cipher(algorithms.AES(k), modes.CTR(iv)).encryptor()
            ct = e.update(data) + e.finalize()
        elif chain == "lrw" and cipher == "aes":
            ct = lrw(k, iv, data)
        else:
            raise NotImplementedError(chain)

        if ivmode == "tcw":  # whitening of the ciphertext (crypt_iv_tcw_whitening)
            le = struct.pack("<Q", s & MASK64)
            buf = bytearray(xor(whitening[:8], le) + xor(whitening[8:], le))
            for i in range(4):
                buf[4 * i:4 * i + 4] = struct.pack("<I", crc32_le_seed0(bytes(buf[4 * i:4 * i + 4])))
            buf[0:4] = xor(buf[0:4], buf[12:16])
            buf[4:8] = xor(buf[4:8], buf[8:12])
            ct = xor(ct, bytes(buf[:8]) * (sector_size // 8))
        out += ct
    return bytes(out)


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    only = re.compile(sys.argv[2]) if len(sys.argv) > 2 else None
    pt_all = open(os.path.join(d, "plaintext.bin"), "rb").read()
    rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(d, "manifest.tsv"))]
    hdr, rows = rows[0], rows[1:]
    ok = bad = skip = 0
    for r in rows:
        c = dict(zip(hdr, r))
        if only and not only.search(c["case"]):
            continue
        key = b"" if c["key_hex"] == "-" else bytes.fromhex(c["key_hex"])
        size = int(c["size"])
        opts = [] if c["opts"] == "-" else c["opts"].split()
        ct = open(os.path.join(d, c["ct_file"]), "rb").read()
        assert hashlib.sha256(ct).hexdigest() == c["ct_sha256"], c["case"]
        try:
            mine = encrypt_case(c["cipher"], key, int(c["iv_offset"]), int(c["sector_size"]), opts,
                                pt_all[:size])
        except NotImplementedError as e:
            print("SKIP     %-48s (%s)" % (c["case"], e))
            skip += 1
            continue
        if mine == ct:
            print("MATCH    %s" % c["case"])
            ok += 1
        else:
            first = next(i for i in range(size) if mine[i] != ct[i])
            print("MISMATCH %-48s first differing byte %d (unit %d)" % (c["case"], first, first // int(c["sector_size"])))
            bad += 1
    print("summary: %d match, %d mismatch, %d skipped" % (ok, bad, skip))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
