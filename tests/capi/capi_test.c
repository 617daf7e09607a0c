/* Tests of <blkcrypt/blkcrypt.h>, in C11 against libblkcrypt-c alone; the
 * driver (capi.sh) makes the images with cryptsetup and the CLI and checks
 * what this prints against them. Subcommands:
 *   errors                         argument checks, error codes and messages
 *   crypto                         blk_hash, blk_cipher against published vectors
 *   read IMAGE TYPE SECRET|@FILE   the whole plaintext to stdout (pread in odd pieces)
 *   wrong IMAGE TYPE SECRET        the wrong secret: BLK_ERR_WRONG_SECRET, and no device
 *   vkey IMAGE HEXKEY              unlock with the volume key, the plaintext to stdout
 *   write IMAGE SECRET             pwrite/flush on a read-write handle (read-only refused)
 *   dump IMAGE TYPE SECRET         blk_dump_json to stdout
 *   verity DATA HASH               format, verify, then a flipped byte fails verify
 *   version                        blk_version() to stdout
 *   tread IMAGE SECRET FLAGS PIM HASH [KEYFILE...]
 *                                  a "tcrypt" handle with blk_tcrypt_options (FLAGS:
 *                                  letters h hidden, b backup, s system, t TrueCrypt
 *                                  only, - none) and keyfiles: the plaintext to stdout
 *   dread IMAGE HEADER SECRET      blk_open_detached: the plaintext to stdout
 * Exit 0 when every check passed. */
#include <blkcrypt/blkcrypt.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: CHECK(%s) failed; last error: %s\n", __FILE__, __LINE__, \
                    #cond, blk_last_error());                                             \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

static int unhex(const char *s, unsigned char *out, size_t max) {
    size_t n = strlen(s) / 2;
    if (n > max) return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) return -1;
        out[i] = (unsigned char)v;
    }
    return (int)n;
}

static const char *type_arg(const char *t) { return strcmp(t, "auto") == 0 ? NULL : t; }

/* SECRET, or @FILE: the key file. */
static int unlock(blk_image *img, const char *secret) {
    if (secret[0] == '@') return blk_unlock_key_file(img, secret + 1);
    return blk_unlock_passphrase(img, secret, strlen(secret));
}

static int dump_plaintext(blk_image *img);

static int test_tread(int argc, char **argv) {
    const char *image = argv[2], *secret = argv[3], *f = argv[4], *hash = argv[6];
    unsigned flags = 0;
    for (; *f; f++) {
        if (*f == 'h') flags |= BLK_TCRYPT_HIDDEN;
        else if (*f == 'b') flags |= BLK_TCRYPT_BACKUP;
        else if (*f == 's') flags |= BLK_TCRYPT_SYSTEM;
        else if (*f == 't') flags |= BLK_TCRYPT_NO_VERACRYPT;
    }
    blk_image *img = NULL;
    CHECK(blk_open(image, "tcrypt", 0, &img) == BLK_OK);
    if (!img) return 1;
    CHECK(blk_tcrypt_options(img, flags, (uint32_t)strtoul(argv[5], NULL, 10), hash) == BLK_OK);
    for (int i = 7; i < argc; i++) CHECK(blk_tcrypt_add_keyfile(img, argv[i]) == BLK_OK);
    int rc = blk_unlock_passphrase(img, secret, strlen(secret));
    if (rc == BLK_ERR_WRONG_SECRET) {
        fprintf(stderr, "wrong secret: %s\n", blk_last_error());
        blk_close(img);
        exit(failures ? 1 : 3);
    }
    CHECK(rc == BLK_OK);
    if (rc == BLK_OK) dump_plaintext(img);
    blk_close(img);
    return failures;
}

static int test_dread(const char *image, const char *header, const char *secret) {
    blk_image *img = NULL;
    CHECK(blk_open_detached(image, header, NULL, 0, &img) == BLK_OK);
    if (!img) return 1;
    fprintf(stderr, "type %s\n", blk_image_type(img));
    CHECK(unlock(img, secret) == BLK_OK);
    dump_plaintext(img);
    blk_close(img);
    return failures;
}

