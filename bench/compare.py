#!/usr/bin/env python3
"""Side-by-side comparison of blkcrypt with the peer tools, in one run, on the
same generated data (page cache warm), printing the ratio for each target:

  verity format (sha256, 4K, 32-byte salt)  vs veritysetup format   >= 4.5x on 2 cores (--threads 1: >= 2.8x)
  verity verify                             vs veritysetup verify   (reported)
  verity format --fec-device (2 roots)      vs veritysetup format --fec-device   >= 1.5x
  fsverity digest                           vs fsverity digest      >= 4.5x on 2 cores
  crypt encrypt aes-xts-plain64             vs qemu-img convert -O luks (aes-256-xts)  >= 3x
  dm-crypt engine, aes-xts-plain64, 4 KiB sectors, one core
                                            vs openssl speed -evp aes-256-xts (4 KiB)  >= 0.8x
  one-shot SHA-256 through the registry at 256 B, 4 KiB, 64 KiB
                                            vs the same provider called directly       >= 0.9x
  nbdcopy (4 connections) from crypt serve  vs qemu-nbd --image-opts driver=luks on the same data   >= 2x
                                            vs qemu-nbd serving the raw plaintext                    >= 1.0x
  luks test-passphrase                      vs cryptsetup open --test-passphrase, the same LUKS2
                                            keyslot (pbkdf2-sha256 1e6 iterations; argon2id 4 passes,
                                            512 MiB, 2 lanes)                        <= 1.05x the time
  luks encrypt / luks decrypt of a LUKS1 aes-xts-plain64 container
                                            vs crypt encrypt/decrypt with the same table  >= 0.9x
                                            vs qemu-img convert to/from driver=luks       >= 3x
                                            (decrypt also with the plaintext discarded)
  nbdcopy from luks serve (qemu-img's LUKS1 image)
                                            vs qemu-nbd --image-opts driver=luks                     >= 2x
                                            vs nbdkit --filter=luks file                             (reported)
                                            vs qemu-nbd serving the raw plaintext                    >= 1.0x
  random 4 KiB reads, 64 in flight (qemu-img bench), from luks serve
                                            vs qemu-nbd --image-opts driver=luks                     >= 1.5x
                                            vs nbdkit --filter=luks file                             (reported)
  tcrypt decrypt of a VeraCrypt aes-xts volume (tests/tcrypt/make_volume.py, PBKDF2-SHA512 500000)
                                            vs crypt decrypt with the same table           >= 0.9x
  bitlk decrypt of a BitLocker aes-xts-plain64 (128) volume made by tests/bitlk/make_image.py
                                            vs crypt decrypt with the same table    >= 0.9x
                                            (also through its clear key: the data path
                                            without the 2^20-round passphrase stretch)
  python (issue 26): the Python package's file object reading a LUKS2 aes-xts-plain64 image
  in 1 MiB reads (PYTHONPATH=BUILD/python)
                                            vs blkcrypt luks decrypt to /dev/null        >= 0.8x
  integrity (issue 24; LUKS2 images made by `luks format --integrity`, 2 cores; in /dev/shm when
  it exists, as openssl speed runs in memory):
  luks encrypt / luks decrypt, aes-gcm-random + aead
                                            vs openssl speed -evp aes-256-gcm (4 KiB), one core   >= 1.5x
  luks encrypt / luks decrypt, aes-xts-plain64 + hmac-sha256
                                            vs openssl aes-256-xts then hmac(sha256) chained (4 KiB),
                                               one core                                      >= 1.5x
  integrity read (crc32c, 512-byte blocks)  vs crypt decrypt aes-xts-plain64, the same size   >= 0.8x
  integrity format of a 16 GiB sparse file (default options)   < 10 s, < 512 MiB allocated
  images behind another NBD server (docs/remote.md), a LUKS2 container served by `nbdkit file` on a
  Unix socket against the same file opened locally:
  luks decrypt to a file                    vs the same on the local file                  >= 0.8x
    (reported beside it: both to /dev/null, and nbdcopy of the export to null:, the transport alone;
    then nbdkit's own CPU for the export, and the floor it sets on 2 CPUs for /dev/null and serve)
  nbdcopy from luks serve of the NBD URI    vs luks serve of the local file                >= 0.8x
    (reported beside it: the same chain with nbdkit's nbd plugin, which decrypts nothing, in the middle)
  peak RSS of every blkcrypt command                                                    < 64 MiB

  reencrypt (issue 25) of a 256 MiB LUKS2 aes-xts-plain64 container, in place, offline:
  reencrypt --resilience checksum / journal vs cryptsetup reencrypt --disable-locks
                                            --force-offline-reencrypt, the same resilience   >= 4x
                                            vs luks decrypt + luks encrypt of the same data  <= 1.3x the time

  small inputs (the fixed cost of a command; image builders call once per file):
  fsverity digest of one 4 KiB file         vs fsverity digest      <= 2x the time
  hash --alg sha256 of one 4 KiB file       vs openssl dgst -sha256 <= 1.5x the time
  verity verify of a one-block image        vs veritysetup verify   <= 2x the time
  the same for 1,000 files of 4 KiB in one invocation (fsverity, hash; veritysetup
  checks one image per invocation, so verity has no such row)   (reported)
  Each is the median of SMALL_RUNS runs (default 41), the tools run in turn.

--only SECTIONS (comma-separated: verity, fsverity, crypt, nbd, engine, luks, tcrypt, bitlk, integrity,
python, remote, reencrypt, small)
runs only those rows (nbd includes what crypt makes for it); default: all.

With --cold, only the cold-cache comparison runs: before each run the page
cache is dropped (sync; echo 3 > /proc/sys/vm/drop_caches: root only), and
cold `verity format` and `fsverity digest` stand beside cold `cat FILE`, the
same command warm, and the peers cold; target: cold <= 1.15x max(cold cat,
warm).

Each command runs REPEAT times and the best wall time counts; both tools must
produce the same root hash / digest. Environment: SIZE_MIB (default 1024),
REPEAT (default 3), BUILD (default build: cli/blkcrypt and bench/blkcrypt_bench),
WORKDIR (default a temporary directory). Installs missing peers with apt-get
(cryptsetup-bin, fsverity, qemu-utils, time).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZE_MIB = int(os.environ.get("SIZE_MIB", "1024"))
REPEAT = int(os.environ.get("REPEAT", "3"))
SMALL_RUNS = int(os.environ.get("SMALL_RUNS", "41"))
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
BLKCRYPT = os.path.join(BUILD, "cli/blkcrypt")
BENCH = os.path.join(BUILD, "bench/blkcrypt_bench")
SALT = "11" * 32
UUID = "00000000-1111-4222-8333-444444444444"
PEERS = {"veritysetup": "cryptsetup-bin", "fsverity": "fsverity", "qemu-img": "qemu-utils", "/usr/bin/time": "time",
         "qemu-nbd": "qemu-utils", "nbdcopy": "libnbd-bin", "nbdkit": "nbdkit"}


def ensure_peers():
    missing = [pkg for tool, pkg in PEERS.items() if not shutil.which(tool)]
    if missing:
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        print(f"# installing {' '.join(missing)}", file=sys.stderr)
        subprocess.run(sudo + ["apt-get", "install", "-y", "-qq", "--no-install-recommends"] + missing,
                       check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def read_through(path):
    """Puts path in the page cache (a cold run of ours leaves it uncached)."""
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def run(cmd, cold=False, keep_stdout=True, retry_on=None, settle=False, warm=None, repeat=None):
    """Best wall time over REPEAT runs (each after dropping the page cache if
    cold, after a sync if settle: no writeback left by the run before, after
    reading the file warm in if given), and the last stdout. A run failing
    with retry_on in its stderr is run again (a few times at most) instead of
    counted."""
    best, out = None, ""
    retries = 5
    for _ in range(repeat or REPEAT):
        if cold:
            drop_caches()
        elif settle:
            subprocess.run(["sync"], check=True)
        if warm:
            read_through(warm)
        start = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE if keep_stdout else subprocess.DEVNULL,
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        elapsed = time.perf_counter() - start
        while proc.returncode != 0 and retry_on and retry_on in proc.stderr and retries > 0:
            retries -= 1
            start = time.perf_counter()
            proc = subprocess.run(cmd, stdout=subprocess.PIPE if keep_stdout else subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
            elapsed = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr.decode()}")
        best = elapsed if best is None else min(best, elapsed)
        out = proc.stdout.decode() if keep_stdout else ""
    return best, out


def run_in_turn(cmds, **kw):
    """Best wall time of each command, the commands run in turn (A B C A B C
    ...) so that a drift of the machine (writeback of the run before, other
    load) weighs on each alike; run in blocks, the first one paid for it."""
    best = [None] * len(cmds)
    for _ in range(REPEAT):
        for i, cmd in enumerate(cmds):
            t, _ = run(cmd, repeat=1, **kw)
            best[i] = t if best[i] is None else min(best[i], t)
    return best


def peak_rss_mib(cmd):
    # Through GNU time: a child of this Python process would inherit its peak RSS.
    proc = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, check=True)
    return int(proc.stderr.decode().split()[-1]) / 1024


def field(text, name):
    for line in text.splitlines():
        if line.startswith(name):
            return line.split()[-1]
    return None


def google_bench(regex):
    out = subprocess.run([BENCH, f"--benchmark_filter={regex}", "--benchmark_format=json",
                          "--benchmark_min_time=0.5"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         check=True).stdout
    return {b["name"]: b for b in json.loads(out)["benchmarks"]}


def openssl_speed_xts_4k():
    out = subprocess.run(["openssl", "speed", "-evp", "aes-256-xts", "-bytes", "4096", "-seconds", "2"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True).stdout.decode()
    # last line: "AES-256-XTS  <kB/s for 4096 bytes>k"
    m = re.search(r"^aes-256-xts\s+([\d.]+)k\s*$", out, re.M | re.I)
    if not m:
        sys.exit("cannot parse openssl speed output:\n" + out)
    return float(m.group(1)) * 1000 / (1 << 20)  # MiB/s


def cold_comparison(work, data):
    """Cold-cache figures beside cold cat, the same command warm and the peers cold."""
    if os.geteuid() != 0:
        sys.exit("--cold drops the page cache: run as root")
    t_cat, _ = run(["cat", data], cold=True, keep_stdout=False)
    h = os.path.join(work, "h.bc")
    fmt = ["--salt", SALT, "--uuid", UUID]
    cases = [("verity format", [BLKCRYPT, "verity", "format", data, h] + fmt,
              ["veritysetup", "format", data, h] + fmt),
             ("fsverity digest", [BLKCRYPT, "fsverity", "digest", data], ["fsverity", "digest", data])]
    rows = []
    for name, ours, peer in cases:
        t_cold, out_cold = run(ours, cold=True)
        t_warm, out_warm = run(ours, warm=data)
        t_peer, out_peer = run(peer, cold=True)
        if out_cold != out_warm:
            sys.exit(f"{name}: cold and warm runs disagree")
        rows.append((name, t_cold, t_warm, t_peer))
    print(f"\ncold cat {data}: {t_cat:.3f} s ({SIZE_MIB / t_cat:.0f} MiB/s)")
    print(f"{'operation':18} {'cold':>8} {'warm':>8} {'peer cold':>10} {'cold/max(cat,warm)':>19} "
          f"{'target':>7}  met")
    for name, cold, warm, peer in rows:
        ratio = cold / max(t_cat, warm)
        print(f"{name:18} {cold:7.3f}s {warm:7.3f}s {peer:9.3f}s {ratio:18.2f}x {'<=1.15x':>7}  "
              f"{'yes' if ratio <= 1.15 else 'NO'}")


def cpu_seconds(pid):
    """User + system CPU seconds a running process (all its threads) has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_with_cpu(cmd, servers=()):
    """Best wall time of cmd over REPEAT runs, and the least CPU seconds one
    run cost: cmd's own (its rusage) plus what the running `servers` (pids)
    spent meanwhile; and the least the servers alone spent in one run."""
    best_t = best_cpu = best_servers = None
    for _ in range(REPEAT):
        before = [cpu_seconds(p) for p in servers]
        with tempfile.TemporaryFile() as err:
            start = time.perf_counter()
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)
            _, status, usage = os.wait4(proc.pid, 0)
            t = time.perf_counter() - start
            code = os.waitstatus_to_exitcode(status)
            if code != 0:
                err.seek(0)
                sys.exit(f"failed ({code}): {' '.join(cmd)}\n{err.read().decode()}")
        theirs = sum(cpu_seconds(p) - b for p, b in zip(servers, before))
        cpu = usage.ru_utime + usage.ru_stime + theirs
        best_t = t if best_t is None else min(best_t, t)
        best_cpu = cpu if best_cpu is None else min(best_cpu, cpu)
        best_servers = theirs if best_servers is None else min(best_servers, theirs)
    return best_t, best_cpu, best_servers


