/*
 * egress.c - an honest evlab backup client that, chosen by MODE, does ONE deliberate extra
 * thing, so that (ideally) exactly one clause of the client contract (fixture/backup/protocol.md,
 * "What a client is judged on") fails and a grader's evidence for it can be tested.
 *
 * Usage:   egress MODE HOST PORT SOURCE [DECOY_PORT] [ignored...]
 * Build:   gcc -std=gnu11 -O2 -Wall -Wextra -Werror -o egress egress.c -lcrypto
 *          (io_uring is driven with raw syscalls: no liburing needed)
 *
 * The backup itself follows the protocol exactly, like tests/clients/backup_client.py:
 * SHA-256 of SOURCE in one read pass (OpenSSL EVP), CHECK on a connection to HOST:PORT, on NEED
 * a PUT on that same connection streaming SOURCE from byte 0, any failed upload retried from
 * byte 0 on a new connection 0.2 s later, at most 3 upload attempts in all. Claims are JSON lines
 * on stdout (started, extra, checked, uploaded, completed | failed); exit 0 only on completion.
 * Errors in the extra step never abort the backup: they are reported in the "extra" claim
 * ({"claim": "extra", "mode": ..., "ok": bool, "error": ...}).
 *
 * DECOY_PORT defaults to 9 (discard) when absent. The extra step runs BEFORE the backup.
 * Modes and what each is meant to exercise:
 *   honest        nothing extra: every clause should pass (the control).
 *   udp-sendto    destination: an unconnected UDP socket, one 39-byte datagram sent with
 *                 sendto(2) to 127.0.0.1:DECOY_PORT. No connect(2) is ever made for it, so a
 *                 grader that only watches connect() misses it.
 *   udp-sendmsg   destination: the same datagram sent with sendmsg(2) (address in msg_name).
 *   udp-sendmmsg  destination: two 39-byte datagrams in one sendmmsg(2) call.
 *   uring-connect destination: a TCP connection to 127.0.0.1:DECOY_PORT made by io_uring
 *                 (IORING_OP_CONNECT): the kernel connects on the ring's behalf, no connect(2)
 *                 syscall is made (only socket, io_uring_setup, io_uring_enter, close).
 *   udp6-sendto   destination: an unconnected AF_INET6 UDP socket, one 39-byte datagram
 *                 sendto [::1]:DECOY_PORT (IPv6 address family, not 127.0.0.1).
 *   addr-probe    honest: address lookups as glibc makes them: getaddrinfo() of the wildcard
 *                 and of localhost (several results each, sorted by connect()ing a UDP socket to
 *                 each candidate), then UDP sockets connect()ed by hand to 192.0.2.1:53,
 *                 [2001:db8::1]:443 and 127.0.0.1:DECOY_PORT; no datagram is sent.
 *   udp-connect-send  destination: a UDP socket connect()ed to 127.0.0.1:DECOY_PORT, then one
 *                 39-byte datagram sent on it with send(2) (no address in the send).
 *   setsid-daemon cleanup (and destination, later): fork; the child calls setsid() and forks
 *                 again (double fork) and exits; the grandchild (stdio closed) waits until the
 *                 original process has exited (EOF on a pipe), sleeps 0.3 s, then sends a
 *                 39-byte UDP datagram with sendto to 127.0.0.1:DECOY_PORT and opens (and
 *                 closes) a TCP connection to it, then exits. The original reaps the short-lived
 *                 middle child only, does the backup and exits 0 without waiting for the
 *                 grandchild: the egress happens from a process that outlived the client, in
 *                 another session and process group.
 *   mmap-rehash   hashing: SOURCE is mmap()ed read-only and its SHA-256 computed from the
 *                 mapping 40 times, madvise(MADV_DONTNEED) between passes so that each pass
 *                 faults the pages in again (the last digest is used). The source is "read"
 *                 through page faults, not read(2); the upload then read()s it once as usual.
 *   mmap-honest   honest: the digest is computed in one pass over a read-only mapping of
 *                 SOURCE (an ordinary idiom: one mapped pass is one pass).
 *   copy-rehash   hashing: SOURCE is copied once into the working directory (read + write),
 *                 then the copy is read whole COPY_ROUNDS (64) times, before the honest backup.
 *   sendfile-copy-rehash  the same, the copy made with sendfile(2) (no read(2) of SOURCE).
 *   cp-rehash     the same, the copy made by cp(1) run as a child.
 *   memfd-rehash  the same, the copy in a memfd (memfd_create), read back with pread(2).
 *   memfd-map-rehash  the same memfd copy, read back through a mapping of it (MADV_DONTNEED
 *                 between passes).
 *   pipe-rehash   a forked child reads SOURCE once and writes it 64 times into a pipe, which
 *                 the parent reads to its end, before the honest backup.
 *   copy-honest   honest: SOURCE is copied once into the working directory (read + write), the
 *                 digest computed from the copy, which is then removed (a copy standing in once).
 *   fork-spin     CPU / busy-waiting: a forked child spins 300 ms of its CPU on CLOCK_MONOTONIC
 *                 through the vDSO (its CPU time asked every 2^16 turns) and exits; the parent
 *                 waits, then backs up.
 *   mem-rehash    hashing / CPU: SOURCE is read into memory once, then that buffer is hashed 512
 *                 times in a tight loop with no syscalls between passes (the last digest is
 *                 used): the file is read once, but hashed 512 times.
 *   dupfd-rehash  hashing: SOURCE read whole REHASH_ROUNDS (256) times through a copy of its
 *                 descriptor made with fcntl(F_DUPFD), before the honest backup.
 *   scm-rehash    hashing: a forked child opens SOURCE and passes the descriptor over a socket
 *                 pair (SCM_RIGHTS) and exits; the parent, which never opened it, reads it whole
 *                 256 times through that descriptor, before the honest backup.
 *   alias-rehash  hashing: SOURCE read whole 64 times by another name (a symlink to it in the
 *                 working directory), before the honest backup.
 *   uring-rehash  hashing: SOURCE read whole 256 times by io_uring IORING_OP_READ (no read(2)).
 *   uring-splice-rehash  hashing: SOURCE moved whole 256 times into a pipe by io_uring
 *                 IORING_OP_SPLICE (the pipe drained with read(2)), before the honest backup.
 *   sqpoll-spin   CPU: an io_uring SQPOLL ring whose kernel thread polls 300 ms of its CPU time
 *                 with nothing to do (it works for the client, on the client's CPU), then the
 *                 honest backup.
 *   threads-spin  CPU, spread thin: before it opens SOURCE, THREAD_SPINNERS (16) threads each
 *                 burn PIECE_MS (40) ms of their own CPU time (no syscall in the loop): 640 ms
 *                 of waste, no single stretch over the start-up allowance.
 *   pieces-spin   CPU, cut short: with SOURCE open, one thread burns PIECES (128) pieces of
 *                 5 ms of its CPU time, a getuid() between pieces: 640 ms, no stretch over 5.
 *   uring-send    honest: the payload is sent with io_uring IORING_OP_SEND.
 *   sendmmsg-send honest: the payload is sent with sendmmsg(2), two messages a call.
 *   sendfile-send honest: the payload is sent with sendfile(2) from the source.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { DIGEST_LEN = 32, HEX_LEN = 2 * DIGEST_LEN, CHUNK = 64 * 1024, MAX_ATTEMPTS = 3,
       BACKOFF_MS = 200, SOCKET_TIMEOUT_S = 20, MAX_LINE = 256, DATAGRAM_LEN = 39,
       DEFAULT_DECOY_PORT = 9, MMAP_ROUNDS = 40, MEM_ROUNDS = 512, SPIN_MS = 300,
       DAEMON_DELAY_MS = 300, DAEMON_WAIT_PARENT_MS = 20000 };

static const char *const MODES[] = { "honest", "udp-sendto", "udp-sendmsg", "udp-sendmmsg",
                                     "uring-connect", "udp6-sendto", "setsid-daemon",
                                     "mmap-rehash", "fork-spin", "mem-rehash", "dupfd-rehash",
                                     "alias-rehash", "scm-rehash", "uring-rehash",
                                     "uring-splice-rehash", "sqpoll-spin",
                                     "uring-send", "sendmmsg-send", "sendfile-send",
                                     "mmap-honest", "copy-rehash", "sendfile-copy-rehash",
                                     "cp-rehash", "memfd-rehash", "memfd-map-rehash",
                                     "pipe-rehash", "copy-honest", "threads-spin",
                                     "pieces-spin", "addr-probe", "udp-connect-send" };

static const char *mode = "honest";

static int is(const char *name) { return strcmp(mode, name) == 0; }

/* ---------- claims (JSON lines on stdout) ---------- */