static int test_errors(void) {
    blk_image *img = NULL;
    CHECK(blk_open(NULL, NULL, 0, &img) == BLK_ERR_INVALID);
    CHECK(strstr(blk_last_error(), "blk_open") != NULL);
    CHECK(blk_open("/nonexistent/x.img", NULL, 0, &img) == BLK_ERR_IO || blk_last_error()[0]);
    CHECK(img == NULL);
    CHECK(strstr(blk_last_error(), "/nonexistent/x.img") != NULL);
    CHECK(blk_open("/dev/null", "nosuchtype", 0, &img) == BLK_ERR_INVALID);
    CHECK(blk_open("/dev/null", NULL, 0x80, &img) == BLK_ERR_INVALID);
    CHECK(blk_unlock_passphrase(NULL, "x", 1) == BLK_ERR_INVALID);
    uint64_t size = 0;
    CHECK(blk_size(NULL, &size) == BLK_ERR_INVALID);
    CHECK(blk_pread(NULL, &size, 1, 0) == BLK_ERR_INVALID);
    CHECK(blk_flush(NULL) == BLK_ERR_INVALID);
    blk_close(NULL);
    CHECK(strcmp(blk_strerror(BLK_ERR_WRONG_SECRET), "wrong secret") == 0);
    CHECK(strcmp(blk_strerror(12345), "unknown error") == 0);
    CHECK(strcmp(blk_strerror(BLK_OK), "success") == 0);
    CHECK(strchr(blk_version(), '.') != NULL);
    /* BLKCRYPT_1.1 */
    blk_image *none = NULL;
    CHECK(blk_open_detached("x", NULL, NULL, 0, &none) == BLK_ERR_INVALID && none == NULL);
    CHECK(blk_open_detached("x", "", NULL, 0, &none) == BLK_ERR_INVALID && none == NULL);
    CHECK(blk_tcrypt_options(NULL, 0, 0, NULL) == BLK_ERR_INVALID);
    CHECK(blk_tcrypt_add_keyfile(NULL, "k") == BLK_ERR_INVALID);
    blk_free(NULL);
    return failures;
}

static int test_crypto(void) {
    /* SHA-256("abc"), FIPS 180-2. */
    unsigned char d[64], want[64];
    size_t n = sizeof d;
    CHECK(blk_hash("sha256", NULL, 0, "abc", 3, d, &n) == BLK_OK);
    CHECK(n == 32);
    unhex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", want, sizeof want);
    CHECK(memcmp(d, want, 32) == 0);
    /* Too small a buffer: the size needed comes back. */
    n = 4;
    CHECK(blk_hash("sha256", NULL, 0, "abc", 3, d, &n) == BLK_ERR_INVALID);
    CHECK(n == 32);
    /* HMAC-SHA256, RFC 4231 test case 2. */
    n = sizeof d;
    const char *msg = "what do ya want for nothing?";
    CHECK(blk_hash("hmac(sha256)", "Jefe", 4, msg, strlen(msg), d, &n) == BLK_OK);
    unhex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", want, sizeof want);
    CHECK(n == 32 && memcmp(d, want, 32) == 0);
    n = sizeof d;
    CHECK(blk_hash("no-such-hash", NULL, 0, "", 0, d, &n) == BLK_ERR_NOT_FOUND);
    CHECK(strstr(blk_last_error(), "no-such-hash") != NULL);

    /* AES-128-CBC, NIST SP 800-38A F.2.1, first block. */
    unsigned char key[16], iv[16], pt[16], ct[16], out[16], back[16];
    unhex("2b7e151628aed2a6abf7158809cf4f3c", key, 16);
    unhex("000102030405060708090a0b0c0d0e0f", iv, 16);
    unhex("6bc1bee22e409f96e93d7e117393172a", pt, 16);
    unhex("7649abac8119b246cee98e9b12e9197d", ct, 16);
    CHECK(blk_cipher("cbc(aes)", 1, key, 16, iv, 16, pt, out, 16) == BLK_OK);
    CHECK(memcmp(out, ct, 16) == 0);
    CHECK(blk_cipher("cbc(aes)", 0, key, 16, iv, 16, out, back, 16) == BLK_OK);
    CHECK(memcmp(back, pt, 16) == 0);
    /* In place. */
    memcpy(back, pt, 16);
    CHECK(blk_cipher("cbc(aes)", 1, key, 16, iv, 16, back, back, 16) == BLK_OK);
    CHECK(memcmp(back, ct, 16) == 0);
    CHECK(blk_cipher("cbc(aes)", 1, key, 16, iv, 8, pt, out, 16) == BLK_ERR_INVALID);
    CHECK(blk_cipher("cbc(aes)", 1, key, 15, iv, 16, pt, out, 16) == BLK_ERR_INVALID);
    CHECK(blk_cipher("nope(aes)", 1, key, 16, iv, 16, pt, out, 16) == BLK_ERR_NOT_FOUND);
    /* AES-128-ECB, FIPS 197 C.1. */
    unhex("000102030405060708090a0b0c0d0e0f", key, 16);
    unhex("00112233445566778899aabbccddeeff", pt, 16);
    unhex("69c4e0d86a7b0430d8cdb78070b4c55a", ct, 16);
    CHECK(blk_cipher("ecb(aes)", 1, key, 16, NULL, 0, pt, out, 16) == BLK_OK);
    CHECK(memcmp(out, ct, 16) == 0);
    return failures;
}