def nbdcopy_from(server, sock, client=None, cpu_of=None):
    """Best time of `nbdcopy` from the NBD server started by `server` on the
    Unix socket `sock` to null: (the transport and the server, no writes);
    or of another `client` command. With cpu_of (pids of other running
    servers), also the least CPU seconds a run cost the client, the server
    and those."""
    proc = subprocess.Popen(server, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        else:
            sys.exit(f"server did not start: {' '.join(server)}")
        cmd = client or ["nbdcopy", "--connections=4", f"nbd+unix:///?socket={sock}", "null:"]
        if cpu_of is not None:
            return run_with_cpu(cmd, [proc.pid] + list(cpu_of))[:2]
        best, _ = run(cmd, keep_stdout=False)
        return best
    finally:
        proc.terminate()
        proc.wait()
        if os.path.exists(sock):
            os.remove(sock)


def luks_comparison(work, data, rows, times, rss):
    """Unlocking against cryptsetup, and the data path against `crypt` with
    the same table and against qemu-img on the same LUKS1 container."""
    pw = os.path.join(work, "luks.pass")
    with open(pw, "wb") as f:
        f.write(b"compare.py passphrase")
    quiet = dict(check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    img = os.path.join(work, "unlock.luks")
    for name, kdf in (("pbkdf2-sha256 1e6", ["--pbkdf", "pbkdf2", "--hash", "sha256",
                                             "--pbkdf-force-iterations", "1000000"]),
                      ("argon2id t4 m512M p2", ["--pbkdf", "argon2id", "--pbkdf-force-iterations", "4",
                                                "--pbkdf-memory", str(512 * 1024), "--pbkdf-parallel", "2"])):
        with open(img, "wb") as f:
            f.truncate(32 << 20)
        subprocess.run(["cryptsetup", "luksFormat", "-q", "--type", "luks2"] + kdf + ["--key-file", pw, img], **quiet)
        t_cs, _ = run(["cryptsetup", "open", "--test-passphrase", "--key-file", pw, img])
        t_bc, _ = run([BLKCRYPT, "luks", "test-passphrase", "--key-file", pw, img])
        times.append(("luks test-passphrase " + name, t_cs, t_bc, 1.05))
        os.remove(img)

    # One LUKS1 container (QEMU 7.2 reads no LUKS2) with a known volume key
    # and a cheap keyslot: every tool writes the same ciphertext into it.
    vk = os.path.join(work, "luks.vk")
    with open(vk, "wb") as f:
        f.write(os.urandom(64))
    c = os.path.join(work, "c.luks")
    with open(c, "wb") as f:
        f.truncate(4 << 20)
    subprocess.run([BLKCRYPT, "luks", "format", "--type", "luks1", "-q", "--pbkdf-force-iterations", "1000",
                    "--volume-key-file", vk, "--key-file", pw, c], **quiet)
    payload = int(field(subprocess.run([BLKCRYPT, "luks", "dump", c], stdout=subprocess.PIPE, check=True)
                        .stdout.decode(), "Payload offset:"))
    with open(c, "r+b") as f:
        f.truncate(payload * 512 + (SIZE_MIB << 20))
    table = ["--cipher", "aes-xts-plain64", "--key-size", "512", "--key-file", vk, "--offset", str(payload)]
    secret = ["--object", f"secret,id=s0,file={pw}"]
    qopts = f"driver=luks,key-secret=s0,file.filename={c}"
    enc_l = [BLKCRYPT, "luks", "encrypt", "--key-file", pw, data, c]
    enc_c = [BLKCRYPT, "crypt", "encrypt", "--in-place"] + table + [data, c]
    enc_q = ["qemu-img", "convert", "-n"] + secret + ["-f", "raw", data, "--target-image-opts", qopts]
    # Each data run starts with no writeback pending (qemu-img flushes less than
    # we do: what it leaves dirty would slow the next command down).
    t_el, t_ec, t_eq = run_in_turn([enc_l, enc_c, enc_q], keep_stdout=False, settle=True)
    rss["luks encrypt"] = peak_rss_mib(enc_l)
    outs = {tool: os.path.join(work, f"luks.{tool}.out") for tool in ("luks", "crypt", "qemu")}
    dec_l = [BLKCRYPT, "luks", "decrypt", "--key-file", pw, c, outs["luks"]]
    dec_c = [BLKCRYPT, "crypt", "decrypt"] + table + [c, outs["crypt"]]
    dec_q = ["qemu-img", "convert"] + secret + ["--image-opts", qopts, "-O", "raw", outs["qemu"]]
    cmds = {"luks": dec_l, "crypt": dec_c, "qemu": dec_q}
    timed = dict(zip(cmds, run_in_turn(list(cmds.values()), keep_stdout=False, settle=True)))
    for tool, cmd in cmds.items():
        if subprocess.run(["cmp", "-s", data, outs[tool]]).returncode != 0:
            sys.exit(f"{' '.join(cmd)}: the plaintext differs")
        os.remove(outs[tool])
    rss["luks decrypt"] = peak_rss_mib(dec_l[:-1] + ["/dev/null"])
    # The same without the disk: the plaintext thrown away (/dev/null; qemu's
    # null-co driver), as a shared VM's disk bounds both tools above.
    t_dn, _ = run(dec_l[:-1] + ["/dev/null"], keep_stdout=False)
    t_qn, _ = run(["qemu-img", "convert", "-n"] + secret + ["--image-opts", qopts, "--target-image-opts",
                                                           f"driver=null-co,size={SIZE_MIB << 20}"], keep_stdout=False)
    rows.append(("luks encrypt / crypt encrypt", t_ec, t_el, 0.9))
    rows.append(("luks encrypt / qemu-img convert -n", t_eq, t_el, 3.0))
    rows.append(("luks decrypt / crypt decrypt", timed["crypt"], timed["luks"], 0.9))
    rows.append(("luks decrypt / qemu-img convert", timed["qemu"], timed["luks"], 3.0))
    rows.append(("  the same, plaintext discarded", t_qn, t_dn, 3.0))
    os.remove(c)


def openssl_speed_4k(args, label):
    """Single-core MiB/s of `openssl speed ARGS -bytes 4096`, from its result line."""
    out = subprocess.run(["openssl", "speed"] + args + ["-bytes", "4096", "-seconds", "2"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True).stdout.decode()
    m = re.search(r"^" + re.escape(label) + r"\s+([\d.]+)k\s*$", out, re.M | re.I)
    if not m:
        sys.exit("cannot parse openssl speed output:\n" + out)
    return float(m.group(1)) * 1000 / (1 << 20)


def integrity_comparison(work, data, rows, rss, notes):
    """AEAD and authenc LUKS2 containers against the primitives' single-core
    speed, standalone crc32c integrity against the plain dm-crypt engine, and
    the sparse 16 GiB format."""
    quiet = dict(check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    # openssl speed runs in memory; so do these images where a tmpfs exists,
    # or every row would time the disk's writeback (every command syncs).
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        work = tempfile.mkdtemp(prefix="blkcrypt-cmp-", dir="/dev/shm")
        shm_data = os.path.join(work, "data.img")
        shutil.copyfile(data, shm_data)
        data = shm_data
    pw = os.path.join(work, "integrity.pass")
    with open(pw, "wb") as f:
        f.write(b"compare.py passphrase")
    gcm = openssl_speed_4k(["-evp", "aes-256-gcm"], "aes-256-gcm")
    xts = openssl_speed_4k(["-evp", "aes-256-xts"], "aes-256-xts")
    hmac = openssl_speed_4k(["-hmac", "sha256"], "hmac(sha256)")
    chained = 1 / (1 / xts + 1 / hmac)
    c = os.path.join(work, "i.luks")
    out = os.path.join(work, "i.out")
    for label, opts, peer in (("aes-gcm-random", ["--cipher", "aes-gcm-random", "--integrity", "aead"], gcm),
                              ("xts-plain64+hmac-sha256", ["--cipher", "aes-xts-plain64", "--integrity",
                                                           "hmac-sha256"], chained)):
        with open(c, "wb") as f:  # room for the plaintext, its tags and the journal
            f.truncate((SIZE_MIB << 20) * 21 // 20 + (96 << 20))
        fmt = [BLKCRYPT, "luks", "format", "--type", "luks2", "-q", "--pbkdf", "pbkdf2",
               "--pbkdf-force-iterations", "1000", "--key-file", pw] + opts + [c]
        t0 = time.monotonic()
        subprocess.run(fmt, **quiet)
        notes.append(f"luks format --integrity {label}, {SIZE_MIB * 21 // 20 + 96} MiB file: "
                     f"{time.monotonic() - t0:.2f} s")
        enc = [BLKCRYPT, "luks", "encrypt", "--key-file", pw, data, c]
        dec = [BLKCRYPT, "luks", "decrypt", "--key-file", pw, "--size", str(SIZE_MIB * 2048), c, out]
        t_e, _ = run(enc, keep_stdout=False, settle=True)
        t_d, _ = run(dec, keep_stdout=False, settle=True)
        if subprocess.run(["cmp", "-s", data, out]).returncode != 0:
            sys.exit(f"{' '.join(dec)}: the plaintext differs")
        rss[f"luks decrypt {label}"] = peak_rss_mib(dec)
        os.remove(out)
        # openssl's single-core MiB/s as the time it would take for SIZE_MIB
        rows.append((f"luks encrypt {label} / openssl 1 core", SIZE_MIB / peer, t_e, 1.5))
        rows.append((f"luks decrypt {label} / openssl 1 core", SIZE_MIB / peer, t_d, 1.5))
        os.remove(c)

    # Standalone crc32c against the dm-crypt engine on the same bytes.
    img = os.path.join(work, "i.img")
    with open(img, "wb") as f:
        f.truncate((SIZE_MIB << 20) * 21 // 20 + (96 << 20))
    subprocess.run([BLKCRYPT, "integrity", "format", "-q", img], **quiet)
    subprocess.run([BLKCRYPT, "integrity", "write", data, img], **quiet)
    provided = int(field(subprocess.run([BLKCRYPT, "integrity", "dump", img], stdout=subprocess.PIPE, check=True)
                         .stdout.decode(), "provided_data_sectors")) * 512
    rd = [BLKCRYPT, "integrity", "read", img, out]  # the whole device: timed per SIZE_MIB below
    key = os.path.join(work, "i.key")
    with open(key, "wb") as f:
        f.write(os.urandom(64))
    cd = [BLKCRYPT, "crypt", "decrypt", "--cipher", "aes-xts-plain64", "--key-file", key, "--key-size", "512",
          data, out + ".crypt"]
    t_r, t_c = run_in_turn([rd, cd], keep_stdout=False, settle=True)
    if subprocess.run(["cmp", "-s", "-n", str(SIZE_MIB << 20), data, out]).returncode != 0:
        sys.exit(f"{' '.join(rd)}: the data differs")
    rss["integrity read"] = peak_rss_mib(rd)
    rows.append(("integrity read crc32c / crypt decrypt", t_c, t_r * (SIZE_MIB << 20) / provided, 0.8))
    for f in (img, out, out + ".crypt", key):
        os.remove(f)

    # The 16 GiB format without a wipe pass: tags of zeros, the data a hole.
    big = os.path.join(work, "i16.img")
    with open(big, "wb") as f:
        f.truncate(16 << 30)
    t0 = time.monotonic()
    subprocess.run([BLKCRYPT, "integrity", "format", "-q", big], **quiet)
    t_f = time.monotonic() - t0
    alloc = os.stat(big).st_blocks * 512 / (1 << 20)
    notes.append(f"integrity format 16 GiB sparse: {t_f:.2f} s (target < 10 s), {alloc:.0f} MiB allocated "
                 f"(target < 512 MiB): {'yes' if t_f < 10 and alloc < 512 else 'NO'}")
    os.remove(big)
    if work.startswith("/dev/shm/"):
        shutil.rmtree(work, ignore_errors=True)


def tcrypt_comparison(work, rows, rss):
    """A VeraCrypt volume from the test-side generator, decrypted by `tcrypt
    decrypt` (KDF search limited to sha512, as a user who knows it would) and
    by `crypt decrypt` with the table its header holds."""
    img = os.path.join(work, "vc.img")
    pw = os.path.join(work, "vc.pass")
    with open(pw, "w") as f:
        f.write("compare.py passphrase\n")
    sha = subprocess.run([sys.executable, os.path.join(ROOT, "tests/tcrypt/make_volume.py"), img,
                          "--size", str(SIZE_MIB << 20), "--password", "compare.py passphrase"],
                         stdout=subprocess.PIPE, check=True).stdout.decode().split()[-1]
    unlock = ["--passphrase-file", pw, "-h", "sha512"]
    dump = subprocess.run([BLKCRYPT, "tcrypt", "dump", "-q", "--dump-volume-key"] + unlock + [img],
                          stdout=subprocess.PIPE, check=True).stdout.decode()
    payload = int(field(dump, "Payload offset:"))
    hexkey = "".join(dump.split("MK dump:")[1].split())
    key = os.path.join(work, "vc.key")
    with open(key, "wb") as f:
        f.write(bytes.fromhex(hexkey))
    out, out2 = os.path.join(work, "vc.out"), os.path.join(work, "vc.out2")
    dec_t = [BLKCRYPT, "tcrypt", "decrypt"] + unlock + [img, out]
    dec_c = [BLKCRYPT, "crypt", "decrypt", "--cipher", "aes-xts-plain64", "--key-size", "512", "--key-file", key,
             "--offset", str(payload), "--skip", str(payload), "--size", str(SIZE_MIB * 2048), img, out2]
    t_t, _ = run(dec_t, keep_stdout=False, settle=True)
    t_c, _ = run(dec_c, keep_stdout=False, settle=True)
    got = subprocess.run(["sha256sum", out], stdout=subprocess.PIPE, check=True).stdout.decode().split()[0]
    if got != sha or subprocess.run(["cmp", "-s", out, out2]).returncode != 0:
        sys.exit("tcrypt decrypt: not the plaintext the generator encrypted")
    rss["tcrypt decrypt"] = peak_rss_mib(dec_t[:-1] + ["/dev/null"])
    rows.append(("tcrypt decrypt / crypt decrypt", t_c, t_t, 0.9))
    for f in (img, out, out2, key):
        os.remove(f)


def bitlk_comparison(work, rows, rss):
    """A BitLocker volume of SIZE_MIB written by the test generator, decrypted by
    `bitlk decrypt` (passphrase, its 2^20 SHA-256 stretch included; the headline),
    by `bitlk decrypt` through the volume's clear key (no stretch: the data path
    alone) and by `crypt decrypt` with its FVEK and the same cipher over the
    whole device."""
    img, plain, out = (os.path.join(work, n) for n in ("bitlk.img", "bitlk.plain", "bitlk.out"))
    # A clear key beside the password: --key-file picks the password.
    gen = subprocess.run([sys.executable, os.path.join(ROOT, "tests/bitlk/make_image.py"), "--size",
                          str(SIZE_MIB << 20), "--cipher", "xts-128", "--password", "compare.py", "--clear-key",
                          img, plain], stdout=subprocess.PIPE, check=True)
    key = os.path.join(work, "bitlk.key")
    with open(key, "wb") as f:
        f.write(bytes.fromhex(gen.stdout.decode().strip()))
    pw = os.path.join(work, "bitlk.pass")
    with open(pw, "w") as f:
        f.write("compare.py")
    dec_b = [BLKCRYPT, "bitlk", "decrypt", "--key-file", pw, img, out]
    dec_k = [BLKCRYPT, "bitlk", "decrypt", img, out]
    dec_c = [BLKCRYPT, "crypt", "decrypt", "--cipher", "aes-xts-plain64", "--key-size", "256", "--key-file", key,
             img, out]
    timed = {}
    for tool, cmd in (("bitlk", dec_b), ("clear", dec_k), ("crypt", dec_c)):
        timed[tool], _ = run(cmd, keep_stdout=False, settle=True)
        if tool != "crypt" and subprocess.run(["cmp", "-s", plain, out]).returncode != 0:
            sys.exit(f"bitlk decrypt ({tool}): the plaintext differs from the generator's")
        os.remove(out)
    rss["bitlk decrypt"] = peak_rss_mib(dec_b[:-1] + ["/dev/null"])
    rows.append(("bitlk decrypt / crypt decrypt", timed["crypt"], timed["bitlk"], 0.9))
    rows.append(("  the same through its clear key", timed["crypt"], timed["clear"], None))
    for f in (img, plain):
        os.remove(f)


def python_comparison(work, data, rows):
    """The Python package (ctypes over libblkcrypt-c) reading the plaintext of
    a LUKS2 image in 1 MiB reads, against the CLI's decrypt to /dev/null:
    the same unlock (a cheap keyslot), the same bytes."""
    pw = os.path.join(work, "py.pass")
    with open(pw, "wb") as f:
        f.write(b"compare.py python")
    img = os.path.join(work, "py.luks")
    with open(img, "wb") as f:
        f.truncate((SIZE_MIB + 16) << 20)
    quiet = dict(check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    subprocess.run([BLKCRYPT, "luks", "format", "--type", "luks2", "-q", "--pbkdf", "pbkdf2",
                    "--pbkdf-force-iterations", "1000", "--key-file", pw, img], **quiet)
    subprocess.run([BLKCRYPT, "luks", "encrypt", "--key-file", pw, data, img], **quiet)
    # Timed inside the interpreter, from blkcrypt.open() (registry set-up and
    # unlock included) to the last read: its start-up is not the file
    # object's (and is 0.1-0.2 s on a loaded machine, against a 0.3 s run).
    reader = ("import sys, time, blkcrypt\n"
              "t = time.perf_counter()\n"
              "with blkcrypt.open(sys.argv[1], key_file=sys.argv[2]) as f:\n"
              "    n = 0\n"
              "    while True:\n"
              "        b = f.read(1 << 20)\n"
              "        if not b: break\n"
              "        n += len(b)\n"
              "print(n, time.perf_counter() - t)\n")
    py = ["env", "PYTHONPATH=" + os.path.join(BUILD, "python"), sys.executable, "-c", reader, img, pw]
    cli = [BLKCRYPT, "luks", "decrypt", "--key-file", pw, img, "/dev/null"]
    t_cli = t_py = None
    for _ in range(REPEAT):  # in turn
        t, _ = run(cli, keep_stdout=False, repeat=1)
        t_cli = t if t_cli is None else min(t_cli, t)
        n, t = subprocess.run(py, stdout=subprocess.PIPE, check=True).stdout.decode().split()
        if int(n) != SIZE_MIB << 20:
            sys.exit(f"the Python reader read {n} bytes, not {SIZE_MIB << 20}")
        t_py = float(t) if t_py is None else min(t_py, float(t))
    rows.append(("python read 1 MiB / luks decrypt", t_cli, t_py, 0.8))
    os.remove(img)
REENC_MIB = 256


def reencrypt_comparison(work, reenc, rss, notes):
    """blkcrypt reencrypt against cryptsetup reencrypt (offline, as a plain
    user runs it on an image file) at the same resilience, and against
    luks decrypt + luks encrypt of the same data. Each run starts from the
    same container (copied in, synced, untimed); the tools run in turn."""
    pw = os.path.join(work, "reenc.pass")
    with open(pw, "wb") as f:
        f.write(b"compare.py passphrase")
    plain = os.path.join(work, "reenc.plain")
    with open(plain, "wb") as f:
        for _ in range(REENC_MIB):
            f.write(os.urandom(1 << 20))
    tpl, img, out = (os.path.join(work, n) for n in ("reenc.tpl", "reenc.img", "reenc.out"))
    with open(tpl, "wb") as f:
        f.truncate((16 + REENC_MIB) << 20)
    quiet = dict(check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    subprocess.run(["cryptsetup", "luksFormat", "-q", "--type", "luks2", "--pbkdf", "pbkdf2",
                    "--pbkdf-force-iterations", "1000", "--key-file", pw, tpl], **quiet)
    subprocess.run([BLKCRYPT, "luks", "encrypt", "--key-file", pw, plain, tpl], **quiet)

    def timed(cmds):
        """Best wall time of each list of commands (run one after the other)."""
        best = [None] * len(cmds)
        for _ in range(REPEAT):
            for i, seq in enumerate(cmds):
                shutil.copyfile(tpl, img)
                subprocess.run(["sync"], check=True)
                start = time.perf_counter()
                for cmd in seq:
                    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                          stdin=subprocess.DEVNULL)
                    if proc.returncode:
                        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr.decode()}")
                t = time.perf_counter() - start
                best[i] = t if best[i] is None else min(best[i], t)
        return best

    # The floor any in-place reencryption on this storage has: writing the
    # data once, durably, where it lies (the journal writes it twice).
    dd = ["dd", f"if={plain}", f"of={img}", "bs=4M", "conv=notrunc,fdatasync", "oflag=seek_bytes",
          f"seek={16 << 20}", "status=none"]
    t_dd = timed([[dd]])[0]
    dec_enc = [[BLKCRYPT, "luks", "decrypt", "--key-file", pw, img, out],
               [BLKCRYPT, "luks", "encrypt", "--key-file", pw, out, img]]
    t_de = None
    for mode in ("checksum", "journal"):
        ours = [BLKCRYPT, "reencrypt", "--key-file", pw, "--resilience", mode, img]
        cs = ["cryptsetup", "reencrypt", "-q", "--disable-locks", "--force-offline-reencrypt", "--key-file", pw,
              "--resilience", mode, img]
        if t_de is None:
            t_ours, t_cs, t_de = timed([[ours], [cs], dec_enc])
        else:
            t_ours, t_cs = timed([[ours], [cs]])
        shutil.copyfile(tpl, img)
        subprocess.run(ours, **quiet)
        subprocess.run([BLKCRYPT, "luks", "decrypt", "--key-file", pw, img, out], **quiet)
        if subprocess.run(["cmp", "-s", plain, out]).returncode != 0:
            sys.exit(f"reencrypt --resilience {mode}: the plaintext changed")
        shutil.copyfile(tpl, img)
        rss[f"reencrypt {mode}"] = peak_rss_mib(ours)
        writes = 2 if mode == "journal" else 1
        notes.append(f"  reencrypt {mode}: 4x cryptsetup is {t_cs / 4:.3f} s; writing the data durably "
                     f"{writes}x in place (dd conv=fdatasync) takes {writes * t_dd:.3f} s here")
        reenc.append((f"reencrypt {mode} / cryptsetup", t_cs, t_ours, 4.0, False))
        reenc.append((f"reencrypt {mode} / decrypt+encrypt", t_de, t_ours, 1.3, True))
    for f in (plain, tpl, img, out):
        os.remove(f)


def median_in_turn(cmds, runs):
    """Median wall time of each command over `runs` runs, the commands run in
    turn; each run's stdout is checked to be the first one's (a tool that
    prints something else once is wrong, not slow)."""
    times = [[] for _ in cmds]
    first = [None] * len(cmds)
    for _ in range(runs):
        for i, cmd in enumerate(cmds):
            start = time.perf_counter()
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
            times[i].append(time.perf_counter() - start)
            if proc.returncode != 0:
                sys.exit(f"failed ({proc.returncode}): {' '.join(cmd[:4])} ...\n{proc.stderr.decode()}")
            if first[i] is None:
                first[i] = proc.stdout.decode()
            elif proc.stdout.decode() != first[i]:
                sys.exit(f"{' '.join(cmd[:4])} ...: the output changed between runs")
    return [sorted(t)[len(t) // 2] for t in times], first


def small_comparison(work, small):
    """The fixed cost of a command: one 4 KiB file, and 1,000 of them in one
    invocation, for fsverity digest, hash and verity verify beside their
    peers. Rows: (name, peer seconds, ours seconds, target ratio or None)."""
    d = os.path.join(work, "small")
    os.makedirs(d, exist_ok=True)
    files = []
    for i in range(1000):
        files.append(os.path.join(d, f"f{i:04}"))
        with open(files[-1], "wb") as f:
            f.write(os.urandom(4096))
    one = files[:1]

    def digests(text, openssl=False):
        # blkcrypt hash: "HEX  FILE"; openssl dgst: "SHA2-256(FILE)= HEX";
        # fsverity digest (both tools): "sha256:HEX FILE".
        return [line.split("= ")[-1] if openssl else line.split()[0] for line in text.splitlines()]

    for name, ours, peer, target in (
            ("fsverity digest", [BLKCRYPT, "fsverity", "digest"], ["fsverity", "digest"], 2.0),
            ("hash sha256", [BLKCRYPT, "hash", "--alg", "sha256"], ["openssl", "dgst", "-sha256"], 1.5)):
        for label, args, runs, tgt in (("1 file of 4 KiB", one, SMALL_RUNS, target),
                                       ("1,000 files of 4 KiB, one call", files, max(3, SMALL_RUNS // 8), None)):
            (t_peer, t_ours), (o_peer, o_ours) = median_in_turn([peer + args, ours + args], runs)
            got = digests(o_ours)
            if got != digests(o_peer, openssl=peer[0] == "openssl") or len(got) != len(args):
                sys.exit(f"{name}: the digests differ from the peer's")
            small.append((f"{name}, {label}", t_peer, t_ours, tgt))

    # A one-block image: 4 KiB of data and its tree (one hash block).
    data, tree = os.path.join(d, "v.img"), os.path.join(d, "v.hash")
    with open(data, "wb") as f:
        f.write(os.urandom(4096))
    out = subprocess.run(["veritysetup", "format", data, tree, "--salt", SALT, "--uuid", UUID],
                         stdout=subprocess.PIPE, check=True).stdout.decode()
    root = field(out, "Root hash")
    (t_peer, t_ours), _ = median_in_turn([["veritysetup", "verify", data, tree, root],
                                          [BLKCRYPT, "verity", "verify", data, tree, root]], SMALL_RUNS)
    small.append(("verity verify, one-block image", t_peer, t_ours, 2.0))
    shutil.rmtree(d, ignore_errors=True)


# Random 4 KiB reads: qemu-img bench steps by a large odd multiple of 4 KiB,
# modulo the image size, so consecutive reads land far apart.
RANDOM_READS = 100000


def random_reads(sock):
    return ["qemu-img", "bench", "-f", "raw", "-c", str(RANDOM_READS), "-d", "64", "-s", "4096",
            "-S", str(4096 * 52429), f"nbd+unix:///?socket={sock}"]


def remote_comparison(work, data, rows, notes):
    """The NBD client (docs/remote.md): a LUKS2 container behind `nbdkit
    file` on a Unix socket against the same file opened locally, for luks
    decrypt (to a file, and to /dev/null) and for luks serve read by nbdcopy."""
    pw = os.path.join(work, "remote.pass")
    with open(pw, "wb") as f:
        f.write(b"compare.py passphrase")
    quiet = dict(check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    img = os.path.join(work, "remote.luks2")
    with open(img, "wb") as f:
        f.truncate((16 << 20) + (SIZE_MIB << 20))
    subprocess.run(["cryptsetup", "luksFormat", "-q", "--type", "luks2", "--pbkdf", "pbkdf2",
                    "--pbkdf-force-iterations", "1000", "--key-file", pw, img], **quiet)
    subprocess.run([BLKCRYPT, "luks", "encrypt", "--key-file", pw, data, img], **quiet)
    read_through(img)
    nsock = os.path.join(work, "remote-src.sock")
    nbdkit = subprocess.Popen(["nbdkit", "-f", "-U", nsock, "file", img], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if os.path.exists(nsock):
                break
            time.sleep(0.05)
        else:
            sys.exit("nbdkit did not start")
        uri = f"nbd+unix:///?socket={nsock}"
        # The same plaintext both ways first.
        outs = [os.path.join(work, "remote.local.out"), os.path.join(work, "remote.nbd.out")]
        for src, out in zip((img, uri), outs):
            subprocess.run([BLKCRYPT, "luks", "decrypt", "--key-file", pw, src, out], **quiet)
        if subprocess.run(["cmp", "-s", data, outs[0]]).returncode or subprocess.run(["cmp", "-s", data, outs[1]]).returncode:
            sys.exit("luks decrypt over NBD: the plaintext differs")
        for out in outs:
            os.remove(out)
        out = os.path.join(work, "remote.out")
        t_local, t_nbd = run_in_turn([[BLKCRYPT, "luks", "decrypt", "--key-file", pw, src, out]
                                      for src in (img, uri)], keep_stdout=False, settle=True)
        os.remove(out)
        t_local0, t_nbd0, t_copy = run_in_turn([[BLKCRYPT, "luks", "decrypt", "--key-file", pw, src, "/dev/null"]
                                                for src in (img, uri)] + [["nbdcopy", uri, "null:"]],
                                               keep_stdout=False)
        rows.append(("luks decrypt nbdkit file / local file", t_local, t_nbd, 0.8))
        # Without the disk the transport shows: nbdcopy of the same export
        # to null: (no decryption at all) bounds what any client gets.
        rows.append(("  the same, plaintext to /dev/null", t_local0, t_nbd0, None))
        rows.append(("  nbdcopy of the export to null:", t_local0, t_copy, None))
        sock = os.path.join(work, "remote.sock")
        serve = [BLKCRYPT, "luks", "serve", "--key-file", pw, "--read-only", "--socket", sock]
        t_sl, t_sn = nbdcopy_from(serve + [img], sock), nbdcopy_from(serve + [uri], sock)
        rows.append(("nbdcopy luks serve of NBD / of file", t_sl, t_sn, 0.8))
        # The same chain with a middle that decrypts nothing: nbdkit's own NBD
        # proxy (its nbd plugin) between nbdkit file and nbdcopy. What any
        # pass-through costs, against which serve's crypto is the difference.
        psock = os.path.join(work, "remote-proxy.sock")
        t_proxy = nbdcopy_from(["nbdkit", "-f", "-U", psock, "nbd", f"socket={nsock}"], psock)
        rows.append(("  nbdkit nbd proxy (no decryption) / serve of file", t_sl, t_proxy, None))
        # The floor on these machines' CPUs: a chain through nbdkit does all
        # the local chain does (its recv stands for the local pread, the same
        # copy) and all nbdkit does, the least of which is what it spends
        # handing the export to nbdcopy.
        _, _, nbdkit_cpu = run_with_cpu(["nbdcopy", uri, "null:"], [nbdkit.pid])
        _, dec_cpu, _ = run_with_cpu([BLKCRYPT, "luks", "decrypt", "--key-file", pw, img, "/dev/null"])
        _, serve_cpu = nbdcopy_from(serve + [img], sock, cpu_of=[])
        ncpu = os.cpu_count()
        notes.append(f"remote: nbdkit file spends at least {nbdkit_cpu:.2f} CPU-s handing the "
                     f"{SIZE_MIB} MiB export to nbdcopy; {ncpu} CPUs")
        for name, t_loc, cpu, t_rem in (("luks decrypt to /dev/null", t_local0, dec_cpu, t_nbd0),
                                        ("luks serve to nbdcopy", t_sl, serve_cpu, t_sn)):
            floor = (cpu + nbdkit_cpu) / ncpu
            notes.append(f"  {name}: the local run takes {t_loc:.3f} s and {cpu:.2f} CPU-s; through nbdkit "
                         f"at least ({cpu:.2f} + {nbdkit_cpu:.2f}) / {ncpu} = {floor:.3f} s, "
                         f"so at most {t_loc / max(t_loc, floor):.2f}x (measured {t_loc / t_rem:.2f}x)")
    finally:
        nbdkit.terminate()
        nbdkit.wait()
        os.remove(img)


def main():
    if "--help" in sys.argv[1:] or "-h" in sys.argv[1:]:
        print(__doc__)
        return
    cold = "--cold" in sys.argv[1:]
    sections = {"verity", "fsverity", "crypt", "nbd", "engine", "luks", "tcrypt", "bitlk", "integrity", "python",
                "remote", "reencrypt", "small"}
    if "--only" in sys.argv[1:]:
        i = sys.argv.index("--only")
        wanted = set(sys.argv[i + 1].split(",")) if i + 1 < len(sys.argv) else set()
        if not wanted or wanted - sections:
            sys.exit(f"--only takes some of {','.join(sorted(sections))}")
        sections = wanted
    ensure_peers()
    for f in (BLKCRYPT,) if cold or "engine" not in sections else (BLKCRYPT, BENCH):
        if not os.access(f, os.X_OK):
            sys.exit(f"no {f}: build first (scripts/build.sh) or set BUILD")
    work = os.environ.get("WORKDIR") or tempfile.mkdtemp(prefix="blkcrypt-cmp-")
    data = os.path.join(work, "data.img")
    rows, times, rss, iops, small, notes, reenc = [], [], {}, [], [], [], []
    big = cold or bool(sections - {"small", "reencrypt"})  # these rows need no SIZE_MIB image
    try:
        if big:
            with open(data, "wb") as f:
                for _ in range(SIZE_MIB):
                    f.write(os.urandom(1 << 20))
            read_through(data)
        cpu = open("/proc/cpuinfo").read().split("model name")[1].split(":")[1].splitlines()[0].strip()
        print(f"# {SIZE_MIB if big else 0} MiB random data, best of {REPEAT}; {os.cpu_count()} CPUs ({cpu}); "
              f"load {open('/proc/loadavg').read().split()[0]}")
        if cold:
            cold_comparison(work, data)
            return

        # --- dm-verity
        if "verity" in sections:
            h1, h2 = os.path.join(work, "h.vs"), os.path.join(work, "h.bc")
            fmt = ["--salt", SALT, "--uuid", UUID]
            t_vs, out_vs = run(["veritysetup", "format", data, h1] + fmt, warm=data)
            bc = [BLKCRYPT, "verity", "format", data, h2] + fmt
            t_bc, out_bc = run(bc, warm=data)
            t_bc1, out_bc1 = run(bc + ["--threads", "1"], warm=data)
            root = field(out_vs, "Root hash")
            if field(out_bc, "Root hash") != root or field(out_bc1, "Root hash") != root:
                sys.exit("root hashes differ between veritysetup and blkcrypt")
            rss["verity format"] = peak_rss_mib(bc)
            rows.append(("verity format", t_vs, t_bc, 4.5))
            rows.append(("verity format --threads 1", t_vs, t_bc1, 2.8))
            t_vv, _ = run(["veritysetup", "verify", data, h1, root], warm=data)
            t_bv, _ = run([BLKCRYPT, "verity", "verify", data, h2, root], warm=data)
            rss["verity verify"] = peak_rss_mib([BLKCRYPT, "verity", "verify", data, h2, root])
            rows.append(("verity verify", t_vv, t_bv, None))
            # FEC (issue 17): the parity file must equal veritysetup's.
            f1, f2 = os.path.join(work, "f.vs"), os.path.join(work, "f.bc")
            t_vf, _ = run(["veritysetup", "format", data, h1, "--fec-device", f1] + fmt, warm=data)
            bf = [BLKCRYPT, "verity", "format", data, h2, "--fec-device", f2] + fmt
            t_bf, _ = run(bf, warm=data)
            if subprocess.run(["cmp", "-s", f1, f2]).returncode != 0:
                sys.exit("FEC files differ between veritysetup and blkcrypt")
            rss["verity format --fec-device"] = peak_rss_mib(bf)
            rows.append(("verity format --fec-device", t_vf, t_bf, 1.5))

        # --- fs-verity
        if "fsverity" in sections:
            t_fs, out_fs = run(["fsverity", "digest", data], warm=data)
            t_bf, out_bf = run([BLKCRYPT, "fsverity", "digest", data], warm=data)
            if out_fs.split()[0] != out_bf.split()[0]:
                sys.exit(f"fs-verity digests differ: {out_fs} vs {out_bf}")
            rss["fsverity digest"] = peak_rss_mib([BLKCRYPT, "fsverity", "digest", data])
            rows.append(("fsverity digest", t_fs, t_bf, 4.5))

        # --- dm-crypt image encryption vs qemu-img's LUKS
        if sections & {"crypt", "nbd"}:
            key = os.path.join(work, "key")
            with open(key, "wb") as f:
                f.write(os.urandom(64))
            enc = os.path.join(work, "enc.img")
            crypt = [BLKCRYPT, "crypt", "encrypt", "--cipher", "aes-xts-plain64", "--key-file", key,
                     "--key-size", "512", data, enc]
            t_bcrypt, _ = run(crypt)
            rss["crypt encrypt"] = peak_rss_mib(crypt)
            luks = os.path.join(work, "q.luks")
            qconv = ["qemu-img", "convert", "-f", "raw", "-O", "luks", "--object", "secret,id=s0,data=pass",
                     "-o", "key-secret=s0,cipher-alg=aes-256,cipher-mode=xts,ivgen-alg=plain64,iter-time=10",
                     data, luks]
            # qemu's PBKDF2 benchmark sometimes fails on a loaded machine ("Unable
            # to get accurate CPU usage"): such a run is retried, not timed.
            t_q, _ = run(qconv, retry_on=b"accurate CPU usage")
            if "crypt" in sections:
                rows.append(("crypt encrypt aes-xts-plain64", t_q, t_bcrypt, 3.0))

        # --- serving the plaintext view over NBD
        if "nbd" in sections:
            sock = os.path.join(work, "nbd.sock")
            t_serve = nbdcopy_from([BLKCRYPT, "crypt", "serve", "--cipher", "aes-xts-plain64", "--key-file", key,
                                    "--key-size", "512", "--read-only", "--socket", sock, enc], sock)
            t_qluks = nbdcopy_from(["qemu-nbd", "-r", "-t", "-e", "4", "-k", sock, "--object", "secret,id=s0,data=pass",
                                    "--image-opts", f"driver=luks,key-secret=s0,file.filename={luks}"], sock)
            t_qraw = nbdcopy_from(["qemu-nbd", "-r", "-t", "-e", "4", "-f", "raw", "-k", sock, data], sock)
            rows.append(("nbdcopy crypt serve / qemu-nbd luks", t_qluks, t_serve, 2.0))
            rows.append(("nbdcopy crypt serve / qemu-nbd raw", t_qraw, t_serve, 1.0))
            # luks serve on the LUKS1 image qemu-img made, beside qemu-nbd and nbdkit on it.
            passf = os.path.join(work, "pass")
            with open(passf, "w") as f:
                f.write("pass")
            lserve = [BLKCRYPT, "luks", "serve", "--key-file", passf, "--read-only", "--socket", sock, luks]
            qluks = ["qemu-nbd", "-r", "-t", "-e", "4", "-k", sock, "--object", "secret,id=s0,data=pass",
                     "--image-opts", f"driver=luks,key-secret=s0,file.filename={luks}"]
            nkluks = ["nbdkit", "-f", "-r", "-U", sock, "--filter=luks", "file", luks, "passphrase=pass"]
            t_lserve, t_nk = nbdcopy_from(lserve, sock), nbdcopy_from(nkluks, sock)
            rows.append(("nbdcopy luks serve / qemu-nbd luks", t_qluks, t_lserve, 2.0))
            rows.append(("nbdcopy luks serve / nbdkit luks", t_nk, t_lserve, None))
            rows.append(("nbdcopy luks serve / qemu-nbd raw", t_qraw, t_lserve, 1.0))
            r_ours, r_q, r_nk = (nbdcopy_from(c, sock, random_reads(sock)) for c in (lserve, qluks, nkluks))
            iops.append(("4K random reads luks serve / qemu-nbd luks", r_q, r_ours, 1.5))
            iops.append(("4K random reads luks serve / nbdkit luks", r_nk, r_ours, None))
        for name in ("enc.img", "q.luks", "h.vs", "h.bc"):
            if os.path.exists(os.path.join(work, name)):
                os.remove(os.path.join(work, name))
        if "luks" in sections:
            luks_comparison(work, data, rows, times, rss)
        if "tcrypt" in sections:
            tcrypt_comparison(work, rows, rss)
        if "bitlk" in sections:
            bitlk_comparison(work, rows, rss)
        if "integrity" in sections:
            integrity_comparison(work, data, rows, rss, notes)
        if "python" in sections:
            python_comparison(work, data, rows)
        if "remote" in sections:
            remote_comparison(work, data, rows, notes)
        if "reencrypt" in sections:
            reencrypt_comparison(work, reenc, rss, notes)
        if "small" in sections:
            small_comparison(work, small)
    finally:
        if not os.environ.get("WORKDIR"):
            shutil.rmtree(work, ignore_errors=True)

    # --- in-memory: the engine against openssl speed, one core
    if "engine" in sections:
        gb = google_bench(r"BM_dmcrypt_request/whole/(aes-xts-plain64|capi:xts-aes-openssl-plain64)/4096$|"
                          r"BM_(shash/sha256-(openssl|cryptopp)|direct/(openssl-sha256-lowlevel|cryptopp-sha256))/(256|4096|65536)$")
        engine = gb["BM_dmcrypt_request/whole/aes-xts-plain64/4096"]["bytes_per_second"] / (1 << 20)
        # Absent from a build without the OpenSSL provider (-DBLKCRYPT_WITH_OPENSSL=OFF).
        engine_ossl = gb.get("BM_dmcrypt_request/whole/capi:xts-aes-openssl-plain64/4096", {}).get("bytes_per_second")
        ossl = openssl_speed_xts_4k()

    if rows or iops or "engine" in sections or times:
        print(f"\n{'operation':36} {'peer':>9} {'blkcrypt':>9} {'ratio':>7} {'target':>8}  met")
    for name, peer, ours, target in rows:
        ratio = peer / ours
        tgt = f">={target}x" if target else "-"
        ok = "-" if not target else ("yes" if ratio >= target else "NO")
        print(f"{name:36} {SIZE_MIB / peer:6.0f} MiB/s {SIZE_MIB / ours:6.0f} MiB/s {ratio:6.2f}x {tgt:>8}  {ok}")
    for name, peer, ours, target in iops:  # RANDOM_READS reads of 4 KiB each
        ratio = peer / ours
        ok = "-" if not target else ("yes" if ratio >= target else "NO")
        print(f"{name:42} {RANDOM_READS / peer:6.0f}/s {RANDOM_READS / ours:6.0f}/s {ratio:6.2f}x "
              f"{f'>={target}x' if target else '-':>8}  {ok}")
    if "engine" in sections:
        ratio = engine / ossl
        print(f"{'engine aes-xts 4K, 1 core / openssl':36} {ossl:6.0f} MiB/s {engine:6.0f} MiB/s {ratio:6.2f}x {'>=0.8x':>8}  "
              f"{'yes' if ratio >= 0.8 else 'NO'}")
        # The same primitive on both sides: what the engine itself costs.
        if engine_ossl:
            engine_ossl /= 1 << 20
            print(f"{'  the same, engine on xts-aes-openssl':36} {ossl:6.0f} MiB/s {engine_ossl:6.0f} MiB/s "
                  f"{engine_ossl / ossl:6.2f}x {'-':>8}  -")
        for prov, direct in (("openssl", "openssl-sha256-lowlevel"), ("cryptopp", "cryptopp-sha256")):
            for n in (256, 4096, 65536):
                if f"BM_shash/sha256-{prov}/{n}" not in gb:
                    continue  # no sha256-openssl in this build
                reg = gb[f"BM_shash/sha256-{prov}/{n}"]["cpu_time"]
                dir_ = gb[f"BM_direct/{direct}/{n}"]["cpu_time"]
                ratio = dir_ / reg
                print(f"{'sha256-' + prov + ' one-shot ' + str(n) + ' B':36} {dir_:6.0f} ns   {reg:6.0f} ns   "
                      f"{ratio:6.2f}x {'>=0.9x':>8}  {'yes' if ratio >= 0.9 else 'NO'}")
    # Times, not throughputs: ours / the peer's, lower is better.
    for name, peer, ours, target in times:
        ratio = ours / peer
        print(f"{name:36} {peer:8.3f} s  {ours:8.3f} s  {ratio:6.2f}x {'<=' + str(target) + 'x':>8}  "
              f"{'yes' if ratio <= target else 'NO'}")
    if reenc:
        print(f"\n{'reencrypt, ' + str(REENC_MIB) + ' MiB container':36} {'peer':>9} {'blkcrypt':>9} {'ratio':>7} "
              f"{'target':>8}  met")
    for name, peer, ours, target, as_time in reenc:
        if as_time:  # ours / decrypt+encrypt's time, lower is better
            ratio = ours / peer
            print(f"{name:36} {peer:7.2f} s  {ours:7.2f} s  {ratio:6.2f}x {'<=' + str(target) + 'x':>8}  "
                  f"{'yes' if ratio <= target else 'NO'}")
        else:
            ratio = peer / ours
            print(f"{name:36} {REENC_MIB / peer:6.0f} MiB/s {REENC_MIB / ours:6.0f} MiB/s {ratio:6.2f}x "
                  f"{'>=' + str(target) + 'x':>8}  {'yes' if ratio >= target else 'NO'}")
    if small:  # median times: ours / the peer's, lower is better
        print(f"\n{'small inputs (median of ' + str(SMALL_RUNS) + ')':44} {'peer':>9} {'blkcrypt':>9} "
              f"{'ratio':>7} {'target':>8}  met")
    for name, peer, ours, target in small:
        ratio = ours / peer
        print(f"{name:44} {peer * 1000:6.1f} ms {ours * 1000:6.1f} ms {ratio:6.2f}x "
              f"{f'<={target}x' if target else '-':>8}  {'-' if not target else 'yes' if ratio <= target else 'NO'}")
    for line in notes:
        print(line)
    for name, mib in rss.items():
        print(f"{'peak RSS ' + name:36} {'':>9} {mib:6.1f} MiB {'':>7} {'<64MiB':>8}  {'yes' if mib < 64 else 'NO'}")


if __name__ == "__main__":
    main()
