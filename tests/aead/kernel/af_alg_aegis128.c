/* Runs in the oracle guest (no python there): encrypts a fixed set of
 * AEGIS-128 cases through the kernel's AF_ALG "aead" interface, with every
 * driver named on the command line, and prints one block per case for
 * aegis128-af_alg.txt. The inputs are generated from the case number, so the
 * file records them too. Built static by make-aegis128-golden.sh. */
#include <linux/if_alg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SOL_ALG
#define SOL_ALG 279
#endif

struct kase { unsigned alen, plen, authsize; };
/* Odd lengths around the 16-byte block, a sector, and tag lengths 8..16. */
static const struct kase cases[] = {
    {0, 0, 16}, {1, 1, 16}, {13, 29, 16}, {16, 16, 12}, {20, 512, 16},
    {24, 4096, 16}, {33, 1000, 8}, {0, 77, 15}, {300, 0, 16}, {61, 4111, 13},
};

static void fill(uint8_t *p, size_t n, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        p[i] = (uint8_t)x;
    }
}

static void hex(const char *k, const uint8_t *p, size_t n) {
    printf("%-5s = ", k);
    for (size_t i = 0; i < n; i++) printf("%02x", p[i]);
    printf("\n");
}

/* Returns 0 and fills out (alen + plen + authsize bytes) on success. */
static int encrypt(const char *driver, const uint8_t *key, const uint8_t *iv, const uint8_t *in,
                   const struct kase *c, uint8_t *out) {
    struct sockaddr_alg sa = {.salg_family = AF_ALG};
    strcpy((char *)sa.salg_type, "aead");
    strncpy((char *)sa.salg_name, driver, sizeof sa.salg_name - 1);
    int tfm = socket(AF_ALG, SOCK_SEQPACKET, 0);
    if (tfm < 0 || bind(tfm, (struct sockaddr *)&sa, sizeof sa) < 0) return -1;
    if (setsockopt(tfm, SOL_ALG, ALG_SET_KEY, key, 16) < 0 ||
        setsockopt(tfm, SOL_ALG, ALG_SET_AEAD_AUTHSIZE, NULL, c->authsize) < 0) return -2;
    int op = accept(tfm, NULL, 0);
    if (op < 0) return -3;
    char cbuf[CMSG_SPACE(4) + CMSG_SPACE(sizeof(struct af_alg_iv) + 16) + CMSG_SPACE(4)];
    memset(cbuf, 0, sizeof cbuf);
    struct iovec iov = {(void *)in, c->alen + c->plen};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_ALG; cm->cmsg_type = ALG_SET_OP; cm->cmsg_len = CMSG_LEN(4);
    *(uint32_t *)CMSG_DATA(cm) = ALG_OP_ENCRYPT;
    cm = CMSG_NXTHDR(&msg, cm);
    cm->cmsg_level = SOL_ALG; cm->cmsg_type = ALG_SET_IV; cm->cmsg_len = CMSG_LEN(sizeof(struct af_alg_iv) + 16);
    struct af_alg_iv *aiv = (struct af_alg_iv *)CMSG_DATA(cm);
    aiv->ivlen = 16;
    memcpy(aiv->iv, iv, 16);
    cm = CMSG_NXTHDR(&msg, cm);
    cm->cmsg_level = SOL_ALG; cm->cmsg_type = ALG_SET_AEAD_ASSOCLEN; cm->cmsg_len = CMSG_LEN(4);
    *(uint32_t *)CMSG_DATA(cm) = c->alen;
    if (sendmsg(op, &msg, 0) != (ssize_t)(c->alen + c->plen)) return -4;
    size_t want = c->alen + c->plen + c->authsize, got = 0;
    while (got < want) {
        ssize_t r = read(op, out + got, want - got);
        if (r <= 0) return -5;
        got += (size_t)r;
    }
    close(op);
    close(tfm);
    return 0;
}

int main(int argc, char **argv) {
    int rc = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const struct kase *c = &cases[k];
        uint8_t key[16], iv[16];
        uint8_t *in = malloc(c->alen + c->plen + 1), *first = NULL;
        fill(key, 16, 3 * k + 1);
        fill(iv, 16, 3 * k + 2);
        fill(in, c->alen + c->plen, 3 * k + 3);
        const size_t outlen = c->alen + c->plen + c->authsize;
        for (int d = 1; d < argc; d++) {
            uint8_t *out = malloc(outlen);
            int e = encrypt(argv[d], key, iv, in, c, out);
            if (e) {
                fprintf(stderr, "%s: case %zu failed (%d)\n", argv[d], k, e);
                rc = 1;
            } else if (!first) {
                first = out;
                continue;
            } else if (memcmp(first, out, outlen)) {
                fprintf(stderr, "%s: case %zu differs from %s\n", argv[d], k, argv[1]);
                rc = 1;
            }
            free(out);
        }
        if (!first) continue;
        printf("# case %zu: assoc %u, text %u, tag %u\n", k, c->alen, c->plen, c->authsize);
        hex("key", key, 16);
        hex("iv", iv, 16);
        hex("assoc", in, c->alen);
        hex("ptext", in + c->alen, c->plen);
        hex("ctext", first + c->alen, c->plen + c->authsize);
        printf("\n");
        free(first);
        free(in);
    }
    return rc;
}