/* The plaintext in pieces that cross block edges: 1, 511, 4097 bytes... */
static int dump_plaintext(blk_image *img) {
    uint64_t size = 0;
    CHECK(blk_size(img, &size) == BLK_OK);
    static const size_t pieces[] = {1, 511, 4097, 65536, 1 << 20, 3};
    static char buf[1 << 20];
    uint64_t at = 0;
    for (unsigned i = 0; at < size; i++) {
        size_t want = pieces[i % (sizeof pieces / sizeof pieces[0])];
        int64_t got = blk_pread(img, buf, want, at);
        CHECK(got > 0);
        if (got <= 0) return 1;
        CHECK((uint64_t)got == (size - at < want ? size - at : want));
        fwrite(buf, 1, (size_t)got, stdout);
        at += (uint64_t)got;
    }
    CHECK(blk_pread(img, buf, 10, size) == 0);      /* at the end: 0 */
    CHECK(blk_pread(img, buf, 10, size + 7) == 0);  /* past it too */
    return 0;
}

static int test_read(const char *image, const char *type, const char *secret) {
    blk_image *img = NULL;
    int rc = blk_open(image, type_arg(type), 0, &img);
    CHECK(rc == BLK_OK);
    if (rc != BLK_OK) return 1;
    fprintf(stderr, "type %s\n", blk_image_type(img));
    char c;
    CHECK(blk_pread(img, &c, 1, 0) == BLK_ERR_NOT_UNLOCKED);
    CHECK(unlock(img, secret) == BLK_OK);
    dump_plaintext(img);
    CHECK(blk_pwrite(img, "x", 1, 0) == BLK_ERR_READ_ONLY);
    blk_close(img);
    return failures;
}

static int test_wrong(const char *image, const char *type, const char *secret) {
    blk_image *img = NULL;
    CHECK(blk_open(image, type_arg(type), 0, &img) == BLK_OK);
    if (!img) return 1;
    int rc = unlock(img, secret);
    CHECK(rc == BLK_ERR_WRONG_SECRET);
    CHECK(blk_last_error()[0] != '\0');
    fprintf(stderr, "wrong secret: %d %s\n", rc, blk_last_error());
    uint64_t size;
    CHECK(blk_size(img, &size) == BLK_ERR_NOT_UNLOCKED);
    blk_close(img);
    return failures;
}

static int test_vkey(const char *image, const char *hexkey) {
    unsigned char key[256];
    int n = unhex(hexkey, key, sizeof key);
    CHECK(n > 0);
    blk_image *img = NULL;
    CHECK(blk_open(image, NULL, 0, &img) == BLK_OK);
    if (!img || n <= 0) return 1;
    /* A flipped bit: LUKS's digest refuses it. */
    key[0] ^= 1;
    if (strncmp(blk_image_type(img), "LUKS", 4) == 0) CHECK(blk_unlock_volume_key(img, key, (size_t)n) == BLK_ERR_WRONG_SECRET);
    key[0] ^= 1;
    CHECK(blk_unlock_volume_key(img, key, (size_t)n) == BLK_OK);
    dump_plaintext(img);
    blk_close(img);
    return failures;
}

static int test_write(const char *image, const char *secret) {
    blk_image *img = NULL;
    CHECK(blk_open(image, NULL, BLK_OPEN_READ_WRITE, &img) == BLK_OK);
    if (!img) return 1;
    CHECK(unlock(img, secret) == BLK_OK);
    uint64_t size = 0;
    CHECK(blk_size(img, &size) == BLK_OK);
    /* Unaligned, across a block edge; whole blocks; the last byte. */
    static char pat[70000], back[70000];
    for (size_t i = 0; i < sizeof pat; i++) pat[i] = (char)(i * 7 + 3);
    /* A sequential read first: the chunks after it are read ahead, and the
     * writes below must not leave them stale (the read at 4000 continues it). */
    CHECK(blk_pread(img, back, 4000, 0) == 4000);
    CHECK(blk_pwrite(img, pat, 1000, 4000) == 1000);
    CHECK(blk_pwrite(img, pat, 65536, 65536) == 65536);
    CHECK(blk_pwrite(img, pat + 9, 70000 - 9, 200001) == 70000 - 9);
    CHECK(blk_pwrite(img, "Z", 1, size - 1) == 1);
    CHECK(blk_pwrite(img, "ZZ", 2, size - 1) == BLK_ERR_RANGE);
    CHECK(blk_flush(img) == BLK_OK);
    CHECK(blk_pread(img, back, 1000, 4000) == 1000 && memcmp(back, pat, 1000) == 0);
    CHECK(blk_pread(img, back, 65536, 65536) == 65536 && memcmp(back, pat, 65536) == 0);
    CHECK(blk_pread(img, back, 70000 - 9, 200001) == 70000 - 9 && memcmp(back, pat + 9, 70000 - 9) == 0);
    blk_close(img);
    return failures;
}