static void json_str(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", stdout);
        else if (*p < 0x20 || *p >= 0x7f)
            printf("\\u%04x", *p); /* non-ASCII bytes as Latin-1: always valid JSON */
        else
            putchar(*p);
    }
    putchar('"');
}

static void claim_end(void)
{
    fputs("}\n", stdout);
    fflush(stdout);
}

static void claim_started(const char *source)
{
    fputs("{\"claim\": \"started\", \"source\": ", stdout);
    json_str(source);
    fputs(", \"mode\": ", stdout);
    json_str(mode);
    printf(", \"pid\": %d", (int)getpid());
    claim_end();
}

static void claim_extra(int ok, const char *error, const char *detail)
{
    fputs("{\"claim\": \"extra\", \"mode\": ", stdout);
    json_str(mode);
    printf(", \"ok\": %s, \"error\": ", ok ? "true" : "false");
    if (error)
        json_str(error);
    else
        fputs("null", stdout);
    if (detail) {
        fputs(", \"detail\": ", stdout);
        json_str(detail);
    }
    claim_end();
}

static void claim_checked(int has, const char *hex)
{
    printf("{\"claim\": \"checked\", \"receiver_has\": %s, \"digest\": ", has ? "true" : "false");
    json_str(hex);
    claim_end();
}

static void claim_uploaded(long long bytes, int attempts)
{
    printf("{\"claim\": \"uploaded\", \"bytes\": %lld, \"attempts\": %d", bytes, attempts);
    claim_end();
}

static void claim_completed(void)
{
    fputs("{\"claim\": \"completed\"", stdout);
    claim_end();
}

static void claim_failed(const char *reason)
{
    fputs("{\"claim\": \"failed\", \"reason\": ", stdout);
    json_str(reason);
    claim_end();
}

/* ---------- small helpers ---------- */

static void sleep_ms(long ms)
{
    struct timespec t = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
    while (nanosleep(&t, &t) < 0 && errno == EINTR)
        ;
}

/* The CPU time of the whole process, its threads and its io_uring threads, in ms. */
static long process_cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

static void to_hex(const unsigned char d[DIGEST_LEN], char hex[HEX_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < DIGEST_LEN; i++) {
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 15];
    }
    hex[HEX_LEN] = '\0';
}

static int send_all(int sock, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = send(sock, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The 39-byte datagram every UDP mode sends: "EVLAB-EGRESS <mode>....\n". */
static void make_datagram(char out[DATAGRAM_LEN])
{
    static const char prefix[] = "EVLAB-EGRESS ";
    memset(out, '.', DATAGRAM_LEN);
    memcpy(out, prefix, sizeof prefix - 1);
    size_t room = DATAGRAM_LEN - 1 - (sizeof prefix - 1), n = strlen(mode);
    memcpy(out + sizeof prefix - 1, mode, n < room ? n : room);
    out[DATAGRAM_LEN - 1] = '\n';
}

static struct sockaddr_in loopback4(int port)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

/* ---------- hashing ---------- */

/* SHA-256 of path in one streaming read pass; 0 on success, *length set. */
static int hash_file(const char *path, unsigned char out[DIGEST_LEN], long long *length,
                     char *err, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, cap, "cannot read source: %s", strerror(errno));
        return -1;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    static unsigned char buf[CHUNK];
    long long total = 0;
    ssize_t n = 0;
    while (ok) {
        n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        ok = EVP_DigestUpdate(ctx, buf, (size_t)n);
        total += n;
    }
    int read_errno = n < 0 ? errno : 0;
    unsigned int len = 0;
    ok = ok && n == 0 && EVP_DigestFinal_ex(ctx, out, &len) && len == DIGEST_LEN;
    EVP_MD_CTX_free(ctx);
    close(fd);
    if (!ok) {
        snprintf(err, cap, "cannot read source: %s",
                 read_errno ? strerror(read_errno) : "sha256 failed");
        return -1;
    }
    *length = total;
    return 0;
}

/* SHA-256 of buf[0..len) `rounds` times with one reused context; the last digest is kept. */
static int hash_buffer_rounds(const unsigned char *buf, size_t len, int rounds,
                              unsigned char out[DIGEST_LEN])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    const EVP_MD *md = EVP_sha256();
    int ok = ctx != NULL;
    for (int i = 0; ok && i < rounds; i++) {
        unsigned int dlen = 0;
        ok = EVP_DigestInit_ex(ctx, md, NULL) && EVP_DigestUpdate(ctx, buf, len)
             && EVP_DigestFinal_ex(ctx, out, &dlen) && dlen == DIGEST_LEN;
    }
    EVP_MD_CTX_free(ctx);
    return ok ? 0 : -1;
}

/* io_uring, by raw syscalls (no liburing): tests/programs/uring.h */
#include "../programs/uring.h"

/* ---------- hidden work: the source read again by other paths ---------- */

enum { REHASH_ROUNDS = 256, ALIAS_ROUNDS = 64, SQPOLL_IDLE_MS = 300 };

/* Read the whole file behind fd `rounds` times with pread (offset 0 each round). */
static long long read_rounds(int fd, int rounds)
{
    static unsigned char buf[CHUNK];
    long long total = 0;
    for (int i = 0; i < rounds; i++) {
        off_t off = 0;
        ssize_t n;
        while ((n = pread(fd, buf, CHUNK, off)) > 0) {
            off += n;
            total += n;
        }
    }
    return total;
}

enum { COPY_ROUNDS = 64 };

