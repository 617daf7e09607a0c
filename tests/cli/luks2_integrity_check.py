"""Independent check of a LUKS2 --integrity container's first blocks: reads
the dm-integrity superblock at the segment offset, finds each block's data
and tag as the kernel lays them out (dm-integrity.rst; get_data_sector,
get_metadata_sector_and_offset), and opens them with python3-cryptography
under a given volume key, as dm-crypt's crypt_convert_block_aead does
(AAD = le64 sector || IV; authenc: HMAC over AAD || ciphertext; random IVs
stored after the auth tag). Prints nothing and exits 0 when every checked
block decrypts to PLAIN's bytes with a valid tag. With BLOCKS 0 it prints
the dm-integrity superblock's sector, the sectors of superblock and journal
and the byte offset of block 0's data ("START INITIAL DATA"), and checks
nothing.

usage: luks2_integrity_check.py IMAGE VOLUME_KEY_FILE PLAIN BLOCKS"""
import hashlib
import hmac
import json
import struct
import sys

img, vkf, plainf, nblocks = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
vk = open(vkf, "rb").read() if nblocks else b""
plain = open(plainf, "rb").read() if nblocks else b""
f = open(img, "rb")
hdr = f.read(4096)
assert hdr[:6] == b"LUKS\xba\xbe", "no LUKS2 header"
hsize = struct.unpack(">Q", hdr[8:16])[0]
f.seek(4096)
meta = json.loads(f.read(hsize - 4096).split(b"\0", 1)[0])
seg = meta["segments"]["0"]
start = int(seg["offset"]) // 512
S = seg["sector_size"]
enc, integ = seg["encryption"], seg["integrity"]["type"]

f.seek(start * 512)
sb = f.read(64)
assert sb[:8] == b"integrt\0", "no dm-integrity superblock"
_, ver, l2i, tag, sections, provided, flags, l2spb = struct.unpack("<8sBbHIQIB", sb[:29])
spb = 1 << l2spb
assert spb * 512 == S, "block size is not the sector size"
entry = (8 + 8 * spb + tag + 7) // 8 * 8
sec_entries = 8 * (504 // entry)
sec_sectors = sec_entries * spb + 8
initial = 8 + sec_sectors * sections
pad = 4096 if flags & 8 else 131072
mrun = (tag * ((1 << l2i) >> l2spb) + pad - 1) // pad * pad // 512
if nblocks == 0:  # "START_SECTOR SECTORS DATA": superblock + journal, block 0's data byte
    print(start, initial, 512 * (start + initial + mrun))
    sys.exit(0)
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes  # noqa: E402
from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # noqa: E402

assert not meta["config"].get("requirements", {}).get("mandatory"), "requirements left"
assert len(meta["segments"]) == 1, "more than one segment"

for b in range(nblocks):
    n = b * spb  # the logical sector, 512-byte units
    area, off = n >> l2i, n & ((1 << l2i) - 1)
    f.seek(512 * (start + initial + area * (1 << l2i) + (area + 1) * mrun + off))
    c = f.read(S)
    f.seek(512 * (start + initial + area * ((1 << l2i) + mrun)) + (off >> l2spb) * tag)
    t = f.read(tag)
    want = plain[b * S:(b + 1) * S]
    le = struct.pack("<Q", n)
    if enc == "aes-gcm-random" and integ == "aead":
        auth, iv = t[:16], t[16:28]
        got = AESGCM(vk).decrypt(iv, c + auth, le + iv)
    elif enc == "aes-xts-plain64" and integ == "hmac(sha256)":
        ek, mk = vk[:-32], vk[-32:]
        iv = le + bytes(8)
        assert hmac.compare_digest(hmac.new(mk, le + iv + c, hashlib.sha256).digest(), t[:32]), f"block {b}: bad HMAC"
        d = Cipher(algorithms.AES(ek), modes.XTS(iv)).decryptor()
        got = d.update(c) + d.finalize()
    else:
        sys.exit(f"no check for {enc} / {integ}")
    assert got == want, f"block {b}: wrong plaintext"
