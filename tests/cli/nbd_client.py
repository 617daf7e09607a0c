#!/usr/bin/env python3
"""A minimal NBD client for tests/cli/nbd.sh: what the real clients never do.

  nbd_client.py SOCKET rmw MODEL SEED COUNT   unaligned writes and reads, many in
                                              flight, checked against the file MODEL
                                              (updated to match)
  nbd_client.py SOCKET garbage                a broken handshake
  nbd_client.py SOCKET oversize               requests past the limits: EINVAL/ENOSPC
  nbd_client.py SOCKET idle N LIMIT           N connections silent after the greeting; prints
                                              "held" once all are greeted, and fails unless
                                              the server closes every one within LIMIT s
  nbd_client.py SOCKET stall N LIMIT          N reads of 4 MiB whose replies are never read;
                                              prints "sent", and fails unless the server drops
                                              the connection within LIMIT s
"""
import os
import random
import select
import socket
import struct
import sys
import time

OPT_MAGIC = 0x49484156454F5054
REQ_MAGIC = 0x25609513


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("server closed the connection")
        b += c
    return b


def connect(path):
    """A Unix socket PATH, or HOST:PORT for TCP."""
    if path.startswith("/"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
    else:
        host, port = path.rsplit(":", 1)
        s = socket.create_connection((host, int(port)))
    hello = recv_exact(s, 18)
    assert hello[:16] == b"NBDMAGICIHAVEOPT", hello
    s.sendall(struct.pack(">I", 3))  # fixed newstyle, no zeroes
    # NBD_OPT_GO for the default export, no info requests
    s.sendall(struct.pack(">QII", OPT_MAGIC, 7, 6) + struct.pack(">IH", 0, 0))
    size = None
    while True:
        magic, opt, rtype, length = struct.unpack(">QIII", recv_exact(s, 20))
        data = recv_exact(s, length)
        if rtype == 3 and struct.unpack(">H", data[:2])[0] == 0:
            size = struct.unpack(">Q", data[2:10])[0]
        if rtype == 1:
            return s, size
        if rtype & 0x80000000:
            raise RuntimeError("GO refused: %x" % rtype)


def request(s, typ, cookie, off, length, payload=b"", flags=0):
    s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, flags, typ, cookie, off, length) + payload)


def reply(s, lengths):
    magic, err, cookie = struct.unpack(">IIQ", recv_exact(s, 16))
    assert magic == 0x67446698, hex(magic)
    data = recv_exact(s, lengths.pop(cookie)) if err == 0 else b""
    return cookie, err, data


def rmw(path, model_path, seed, count):
    rnd = random.Random(seed)
    s, size = connect(path)
    model = bytearray(open(model_path, "rb").read())
    assert size == len(model), (size, len(model))
    for _ in range(count // 32):
        # 32 writes in flight to disjoint ranges, then 32 reads of anywhere
        lengths, ranges, cookie = {}, [], 0
        while len(ranges) < 32:
            n = rnd.randint(1, 20000)
            off = rnd.randint(0, size - n)
            if any(off < e and b < off + n for b, e in ranges):
                continue
            ranges.append((off, off + n))
            data = os.urandom(n)
            model[off:off + n] = data
            cookie += 1
            lengths[cookie] = 0
            request(s, 1, cookie, off, n, data)
        while lengths:
            c, err, _ = reply(s, lengths)
            assert err == 0, "write %d failed: %d" % (c, err)
        want = {}
        for _ in range(32):
            n = rnd.randint(1, 20000)
            off = rnd.randint(0, size - n)
            cookie += 1
            lengths[cookie] = n
            want[cookie] = bytes(model[off:off + n])
            request(s, 0, cookie, off, n)
        while lengths:
            c, err, data = reply(s, lengths)
            assert err == 0 and data == want[c], "read %d differs" % c
    request(s, 3, 9999, 0, 0)  # flush
    assert reply(s, {9999: 0})[1] == 0
    request(s, 2, 0, 0, 0)  # disconnect
    open(model_path, "wb").write(model)


def garbage(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    recv_exact(s, 18)
    s.sendall(b"\x00\x00\x00\x03" + os.urandom(4000))
    try:
        while s.recv(4096):
            pass
    except ConnectionResetError:
        pass


def oversize(path):
    s, size = connect(path)
    request(s, 0, 1, 0, 64 << 20)                   # read over the maximum
    assert reply(s, {1: 0})[1] == 22
    request(s, 1, 2, 0, 5 << 20, b"\xaa" * (5 << 20))  # write over the maximum: payload dropped
    assert reply(s, {2: 0})[1] == 22
    request(s, 0, 3, size - 100, 200)                # past the end
    assert reply(s, {3: 0})[1] == 22
    request(s, 0, 4, 2**64 - 512, 1024)              # offset + length overflows
    assert reply(s, {4: 0})[1] == 22
    request(s, 1, 5, size, 512, b"\0" * 512)         # write past the end
    assert reply(s, {5: 0})[1] == 28
    request(s, 77, 6, 0, 0)                          # unknown command
    assert reply(s, {6: 0})[1] == 22
    request(s, 0, 7, 0, 4096)                        # still in step
    assert reply(s, {7: 4096})[1] == 0
    s.sendall(b"\xde\xad\xbe\xef" * 7)               # bad magic: the server hangs up
    assert s.recv(1) == b""


def wait_closed(conns, limit):
    """Waits, reading nothing, until the server has closed every socket (POLLRDHUP)."""
    start = time.monotonic()
    p = select.poll()
    for c in conns:
        p.register(c, select.POLLRDHUP)
    left = {c.fileno() for c in conns}
    while left:
        remaining = limit - (time.monotonic() - start)
        if remaining <= 0:
            sys.exit("%d of %d connections still open after %d s" % (len(left), len(conns), limit))
        for fd, ev in p.poll(remaining * 1000):
            if ev & (select.POLLRDHUP | select.POLLHUP | select.POLLERR):
                left.discard(fd)
                p.unregister(fd)
    print("closed after %.1f s" % (time.monotonic() - start), flush=True)


def idle(path, n, limit):
    conns = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        conns.append(s)
    for s in conns:
        assert recv_exact(s, 18)[:16] == b"NBDMAGICIHAVEOPT"
    print("held", flush=True)
    wait_closed(conns, limit)


def stall(path, n, limit):
    s, size = connect(path)
    for i in range(n):
        request(s, 0, i, (i * (4 << 20)) % (size - (4 << 20) + 1), 4 << 20)
    print("sent", flush=True)
    wait_closed([s], limit)


if __name__ == "__main__":
    sock, mode = sys.argv[1], sys.argv[2]
    if mode == "rmw":
        rmw(sock, sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif mode == "garbage":
        garbage(sock)
    elif mode == "oversize":
        oversize(sock)
    elif mode == "idle":
        idle(sock, int(sys.argv[3]), float(sys.argv[4]))
    elif mode == "stall":
        stall(sock, int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit("unknown mode " + mode)