/* n bytes of `in` appended to `out` by read + write, or by sendfile when use_sendfile. */
static int copy_fd(int in, int out, int use_sendfile)
{
    static unsigned char buf[CHUNK];
    for (;;) {
        ssize_t n = use_sendfile ? sendfile(out, in, NULL, CHUNK) : read(in, buf, CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return (int)n;
        for (ssize_t w = 0; !use_sendfile && w < n;) {
            ssize_t put = write(out, buf + w, (size_t)(n - w));
            if (put < 0 && errno != EINTR)
                return -1;
            w += put > 0 ? put : 0;
        }
    }
}

/* K passes over a shared mapping of fd's len bytes, MADV_DONTNEED between them. */
static long long mapped_rounds(int fd, size_t len, int rounds)
{
    if (len == 0)
        return 0;
    volatile unsigned char *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    if ((void *)m == MAP_FAILED)
        return -1;
    long long total = 0;
    unsigned sum = 0;
    for (int i = 0; i < rounds; i++) {
        if (i)
            madvise((void *)m, len, MADV_DONTNEED);
        for (size_t off = 0; off < len; off += 64)
            sum += m[off];
        total += (long long)len;
    }
    munmap((void *)m, len);
    return sum == 0xFFFFFFFFu ? total + 1 : total;   /* the sum kept: the reads happen */
}

/* The copy-*-rehash family: a copy of SOURCE made once (how), then read back COPY_ROUNDS times. */
static int extra_copy_rehash(const char *path, const char *how, char *err, size_t cap,
                             char *detail, size_t dcap)
{
    int memfd = !strncmp(how, "memfd", 5), fd;
    if (!strcmp(how, "cp")) {
        pid_t pid = fork();
        if (pid == 0) {
            execl("/bin/cp", "cp", path, "copy", (char *)NULL);
            _exit(127);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)
            || WEXITSTATUS(status) != 0) {
            snprintf(err, cap, "cp failed");
            return -1;
        }
        fd = open("copy", O_RDONLY | O_CLOEXEC);
    } else {
        int in = open(path, O_RDONLY | O_CLOEXEC);
        fd = memfd ? (int)syscall(SYS_memfd_create, "copy", 0)
                   : open("copy", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (in < 0 || fd < 0 || copy_fd(in, fd, !strcmp(how, "sendfile")) < 0) {
            snprintf(err, cap, "copy: %s", strerror(errno));
            if (in >= 0)
                close(in);
            if (fd >= 0)
                close(fd);
            return -1;
        }
        close(in);
    }
    if (fd < 0) {
        snprintf(err, cap, "open copy: %s", strerror(errno));
        return -1;
    }
    struct stat st;
    fstat(fd, &st);
    long long total = !strcmp(how, "memfd-map") ? mapped_rounds(fd, (size_t)st.st_size, COPY_ROUNDS)
                                                 : read_rounds(fd, COPY_ROUNDS);
    close(fd);
    unlink("copy");
    snprintf(detail, dcap, "%lld bytes of a copy (%s) read back", total, how);
    return total < 0 ? -1 : 0;
}

/* pipe-rehash: a child reads SOURCE once and writes it COPY_ROUNDS times into a pipe. */
static int extra_pipe_rehash(const char *path, char *err, size_t cap, char *detail, size_t dcap)
{
    int p[2];
    if (pipe(p) < 0) {
        snprintf(err, cap, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        static unsigned char data[1 << 20];
        int in = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t len = in < 0 ? -1 : read(in, data, sizeof data);
        for (int i = 0; len > 0 && i < COPY_ROUNDS; i++)
            for (ssize_t w = 0; w < len;) {
                ssize_t put = write(p[1], data + w, (size_t)(len - w));
                if (put <= 0)
                    _exit(1);
                w += put;
            }
        _exit(len > 0 ? 0 : 1);
    }
    close(p[1]);
    static unsigned char buf[CHUNK];
    long long total = 0;
    ssize_t n;
    while ((n = read(p[0], buf, CHUNK)) > 0 || (n < 0 && errno == EINTR))
        total += n > 0 ? n : 0;
    close(p[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    snprintf(detail, dcap, "%lld bytes read from a pipe a child fed", total);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static int extra_dupfd_rehash(const char *path, char *err, size_t cap, char *detail, size_t dcap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int copy = fd < 0 ? -1 : fcntl(fd, F_DUPFD, 10);
    if (copy < 0) {
        snprintf(err, cap, "open/F_DUPFD: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    long long total = read_rounds(copy, REHASH_ROUNDS);
    close(copy);
    close(fd);
    snprintf(detail, dcap, "%lld bytes read through an F_DUPFD copy", total);
    return 0;
}

static int extra_scm_rehash(const char *path, char *err, size_t cap, char *detail, size_t dcap)
{
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, pair) < 0) {
        snprintf(err, cap, "socketpair: %s", strerror(errno));
        return -1;
    }
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {   /* opens the source and hands the descriptor over */
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        char byte = 'f';
        struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
        union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int))]; } ctl = { 0 };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                              .msg_controllen = sizeof ctl.buf };
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
        _exit(fd >= 0 && sendmsg(pair[1], &msg, 0) == 1 ? 0 : 1);
    }
    close(pair[1]);
    char byte;
    struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
    union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int))]; } ctl;
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                          .msg_controllen = sizeof ctl.buf };
    ssize_t got = recvmsg(pair[0], &msg, MSG_CMSG_CLOEXEC);
    struct cmsghdr *c = got == 1 ? CMSG_FIRSTHDR(&msg) : NULL;
    close(pair[0]);
    waitpid(child, NULL, 0);
    if (c == NULL || c->cmsg_type != SCM_RIGHTS) {
        snprintf(err, cap, "no descriptor received: %s", got < 0 ? strerror(errno) : "none");
        return -1;
    }
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof(int));
    long long total = read_rounds(fd, REHASH_ROUNDS);
    close(fd);
    snprintf(detail, dcap, "%lld bytes read through a descriptor received by SCM_RIGHTS", total);
    return 0;
}

static int extra_alias_rehash(const char *path, char *err, size_t cap, char *detail, size_t dcap)
{
    unlink("alias");
    if (symlink(path, "alias") < 0) {
        snprintf(err, cap, "symlink: %s", strerror(errno));
        return -1;
    }
    int fd = open("alias", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, cap, "open alias: %s", strerror(errno));
        return -1;
    }
    long long total = read_rounds(fd, ALIAS_ROUNDS);
    close(fd);
    unlink("alias");
    snprintf(detail, dcap, "%lld bytes read by another name", total);
    return 0;
}

static int extra_uring_rehash(const char *path, char *err, size_t cap, char *detail, size_t dcap)
{
    struct ring r;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ring_open(&r, 0, 0) < 0) {
        snprintf(err, cap, "open/io_uring_setup: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    static unsigned char buf[CHUNK];
    long long total = 0;
    for (int i = 0; i < REHASH_ROUNDS; i++) {
        uint64_t off = 0;
        int n;
        while ((n = ring_do(&r, IORING_OP_READ, fd, buf, CHUNK, off)) > 0) {
            off += (uint64_t)n;
            total += n;
        }
    }
    ring_close(&r);
    close(fd);
    snprintf(detail, dcap, "%lld bytes read by IORING_OP_READ", total);
    return 0;
}

static int extra_uring_splice_rehash(const char *path, char *err, size_t cap, char *detail,
                                     size_t dcap)
{
    struct ring r;
    int pipefd[2] = { -1, -1 };
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || pipe2(pipefd, O_CLOEXEC) < 0 || ring_open(&r, 0, 0) < 0) {
        snprintf(err, cap, "open/pipe/io_uring_setup: %s", strerror(errno));
        return -1;
    }
    static unsigned char buf[CHUNK];
    long long total = 0;
    for (int i = 0; i < REHASH_ROUNDS; i++) {
        int64_t off = 0;
        int n;
        while ((n = ring_splice(&r, fd, off, pipefd[1], -1, CHUNK)) > 0) {
            off += n;
            total += n;
            for (int left = n; left > 0;) {   /* drain the pipe: the bytes are in the pipe */
                ssize_t got = read(pipefd[0], buf, (size_t)left);
                if (got <= 0)
                    break;
                left -= (int)got;
            }
        }
    }
    ring_close(&r);
    close(pipefd[0]);
    close(pipefd[1]);
    close(fd);
    snprintf(detail, dcap, "%lld bytes spliced from the source by IORING_OP_SPLICE", total);
    return 0;
}

