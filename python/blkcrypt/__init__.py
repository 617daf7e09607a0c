"""blkcrypt: encrypted disk images (LUKS1/2, TrueCrypt/VeraCrypt, BitLocker,
FileVault 2) as Python file objects, on blkcrypt's C API (libblkcrypt-c.so.1)
through ctypes.

    import blkcrypt
    with blkcrypt.open("disk.img", passphrase="secret") as f:
        f.seek(1024)
        data = f.read(4096)
        print(f.size, f.dump()["cipher"])
"""
import ctypes
import io
import json
import os

__all__ = ["open", "Image", "Error", "WrongSecret", "hash", "cipher", "verity_format", "verity_verify"]


def _load():
    names = []
    try:
        from . import _libpath  # written by CMake: the build tree's or the installed library
        names.append(_libpath.LIBRARY)
    except ImportError:
        pass
    env = os.environ.get("BLKCRYPT_C_LIBRARY")
    if env:
        names.insert(0, env)
    names.append("libblkcrypt-c.so.1")  # the dynamic loader's search path
    errors = []
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError as e:
            errors.append(str(e))
    raise ImportError("blkcrypt: cannot load libblkcrypt-c.so.1 (%s)" % "; ".join(errors))


_lib = _load()
_c_image_p = ctypes.c_void_p
_sz = ctypes.c_size_t
_u64 = ctypes.c_uint64
_void_p = ctypes.c_void_p
for _name, _res, _args in [
    ("blk_last_error", ctypes.c_char_p, []),
    ("blk_strerror", ctypes.c_char_p, [ctypes.c_int]),
    ("blk_version", ctypes.c_char_p, []),
    ("blk_free", None, [_void_p]),
    ("blk_open", ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint, ctypes.POINTER(_c_image_p)]),
    ("blk_close", None, [_c_image_p]),
    ("blk_image_type", ctypes.c_char_p, [_c_image_p]),
    ("blk_unlock_passphrase", ctypes.c_int, [_c_image_p, ctypes.c_char_p, _sz]),
    ("blk_unlock_key_file", ctypes.c_int, [_c_image_p, ctypes.c_char_p]),
    ("blk_unlock_volume_key", ctypes.c_int, [_c_image_p, ctypes.c_char_p, _sz]),
    ("blk_size", ctypes.c_int, [_c_image_p, ctypes.POINTER(_u64)]),
    ("blk_pread", ctypes.c_int64, [_c_image_p, _void_p, _sz, _u64]),
    ("blk_pwrite", ctypes.c_int64, [_c_image_p, _void_p, _sz, _u64]),
    ("blk_flush", ctypes.c_int, [_c_image_p]),
    ("blk_dump_json", ctypes.c_int, [_c_image_p, ctypes.POINTER(_void_p)]),
    ("blk_verity_format", ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint32,
                                         ctypes.c_uint32, ctypes.c_char_p, _sz, ctypes.c_char_p,
                                         ctypes.POINTER(_sz)]),
    ("blk_verity_verify", ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, _sz]),
    ("blk_hash", ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, _sz, ctypes.c_char_p, _sz, ctypes.c_char_p,
                                ctypes.POINTER(_sz)]),
    ("blk_cipher", ctypes.c_int, [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, _sz, ctypes.c_char_p, _sz,
                                  ctypes.c_char_p, ctypes.c_char_p, _sz]),
    # BLKCRYPT_1.1
    ("blk_open_detached", ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint,
                                         ctypes.POINTER(_c_image_p)]),
    ("blk_tcrypt_options", ctypes.c_int, [_c_image_p, ctypes.c_uint, ctypes.c_uint32, ctypes.c_char_p]),
    ("blk_tcrypt_add_keyfile", ctypes.c_int, [_c_image_p, ctypes.c_char_p]),
]:
    _f = getattr(_lib, _name)
    _f.restype = _res
    _f.argtypes = _args

# read() fills a new bytes object in place (CPython: PyBytes_FromStringAndSize
# with NULL gives one uninitialised, ours alone until returned), instead of
# RawIOBase.read's zeroed bytearray, readinto and copy: at 1 MiB per read the
# copies, not the decryption, were the cost.
_new_bytes = ctypes.pythonapi.PyBytes_FromStringAndSize
_new_bytes.restype = ctypes.py_object
_new_bytes.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t]
_bytes_data = ctypes.pythonapi.PyBytes_AsString
_bytes_data.restype = ctypes.c_void_p
_bytes_data.argtypes = [ctypes.py_object]

