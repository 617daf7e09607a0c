/* c_read IMAGE KEYFILE OFFSET LENGTH: open IMAGE (its format detected:
 * LUKS1, LUKS2, BitLocker, FileVault 2), unlock it with the passphrase in
 * KEYFILE (the whole file, as cryptsetup --key-file reads it) and write
 * LENGTH plaintext bytes from byte OFFSET to stdout. C11 and the C API only:
 *   cc -std=c11 c_read.c $(pkg-config --cflags --libs blkcrypt) */
#include <blkcrypt/blkcrypt.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int number(const char *s, uint64_t *v) {
    char *end = NULL;
    errno = 0;
    unsigned long long n = strtoull(s, &end, 10);
    if (!*s || *s == '-' || *end || errno) return 0;
    *v = (uint64_t)n;
    return 1;
}

static int fail(const char *what, int code) {
    fprintf(stderr, "c_read: %s: %s (%s)\n", what, blk_last_error(), blk_strerror(code));
    return code == BLK_ERR_WRONG_SECRET ? 2 : 1;
}

int main(int argc, char **argv) {
    uint64_t offset = 0, length = 0;
    if (argc != 5 || !number(argv[3], &offset) || !number(argv[4], &length)) {
        fprintf(stderr, "usage: c_read IMAGE KEYFILE OFFSET LENGTH\n");
        return 2;
    }
    blk_image *img = NULL;
    int rc = blk_open(argv[1], NULL, 0, &img);
    if (rc != BLK_OK) return fail("open", rc);
    fprintf(stderr, "%s: %s\n", argv[1], blk_image_type(img));
    rc = blk_unlock_key_file(img, argv[2]);
    if (rc != BLK_OK) {
        blk_close(img);
        return fail("unlock", rc);
    }
    uint64_t size = 0;
    blk_size(img, &size);
    if (offset > size || length > size - offset) {
        fprintf(stderr, "c_read: the plaintext is %llu bytes\n", (unsigned long long)size);
        blk_close(img);
        return 1;
    }
    static char buf[1 << 20];
    int status = 0;
    while (length > 0) {
        size_t want = length < sizeof buf ? (size_t)length : sizeof buf;
        int64_t got = blk_pread(img, buf, want, offset);
        if (got <= 0) {
            status = fail("read", got < 0 ? (int)got : BLK_ERR_IO);
            break;
        }
        if (fwrite(buf, 1, (size_t)got, stdout) != (size_t)got) {
            perror("c_read: writing stdout");
            status = 1;
            break;
        }
        offset += (uint64_t)got;
        length -= (uint64_t)got;
    }
    blk_close(img);
    if (fflush(stdout) != 0) {
        perror("c_read: writing stdout");
        return 1;
    }
    return status;
}