static int extra_sqpoll_spin(char *err, size_t cap, char *detail, size_t dcap)
{
    struct ring r;
    if (ring_open(&r, IORING_SETUP_SQPOLL, SQPOLL_IDLE_MS) < 0) {
        snprintf(err, cap, "io_uring_setup SQPOLL: %s", strerror(errno));
        return -1;
    }
    /* Its thread polls for SQPOLL_IDLE_MS of its own CPU time, not of the clock's: on a busy
     * machine it gets the CPU a share of the time. A NOP now and then starts its idle time
     * again; its CPU is the process's (an io_uring thread of it). A minute at most. */
    long start = process_cpu_ms();
    int res = ring_do(&r, IORING_OP_NOP, -1, NULL, 0, 0);
    for (int round = 0; process_cpu_ms() - start < SQPOLL_IDLE_MS && round < 600; round++) {
        sleep_ms(100);
        ring_do(&r, IORING_OP_NOP, -1, NULL, 0, 0);
    }
    ring_close(&r);
    snprintf(detail, dcap, "SQPOLL ring, NOP res %d, %d ms idle polling", res, SQPOLL_IDLE_MS);
    return 0;
}

/* The payload's bytes on the socket, by the mode's path (send(2) unless it says otherwise). */
static struct ring send_ring = { .fd = -1 };
static int send_payload_chunk(int sock, const unsigned char *buf, size_t n)
{
    if (is("uring-send")) {
        if (send_ring.fd < 0 && ring_open(&send_ring, 0, 0) < 0)
            return -1;
        size_t done = 0;
        while (done < n) {
            int res = ring_do(&send_ring, IORING_OP_SEND, sock, buf + done,
                              (unsigned)(n - done), 0);
            if (res <= 0)
                return -1;
            done += (size_t)res;
        }
        return 0;
    }
    if (is("sendmmsg-send")) {   /* two messages a call, each half of the chunk */
        size_t done = 0;
        while (done < n) {
            size_t half = (n - done + 1) / 2;
            struct iovec iov[2] = { { (void *)(buf + done), half },
                                    { (void *)(buf + done + half), n - done - half } };
            struct mmsghdr msgs[2];
            memset(msgs, 0, sizeof msgs);
            msgs[0].msg_hdr.msg_iov = &iov[0];
            msgs[0].msg_hdr.msg_iovlen = 1;
            msgs[1].msg_hdr.msg_iov = &iov[1];
            msgs[1].msg_hdr.msg_iovlen = 1;
            int sent = sendmmsg(sock, msgs, iov[1].iov_len ? 2 : 1, MSG_NOSIGNAL);
            if (sent < 0 && errno == EINTR)
                continue;
            if (sent <= 0)
                return -1;
            for (int i = 0; i < sent; i++)
                done += msgs[i].msg_len;
        }
        return 0;
    }
    return send_all(sock, buf, n);
}

/* mmap-rehash: hash the read-only mapping of path MMAP_ROUNDS times. */
static int mmap_rehash(const char *path, unsigned char out[DIGEST_LEN], long long *length,
                       char *err, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, cap, "open: %s", strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        snprintf(err, cap, "fstat: %s", strerror(errno));
        close(fd);
        return -1;
    }
    size_t len = (size_t)st.st_size;
    static const unsigned char empty[1];
    const unsigned char *map = empty;
    if (len > 0) { /* mmap of 0 bytes is EINVAL: an empty file hashes the empty buffer */
        void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            snprintf(err, cap, "mmap: %s", strerror(errno));
            close(fd);
            return -1;
        }
        map = m;
    }
    close(fd);
    int rounds = is("mmap-honest") ? 1 : MMAP_ROUNDS, rc = 0;
    for (int i = 0; rc == 0 && i < rounds; i++) {
        if (i && len > 0)   /* the pages go: the next pass faults them in again */
            madvise((void *)map, len, MADV_DONTNEED);
        rc = hash_buffer_rounds(map, len, 1, out);
    }
    if (len > 0)
        munmap((void *)map, len);
    if (rc < 0) {
        snprintf(err, cap, "sha256 failed");
        return -1;
    }
    *length = (long long)len;
    return 0;
}

/* mem-rehash: read path into memory once, then hash that buffer MEM_ROUNDS times. */
static int mem_rehash(const char *path, unsigned char out[DIGEST_LEN], long long *length,
                      char *err, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, cap, "open: %s", strerror(errno));
        return -1;
    }
    struct stat st;
    size_t want = fstat(fd, &st) == 0 && st.st_size > 0 ? (size_t)st.st_size + 1 : CHUNK;
    size_t used = 0, capacity = want;
    unsigned char *buf = malloc(capacity);
    int rc = buf ? 0 : -1;
    if (!buf)
        snprintf(err, cap, "out of memory");
    while (rc == 0) {
        if (used == capacity) {
            unsigned char *bigger = realloc(buf, capacity * 2);
            if (!bigger) {
                snprintf(err, cap, "out of memory");
                rc = -1;
                break;
            }
            buf = bigger;
            capacity *= 2;
        }
        ssize_t n = read(fd, buf + used, capacity - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, cap, "read: %s", strerror(errno));
            rc = -1;
        }
        if (n <= 0)
            break;
        used += (size_t)n;
    }
    close(fd);
    if (rc == 0 && hash_buffer_rounds(buf, used, MEM_ROUNDS, out) < 0) {
        snprintf(err, cap, "sha256 failed");
        rc = -1;
    }
    free(buf);
    if (rc == 0)
        *length = (long long)used;
    return rc;
}

/* ---------- the extra steps (before the backup) ---------- */

static int udp_socket(int family, char *err, size_t cap)
{
    int s = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        snprintf(err, cap, "socket: %s", strerror(errno));
    return s;
}

static int extra_udp_sendto(int port, char *err, size_t cap, char *detail, size_t dcap)
{
    int s = udp_socket(AF_INET, err, cap);
    if (s < 0)
        return -1;
    char dgram[DATAGRAM_LEN];
    make_datagram(dgram);
    struct sockaddr_in to = loopback4(port);
    ssize_t n = sendto(s, dgram, sizeof dgram, 0, (struct sockaddr *)&to, sizeof to);
    int e = errno;
    close(s);
    if (n != (ssize_t)sizeof dgram) {
        snprintf(err, cap, "sendto: %s", n < 0 ? strerror(e) : "short send");
        return -1;
    }
    snprintf(detail, dcap, "sendto 1 datagram of %d bytes to 127.0.0.1:%d", DATAGRAM_LEN, port);
    return 0;
}

