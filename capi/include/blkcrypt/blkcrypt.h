/* blkcrypt's C API (libblkcrypt-c.so.1): open an encrypted image (LUKS1,
 * LUKS2, TrueCrypt/VeraCrypt, BitLocker, FileVault 2), unlock it, and read
 * and write its plaintext; dm-verity format and verify; one-shot hashes and
 * ciphers by registry name. Plain C11, opaque handles, no C++ types.
 *
 * Every function returns BLK_OK (0) or a negative blk_error (the byte
 * counts of blk_pread/blk_pwrite are >= 0 on success). After a failure,
 * blk_last_error() gives its message, kept per thread until the next
 * failure in that thread. Secrets given to the library are copied into
 * memory it wipes when done; the caller wipes its own copies.
 *
 * ABI: symbols carry the version node that added them (BLKCRYPT_1.0, 1.1:
 * marked "since BLKCRYPT_1.1" below); an ABI break changes the
 * SONAME (docs/library.md, "ABI policy"). */
#ifndef BLKCRYPT_BLKCRYPT_H
#define BLKCRYPT_BLKCRYPT_H

#include <stddef.h>
#include <stdint.h>

#if defined(BLKCRYPT_C_BUILDING)
#define BLK_API __attribute__((visibility("default")))
#else
#define BLK_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum blk_error {
    BLK_OK = 0,
    BLK_ERR_INVALID = -1,         /* a bad argument (NULL handle, length, name) */
    BLK_ERR_WRONG_SECRET = -2,    /* the passphrase, key file or volume key opens nothing */
    BLK_ERR_NOT_FOUND = -3,       /* no known format on the image; no such algorithm */
    BLK_ERR_UNSUPPORTED = -4,     /* known, but not done (e.g. a volume key for TrueCrypt) */
    BLK_ERR_IO = -5,              /* reading or writing the image failed */
    BLK_ERR_CORRUPT = -6,         /* stored data disagrees (verity, metadata checksums) */
    BLK_ERR_NO_MEMORY = -7,
    BLK_ERR_READ_ONLY = -8,       /* a write on a handle opened read-only */
    BLK_ERR_NOT_UNLOCKED = -9,    /* device I/O before a successful unlock */
    BLK_ERR_RANGE = -10,          /* a write past the end of the plaintext */
    BLK_ERR_INTERNAL = -11        /* a bug: please report the message */
} blk_error;

/* The message of the last failed call in this thread ("" when none). Valid
 * until the next failing call in the thread. */
BLK_API const char *blk_last_error(void);
/* A fixed English name of an error code ("wrong secret"). */
BLK_API const char *blk_strerror(blk_error code);
/* blkcrypt's version, "MAJOR.MINOR.PATCH": the release this library comes
 * with (`blkcrypt --version`, the package's). What a caller may rely on is
 * the SONAME and the symbol version nodes, not this string. */
BLK_API const char *blk_version(void);
/* Frees a string the library returned (blk_dump_json). NULL is ignored. */
BLK_API void blk_free(void *p);

/* ---- images ---------------------------------------------------------- */

typedef struct blk_image blk_image;

#define BLK_OPEN_READ_WRITE 1u /* blk_pwrite allowed; the image is opened writable at unlock */

/* Opens IMAGE (a path, or whatever the library's store opener takes) and
 * reads its metadata. type NULL or "": detect the format by its signature
 * (LUKS1, LUKS2, BitLocker, FileVault 2); else one of "luks" (either
 * version), "luks1", "luks2", "bitlk", "fvault2", "tcrypt" (TrueCrypt or
 * VeraCrypt: no signature, the header is checked at unlock). flags:
 * BLK_OPEN_*. *out is set only on success; close it with blk_close. */
BLK_API int blk_open(const char *image, const char *type, unsigned flags, blk_image **out);
/* Closes the handle (flushing writes first); NULL is ignored. */
BLK_API void blk_close(blk_image *img);
/* As cryptsetup names the type: "LUKS1", "LUKS2", "BITLK", "FVAULT2", "TCRYPT". */
BLK_API const char *blk_image_type(const blk_image *img);

/* Unlocks with a passphrase of len bytes (BitLocker: also a recovery
 * password; an empty one opens a clear-key volume). BLK_ERR_WRONG_SECRET
 * when it opens nothing. Unlocking again replaces the plaintext device. */
BLK_API int blk_unlock_passphrase(blk_image *img, const void *passphrase, size_t len);
/* The whole file at path as the passphrase, as cryptsetup --key-file reads
 * it (BitLocker: a startup key's .BEK file). A FIFO, pipe or /dev/stdin is
 * read to its end. "-" is a file named "-": a library does not take the
 * process's standard input on its own; pass "/dev/stdin" to mean it. */
BLK_API int blk_unlock_key_file(blk_image *img, const char *path);
/* The volume key itself (cryptsetup --volume-key-file). LUKS checks it
 * against the header's digest (BLK_ERR_WRONG_SECRET); BitLocker and
 * FileVault 2 keep no digest, so a wrong key reads as noise; TrueCrypt:
 * BLK_ERR_UNSUPPORTED. */
BLK_API int blk_unlock_volume_key(blk_image *img, const void *key, size_t len);

