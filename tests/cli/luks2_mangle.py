#!/usr/bin/env python3
"""Rewrites the JSON metadata of both LUKS2 header copies of an image, as
cryptsetup's tests/luks2-reencryption-mangle-test does with its own tools:
the checksums are recomputed, so only the metadata's meaning is wrong.

usage: luks2_mangle.py IMAGE CASE
CASE names a change of the reencryption metadata (see CASES below)."""
import hashlib
import json
import struct
import sys


def reencrypt_keyslot(md):
    return next(k for k, v in md["keyslots"].items() if v["type"] == "reencrypt")


def reencrypt_digest(md):
    ks = reencrypt_keyslot(md)
    return next(k for k, v in md["digests"].items() if v["keyslots"] == [ks])


def set_direction(md):  # the digest no longer matches the keyslot
    md["keyslots"][reencrypt_keyslot(md)]["direction"] = "backward"


def bad_area_type(md):  # an area type cryptsetup does not know
    md["keyslots"][reencrypt_keyslot(md)]["area"]["type"] = "bogus"


def drop_digest(md):  # no verification digest: cryptsetup wants repair
    del md["digests"][reencrypt_digest(md)]


def drop_requirement(md):  # a reencrypt keyslot without the requirement
    del md["config"]["requirements"]


def key_size_2(md):  # the reencrypt keyslot's key_size must be 1
    md["keyslots"][reencrypt_keyslot(md)]["key_size"] = 2


def drop_backup_final(md):
    segs = md["segments"]
    k = next(k for k, v in segs.items() if "backup-final" in v.get("flags", []))
    del segs[k]
    for d in md["digests"].values():
        d["segments"] = [s for s in d["segments"] if s != k]


CASES = {f.__name__: f for f in (set_direction, bad_area_type, drop_digest, drop_requirement, key_size_2,
                                 drop_backup_final)}


def main():
    path, case = sys.argv[1], sys.argv[2]
    with open(path, "r+b") as f:
        hdr_size = struct.unpack(">Q", f.read(16)[8:16])[0]
        for off in (0, hdr_size):
            f.seek(off)
            area = bytearray(f.read(hdr_size))
            text = area[4096:].split(b"\0", 1)[0]
            md = json.loads(text)
            CASES[case](md)
            new = json.dumps(md, separators=(",", ":")).encode()
            area[4096:] = new + b"\0" * (hdr_size - 4096 - len(new))
            area[448:448 + 64] = b"\0" * 64
            area[448:448 + 32] = hashlib.sha256(bytes(area)).digest()
            f.seek(off)
            f.write(area)


if __name__ == "__main__":
    main()