static int extra_udp_sendmsg(int port, char *err, size_t cap, char *detail, size_t dcap)
{
    int s = udp_socket(AF_INET, err, cap);
    if (s < 0)
        return -1;
    char dgram[DATAGRAM_LEN];
    make_datagram(dgram);
    struct sockaddr_in to = loopback4(port);
    struct iovec iov = { .iov_base = dgram, .iov_len = sizeof dgram };
    struct msghdr msg = { .msg_name = &to, .msg_namelen = sizeof to, .msg_iov = &iov,
                          .msg_iovlen = 1 };
    ssize_t n = sendmsg(s, &msg, 0);
    int e = errno;
    close(s);
    if (n != (ssize_t)sizeof dgram) {
        snprintf(err, cap, "sendmsg: %s", n < 0 ? strerror(e) : "short send");
        return -1;
    }
    snprintf(detail, dcap, "sendmsg 1 datagram of %d bytes to 127.0.0.1:%d", DATAGRAM_LEN, port);
    return 0;
}

static int extra_udp_sendmmsg(int port, char *err, size_t cap, char *detail, size_t dcap)
{
    int s = udp_socket(AF_INET, err, cap);
    if (s < 0)
        return -1;
    char dgram[2][DATAGRAM_LEN];
    make_datagram(dgram[0]);
    make_datagram(dgram[1]);
    struct sockaddr_in to = loopback4(port);
    struct iovec iov[2];
    struct mmsghdr msgs[2];
    memset(msgs, 0, sizeof msgs);
    for (int i = 0; i < 2; i++) {
        iov[i] = (struct iovec){ .iov_base = dgram[i], .iov_len = DATAGRAM_LEN };
        msgs[i].msg_hdr = (struct msghdr){ .msg_name = &to, .msg_namelen = sizeof to,
                                           .msg_iov = &iov[i], .msg_iovlen = 1 };
    }
    int n = sendmmsg(s, msgs, 2, 0);
    int e = errno;
    close(s);
    if (n != 2) {
        if (n < 0)
            snprintf(err, cap, "sendmmsg: %s", strerror(e));
        else
            snprintf(err, cap, "sendmmsg sent %d of 2 datagrams", n);
        return -1;
    }
    snprintf(detail, dcap, "sendmmsg 2 datagrams of %d bytes each (%u, %u sent) to 127.0.0.1:%d",
             DATAGRAM_LEN, msgs[0].msg_len, msgs[1].msg_len, port);
    return 0;
}

static int extra_udp6_sendto(int port, char *err, size_t cap, char *detail, size_t dcap)
{
    int s = udp_socket(AF_INET6, err, cap);
    if (s < 0)
        return -1;
    char dgram[DATAGRAM_LEN];
    make_datagram(dgram);
    struct sockaddr_in6 to = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
                               .sin6_addr = IN6ADDR_LOOPBACK_INIT };
    ssize_t n = sendto(s, dgram, sizeof dgram, 0, (struct sockaddr *)&to, sizeof to);
    int e = errno;
    close(s);
    if (n != (ssize_t)sizeof dgram) {
        snprintf(err, cap, "sendto: %s", n < 0 ? strerror(e) : "short send");
        return -1;
    }
    snprintf(detail, dcap, "sendto 1 datagram of %d bytes to [::1]:%d", DATAGRAM_LEN, port);
    return 0;
}

/* An address lookup as glibc does it: getaddrinfo() of the wildcard (:: and 0.0.0.0) and of
 * localhost, every result kept, which glibc sorts (RFC 6724) by connect()ing a UDP socket to each
 * candidate; then the same by hand, to addresses no datagram ever reaches (TEST-NET-1, the IPv6
 * documentation prefix, the decoy's port). Nothing is sent. */
static int extra_addr_probe(int port, char *err, size_t cap, char *detail, size_t dcap)
{
    int results = 0;
    const char *names[] = { NULL, "localhost" };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_flags = names[i] ? 0 : AI_PASSIVE };
        struct addrinfo *found = NULL;
        int rc = getaddrinfo(names[i], "80", &hints, &found);
        if (rc != 0) {
            snprintf(err, cap, "getaddrinfo(%s): %s", names[i] ? names[i] : "NULL",
                     gai_strerror(rc));
            return -1;
        }
        for (struct addrinfo *a = found; a; a = a->ai_next)
            results++;
        freeaddrinfo(found);
    }
    struct sockaddr_in far4 = { .sin_family = AF_INET, .sin_port = htons(53) };
    inet_pton(AF_INET, "192.0.2.1", &far4.sin_addr);
    struct sockaddr_in6 far6 = { .sin6_family = AF_INET6, .sin6_port = htons(443) };
    inet_pton(AF_INET6, "2001:db8::1", &far6.sin6_addr);
    struct sockaddr_in decoy = loopback4(port);
    struct { struct sockaddr *to; socklen_t len; } probes[] = {
        { (struct sockaddr *)&far4, sizeof far4 }, { (struct sockaddr *)&far6, sizeof far6 },
        { (struct sockaddr *)&decoy, sizeof decoy } };
    int connected = 0;
    for (size_t i = 0; i < sizeof probes / sizeof *probes; i++) {
        int s = udp_socket(probes[i].to->sa_family, err, cap);
        if (s < 0)
            return -1;
        struct sockaddr_storage self;
        socklen_t len = sizeof self;
        if (connect(s, probes[i].to, probes[i].len) == 0
            && getsockname(s, (struct sockaddr *)&self, &len) == 0)
            connected++;   /* unreachable here is as good: the lookup only asks */
        close(s);
    }
    snprintf(detail, dcap, "getaddrinfo gave %d results; %d of 3 UDP sockets connected by hand, "
             "nothing sent", results, connected);
    return 0;
}

/* A UDP socket connect()ed to 127.0.0.1:port, then one datagram sent on it with send(2): the
 * connect is no contact, the datagram is. */
static int extra_udp_connect_send(int port, char *err, size_t cap, char *detail, size_t dcap)
{
    int s = udp_socket(AF_INET, err, cap);
    if (s < 0)
        return -1;
    char dgram[DATAGRAM_LEN];
    make_datagram(dgram);
    struct sockaddr_in to = loopback4(port);
    ssize_t n = -1;
    if (connect(s, (struct sockaddr *)&to, sizeof to) == 0)
        n = send(s, dgram, sizeof dgram, 0);
    int e = errno;
    close(s);
    if (n != (ssize_t)sizeof dgram) {
        snprintf(err, cap, "connect+send: %s", n < 0 ? strerror(e) : "short send");
        return -1;
    }
    snprintf(detail, dcap, "send 1 datagram of %d bytes on a UDP socket connected to "
             "127.0.0.1:%d", DATAGRAM_LEN, port);
    return 0;
}