OK = 0
ERR_INVALID, ERR_WRONG_SECRET, ERR_NOT_FOUND, ERR_UNSUPPORTED, ERR_IO, ERR_CORRUPT = -1, -2, -3, -4, -5, -6
ERR_NO_MEMORY, ERR_READ_ONLY, ERR_NOT_UNLOCKED, ERR_RANGE, ERR_INTERNAL = -7, -8, -9, -10, -11
_TCRYPT_HIDDEN, _TCRYPT_BACKUP, _TCRYPT_SYSTEM, _TCRYPT_NO_VERACRYPT = 1, 2, 4, 8
# blkcrypt's version as the library says it (CMake's PROJECT_VERSION, as
# `blkcrypt --version` and the package): one number, not a copy here.
__version__ = _lib.blk_version().decode()


class Error(Exception):
    """A failed call: .code is the C API's blk_error, str() its message."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class WrongSecret(Error):
    """The passphrase, key file or volume key opens nothing."""


def _check(rc):
    if rc >= 0:
        return rc
    msg = _lib.blk_last_error().decode("utf-8", "replace") or _lib.blk_strerror(rc).decode()
    raise (WrongSecret if rc == ERR_WRONG_SECRET else Error)(rc, msg)


def _path(p):
    return os.fsencode(p)


def _secret(s):
    return s.encode("utf-8") if isinstance(s, str) else bytes(s)


class Image(io.RawIOBase):
    """The plaintext of an unlocked image: a seekable binary raw file."""

    def __init__(self, image, passphrase=None, key_file=None, type=None, read_only=True, volume_key=None,
                 header=None, keyfiles=(), pim=0, hidden=False, backup=False, system=False, truecrypt=False,
                 hash=None):
        super().__init__()
        self._h = None
        self._pos = 0
        self._writable = not read_only
        h = _c_image_p()
        t = type.encode() if type else None
        flags = 0 if read_only else 1
        if header is not None:
            _check(_lib.blk_open_detached(_path(image), _path(header), t, flags, ctypes.byref(h)))
        else:
            _check(_lib.blk_open(_path(image), t, flags, ctypes.byref(h)))
        self._h = h
        try:
            tc = (hidden and _TCRYPT_HIDDEN) | (backup and _TCRYPT_BACKUP) | (system and _TCRYPT_SYSTEM) | \
                (truecrypt and _TCRYPT_NO_VERACRYPT)
            if tc or pim or hash or keyfiles:
                _check(_lib.blk_tcrypt_options(h, tc, pim, hash.encode() if hash else None))
                for k in keyfiles:
                    _check(_lib.blk_tcrypt_add_keyfile(h, _path(k)))
            given = [x is not None for x in (passphrase, key_file, volume_key)]
            if sum(given) > 1:
                raise ValueError("give one of passphrase, key_file and volume_key")
            if key_file is not None:
                _check(_lib.blk_unlock_key_file(h, _path(key_file)))
            elif volume_key is not None:
                key = bytes(volume_key)
                _check(_lib.blk_unlock_volume_key(h, key, len(key)))
            else:
                # No secret: an empty passphrase (a BitLocker clear-key volume).
                secret = _secret(passphrase) if passphrase is not None else b""
                _check(_lib.blk_unlock_passphrase(h, secret, len(secret)))
            size = _u64()
            _check(_lib.blk_size(h, ctypes.byref(size)))
            self.size = size.value
            self.type = _lib.blk_image_type(h).decode()
        except BaseException:
            self._release()
            raise
        self.name = os.fsdecode(image)

    def _release(self):
        if self._h is not None:
            _lib.blk_close(self._h)
            self._h = None

    def close(self):
        if not self.closed:
            try:
                if self._writable and self._h is not None:
                    _check(_lib.blk_flush(self._h))
            finally:
                self._release()
                super().close()

    def __del__(self):
        self._release()

    def readable(self):
        return True

    def writable(self):
        return self._writable

    def seekable(self):
        return True

    def _handle(self):
        if self.closed or self._h is None:
            raise ValueError("I/O operation on closed file")
        return self._h

    def readinto(self, b):
        h = self._handle()
        m = memoryview(b).cast("B")
        n = len(m)
        if n == 0:
            return 0
        if m.readonly:
            raise TypeError("readinto() needs a writable buffer")
        buf = (ctypes.c_char * n).from_buffer(m)
        got = _check(_lib.blk_pread(h, buf, n, self._pos))
        self._pos += got
        return got

    def read(self, size=-1):
        h = self._handle()
        left = max(0, self.size - self._pos)
        n = left if size is None or size < 0 else min(size, left)
        if n == 0:
            return b""
        out = _new_bytes(None, n)
        got = _check(_lib.blk_pread(h, _bytes_data(out), n, self._pos))
        self._pos += got
        return out if got == n else out[:got]

    def readall(self):
        return self.read(-1)

    def write(self, b):
        h = self._handle()
        if not self._writable:
            raise io.UnsupportedOperation("opened read-only (read_only=True)")
        data = bytes(b)
        if not data:
            return 0
        n = _check(_lib.blk_pwrite(h, data, len(data), self._pos))
        self._pos += n
        return n

    def seek(self, offset, whence=io.SEEK_SET):
        self._handle()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self.size + offset
        else:
            raise ValueError("invalid whence (%r)" % whence)
        if pos < 0:
            raise OSError(22, "negative seek position %d" % pos)
        self._pos = pos
        return pos

    def tell(self):
        self._handle()
        return self._pos

    def flush(self):
        if self._writable and self._h is not None and not self.closed:
            _check(_lib.blk_flush(self._h))

    def dump(self):
        """The metadata as a dict (LUKS: `blkcrypt luks dump --json`'s object)."""
        out = _void_p()
        _check(_lib.blk_dump_json(self._handle(), ctypes.byref(out)))
        try:
            return json.loads(ctypes.string_at(out).decode("utf-8", "surrogateescape"))
        finally:
            _lib.blk_free(out)


def open(image, passphrase=None, key_file=None, type=None, read_only=True, volume_key=None, header=None,
         keyfiles=(), pim=0, hidden=False, backup=False, system=False, truecrypt=False, hash=None):
    """Opens and unlocks IMAGE: a file object over its plaintext.

    type: None to detect (LUKS1/2, BitLocker, FileVault 2), or "luks",
    "luks1", "luks2", "bitlk", "fvault2", "tcrypt" (TrueCrypt/VeraCrypt).
    header: a detached LUKS header (cryptsetup --header); IMAGE then holds
    the data. TrueCrypt/VeraCrypt (type="tcrypt"): keyfiles (paths, in
    order), pim (VeraCrypt PIM), hidden, backup, system (the hidden
    volume's, the backup, a system-encrypted disk's header), truecrypt
    (TrueCrypt KDFs only), hash (only KDFs whose hash contains it, as
    cryptsetup -h: each KDF tried costs its full iterations).
    Raises WrongSecret for a wrong secret, Error for the other failures."""
    return Image(image, passphrase=passphrase, key_file=key_file, type=type, read_only=read_only,
                 volume_key=volume_key, header=header, keyfiles=keyfiles, pim=pim, hidden=hidden, backup=backup,
                 system=system, truecrypt=truecrypt, hash=hash)


def hash(alg, data, key=None):
    """The digest of data under the registry's alg ("sha256", "hmac(sha256)" with key)."""
    data = bytes(data)
    size = _sz(0)
    k = bytes(key) if key is not None else None
    rc = _lib.blk_hash(alg.encode(), k, len(k) if k else 0, data, len(data), None, ctypes.byref(size))
    if rc != ERR_INVALID or size.value == 0:
        _check(rc)
    out = ctypes.create_string_buffer(size.value)
    _check(_lib.blk_hash(alg.encode(), k, len(k) if k else 0, data, len(data), out, ctypes.byref(size)))
    return out.raw[:size.value]


def cipher(alg, key, data, iv=b"", encrypt=True):
    """data encrypted (or decrypted) in one call with the registry's skcipher alg."""
    data, key, iv = bytes(data), bytes(key), bytes(iv)
    out = ctypes.create_string_buffer(len(data))
    _check(_lib.blk_cipher(alg.encode(), 1 if encrypt else 0, key, len(key), iv or None, len(iv), data, out,
                           len(data)))
    return out.raw


def verity_format(data, hash_path, hash_name="sha256", data_block_size=4096, hash_block_size=4096, salt=None):
    """veritysetup format DATA HASH: the root hash (bytes)."""
    root = ctypes.create_string_buffer(128)
    n = _sz(len(root))
    s = bytes(salt) if salt is not None else None
    _check(_lib.blk_verity_format(_path(data), _path(hash_path), hash_name.encode(), data_block_size,
                                  hash_block_size, s, len(s) if s is not None else 0, root, ctypes.byref(n)))
    return root.raw[:n.value]


def verity_verify(data, hash_path, root_hash):
    """veritysetup verify: None when every block matches, Error (code ERR_CORRUPT) otherwise."""
    root = bytes.fromhex(root_hash) if isinstance(root_hash, str) else bytes(root_hash)
    _check(_lib.blk_verity_verify(_path(data), _path(hash_path), root, len(root)))