/* ---- since BLKCRYPT_1.1 ------------------------------------------------ */

/* blk_open with the LUKS header in a file of its own (cryptsetup --header):
 * image holds only the data. type as for blk_open (NULL or "" detects the
 * header's format; only LUKS has detached headers). */
BLK_API int blk_open_detached(const char *image, const char *header, const char *type, unsigned flags,
                              blk_image **out);

#define BLK_TCRYPT_HIDDEN 1u        /* the hidden volume's header (--tcrypt-hidden) */
#define BLK_TCRYPT_BACKUP 2u        /* the backup header at the end (--tcrypt-backup) */
#define BLK_TCRYPT_SYSTEM 4u        /* system encryption: a whole disk (--tcrypt-system) */
#define BLK_TCRYPT_NO_VERACRYPT 8u  /* TrueCrypt KDFs only (--disable-veracrypt) */
/* For the next unlocks of a "tcrypt" handle: flags BLK_TCRYPT_*; pim a
 * VeraCrypt PIM (0: the default iterations); hash NULL or "": try every KDF,
 * else only those whose hash name contains it ("sha512"), as cryptsetup -h
 * (each KDF tried costs its full iteration count, a PIM makes that
 * minutes: naming the hash saves the others). BLK_ERR_INVALID on another
 * type of handle or unknown flags; hidden and system exclude each other. */
BLK_API int blk_tcrypt_options(blk_image *img, unsigned flags, uint32_t pim, const char *hash);
/* Adds a TrueCrypt/VeraCrypt keyfile for the next unlocks of a "tcrypt"
 * handle, after those added before (order counts); its first 1 MiB is
 * read now. A path, or anything open() reads: a FIFO, /dev/stdin. With
 * keyfiles the passphrase may be empty. */
BLK_API int blk_tcrypt_add_keyfile(blk_image *img, const char *path);

/* The plaintext device, after an unlock. Bytes at any offset and length. */
BLK_API int blk_size(blk_image *img, uint64_t *size);
/* Reads up to len bytes at offset: the count read, short only at the end
 * of the device (0 at or past it), or a negative blk_error. */
BLK_API int64_t blk_pread(blk_image *img, void *buf, size_t len, uint64_t offset);
/* Writes len bytes at offset (BLK_OPEN_READ_WRITE): len, or a negative
 * blk_error (BLK_ERR_RANGE past the end; nothing is written then). */
BLK_API int64_t blk_pwrite(blk_image *img, const void *buf, size_t len, uint64_t offset);
/* Every write so far on stable storage. */
BLK_API int blk_flush(blk_image *img);

/* The metadata as one JSON object, NUL-terminated, in *json (free it with
 * blk_free). LUKS: the object of `blkcrypt luks dump --json`
 * (docs/json.md); the other formats: {"device", "type", "dump"}, dump
 * being the text their cryptsetup dump prints (TrueCrypt: after unlock). */
BLK_API int blk_dump_json(blk_image *img, char **json);

/* ---- dm-verity ------------------------------------------------------- */

/* veritysetup format DATA HASH: hashes all of DATA (a whole number of
 * data_block_size blocks) and writes a superblock and the tree to HASH from
 * offset 0 (created if missing, mode 0600; a regular file is extended to
 * fit). hash_name NULL: "sha256"; block sizes 0: 4096; salt NULL: 32
 * random bytes (salt_len 0 with a non-NULL salt: no salt). The root hash
 * goes to root_hash, which holds *root_len bytes; *root_len becomes its
 * length (BLK_ERR_INVALID, with *root_len the size needed, when short). */
BLK_API int blk_verity_format(const char *data, const char *hash, const char *hash_name,
                              uint32_t data_block_size, uint32_t hash_block_size,
                              const void *salt, size_t salt_len, void *root_hash, size_t *root_len);
/* veritysetup verify DATA HASH ROOT: the parameters from HASH's superblock.
 * BLK_OK when every block matches, BLK_ERR_CORRUPT (with the first bad
 * block in the message) when one does not. */
BLK_API int blk_verity_verify(const char *data, const char *hash, const void *root_hash, size_t root_len);

/* ---- one-shot crypto by registry name ---------------------------------- */

/* The digest of data under alg ("sha256", "hmac(sha256)" with a key,
 * "blake2b-512", a driver name...). key NULL: unkeyed. out holds *out_len
 * bytes; *out_len becomes the digest size (BLK_ERR_INVALID, with the size
 * needed, when short). */
BLK_API int blk_hash(const char *alg, const void *key, size_t key_len, const void *data, size_t len,
                     void *out, size_t *out_len);
/* Encrypts (encrypt != 0) or decrypts len bytes of in into out (which may
 * be in) with the skcipher alg ("xts(aes)", "cbc(aes)", "chacha20"...).
 * iv: iv_len must be the cipher's IV size (NULL and 0 for none). len must
 * suit the mode (whole blocks for cbc, at least one block for xts). */
BLK_API int blk_cipher(const char *alg, int encrypt, const void *key, size_t key_len, const void *iv,
                       size_t iv_len, const void *in, void *out, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* BLKCRYPT_BLKCRYPT_H */