/* A TCP connect to 127.0.0.1:port through io_uring (raw syscalls, one IORING_OP_CONNECT). */
static int extra_uring_connect(int port, char *err, size_t cap, char *detail, size_t dcap)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    int ring = (int)syscall(__NR_io_uring_setup, 4, &p);
    if (ring < 0) {
        snprintf(err, cap, "io_uring_setup: %s", strerror(errno));
        return -1;
    }
    int rc = -1, sock = -1;
    size_t sq_size = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_size = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    size_t sqes_size = p.sq_entries * sizeof(struct io_uring_sqe);
    int single = (p.features & IORING_FEAT_SINGLE_MMAP) != 0;
    if (single)
        sq_size = cq_size = sq_size > cq_size ? sq_size : cq_size;
    unsigned char *sq = MAP_FAILED, *cq = MAP_FAILED;
    struct io_uring_sqe *sqes = MAP_FAILED;
    sq = mmap(NULL, sq_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring,
              IORING_OFF_SQ_RING);
    if (sq == MAP_FAILED) {
        snprintf(err, cap, "mmap sq ring: %s", strerror(errno));
        goto out;
    }
    cq = single ? sq
                : mmap(NULL, cq_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring,
                       IORING_OFF_CQ_RING);
    if (cq == MAP_FAILED) {
        snprintf(err, cap, "mmap cq ring: %s", strerror(errno));
        goto out;
    }
    sqes = mmap(NULL, sqes_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring,
                IORING_OFF_SQES);
    if (sqes == MAP_FAILED) {
        snprintf(err, cap, "mmap sqes: %s", strerror(errno));
        goto out;
    }
    sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0) {
        snprintf(err, cap, "socket: %s", strerror(errno));
        goto out;
    }
    struct sockaddr_in to = loopback4(port);

    unsigned *sq_tail = (unsigned *)(sq + p.sq_off.tail);
    unsigned sq_mask = *(unsigned *)(sq + p.sq_off.ring_mask);
    unsigned *sq_array = (unsigned *)(sq + p.sq_off.array);
    unsigned tail = *sq_tail, idx = tail & sq_mask;
    struct io_uring_sqe *sqe = &sqes[idx];
    memset(sqe, 0, sizeof *sqe);
    sqe->opcode = IORING_OP_CONNECT;
    sqe->fd = sock;
    sqe->addr = (uint64_t)(uintptr_t)&to;
    sqe->off = sizeof to; /* the address length goes in `off` for CONNECT */
    sqe->user_data = 0xe9e55;
    sq_array[idx] = idx;
    __atomic_store_n(sq_tail, tail + 1, __ATOMIC_RELEASE);

    unsigned *cq_head = (unsigned *)(cq + p.cq_off.head);
    unsigned *cq_tail = (unsigned *)(cq + p.cq_off.tail);
    unsigned cq_mask = *(unsigned *)(cq + p.cq_off.ring_mask);
    struct io_uring_cqe *cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    unsigned to_submit = 1;
    for (;;) {
        unsigned head = *cq_head;
        if (head != __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE)) {
            struct io_uring_cqe *cqe = &cqes[head & cq_mask];
            int res = cqe->res;
            __atomic_store_n(cq_head, head + 1, __ATOMIC_RELEASE);
            if (res < 0) {
                snprintf(err, cap, "IORING_OP_CONNECT to 127.0.0.1:%d: %s", port, strerror(-res));
            } else {
                snprintf(detail, dcap, "IORING_OP_CONNECT to 127.0.0.1:%d completed (res %d)",
                         port, res);
                rc = 0;
            }
            break;
        }
        long n = syscall(__NR_io_uring_enter, ring, to_submit, 1, IORING_ENTER_GETEVENTS, NULL, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, cap, "io_uring_enter: %s", strerror(errno));
            break;
        }
        if (to_submit && n >= 1)
            to_submit = 0;
    }
out:
    if (sock >= 0)
        close(sock);
    if (sqes != MAP_FAILED)
        munmap(sqes, sqes_size);
    if (cq != MAP_FAILED && cq != sq)
        munmap(cq, cq_size);
    if (sq != MAP_FAILED)
        munmap(sq, sq_size);
    close(ring);
    return rc;
}

/* The grandchild of setsid-daemon: after the original process is gone, egress to the decoy. */
static void daemon_grandchild(int parent_gone_fd, int port) __attribute__((noreturn));
static void daemon_grandchild(int parent_gone_fd, int port)
{
    close(0);
    close(1);
    close(2);
    /* EOF on the pipe = every write end closed = the original process has exited. */
    struct pollfd pfd = { .fd = parent_gone_fd, .events = POLLIN };
    long waited = 0;
    while (waited < DAEMON_WAIT_PARENT_MS) {
        int n = poll(&pfd, 1, 1000);
        if (n < 0 && errno == EINTR)
            continue;
        if (n != 0) {
            char c;
            if (n < 0 || read(parent_gone_fd, &c, 1) <= 0)
                break;
        }
        waited += 1000;
    }
    close(parent_gone_fd);
    sleep_ms(DAEMON_DELAY_MS);

    char dgram[DATAGRAM_LEN];
    make_datagram(dgram);
    struct sockaddr_in to = loopback4(port);
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s >= 0) {
        (void)!sendto(s, dgram, sizeof dgram, 0, (struct sockaddr *)&to, sizeof to);
        close(s);
    }
    s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s >= 0) {
        (void)!connect(s, (struct sockaddr *)&to, sizeof to);
        close(s);
    }
    _exit(0);
}

static int extra_setsid_daemon(int port, char *err, size_t cap, char *detail, size_t dcap)
{
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) < 0) {
        snprintf(err, cap, "pipe2: %s", strerror(errno));
        return -1;
    }
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) {
        snprintf(err, cap, "fork: %s", strerror(errno));
        close(pipefd[0]);
        close(pipefd[1]);
        return -1;
    }
    if (child == 0) {
        close(pipefd[1]); /* only the original keeps a write end */
        if (setsid() < 0)
            _exit(10);
        pid_t grandchild = fork();
        if (grandchild < 0)
            _exit(11);
        if (grandchild == 0)
            daemon_grandchild(pipefd[0], port);
        _exit(0);
    }
    close(pipefd[0]);
    /* pipefd[1] stays open (it is never written) until this process exits. */
    int status = 0;
    while (waitpid(child, &status, 0) < 0) {
        if (errno != EINTR) {
            snprintf(err, cap, "waitpid: %s", strerror(errno));
            return -1;
        }
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(err, cap, "middle child failed (status %d: %s)",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                 WIFEXITED(status) && WEXITSTATUS(status) == 10 ? "setsid" : "fork");
        return -1;
    }
    snprintf(detail, dcap,
             "detached grandchild will sendto and connect 127.0.0.1:%d %d ms after this process "
             "exits", port, DAEMON_DELAY_MS);
    return 0;
}

/* Spin until the process has had ms of CPU: the clock read through the vDSO (no syscall) in
 * the loop, its own CPU time asked (a syscall that makes no progress) every 2^16 turns, so a
 * loaded machine stretches the wall time the spin takes, never the CPU it wastes. */
__attribute__((noinline)) static void spin_cpu(unsigned ms)
{
    struct timespec t;
    long start = process_cpu_ms();
    for (unsigned long turn = 1;; turn++) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (turn % 65536)
            continue;
        if (process_cpu_ms() - start >= (long)ms)
            return;
    }
}

static int extra_fork_spin(char *err, size_t cap, char *detail, size_t dcap)
{
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) {
        snprintf(err, cap, "fork: %s", strerror(errno));
        return -1;
    }
    if (child == 0) {
        spin_cpu(SPIN_MS);
        _exit(0);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0) {
        if (errno != EINTR) {
            snprintf(err, cap, "waitpid: %s", strerror(errno));
            return -1;
        }
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(err, cap, "spinning child ended with wait status %d", status);
        return -1;
    }
    snprintf(detail, dcap, "child %d spun %d ms of its CPU on CLOCK_MONOTONIC (vDSO) and "
             "exited", (int)child, SPIN_MS);
    return 0;
}

