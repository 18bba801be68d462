/*
 * The bench's syscall-heavy client: COUNT read(2) calls of CHUNK bytes each from FILE.
 *
 * Usage: bench-readloop FILE CHUNK COUNT
 *
 * FILE must hold at least CHUNK * COUNT bytes: every read must return exactly CHUNK bytes, so
 * the truth is COUNT reads and CHUNK * COUNT bytes from FILE (no EOF read, no stdio on FILE).
 * With COUNT = 0 it opens and closes FILE only: what the dynamic loader reads on its own.
 * Exits 0 when every read returned CHUNK bytes, 1 otherwise; prints nothing on success.
 */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s FILE CHUNK COUNT\n", argv[0]);
        return 2;
    }
    long chunk = strtol(argv[2], NULL, 10), count = strtol(argv[3], NULL, 10);
    char buf[4096];
    if (chunk <= 0 || chunk > (long)sizeof buf || count < 0) {
        fprintf(stderr, "CHUNK must be 1..%zu and COUNT >= 0\n", sizeof buf);
        return 2;
    }
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) {
        perror(argv[1]);
        return 1;
    }
    for (long i = 0; i < count; i++) {
        if (read(fd, buf, (size_t)chunk) != chunk) {
            fprintf(stderr, "read %ld of %ld came up short\n", i + 1, count);
            return 1;
        }
    }
    close(fd);
    return 0;
}
