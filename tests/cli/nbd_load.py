#!/usr/bin/env python3
"""A load test for the NBD server (tests/cli/nbd_load.sh):

  nbd_load.py MODEL OPS INFLIGHT ADDRESS...

one connection per ADDRESS (a Unix socket path or HOST:PORT), all at once,
each keeping up to INFLIGHT requests in flight: OPS random reads, writes and
flushes per connection, at unaligned offsets and lengths, every read checked
against the file MODEL (the device's content before; updated to the content
after). Connection i writes only in its own slice of the device, and the
slices meet inside sectors, so neighbours' read-modify-writes of one sector
race. A range is never written while another request on it is in flight,
so each reply has one right answer.
"""
import os
import random
import sys
import threading

from nbd_client import REQ_MAGIC, connect, recv_exact
import struct

CMD_READ, CMD_WRITE, CMD_DISC, CMD_FLUSH = 0, 1, 2, 3


class Conn:
    def __init__(self, address, model, lo, hi, ops, inflight, seed):
        self.s, size = connect(address)
        assert size == len(model), (size, len(model))
        self.model, self.lo, self.hi = model, lo, hi
        self.ops, self.inflight = ops, inflight
        self.rnd = random.Random(seed)
        self.cv = threading.Condition()
        self.pending = {}  # cookie -> (cmd, off, n, expected bytes)
        self.errors = []
        self.counts = {CMD_READ: 0, CMD_WRITE: 0, CMD_FLUSH: 0}

    def busy(self, off, n):
        return any(off < o + m and o < off + n for _, o, m, _ in self.pending.values())

    def send(self):
        for cookie in range(1, self.ops + 1):
            r = self.rnd.random()
            cmd = CMD_FLUSH if r < 0.03 else CMD_WRITE if r < 0.5 else CMD_READ
            n = self.rnd.choice([1, 511, 512, 4096, 4097]) if self.rnd.random() < 0.3 else self.rnd.randint(1, 65536)
            if self.rnd.random() < 0.02:
                n = 256 << 10  # now and then a large one
            n = min(n, self.hi - self.lo)
            with self.cv:
                while True:
                    off = self.rnd.randint(self.lo, self.hi - n)
                    if len(self.pending) < self.inflight and (cmd == CMD_FLUSH or not self.busy(off, n)):
                        break
                    self.cv.wait(0.05)
                if cmd == CMD_FLUSH:
                    self.pending[cookie] = (cmd, 0, 0, None)
                    payload = b""
                    off = n = 0
                elif cmd == CMD_WRITE:
                    payload = os.urandom(n)
                    self.model[off:off + n] = payload
                    self.pending[cookie] = (cmd, off, n, None)
                else:
                    payload = b""
                    self.pending[cookie] = (cmd, off, n, bytes(self.model[off:off + n]))
            self.s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, cmd, cookie, off, n) + payload)
        with self.cv:
            while self.pending:
                self.cv.wait(0.05)
        self.s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, CMD_DISC, 0, 0, 0))

    def receive(self):
        try:
            for _ in range(self.ops):
                magic, err, cookie = struct.unpack(">IIQ", recv_exact(self.s, 16))
                if magic != 0x67446698:
                    raise RuntimeError("reply magic %x" % magic)
                with self.cv:
                    cmd, off, n, want = self.pending[cookie]
                data = recv_exact(self.s, n) if cmd == CMD_READ and err == 0 else b""
                if err:
                    self.errors.append("cookie %d (cmd %d, %d+%d): error %d" % (cookie, cmd, off, n, err))
                elif cmd == CMD_READ and data != want:
                    self.errors.append("read %d+%d differs from the model" % (off, n))
                with self.cv:
                    del self.pending[cookie]
                    self.counts[cmd] += 1
                    self.cv.notify_all()
        except Exception as e:  # reported by the main thread
            self.errors.append("receiver: %r" % e)
            with self.cv:
                self.pending.clear()
                self.cv.notify_all()


def main():
    model_path, ops, inflight, addresses = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    model = bytearray(open(model_path, "rb").read())
    k = len(addresses)
    # Slices of odd sizes: boundaries fall inside sectors.
    cuts = [0] + [len(model) * i // k + 777 * i for i in range(1, k)] + [len(model)]
    conns = [Conn(a, model, cuts[i], cuts[i + 1], ops, inflight, 1000 + i) for i, a in enumerate(addresses)]
    threads = []
    for c in conns:
        threads += [threading.Thread(target=c.send), threading.Thread(target=c.receive)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    errors = [e for c in conns for e in c.errors]
    total = {cmd: sum(c.counts[cmd] for c in conns) for cmd in (CMD_READ, CMD_WRITE, CMD_FLUSH)}
    print("load: %d connections, %d reads, %d writes, %d flushes, %d errors" %
          (k, total[CMD_READ], total[CMD_WRITE], total[CMD_FLUSH], len(errors)))
    if errors:
        sys.exit("\n".join(errors[:10]))
    open(model_path, "wb").write(model)


if __name__ == "__main__":
    main()