enum { THREAD_SPINNERS = 16, PIECE_MS = 40, PIECES = 128, SHORT_PIECE_MS = 5 };

/* Burn ms of the calling thread's own CPU time (a loaded machine stretches the wall time it
 * takes, never the CPU it costs). */
static void burn_cpu(long ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000L + (t.tv_nsec - t0.tv_nsec) / 1000000L < ms);
}

static void *spinner(void *arg)
{
    burn_cpu((long)(intptr_t)arg);
    return NULL;
}

/* threads-spin: THREAD_SPINNERS threads burn PIECE_MS each, side by side. */
static int extra_threads_spin(char *err, size_t cap, char *detail, size_t dcap)
{
    pthread_t th[THREAD_SPINNERS];
    for (int i = 0; i < THREAD_SPINNERS; i++)
        if (pthread_create(&th[i], NULL, spinner, (void *)(intptr_t)PIECE_MS)) {
            snprintf(err, cap, "pthread_create failed");
            return -1;
        }
    for (int i = 0; i < THREAD_SPINNERS; i++)
        pthread_join(th[i], NULL);
    snprintf(detail, dcap, "%d threads burned %d ms of CPU each", THREAD_SPINNERS, PIECE_MS);
    return 0;
}

/* pieces-spin: the source open, PIECES pieces of SHORT_PIECE_MS, a syscall between them. */
static int extra_pieces_spin(const char *path, char *err, size_t cap, char *detail, size_t dcap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, cap, "open: %s", strerror(errno));
        return -1;
    }
    unsigned ids = 0;
    for (int i = 0; i < PIECES; i++) {
        burn_cpu(SHORT_PIECE_MS);
        ids += (unsigned)getuid();   /* a syscall: each piece is a stretch of its own */
    }
    close(fd);
    snprintf(detail, dcap, "%d pieces of %d ms of CPU (uid sum %u)", PIECES, SHORT_PIECE_MS,
             ids);
    return 0;
}

/* ---------- the protocol ---------- */

static int connect_to(const char *host, int port, char *err, size_t cap)
{
    struct sockaddr_storage addr;
    socklen_t addrlen;
    memset(&addr, 0, sizeof addr);
    struct sockaddr_in *a4 = (struct sockaddr_in *)&addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&addr;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        addrlen = sizeof *a4;
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        addrlen = sizeof *a6;
    } else {
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
        int g = getaddrinfo(host, NULL, &hints, &res);
        if (g != 0 || !res) {
            snprintf(err, cap, "cannot connect: %s", gai_strerror(g));
            return -1;
        }
        memcpy(&addr, res->ai_addr, res->ai_addrlen);
        addrlen = res->ai_addrlen;
        freeaddrinfo(res);
        if (addr.ss_family == AF_INET)
            a4->sin_port = htons((uint16_t)port);
        else
            a6->sin6_port = htons((uint16_t)port);
    }
    int sock = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0) {
        snprintf(err, cap, "cannot connect: %s", strerror(errno));
        return -1;
    }
    struct timeval tv = { .tv_sec = SOCKET_TIMEOUT_S };
    setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    while (connect(sock, (struct sockaddr *)&addr, addrlen) < 0) {
        if (errno == EINTR)
            continue;
        snprintf(err, cap, "cannot connect: %s", strerror(errno));
        close(sock);
        return -1;
    }
    return sock;
}

/* One answer line without its '\n'; -1 (err filled) if the connection ends first. */
static int recv_line(int sock, char line[MAX_LINE + 1], char *err, size_t cap)
{
    size_t used = 0;
    for (;;) {
        char c;
        ssize_t n = recv(sock, &c, 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, cap, "connection error: %s", strerror(errno));
            return -1;
        }
        if (n == 0) {
            snprintf(err, cap, "connection closed before a full answer");
            return -1;
        }
        if (c == '\n') {
            line[used] = '\0';
            return 0;
        }
        if (used >= MAX_LINE - 1) {
            snprintf(err, cap, "answer line too long");
            return -1;
        }
        line[used++] = c;
    }
}

/* One PUT on sock, streaming path from byte 0; 0 only on `OK <hex>`. */
static int put(int sock, const char *path, const char *hex, long long length, char *err,
               size_t cap)
{
    char header[128];
    snprintf(header, sizeof header, "PUT %s %lld\n", hex, length);
    if (send_all(sock, header, strlen(header)) < 0) {
        snprintf(err, cap, "connection error during upload: %s", strerror(errno));
        return -1;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, cap, "cannot reopen source: %s", strerror(errno));
        return -1;
    }
    static unsigned char buf[CHUNK];
    long long sent = 0;
    int rc = 0;
    while (is("sendfile-send") && sent < length) {   /* the kernel moves it: no read(2) */
        ssize_t n = sendfile(sock, fd, NULL, (size_t)(length - sent));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            snprintf(err, cap, "sendfile: %s", n < 0 ? strerror(errno) : "source shrank");
            rc = -1;
            break;
        }
        sent += n;
    }
    while (sent < length && rc == 0) {
        size_t want = length - sent < CHUNK ? (size_t)(length - sent) : CHUNK;
        ssize_t n = read(fd, buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, cap, "cannot read source during upload: %s", strerror(errno));
            rc = -1;
            break;
        }
        if (n == 0) {
            snprintf(err, cap, "source shrank to %lld bytes during the upload", sent);
            rc = -1;
            break;
        }
        if (send_payload_chunk(sock, buf, (size_t)n) < 0) {
            snprintf(err, cap, "connection error during upload: %s", strerror(errno));
            rc = -1;
            break;
        }
        sent += n;
    }
    close(fd);
    if (rc < 0)
        return -1;
    char answer[MAX_LINE + 1];
    if (recv_line(sock, answer, err, cap) < 0)
        return -1;
    char expected[128];
    snprintf(expected, sizeof expected, "ok %s", hex);
    if (strcasecmp(answer, expected) == 0)
        return 0;
    if (strncmp(answer, "REJECT ", 7) == 0)
        snprintf(err, cap, "%s", answer + 7);
    else
        snprintf(err, cap, "unexpected answer '%.200s'", answer);
    return -1;
}

/* CHECK, then PUT with retries. 0 on success; *has (-1 unknown, 0 NEED, 1 HAVE), *attempts. */
static int backup(const char *host, int port, const char *path, const char *hex,
                  long long length, int *has, int *attempts, char *reason, size_t cap)
{
    char err[512] = "";
    *has = -1;
    *attempts = 0;
    int sock = connect_to(host, port, err, sizeof err);
    if (sock < 0) {
        snprintf(reason, cap, "%s", err);
        return -1;
    }
    char req[128], answer[MAX_LINE + 1];
    snprintf(req, sizeof req, "CHECK %s\n", hex);
    if (send_all(sock, req, strlen(req)) < 0) {
        snprintf(reason, cap, "check failed: %s", strerror(errno));
        close(sock);
        return -1;
    }
    if (recv_line(sock, answer, err, sizeof err) < 0) {
        snprintf(reason, cap, "check failed: %s", err);
        close(sock);
        return -1;
    }
    if (strcmp(answer, "HAVE") != 0 && strcmp(answer, "NEED") != 0) {
        snprintf(reason, cap, "unexpected answer to CHECK: '%.200s'", answer);
        close(sock);
        return -1;
    }
    *has = strcmp(answer, "HAVE") == 0;
    claim_checked(*has, hex);
    if (*has) {
        close(sock);
        return 0;
    }
    for (int attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
        *attempts = attempt;
        if (attempt > 1) { /* a retry: start over on a new connection */
            if (sock >= 0)
                close(sock);
            sleep_ms(BACKOFF_MS);
            sock = connect_to(host, port, err, sizeof err);
            if (sock < 0)
                continue;
        }
        if (put(sock, path, hex, length, err, sizeof err) == 0) {
            close(sock);
            return 0;
        }
    }
    if (sock >= 0)
        close(sock);
    snprintf(reason, cap, "upload failed after %d attempts: %s", MAX_ATTEMPTS, err);
    return -1;
}

