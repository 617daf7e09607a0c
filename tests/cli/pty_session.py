#!/usr/bin/env python3
"""A command on a new pty as its controlling terminal, for the CLI tests of
prompts and confirmations (what a pipe cannot show: echo off, /dev/tty).

As a module (the tests run `PYTHONPATH=tests/cli python3 - ...`):
    rc, out = run(argv, [(prompt, reply), ...], timeout=60)
        answers each prompt in turn, once it appears after the previous
        answer; out is all the command wrote to the terminal, decoded.
    s = Session(argv); s.read_until(text); s.send(line); s.echo_on();
    rc, out = s.drain()
        step by step, the slave kept open to look at its termios.

As a command:
    pty_session.py [--timeout S] [--answer PROMPT REPLY]... -- CMD [ARG]...
        prints what CMD wrote to the terminal and exits with its status
        (125 when CMD does not finish in time).
"""
import fcntl
import os
import pty
import select
import subprocess
import sys
import termios
import time

# A prompt that reads without echo turns it off after printing itself, and
# TCSAFLUSH discards what was typed before: a reply waits this long.
REPLY_DELAY = 0.3


class Timeout(Exception):
    pass


class Session:
    def __init__(self, argv):
        self.master, self.slave = pty.openpty()

        def child():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(argv, stdin=self.slave, stdout=self.slave, stderr=self.slave,
                                     preexec_fn=child, close_fds=True)

    def read_some(self, timeout):
        """Up to 4096 bytes; b"" after timeout seconds without output or at EOF."""
        r, _, _ = select.select([self.master], [], [], timeout)
        if not r:
            return b""
        try:
            return os.read(self.master, 4096)
        except OSError:  # EIO: every slave descriptor is closed
            return b""

    def read_until(self, text, timeout=20):
        buf, end = b"", time.time() + timeout
        while text.encode() not in buf:
            if time.time() > end:
                raise Timeout("timeout waiting for %r, got %r" % (text, buf))
            buf += self.read_some(0.2)
        return buf

    def send(self, line, delay=REPLY_DELAY):
        time.sleep(delay)
        os.write(self.master, line.encode() + b"\n")

    def echo_on(self):
        return bool(termios.tcgetattr(self.slave)[3] & termios.ECHO)

    def drain(self, timeout=60):
        """The exit status and the rest of the output. The slave stays open
        (for echo_on), so the master never sees EOF: read until the exit."""
        out, end = b"", time.time() + timeout
        while self.proc.poll() is None:
            if time.time() > end:
                self.proc.kill()
                raise Timeout("timeout waiting for exit, got %r" % out)
            out += self.read_some(0.2)
        while True:
            chunk = self.read_some(0.1)
            if not chunk:
                break
            out += chunk
        return self.proc.returncode, out

    def close(self):
        for fd in (self.master, self.slave):
            if fd is not None:
                os.close(fd)
        self.master = self.slave = None


def run(argv, answers, timeout=60):
    """argv to its end, each (prompt, reply) of answers written once prompt
    shows after the previous one; (exit status, output as text)."""
    s = Session(argv)
    os.close(s.slave)  # the master sees EOF once the command is gone
    s.slave = None
    pending, out, seen, end = list(answers), b"", 0, time.time() + timeout
    while True:
        if time.time() > end:
            s.proc.kill()
            s.proc.wait()
            s.close()
            raise Timeout("timeout: %r" % out)
        r, _, _ = select.select([s.master], [], [], 0.2)
        if r:
            chunk = s.read_some(0)
            if not chunk:
                break
            out += chunk
            if pending:
                at = out.find(pending[0][0].encode(), seen)
                if at >= 0:
                    seen = at + len(pending[0][0].encode())
                    s.send(pending.pop(0)[1])
        elif s.proc.poll() is not None:
            break
    s.proc.wait()
    s.close()
    return s.proc.returncode, out.decode(errors="replace")


def main(args):
    timeout, answers = 60.0, []
    while args and args[0] != "--":
        if args[0] == "--timeout" and len(args) >= 2:
            timeout, args = float(args[1]), args[2:]
        elif args[0] == "--answer" and len(args) >= 3:
            answers.append((args[1], args[2]))
            args = args[3:]
        else:
            sys.exit("usage: pty_session.py [--timeout S] [--answer PROMPT REPLY]... -- CMD [ARG]...")
    if len(args) < 2:
        sys.exit("usage: pty_session.py [--timeout S] [--answer PROMPT REPLY]... -- CMD [ARG]...")
    try:
        rc, out = run(args[1:], answers, timeout)
    except Timeout as e:
        sys.stderr.write("pty_session: %s\n" % e)
        return 125
    sys.stdout.write(out)
    return rc if rc >= 0 else 128 - rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
