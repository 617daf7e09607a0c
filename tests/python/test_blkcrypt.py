"""pytest: the Python package blkcrypt (python/blkcrypt) against the CLI's
decrypt, cryptsetup's images and the shared fixtures, and handed to real
consumers (zipfile). Run by ctest (python_blkcrypt) with BLKCRYPT_CLI set
and PYTHONPATH=build/python."""
import hashlib
import io
import os
import shutil
import subprocess
import zipfile

import pytest

import blkcrypt

CLI = os.environ["BLKCRYPT_CLI"]
SRC = os.environ.get("BLKCRYPT_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SHARED = os.environ.get("BLKCRYPT_SHARED_DIR", os.path.join(SRC, "..", "shared"))
FIXTURES = os.path.join(SHARED, "fixtures")
need_cryptsetup = pytest.mark.skipif(shutil.which("cryptsetup") is None, reason="cryptsetup not installed")
need_fixtures = pytest.mark.skipif(not os.path.isdir(FIXTURES), reason=FIXTURES + " absent")


def cli_digest(args, stdin=None):
    """sha256 of the CLI's decrypt to stdout."""
    p = subprocess.run([CLI] + args, input=stdin, stdout=subprocess.PIPE, check=True)
    return hashlib.sha256(p.stdout).hexdigest()


def file_digest(f, chunk=1 << 20):
    h = hashlib.sha256()
    while True:
        b = f.read(chunk)
        if not b:
            return h.hexdigest()
        h.update(b)


def luks_format(path, key, size="16M", version="luks2"):
    subprocess.run(["truncate", "-s", size, str(path)], check=True)
    subprocess.run(["cryptsetup", "luksFormat", "--batch-mode", "--type", version, "--pbkdf", "pbkdf2",
                    "--pbkdf-force-iterations", "1000", "--key-file", str(key), str(path)], check=True,
                   stdout=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def luks(tmp_path_factory):
    d = tmp_path_factory.mktemp("luks")
    key = d / "key"
    key.write_bytes(b"correct horse")
    plain = d / "plain"
    plain.write_bytes(os.urandom(3 << 20))
    images = {}
    if shutil.which("cryptsetup"):
        for v in ("luks1", "luks2"):
            img = d / (v + ".img")
            luks_format(img, key, "24M", v)
            subprocess.run([CLI, "luks", "encrypt", "--key-file", str(key), str(plain), str(img)], check=True)
            images[v] = img
    return d, key, images


@need_cryptsetup
@pytest.mark.parametrize("version", ["luks1", "luks2"])
def test_luks_plaintext_equals_cli(luks, version):
    d, key, images = luks
    img = images[version]
    want = cli_digest(["luks", "decrypt", "--key-file", str(key), str(img), "-"])
    for secret in ("correct horse", b"correct horse"):
        with blkcrypt.open(img, passphrase=secret) as f:
            assert isinstance(f, io.RawIOBase)
            assert f.type == version.upper()
            assert file_digest(f) == want
    with blkcrypt.open(str(img), key_file=str(key), type="luks") as f:
        assert file_digest(f) == want
    # Sizes that switch between the read-ahead (small or unaligned reads) and
    # the split read straight into the buffer (aligned, 256 KiB or more), with
    # pieces that do not divide the read, through read() and readinto().
    with blkcrypt.open(img, passphrase="correct horse") as f:
        h, i = hashlib.sha256(), 0
        sizes = [300000, 1 << 20, 4096, (3 << 20) + 512, 100, 256 << 10, 5 << 20]
        while True:
            n = sizes[i % len(sizes)]
            if i % 2:
                buf = bytearray(n)
                b = memoryview(buf)[:f.readinto(buf)]
            else:
                b = f.read(n)
            i += 1
            if not b:
                break
            h.update(b)
        assert h.hexdigest() == want


@need_cryptsetup
def test_seek_tell_read_readinto(luks):
    d, key, images = luks
    img = images["luks2"]
    whole = subprocess.run([CLI, "luks", "decrypt", "--key-file", str(key), str(img), "-"],
                           stdout=subprocess.PIPE, check=True).stdout
    with blkcrypt.open(img, passphrase="correct horse") as f:
        assert f.size == len(whole)
        assert f.seek(12345) == 12345 and f.tell() == 12345
        assert f.read(777) == whole[12345:12345 + 777]
        assert f.tell() == 12345 + 777
        buf = bytearray(5000)
        assert f.readinto(buf) == 5000 and bytes(buf) == whole[13122:18122]
        assert f.seek(-10, io.SEEK_END) == len(whole) - 10
        assert f.read(100) == whole[-10:]
        assert f.read(100) == b""
        f.seek(100)
        f.seek(50, io.SEEK_CUR)
        assert f.read(3) == whole[150:153]
        with pytest.raises(OSError):
            f.seek(-1)
        assert not f.writable()
        with pytest.raises(io.UnsupportedOperation):
            f.write(b"x")
        # BufferedReader on top, as open() gives for a file.
        f.seek(0)
        r = io.BufferedReader(f, buffer_size=4096)
        assert r.read(10000) == whole[:10000]
    with pytest.raises(ValueError):
        f.read(1)


@need_cryptsetup
def test_wrong_secret_and_errors(luks, tmp_path):
    d, key, images = luks
    with pytest.raises(blkcrypt.WrongSecret) as e:
        blkcrypt.open(images["luks2"], passphrase="correct horsf")
    assert isinstance(e.value, blkcrypt.Error)
    assert "No key available with this passphrase" in str(e.value)
    assert e.value.code == blkcrypt.ERR_WRONG_SECRET
    with pytest.raises(blkcrypt.Error) as e:
        blkcrypt.open(tmp_path / "missing.img", passphrase="x")
    assert not isinstance(e.value, blkcrypt.WrongSecret)
    assert "missing.img" in str(e.value)
    with pytest.raises(blkcrypt.Error) as e:
        blkcrypt.open(images["luks2"], passphrase="correct horse", type="bitlk")
    assert "LUKS2" in str(e.value)
    plain = tmp_path / "plain.bin"
    plain.write_bytes(bytes(1 << 20))
    with pytest.raises(blkcrypt.Error) as e:
        blkcrypt.open(plain, passphrase="x")
    assert e.value.code == blkcrypt.ERR_NOT_FOUND


@need_cryptsetup
def test_dump_equals_cli_json(luks):
    import json
    d, key, images = luks
    for v, img in images.items():
        want = json.loads(subprocess.run([CLI, "luks", "dump", "--json", str(img)], stdout=subprocess.PIPE,
                                         check=True).stdout)
        with blkcrypt.open(img, key_file=key) as f:
            got = f.dump()
        assert got == want
        assert got["version"] == int(v[-1])


@need_cryptsetup
def test_write_then_zipfile_reads_it_back(tmp_path):
    """A zip archive written into a LUKS2 image through the file object, then
    read by zipfile from the image (reopened), and the CLI's decrypt agrees."""
    key = tmp_path / "key"
    key.write_bytes(b"zip secret")
    img = tmp_path / "z.img"
    luks_format(img, key, "20M")
    members = {"a.txt": b"hello from inside LUKS2\n" * 100, "dir/b.bin": os.urandom(300000)}
    with blkcrypt.open(img, key_file=key, read_only=False) as f:
        assert f.writable()
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for name, data in members.items():
                z.writestr(name, data)
        end = f.tell()
    with blkcrypt.open(img, passphrase=b"zip secret") as f:
        # zipfile finds the central directory from the end: give it the archive's extent.
        f.seek(0)
        archive = io.BytesIO(f.read(end))
        with zipfile.ZipFile(archive) as z:
            assert sorted(z.namelist()) == sorted(members)
            for name, data in members.items():
                assert z.read(name) == data
            assert z.testzip() is None
    plain = subprocess.run([CLI, "luks", "decrypt", "--key-file", str(key), str(img), "-"],
                           stdout=subprocess.PIPE, check=True).stdout
    with zipfile.ZipFile(io.BytesIO(plain[:end])) as z:
        assert z.read("a.txt") == members["a.txt"]


@need_cryptsetup
def test_zipfile_reads_straight_from_the_image(tmp_path):
    """zipfile seeks and reads the plaintext file object itself (no copy):
    an archive that fills the plaintext device to its last byte."""
    key = tmp_path / "key"
    key.write_bytes(b"k")
    img = tmp_path / "z.img"
    luks_format(img, key, "20M")
    with blkcrypt.open(img, key_file=key, read_only=False) as f:
        size = f.size
        bio = io.BytesIO()
        with zipfile.ZipFile(bio, "w") as z:
            z.writestr("x.txt", b"x" * 1000)
            z.comment = b""
        data = bio.getvalue()
        # Pad in front with a stored member so that the archive ends at the device's end.
        pad = size - len(data)
        f.seek(0)
        f.write(b"\0" * pad)  # zipfile tolerates leading data (self-extracting archives)
        f.write(data)
        assert f.tell() == size
    with blkcrypt.open(img, key_file=key) as f:
        with zipfile.ZipFile(f) as z:
            assert z.read("x.txt") == b"x" * 1000


def test_hash_cipher_verity(tmp_path):
    assert blkcrypt.hash("sha256", b"abc").hex() == \
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert blkcrypt.hash("hmac(sha256)", b"what do ya want for nothing?", key=b"Jefe").hex() == \
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    key = bytes.fromhex("000102030405060708090a0b0c0d0e0f")
    ct = blkcrypt.cipher("ecb(aes)", key, bytes.fromhex("00112233445566778899aabbccddeeff"))
    assert ct.hex() == "69c4e0d86a7b0430d8cdb78070b4c55a"
    assert blkcrypt.cipher("ecb(aes)", key, ct, encrypt=False).hex() == "00112233445566778899aabbccddeeff"
    with pytest.raises(blkcrypt.Error):
        blkcrypt.hash("no-such", b"")
    data = tmp_path / "data"
    data.write_bytes(os.urandom(1 << 20))
    root = blkcrypt.verity_format(data, tmp_path / "hash")
    assert len(root) == 32
    blkcrypt.verity_verify(data, tmp_path / "hash", root)
    subprocess.run([CLI, "verity", "verify", str(data), str(tmp_path / "hash"), root.hex()], check=True,
                   stdout=subprocess.DEVNULL)
    with data.open("r+b") as f:
        f.seek(4096 * 7)
        f.write(b"!")
    with pytest.raises(blkcrypt.Error) as e:
        blkcrypt.verity_verify(data, tmp_path / "hash", root.hex())
    assert e.value.code == blkcrypt.ERR_CORRUPT


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    if not os.path.isdir(FIXTURES):
        pytest.skip(FIXTURES + " absent")
    d = tmp_path_factory.mktemp("fx")
    for a in ("tcrypt", "bitlk", "fvault2"):
        subprocess.run(["tar", "xSJf", os.path.join(FIXTURES, a + "-images.tar.xz"), "-C", str(d)], check=True)
    return d


@need_fixtures
def test_veracrypt(fixtures):
    img = fixtures / "tcrypt" / "vc_1-sha256-xts-aes"
    want = cli_digest(["tcrypt", "decrypt", "-h", "sha256", str(img), "-"], stdin=b"aaaaaaaaaaaa\n")
    with blkcrypt.open(img, passphrase="aaaaaaaaaaaa", type="tcrypt") as f:
        assert f.type == "TCRYPT"
        assert file_digest(f) == want
        # A FAT filesystem with the volume serial DEAD-BABE (fixtures README):
        # the boot sector's BPB, read through the file object.
        f.seek(0)
        boot = f.read(512)
        assert boot[510:512] == b"\x55\xaa"
        serial = boot[67:71] if boot[82:87] == b"FAT32" else boot[39:43]
        assert serial[::-1].hex().upper() == "DEADBABE"
    # A wrong passphrase is not tried: the whole KDF search takes ~45 s.


@need_fixtures
def test_bitlocker(fixtures):
    b = fixtures / "bitlk"
    img = b / "bitlk-aes-xts-128.img"
    want = cli_digest(["bitlk", "decrypt", str(img), "-"], stdin=b"anaconda\n")
    with blkcrypt.open(img, passphrase="anaconda") as f:
        assert f.type == "BITLK"
        assert file_digest(f) == want
        assert "8f595209-f5b9-49a0-85d4-cb8f80258c27" in f.dump()["dump"]
    bek = b / "4381F759-C4F8-4DE0-BB61-FC33A831BDA5.BEK"
    sk = b / "bitlk-aes-xts-128-startup-key.img"
    with blkcrypt.open(sk, key_file=bek) as f:
        assert file_digest(f) == cli_digest(["bitlk", "decrypt", "--key-file", str(bek), str(sk), "-"])
    with pytest.raises(blkcrypt.WrongSecret):
        blkcrypt.open(img, passphrase="anacondb")


@need_fixtures
def test_filevault2(fixtures):
    img = fixtures / "fvault2-images" / "small"
    want = cli_digest(["fvault2", "decrypt", str(img), "-"], stdin=b"heslo123\n")
    with blkcrypt.open(img, passphrase="heslo123") as f:
        assert f.type == "FVAULT2"
        assert file_digest(f, 4 << 20) == want
    with pytest.raises(blkcrypt.WrongSecret):
        blkcrypt.open(img, passphrase="heslo124")


def test_version_is_blkcrypts():
    """One version: the package's, as the CLI says it."""
    out = subprocess.run([CLI, "--version"], stdout=subprocess.PIPE, check=True).stdout.decode().split()
    assert blkcrypt.__version__ == out[1]


@need_cryptsetup
def test_detached_header(luks, tmp_path):
    d, key, images = luks
    img = images["luks2"]
    hdr = tmp_path / "hdr"
    subprocess.run(["cryptsetup", "luksHeaderBackup", "--header-backup-file", str(hdr), str(img)], check=True)
    want = cli_digest(["luks", "decrypt", "--header", str(hdr), "--key-file", str(key), str(img), "-"])
    with blkcrypt.open(img, passphrase="correct horse", header=hdr) as f:
        assert f.type == "LUKS2"
        assert file_digest(f) == want
    with pytest.raises(blkcrypt.Error):
        blkcrypt.open(img, passphrase="correct horse", header=tmp_path / "none")


@need_fixtures
def test_veracrypt_pim_keyfiles(fixtures):
    t = fixtures / "tcrypt"
    # PIM 1234 (the hash named: one KDF of 1.25 million iterations, not all).
    img = t / "vcpim_1_1234-sha256-xts-aes"
    want = cli_digest(["tcrypt", "decrypt", "-h", "sha256", "--veracrypt-pim", "1234", str(img), "-"],
                      stdin=b"cccccccccccccccccccc\n")
    with blkcrypt.open(img, passphrase="cccccccccccccccccccc", type="tcrypt", pim=1234, hash="sha256") as f:
        assert file_digest(f) == want
    # Keyfiles, with an empty secret refused without them.
    img = t / "vck_1_pw12-sha256-xts-aes"
    kf = [t / "keyfile1", t / "keyfile2"]
    want = cli_digest(["tcrypt", "decrypt", "-h", "sha256", "--key-file", str(kf[0]), "--key-file", str(kf[1]),
                       str(img), "-"], stdin=b"aaaaaaaaaaaa\n")
    with blkcrypt.open(img, passphrase="aaaaaaaaaaaa", type="tcrypt", keyfiles=kf, hash="sha256") as f:
        assert file_digest(f) == want
    with pytest.raises(blkcrypt.WrongSecret):
        blkcrypt.open(img, passphrase="aaaaaaaaaaaa", type="tcrypt", keyfiles=kf[:1], hash="sha256")
    # Options on a handle that is not TrueCrypt's.
    with pytest.raises(blkcrypt.Error):
        blkcrypt.open(fixtures / "bitlk" / "bitlk-aes-xts-128.img", passphrase="anaconda", pim=5)


@need_fixtures
def test_truecrypt_hidden(fixtures):
    img = fixtures / "tcrypt" / "tc_4-sha512-xts-aes-hidden"
    want = cli_digest(["tcrypt", "decrypt", "-h", "sha512", "--tcrypt-hidden", str(img), "-"], stdin=b"bbbbbbbbbbbb\n")
    outer = cli_digest(["tcrypt", "decrypt", "-h", "sha512", str(img), "-"], stdin=b"aaaaaaaaaaaa\n")
    assert want != outer
    with blkcrypt.open(img, passphrase="bbbbbbbbbbbb", type="tcrypt", hidden=True, hash="sha512") as f:
        assert file_digest(f) == want