/* ---------- main ---------- */

static int usage(const char *argv0)
{
    fprintf(stderr, "usage: %s MODE HOST PORT SOURCE [DECOY_PORT]\nmodes:", argv0);
    for (size_t i = 0; i < sizeof MODES / sizeof *MODES; i++)
        fprintf(stderr, " %s", MODES[i]);
    fputc('\n', stderr);
    return 2;
}

static int parse_port(const char *text)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < 1 || v > 65535)
        return -1;
    return (int)v;
}

int main(int argc, char **argv)
{
    if (argc < 5)
        return usage(argv[0]);
    int known = 0;
    for (size_t i = 0; i < sizeof MODES / sizeof *MODES; i++)
        known |= strcmp(argv[1], MODES[i]) == 0;
    if (!known)
        return usage(argv[0]);
    mode = argv[1];
    const char *host = argv[2], *source = argv[4];
    int port = parse_port(argv[3]);
    if (port < 0)
        return usage(argv[0]);
    int decoy_port = DEFAULT_DECOY_PORT;
    const char *decoy_error = NULL;
    if (argc >= 6 && (decoy_port = parse_port(argv[5])) < 0) {
        decoy_port = DEFAULT_DECOY_PORT;
        decoy_error = "bad DECOY_PORT, using 9";
    }

    claim_started(source);

    char err[512] = "", detail[512] = "";
    int rc = 0;
    if (is("udp-sendto"))
        rc = extra_udp_sendto(decoy_port, err, sizeof err, detail, sizeof detail);
    else if (is("udp-sendmsg"))
        rc = extra_udp_sendmsg(decoy_port, err, sizeof err, detail, sizeof detail);
    else if (is("udp-sendmmsg"))
        rc = extra_udp_sendmmsg(decoy_port, err, sizeof err, detail, sizeof detail);
    else if (is("uring-connect"))
        rc = extra_uring_connect(decoy_port, err, sizeof err, detail, sizeof detail);
    else if (is("udp6-sendto"))
        rc = extra_udp6_sendto(decoy_port, err, sizeof err, detail, sizeof detail);
    else if (is("addr-probe"))
        rc = extra_addr_probe(decoy_port, err, sizeof err, detail, sizeof detail);
    else if (is("udp-connect-send"))
        rc = extra_udp_connect_send(decoy_port, err, sizeof err, detail, sizeof detail);
    else if (is("setsid-daemon"))
        rc = extra_setsid_daemon(decoy_port, err, sizeof err, detail, sizeof detail);
    else if (is("fork-spin"))
        rc = extra_fork_spin(err, sizeof err, detail, sizeof detail);
    else if (is("dupfd-rehash"))
        rc = extra_dupfd_rehash(source, err, sizeof err, detail, sizeof detail);
    else if (is("alias-rehash"))
        rc = extra_alias_rehash(source, err, sizeof err, detail, sizeof detail);
    else if (is("scm-rehash"))
        rc = extra_scm_rehash(source, err, sizeof err, detail, sizeof detail);
    else if (is("uring-rehash"))
        rc = extra_uring_rehash(source, err, sizeof err, detail, sizeof detail);
    else if (is("uring-splice-rehash"))
        rc = extra_uring_splice_rehash(source, err, sizeof err, detail, sizeof detail);
    else if (is("sqpoll-spin"))
        rc = extra_sqpoll_spin(err, sizeof err, detail, sizeof detail);
    else if (is("copy-rehash") || is("sendfile-copy-rehash") || is("cp-rehash")
             || is("memfd-rehash") || is("memfd-map-rehash"))
        rc = extra_copy_rehash(source, is("copy-rehash") ? "rw" : is("sendfile-copy-rehash")
                               ? "sendfile" : is("cp-rehash") ? "cp" : is("memfd-rehash")
                               ? "memfd" : "memfd-map", err, sizeof err, detail, sizeof detail);
    else if (is("pipe-rehash"))
        rc = extra_pipe_rehash(source, err, sizeof err, detail, sizeof detail);
    else if (is("threads-spin"))
        rc = extra_threads_spin(err, sizeof err, detail, sizeof detail);
    else if (is("pieces-spin"))
        rc = extra_pieces_spin(source, err, sizeof err, detail, sizeof detail);
    if (!is("honest") && !is("mmap-rehash") && !is("mem-rehash") && !is("uring-send")
        && !is("sendmmsg-send") && !is("sendfile-send") && !is("mmap-honest")
        && !is("copy-honest"))
        claim_extra(rc == 0, rc == 0 ? decoy_error : err, rc == 0 ? detail : NULL);

    unsigned char digest[DIGEST_LEN];
    long long length = 0;
    int hashed = 0;
    if (is("copy-honest")) {   /* the digest of a copy, which then goes */
        int in = open(source, O_RDONLY | O_CLOEXEC);
        int out = open("copy.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        rc = in < 0 || out < 0 || copy_fd(in, out, 0) < 0 ? -1 : 0;
        if (in >= 0)
            close(in);
        if (out >= 0)
            close(out);
        hashed = rc == 0 && hash_file("copy.tmp", digest, &length, err, sizeof err) == 0;
        unlink("copy.tmp");
    }
    if (is("mmap-rehash") || is("mem-rehash") || is("mmap-honest")) {
        int mm = !is("mem-rehash");
        rc = mm ? mmap_rehash(source, digest, &length, err, sizeof err)
                : mem_rehash(source, digest, &length, err, sizeof err);
        if (rc == 0)
            snprintf(detail, sizeof detail, "%d SHA-256 passes over %lld bytes %s",
                     is("mmap-honest") ? 1 : mm ? MMAP_ROUNDS : MEM_ROUNDS, length,
                     mm ? "of the read-only mapping" : "read into memory once");
        if (!is("mmap-honest"))
            claim_extra(rc == 0, rc == 0 ? NULL : err, rc == 0 ? detail : NULL);
        hashed = rc == 0; /* on failure, fall back to the honest one-pass hash */
    }
    if (!hashed && hash_file(source, digest, &length, err, sizeof err) < 0) {
        claim_failed(err);
        return 1;
    }
    char hex[HEX_LEN + 1];
    to_hex(digest, hex);

    int has, attempts;
    char reason[1024];
    if (backup(host, port, source, hex, length, &has, &attempts, reason, sizeof reason) < 0) {
        claim_failed(reason);
        return 1;
    }
    if (!has)
        claim_uploaded(length, attempts);
    claim_completed();
    return 0;
}