static int test_dump(const char *image, const char *type, const char *secret) {
    blk_image *img = NULL;
    CHECK(blk_open(image, type_arg(type), 0, &img) == BLK_OK);
    if (!img) return 1;
    if (strcmp(secret, "-") != 0) CHECK(unlock(img, secret) == BLK_OK);
    char *json = NULL;
    CHECK(blk_dump_json(img, &json) == BLK_OK);
    if (json) printf("%s\n", json);
    blk_free(json);
    blk_close(img);
    return failures;
}

static int test_verity(const char *data, const char *hash) {
    unsigned char root[64];
    size_t n = 8;
    /* Too short a root buffer: the size needed. */
    CHECK(blk_verity_format(data, hash, "sha256", 4096, 4096, NULL, 0, root, &n) == BLK_ERR_INVALID);
    CHECK(n == 32);
    n = sizeof root;
    CHECK(blk_verity_format(data, hash, NULL, 0, 0, "\x01\x02\x03\x04", 4, root, &n) == BLK_OK);
    CHECK(n == 32);
    for (size_t i = 0; i < n; i++) printf("%02x", root[i]);
    printf("\n");
    CHECK(blk_verity_verify(data, hash, root, n) == BLK_OK);
    root[3] ^= 0x40;
    CHECK(blk_verity_verify(data, hash, root, n) == BLK_ERR_CORRUPT);
    root[3] ^= 0x40;
    /* One flipped data byte. */
    FILE *f = fopen(data, "r+b");
    CHECK(f != NULL);
    if (!f) return 1;
    fseek(f, 8192 + 5, SEEK_SET);
    int c = fgetc(f);
    fseek(f, 8192 + 5, SEEK_SET);
    fputc(c ^ 0xff, f);
    fclose(f);
    CHECK(blk_verity_verify(data, hash, root, n) == BLK_ERR_CORRUPT);
    CHECK(strstr(blk_last_error(), "data block 2") != NULL);
    fprintf(stderr, "corrupt: %s\n", blk_last_error());
    f = fopen(data, "r+b");
    fseek(f, 8192 + 5, SEEK_SET);
    fputc(c, f);
    fclose(f);
    return failures;
}

int main(int argc, char **argv) {
    const char *cmd = argc > 1 ? argv[1] : "";
    int rc;
    if (strcmp(cmd, "errors") == 0) rc = test_errors();
    else if (strcmp(cmd, "crypto") == 0) rc = test_crypto();
    else if (strcmp(cmd, "read") == 0 && argc == 5) rc = test_read(argv[2], argv[3], argv[4]);
    else if (strcmp(cmd, "wrong") == 0 && argc == 5) rc = test_wrong(argv[2], argv[3], argv[4]);
    else if (strcmp(cmd, "vkey") == 0 && argc == 4) rc = test_vkey(argv[2], argv[3]);
    else if (strcmp(cmd, "write") == 0 && argc == 4) rc = test_write(argv[2], argv[3]);
    else if (strcmp(cmd, "dump") == 0 && argc == 5) rc = test_dump(argv[2], argv[3], argv[4]);
    else if (strcmp(cmd, "verity") == 0 && argc == 4) rc = test_verity(argv[2], argv[3]);
    else if (strcmp(cmd, "version") == 0) rc = printf("%s\n", blk_version()) < 0;
    else if (strcmp(cmd, "tread") == 0 && argc >= 7) rc = test_tread(argc, argv);
    else if (strcmp(cmd, "dread") == 0 && argc == 5) rc = test_dread(argv[2], argv[3], argv[4]);
    else {
        fprintf(stderr, "usage: capi_test errors|crypto|read|wrong|vkey|write|dump|verity|version|tread|dread ...\n");
        return 2;
    }
    if (fflush(stdout) != 0) return 1;
    return (rc || failures) ? 1 : 0;
}
