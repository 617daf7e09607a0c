/* listring KEYRING: prints "TYPE DESCRIPTION" for each key linked into
 * KEYRING (a serial in hex, from /proc/keys), one a line, sorted by the
 * caller. /proc/keys shows how many keys a keyring holds but not which, and
 * the oracle's initramfs has no keyctl. Built static by
 * make-kernel-accept-golden.sh for the guest. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { KEYCTL_DESCRIBE = 6, KEYCTL_READ = 11 };

int main(int argc, char** argv) {
    if (argc != 2) return 2;
    long ring = strtol(argv[1], NULL, 16);
    static int ids[1024];
    long n = syscall(SYS_keyctl, KEYCTL_READ, ring, ids, sizeof ids);
    if (n < 0) {
        printf("keyctl read: %s (errno %d)\n", strerror(errno), errno);
        return 1;
    }
    if ((size_t)n > sizeof ids) n = sizeof ids;
    for (long i = 0; i < n / (long)sizeof ids[0]; i++) {
        static char d[4096];
        long m = syscall(SYS_keyctl, KEYCTL_DESCRIBE, ids[i], d, sizeof d - 1);
        if (m < 0) {
            printf("%x: %s\n", ids[i], strerror(errno));
            continue;
        }
        d[sizeof d - 1] = '\0';
        /* "type;uid;gid;perm;description" */
        char* type = d;
        char* semi = strchr(d, ';');
        if (!semi) continue;
        *semi = '\0';
        char* desc = semi + 1;
        for (int f = 0; f < 3 && desc; f++) {
            desc = strchr(desc, ';');
            if (desc) desc++;
        }
        printf("%s %s\n", type, desc ? desc : "?");
    }
    return 0;
}
