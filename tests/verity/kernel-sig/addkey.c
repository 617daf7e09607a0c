/* addkey TYPE DESC FILE KEYRING: add_key(2) with FILE's bytes as the payload
 * (the oracle's initramfs has no keyctl). KEYRING is a serial in hex (from
 * /proc/keys) or "@u" (the user keyring). Prints the new key's serial or the
 * errno name. Built static by make-kernel-golden.sh for the guest. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char** argv) {
    if (argc != 5) return 2;
    FILE* f = fopen(argv[3], "rb");
    if (!f) return 2;
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    long ring = strcmp(argv[4], "@u") == 0 ? -4 /* KEY_SPEC_USER_KEYRING */ : strtol(argv[4], NULL, 16);
    long id = syscall(SYS_add_key, argv[1], strcmp(argv[2], "-") ? argv[2] : NULL, buf, n, ring);
    if (id < 0) {
        printf("add_key %s: %s (errno %d)\n", argv[1], strerror(errno), errno);
        return 1;
    }
    printf("add_key %s: key %lx\n", argv[1], id);
    return 0;
}
