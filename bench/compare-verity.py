#!/usr/bin/env python3
"""Side-by-side timing of blkcrypt's verity engines against the peer tools, in one run:

  veritysetup format        vs  blkcrypt verity format   (default threads, and --threads 1)
  veritysetup verify        vs  blkcrypt verity verify
  fsverity digest           vs  blkcrypt fsverity digest

on the same file of random data (page cache warm: the file is read once first).
Each command runs REPEAT times; the best wall time counts. Peak RSS comes from
wait4(). Both tools must give the same root hash / digest, or the script fails.

Environment: SIZE_MIB (default 1024), REPEAT (default 3), BLKCRYPT (default
build/cli/blkcrypt), WORKDIR (default a temporary directory).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZE_MIB = int(os.environ.get("SIZE_MIB", "1024"))
REPEAT = int(os.environ.get("REPEAT", "3"))
BLKCRYPT = os.environ.get("BLKCRYPT", os.path.join(ROOT, "build/cli/blkcrypt"))
SALT = "11" * 32
UUID = "00000000-1111-4222-8333-444444444444"


def run(cmd):
    """Best wall time over REPEAT runs and the last stdout."""
    best, out = None, ""
    for _ in range(REPEAT):
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        stdout, stderr = proc.communicate()
        elapsed = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{stderr.decode()}")
        best = elapsed if best is None else min(best, elapsed)
        out = stdout.decode()
    return best, out


def peak_rss_kib(cmd):
    # Through GNU time: a child of this (large) Python process would inherit
    # its peak RSS across fork+exec.
    proc = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, check=True)
    return int(proc.stderr.decode().split()[-1])


def field(text, name):
    for line in text.splitlines():
        if line.startswith(name):
            return line.split()[-1]
    return None


def main():
    for tool, package in (("veritysetup", "cryptsetup-bin"), ("fsverity", "fsverity"), ("/usr/bin/time", "time")):
        if not shutil.which(tool):
            sys.exit(f"{tool} is not installed: apt-get install {package} (scripts/install-deps.sh does)")
    if not os.access(BLKCRYPT, os.X_OK):
        sys.exit(f"no {BLKCRYPT}: build first (scripts/build.sh) or set BLKCRYPT")
    work = os.environ.get("WORKDIR") or tempfile.mkdtemp(prefix="blkcrypt-cmp-")
    data = os.path.join(work, "data.img")
    try:
        with open(data, "wb") as f:
            for _ in range(SIZE_MIB):
                f.write(os.urandom(1 << 20))
        with open(data, "rb") as f:  # warm the page cache
            while f.read(1 << 24):
                pass
        print(f"# {SIZE_MIB} MiB random data, best of {REPEAT}; {os.cpu_count()} CPUs; "
              f"{open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()}; "
              f"load {open('/proc/loadavg').read().split()[0]}")
        rows = []
        h1, h2 = os.path.join(work, "h.vs"), os.path.join(work, "h.bc")
        fmt = ["--salt", SALT, "--uuid", UUID]
        t_vs, out_vs = run(["veritysetup", "format", data, h1] + fmt)
        t_bc, out_bc = run([BLKCRYPT, "verity", "format", data, h2] + fmt)
        t_bc1, out_bc1 = run([BLKCRYPT, "verity", "format", "--threads", "1", data, h2] + fmt)
        root = field(out_vs, "Root hash")
        if field(out_bc, "Root hash") != root or field(out_bc1, "Root hash") != root:
            sys.exit("root hashes differ between veritysetup and blkcrypt")
        rss_vs = peak_rss_kib(["veritysetup", "format", data, h1] + fmt)
        rss_bc = peak_rss_kib([BLKCRYPT, "verity", "format", data, h2] + fmt)
        rows.append(("verity format (sha256, 4K, salt 32)", t_vs, t_bc, rss_vs, rss_bc))
        rows.append(("verity format --threads 1", t_vs, t_bc1, rss_vs, None))
        t_vv, _ = run(["veritysetup", "verify", data, h1, root])
        t_bv, _ = run([BLKCRYPT, "verity", "verify", data, h2, root])
        rows.append(("verity verify", t_vv, t_bv, None, peak_rss_kib([BLKCRYPT, "verity", "verify", data, h2, root])))
        t_fs, out_fs = run(["fsverity", "digest", data])
        t_bf, out_bf = run([BLKCRYPT, "fsverity", "digest", data])
        if out_fs.split()[0] != out_bf.split()[0]:
            sys.exit(f"fs-verity digests differ: {out_fs} vs {out_bf}")
        rss_fs = peak_rss_kib(["fsverity", "digest", data])
        rss_bf = peak_rss_kib([BLKCRYPT, "fsverity", "digest", data])
        rows.append(("fsverity digest (sha256, 4K)", t_fs, t_bf, rss_fs, rss_bf))
        t_bf1, _ = run([BLKCRYPT, "fsverity", "digest", "--threads", "1", data])
        rows.append(("fsverity digest --threads 1", t_fs, t_bf1, rss_fs, None))

        mib = SIZE_MIB
        print(f"{'operation':40} {'peer s':>8} {'blkcrypt s':>10} {'peer MiB/s':>10} {'ours MiB/s':>10} {'speedup':>8} {'peer RSS':>9} {'our RSS':>8}")
        for name, peer, ours, rss_p, rss_o in rows:
            rp = f"{rss_p // 1024} MiB" if rss_p else "-"
            ro = f"{rss_o // 1024} MiB" if rss_o else "-"
            print(f"{name:40} {peer:8.3f} {ours:10.3f} {mib / peer:10.0f} {mib / ours:10.0f} {peer / ours:7.2f}x {rp:>9} {ro:>8}")
    finally:
        if not os.environ.get("WORKDIR"):
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
