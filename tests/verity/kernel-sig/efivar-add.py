#!/usr/bin/env python3
"""efivar-add.py VARS_IN VARS_OUT NAME GUID ATTRS DATA_FILE

Appends one UEFI variable to an OVMF variable store image (OVMF_VARS*.fd),
the way the firmware itself stores it, so that a variable Linux could never
create (shim's MokList must be non-volatile + boot-service-only, and
SetVariable() after ExitBootServices requires the runtime attribute) is there
when the firmware starts. Used by make-kernel-accept-golden.sh only.

Layout (EDK2 MdeModulePkg/Include/Guid/VariableFormat.h): a firmware volume
header, then VARIABLE_STORE_HEADER (the authenticated-variable GUID, size,
format 0x5A, state 0xFE), then 4-byte aligned AUTHENTICATED_VARIABLE_HEADER
records (StartId 0x55AA, State, Attributes, MonotonicCount, TimeStamp,
PubKeyIndex, NameSize, DataSize, VendorGuid), each followed by its UTF-16
name and data; free space is 0xFF. Refuses anything else.
"""
import struct
import sys
import uuid

AUTH_VAR_STORE = uuid.UUID("aaf32c78-947b-439a-a180-2e144ec37792")
VAR_ADDED = 0x3F  # State: all bits but VAR_ADDED's cleared from 0xFF
HDR = 60          # sizeof(AUTHENTICATED_VARIABLE_HEADER)


def fail(msg):
    sys.exit("efivar-add.py: " + msg)


def main():
    if len(sys.argv) != 7:
        fail("usage: VARS_IN VARS_OUT NAME GUID ATTRS DATA_FILE")
    src, dst, name, guid, attrs, data_file = sys.argv[1:]
    img = bytearray(open(src, "rb").read())
    data = open(data_file, "rb").read()
    if img[40:44] != b"_FVH":
        fail("not a firmware volume")
    (hlen,) = struct.unpack_from("<H", img, 48)
    vs = hlen
    if uuid.UUID(bytes_le=bytes(img[vs:vs + 16])) != AUTH_VAR_STORE:
        fail("not an authenticated variable store")
    size, fmt, state = struct.unpack_from("<IBB", img, vs + 16)
    if fmt != 0x5A or state != 0xFE:
        fail("variable store not formatted/healthy")
    end = vs + size
    wname = (name + "\0").encode("utf-16le")
    vguid = uuid.UUID(guid)
    p = vs + 28
    while struct.unpack_from("<H", img, p)[0] == 0x55AA:
        st, at = struct.unpack_from("<BxI", img, p + 2)
        ns, ds = struct.unpack_from("<II", img, p + 36)
        if (st == VAR_ADDED and img[p + 44:p + 60] == vguid.bytes_le
                and img[p + HDR:p + HDR + ns] == wname):
            fail(name + " already in the store")
        p = (p + HDR + ns + ds + 3) & ~3
    rec = struct.pack("<HBBIQ16sIII", 0x55AA, VAR_ADDED, 0, int(attrs, 0), 0,
                      bytes(16), 0, len(wname), len(data)) + vguid.bytes_le + wname + data
    if p + len(rec) > end or any(b != 0xFF for b in img[p:p + len(rec)]):
        fail("no free space at the end of the store")
    img[p:p + len(rec)] = rec
    open(dst, "wb").write(img)


main()
