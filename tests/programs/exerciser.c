/*
 * A test subject whose every syscall the test controls. Steps run in argv order:
 *   read:FILE:N       read N bytes of FILE with read(2)
 *   pread:FILE:N      ... with pread64(2)
 *   readv:FILE:N      ... with readv(2), two iovecs
 *   preadv:FILE:N     ... with preadv(2)
 *   forkread:FILE:N   open FILE, fork; the child reads N bytes from the inherited fd and
 *                     exits; the parent waits, then reads N more bytes
 *   connect:PORT:K    K connect(2) calls to 127.0.0.1:PORT (refused ones included)
 *   send:PORT:N       connect once, send N bytes each with write, send, sendmsg, writev
 *   sendfile:PORT:FILE:N  connect once, sendfile(2) N bytes of FILE to the socket
 *   call:M            call the noinline function counted_fn M times
 *   spin:MS           spin on the CPU for MS milliseconds
 *   cpuspin:MS        spin until the thread has had MS milliseconds of CPU (however loaded the
 *                     machine is: the wall time it takes grows instead)
 *   sleep:MS          nanosleep(2) for MS milliseconds (the task blocks: a voluntary switch)
 *   thread:FILE:N     a second thread reads N bytes of FILE with read(2)
 *   threadexec        a second thread execs this program with the steps that follow (the
 *                     process then has the exiting leader's tid, not the thread's)
 *   mmap:FILE:K       map FILE (private, read-only) and read every byte of it K times,
 *                     madvise(MADV_DONTNEED) between passes (each pass faults the pages in)
 *   mmapcow:FILE:K    the same, but each page is first written (private copy-on-write faults)
 *   copy:FILE:DEST:HOW  copy FILE to DEST (created) with HOW = rw (read + write), sendfile or
 *                     cfr (copy_file_range)
 *   memfd:FILE:K      copy FILE into a memfd (read + write), then pread it all K times
 *   memfdmap:FILE:K   copy FILE into a memfd, then map it and read it K times (DONTNEED between)
 *   pipe:FILE:K       a child reads FILE once and writes it K times into a pipe; this process
 *                     reads it all
 *   write:FILE:N:HOW  create FILE and write N bytes to it with HOW = write, pwrite, writev,
 *                     pwritev, splice (from a pipe) or uring (io_uring IORING_OP_WRITE: no
 *                     write(2) at all)
 *   fsops:DIR:K       K rounds in DIR, each: a file made, renamed with rename(2), again with
 *                     renameat(2) and renameat2(2), unlinked with unlink(2); another made and
 *                     unlinked with unlinkat(2); a folder made with mkdir(2) and removed with
 *                     rmdir(2), another with mkdirat(2) and unlinkat(AT_REMOVEDIR); a hard
 *                     link made with link(2) and another with linkat(2), a symbolic link with
 *                     symlink(2) and another with symlinkat(2), each unlinked
 *   mapwrite:FILE:N   FILE made N bytes long (ftruncate) and filled through a shared writable
 *                     mapping: stores, no write(2) at all
 *   mapread:FILE      FILE (existing) opened read-only and mapped shared, read-only
 *   uringfs:DIR:K     K rounds in DIR through io_uring alone (no naming syscall), each: a file
 *                     made (OPENAT), renamed (RENAMEAT), hard-linked (LINKAT), symlinked
 *                     (SYMLINKAT), all three unlinked (UNLINKAT), a folder made (MKDIRAT) and
 *                     removed (UNLINKAT AT_REMOVEDIR); every path relative to DIR's descriptor
 *   put:FILE:TEXT     write TEXT to FILE (existing), in one write(2); in FILE, "PID" is this
 *                     process's pid and "TID" its thread's (/proc/PID/task/TID/comm)
 *   putother:NAME:TEXT  write TEXT to another process's /proc/CHILD/NAME (a child made for it)
 *   meta:FILE:HOW     one change of FILE's metadata (to what it already is), refused or not,
 *                     by HOW: chmod fchmod fchmodat fchmodat2 fchmodat2-empty (AT_EMPTY_PATH on
 *                     a descriptor), chown fchown lchown fchownat fchownat-empty, utime utimes
 *                     utimensat futimens futimesat, setxattr lsetxattr fsetxattr setxattrat,
 *                     removexattr lremovexattr fremovexattr removexattrat, truncate ftruncate
 *                     fallocate, or through io_uring: uring-fsetxattr uring-setxattr
 *                     uring-fallocate uring-ftruncate; descriptors are FILE opened read-only
 * Exits 0 when every step did exactly what it says.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>

#include "uring.h"

static char buf[1 << 20];
static volatile long sink;

__attribute__((noinline)) void counted_fn(long i) { sink += i; }

static void die(const char *what) { perror(what); exit(1); }

static void read_exact(int fd, long n, const char *how)
{
    long off = 0;
    while (off < n) {
        long want = n - off > 4096 ? 4096 : n - off;
        ssize_t got;
        if (!strcmp(how, "read")) {
            got = read(fd, buf, want);
        } else if (!strcmp(how, "pread")) {
            got = pread(fd, buf, want, off);
        } else if (!strcmp(how, "readv")) {
            struct iovec iov[2] = { { buf, want / 2 }, { buf + want / 2, want - want / 2 } };
            got = readv(fd, iov, 2);
        } else {
            struct iovec iov = { buf, want };
            got = preadv(fd, &iov, 1, off);
        }
        if (got <= 0)
            die(how);
        off += got;
    }
}

/* N bytes into a new FILE, 4096 at a time, by one write path. */
static void write_file(const char *path, long n, const char *how)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600), p[2] = { -1, -1 };
    struct ring r = { .fd = -1 };
    if (fd < 0)
        die(path);
    if ((!strcmp(how, "splice") && pipe(p)) || (!strcmp(how, "uring") && ring_open(&r, 0, 0)))
        die(how);
    memset(buf, 'w', sizeof(buf));
    for (long off = 0; off < n;) {
        long want = n - off > 4096 ? 4096 : n - off;
        ssize_t put;
        if (!strcmp(how, "write")) {
            put = write(fd, buf, want);
        } else if (!strcmp(how, "pwrite")) {
            put = pwrite(fd, buf, want, off);
        } else if (!strcmp(how, "writev")) {
            struct iovec iov[2] = { { buf, want / 2 }, { buf + want / 2, want - want / 2 } };
            put = writev(fd, iov, 2);
        } else if (!strcmp(how, "pwritev")) {
            struct iovec iov = { buf, want };
            put = pwritev(fd, &iov, 1, off);
        } else if (!strcmp(how, "splice")) {
            if (write(p[1], buf, want) != want)
                die("pipe write");
            put = splice(p[0], NULL, fd, NULL, want, 0);
        } else {
            put = ring_do(&r, IORING_OP_WRITE, fd, buf, (unsigned)want, (uint64_t)off);
        }
        if (put <= 0)
            die(how);
        off += put;
    }
    if (p[0] >= 0) {
        close(p[0]);
        close(p[1]);
    }
    if (r.fd >= 0)
        ring_close(&r);
    close(fd);
}

/* K rounds of every naming operation in dir (see the usage above). */
static void fs_ops(const char *dir, long rounds)
{
    char a[8192], b[4096], c[4096], d[4096];
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd < 0)
        die(dir);
    for (long k = 0; k < rounds; k++) {
        snprintf(a, sizeof a, "%s/a%ld", dir, k);
        snprintf(b, sizeof b, "%s/b%ld", dir, k);
        int fd = open(a, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0)
            die("open");
        close(fd);
        if (rename(a, b))
            die("rename");
        snprintf(c, sizeof c, "c%ld", k);
        snprintf(d, sizeof d, "d%ld", k);
        if (renameat(AT_FDCWD, b, dfd, c) || syscall(SYS_renameat2, dfd, c, dfd, d, 0))
            die("renameat");
        snprintf(a, sizeof a, "%s/%s", dir, d);
        if (unlink(a))
            die("unlink");
        fd = openat(dfd, c, O_WRONLY | O_CREAT, 0600);
        if (fd < 0)
            die("openat");
        close(fd);
        if (unlinkat(dfd, c, 0))
            die("unlinkat");
        snprintf(a, sizeof a, "%s/e%ld", dir, k);
        if (mkdir(a, 0700) || rmdir(a))
            die("mkdir/rmdir");
        snprintf(c, sizeof c, "f%ld", k);
        if (mkdirat(dfd, c, 0700) || unlinkat(dfd, c, AT_REMOVEDIR))
            die("mkdirat/unlinkat");
        snprintf(a, sizeof a, "%s/g%ld", dir, k);
        snprintf(b, sizeof b, "%s/h%ld", dir, k);
        snprintf(c, sizeof c, "i%ld", k);
        snprintf(d, sizeof d, "j%ld", k);
        fd = open(a, O_WRONLY | O_CREAT, 0600);
        if (fd < 0)
            die("open");
        close(fd);
        if (link(a, b) || linkat(AT_FDCWD, b, dfd, c, 0))
            die("link/linkat");
        if (unlink(b) || unlinkat(dfd, c, 0))
            die("unlink links");
        snprintf(b, sizeof b, "%s/k%ld", dir, k);
        if (symlink(a, b) || symlinkat("g", dfd, d))
            die("symlink/symlinkat");
        if (unlink(b) || unlinkat(dfd, d, 0) || unlink(a))
            die("unlink symlinks");
    }
    close(dfd);
}

/* One io_uring request naming files (see the usage above): fd and addr, len, addr2 as the
   op reads them, and the op's own flags word; its result. */
static int uring_named(struct ring *r, int op, int fd, const char *addr, unsigned len,
                       const char *addr2, unsigned flags)
{
    struct io_uring_sqe *sqe = ring_sqe(r);
    sqe->opcode = (unsigned char)op;
    sqe->fd = fd;
    sqe->addr = (uint64_t)(uintptr_t)addr;
    sqe->len = len;
    sqe->addr2 = (uint64_t)(uintptr_t)addr2;
    sqe->rename_flags = flags;   /* one union: open_flags, unlink_flags, hardlink_flags too */
    return ring_submit(r);
}

/* K rounds of io_uring's naming requests in dir (see the usage above). */
static void uring_fs(const char *dir, long rounds)
{
    char a[64], b[64], c[64], d[64];
    struct ring r;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd < 0 || ring_open(&r, 0, 0))
        die("uringfs");
    for (long k = 0; k < rounds; k++) {
        snprintf(a, sizeof a, "ua%ld", k);
        snprintf(b, sizeof b, "ub%ld", k);
        snprintf(c, sizeof c, "uc%ld", k);
        snprintf(d, sizeof d, "ud%ld", k);
        int fd = uring_named(&r, IORING_OP_OPENAT, dfd, a, 0600, 0, O_WRONLY | O_CREAT);
        if (fd < 0)
            die("OPENAT");
        close(fd);
        if (uring_named(&r, IORING_OP_RENAMEAT, dfd, a, (unsigned)dfd, b, 0)
            || uring_named(&r, IORING_OP_LINKAT, dfd, b, (unsigned)dfd, c, 0)
            || uring_named(&r, IORING_OP_SYMLINKAT, dfd, b, 0, d, 0))
            die("RENAMEAT/LINKAT/SYMLINKAT");
        if (uring_named(&r, IORING_OP_UNLINKAT, dfd, b, 0, 0, 0)
            || uring_named(&r, IORING_OP_UNLINKAT, dfd, c, 0, 0, 0)
            || uring_named(&r, IORING_OP_UNLINKAT, dfd, d, 0, 0, 0))
            die("UNLINKAT");
        if (uring_named(&r, IORING_OP_MKDIRAT, dfd, a, 0700, 0, 0)
            || uring_named(&r, IORING_OP_UNLINKAT, dfd, a, 0, 0, AT_REMOVEDIR))
            die("MKDIRAT/UNLINKAT");
    }
    ring_close(&r);
    close(dfd);
}

/* FILE filled through a shared mapping (mapwrite), or mapped shared read-only (mapread). */
static void map_file(const char *path, long n, int write)
{
    int fd = write ? open(path, O_RDWR | O_CREAT | O_TRUNC, 0600) : open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || (write && ftruncate(fd, n)) || (!write && fstat(fd, &st)))
        die(path);
    size_t len = write ? (size_t)n : (size_t)st.st_size;
    char *m = mmap(NULL, len, write ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        die("mmap");
    if (write) {
        memset(m, 'm', len);
        msync(m, len, MS_SYNC);
    } else {
        for (size_t i = 0; i < len; i += 4096)
            sink += m[i];
    }
    munmap(m, len);
    close(fd);
}

/* FILE's "PID" and "TID" replaced by this process's and thread's ids; TEXT written to it. */
static void put(const char *file, const char *text)
{
    char path[4096] = "", num[32];
    for (const char *p = file; *p;) {
        int pid = !strncmp(p, "PID", 3), tid = !strncmp(p, "TID", 3);
        if (pid || tid) {
            snprintf(num, sizeof num, "%ld", pid ? (long)getpid() : (long)gettid());
            p += 3;
        } else {
            snprintf(num, sizeof num, "%c", *p++);
        }
        strncat(path, num, sizeof path - strlen(path) - 1);
    }
    int fd = open(path, O_WRONLY);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        die(path);
    close(fd);
}

/* TEXT written to /proc/CHILD/NAME of a child that waits on a pipe meanwhile. */
static void put_other(const char *name, const char *text)
{
    int p[2];
    char path[256];
    if (pipe(p))
        die("pipe");
    pid_t pid = fork();
    if (pid == 0) {
        close(p[1]);
        read(p[0], buf, 1);
        _exit(0);
    }
    close(p[0]);
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
    put(path, text);
    close(p[1]);
    int status;
    waitpid(pid, &status, 0);
}

struct xattr_args_ { uint64_t value; uint32_t size, flags; };

/* One change of path's metadata by how (see the usage); its result is not looked at: a
   refused change is still the attempt the test counts. */
static void meta(const char *path, const char *how)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    struct timespec ts[2] = { { 0, UTIME_OMIT }, { 0, UTIME_OMIT } };
    struct timeval tv[2];
    struct ring r;
    if (fd < 0 || fstat(fd, &st))
        die(path);
    struct utimbuf ub = { st.st_atime, st.st_mtime };
    tv[0] = (struct timeval){ st.st_atime, 0 };
    tv[1] = (struct timeval){ st.st_mtime, 0 };
    mode_t mode = st.st_mode & 07777;
    struct xattr_args_ args = { (uint64_t)(uintptr_t)"1", 1, 0 };
    const char *x = "user.evlab";
    if (!strcmp(how, "chmod")) chmod(path, mode);
    else if (!strcmp(how, "fchmod")) fchmod(fd, mode);
    else if (!strcmp(how, "fchmodat")) fchmodat(AT_FDCWD, path, mode, 0);
    else if (!strcmp(how, "fchmodat2")) syscall(452, AT_FDCWD, path, mode, 0);
    else if (!strcmp(how, "fchmodat2-empty")) syscall(452, fd, "", mode, AT_EMPTY_PATH);
    else if (!strcmp(how, "chown")) chown(path, st.st_uid, st.st_gid);
    else if (!strcmp(how, "fchown")) fchown(fd, st.st_uid, st.st_gid);
    else if (!strcmp(how, "lchown")) lchown(path, st.st_uid, st.st_gid);
    else if (!strcmp(how, "fchownat")) fchownat(AT_FDCWD, path, st.st_uid, st.st_gid, 0);
    else if (!strcmp(how, "fchownat-empty")) fchownat(fd, "", st.st_uid, st.st_gid, AT_EMPTY_PATH);
    else if (!strcmp(how, "utime")) utime(path, &ub);
    else if (!strcmp(how, "utimes")) utimes(path, tv);
    else if (!strcmp(how, "utimensat")) utimensat(AT_FDCWD, path, ts, 0);
    else if (!strcmp(how, "futimens")) futimens(fd, ts);
    else if (!strcmp(how, "futimesat")) syscall(SYS_futimesat, AT_FDCWD, path, tv);
    else if (!strcmp(how, "setxattr")) setxattr(path, x, "1", 1, 0);
    else if (!strcmp(how, "lsetxattr")) lsetxattr(path, x, "1", 1, 0);
    else if (!strcmp(how, "fsetxattr")) fsetxattr(fd, x, "1", 1, 0);
    else if (!strcmp(how, "setxattrat")) syscall(463, AT_FDCWD, path, 0, x, &args, sizeof args);
    else if (!strcmp(how, "removexattr")) removexattr(path, x);
    else if (!strcmp(how, "lremovexattr")) lremovexattr(path, x);
    else if (!strcmp(how, "fremovexattr")) fremovexattr(fd, x);
    else if (!strcmp(how, "removexattrat")) syscall(466, AT_FDCWD, path, 0, x);
    else if (!strcmp(how, "truncate")) truncate(path, st.st_size);
    else if (!strcmp(how, "ftruncate")) ftruncate(fd, st.st_size);   /* EINVAL: read-only */
    else if (!strcmp(how, "fallocate")) fallocate(fd, 0, 0, 1);       /* EBADF: read-only */
    else if (!strncmp(how, "uring-", 6)) {
        if (ring_open(&r, 0, 0))
            die("io_uring");
        struct io_uring_sqe *sqe = ring_sqe(&r);
        sqe->fd = fd;
        if (!strcmp(how, "uring-fsetxattr") || !strcmp(how, "uring-setxattr")) {
            int named = !strcmp(how, "uring-setxattr");
            sqe->opcode = named ? IORING_OP_SETXATTR : IORING_OP_FSETXATTR;
            sqe->addr = (uint64_t)(uintptr_t)x;
            sqe->addr2 = (uint64_t)(uintptr_t)"1";
            sqe->len = 1;
            if (named)
                sqe->addr3 = (uint64_t)(uintptr_t)path;
        } else if (!strcmp(how, "uring-fallocate")) {
            sqe->opcode = IORING_OP_FALLOCATE;
            sqe->addr = 1;   /* its length */
        } else if (!strcmp(how, "uring-ftruncate")) {
            sqe->opcode = IORING_OP_FTRUNCATE;
            sqe->off = (uint64_t)st.st_size;
        } else {
            die(how);
        }
        ring_submit(&r);
        ring_close(&r);
    } else {
        die(how);
    }
    close(fd);
}

static int open_or_die(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        die(path);
    return fd;
}

static int connect_port(int port)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
        close(s);
        return -1;
    }
    return s;
}

static void write_all(int s, long n, int how)
{
    memset(buf, 'x', n);
    long off = 0;
    while (off < n) {
        ssize_t got;
        if (how == 0) {
            got = write(s, buf + off, n - off);
        } else if (how == 1) {
            got = send(s, buf + off, n - off, 0);
        } else if (how == 2) {
            struct iovec iov = { buf + off, n - off };
            struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
            got = sendmsg(s, &m, 0);
        } else {
            struct iovec iov = { buf + off, n - off };
            got = writev(s, &iov, 1);
        }
        if (got <= 0)
            die("send");
        off += got;
    }
}

struct thread_job { const char *path; long n; };
static void *thread_read(void *arg)
{
    struct thread_job *job = arg;
    int fd = open_or_die(job->path);
    read_exact(fd, job->n, "read");
    close(fd);
    return NULL;
}

static long file_size(int fd)
{
    struct stat st;
    if (fstat(fd, &st))
        die("fstat");
    return st.st_size;
}

// K passes over a mapping of fd's first n bytes; `cow` writes each page before reading it.
static void mapped_passes(int fd, long n, long k, int cow)
{
    char *m = mmap(NULL, n, PROT_READ | (cow ? PROT_WRITE : 0), cow ? MAP_PRIVATE : MAP_SHARED,
                   fd, 0);
    if (m == MAP_FAILED)
        die("mmap");
    for (long pass = 0; pass < k; pass++) {
        if (pass && madvise(m, n, MADV_DONTNEED))
            die("madvise");
        long sum = 0;
        for (long off = 0; off < n; off++) {
            if (cow && off % 4096 == 0)   // written first: a copy-on-write fault reads it
                ((volatile char *)m)[off] = 1;
            sum += m[off];
        }
        sink += sum;
    }
    munmap(m, n);
}

// n bytes of `in` written to `out` with read + write.
static void copy_rw(int in, int out, long n)
{
    for (long done = 0; done < n;) {
        long want = n - done > (long)sizeof(buf) ? (long)sizeof(buf) : n - done;
        ssize_t got = read(in, buf, want);
        if (got <= 0)
            die("read");
        for (ssize_t w = 0; w < got;) {
            ssize_t put = write(out, buf + w, got - w);
            if (put <= 0)
                die("write");
            w += put;
        }
        done += got;
    }
}

static int memfd_copy(const char *path, long *n)
{
    int in = open_or_die(path), fd = memfd_create("copy", 0);
    if (fd < 0)
        die("memfd_create");
    *n = file_size(in);
    copy_rw(in, fd, *n);
    close(in);
    return fd;
}

struct exec_job { char **argv; };
static void *thread_exec(void *arg)
{
    struct exec_job *job = arg;
    execv("/proc/self/exe", job->argv);
    die("execv");
    return NULL;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        char *step = strdup(argv[i]);
        char *kind = strtok(step, ":"), *a = strtok(NULL, ":"), *b = strtok(NULL, ":"),
             *c = strtok(NULL, ":");
        if (!strcmp(kind, "read") || !strcmp(kind, "pread") || !strcmp(kind, "readv") ||
            !strcmp(kind, "preadv")) {
            int fd = open_or_die(a);
            read_exact(fd, atol(b), kind);
            close(fd);
        } else if (!strcmp(kind, "forkread")) {
            int fd = open_or_die(a);
            pid_t pid = fork();
            if (pid == 0) {
                read_exact(fd, atol(b), "read");
                _exit(0);
            }
            int status;
            waitpid(pid, &status, 0);
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                die("child");
            read_exact(fd, atol(b), "read");
            close(fd);
        } else if (!strcmp(kind, "connect")) {
            for (int k = 0; k < atoi(b); k++) {
                int s = connect_port(atoi(a));
                if (s >= 0)
                    close(s);
            }
        } else if (!strcmp(kind, "send")) {
            int s = connect_port(atoi(a));
            if (s < 0)
                die("connect");
            for (int how = 0; how < 4; how++)
                write_all(s, atol(b), how);
            close(s);
        } else if (!strcmp(kind, "sendfile")) {
            int s = connect_port(atoi(a)), fd = open_or_die(b);
            long left = atol(c);
            while (left > 0) {
                ssize_t n = sendfile(s, fd, NULL, left);
                if (n <= 0)
                    die("sendfile");
                left -= n;
            }
            close(fd);
            close(s);
        } else if (!strcmp(kind, "call")) {
            for (long k = 0; k < atol(a); k++)
                counted_fn(k);
        } else if (!strcmp(kind, "spin")) {
            struct timespec t0, t;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            do
                clock_gettime(CLOCK_MONOTONIC, &t);
            while ((t.tv_sec - t0.tv_sec) * 1000L + (t.tv_nsec - t0.tv_nsec) / 1000000L < atol(a));
        } else if (!strcmp(kind, "cpuspin")) {
            struct timespec t0, t;
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
            do
                clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
            while ((t.tv_sec - t0.tv_sec) * 1000L + (t.tv_nsec - t0.tv_nsec) / 1000000L < atol(a));
        } else if (!strcmp(kind, "sleep")) {
            struct timespec t = { atol(a) / 1000, (atol(a) % 1000) * 1000000L };
            nanosleep(&t, NULL);
        } else if (!strcmp(kind, "thread")) {
            struct thread_job job = { a, atol(b) };
            pthread_t th;
            pthread_create(&th, NULL, thread_read, &job);
            pthread_join(th, NULL);
        } else if (!strcmp(kind, "threadexec")) {
            argv[i] = argv[0];   // the new image runs the steps after this one
            struct exec_job job = { argv + i };
            pthread_t th;
            pthread_create(&th, NULL, thread_exec, &job);
            pthread_join(th, NULL);   // never returns: the exec ends this thread
            die("threadexec");
        } else if (!strcmp(kind, "mmap") || !strcmp(kind, "mmapcow")) {
            int fd = open_or_die(a);
            mapped_passes(fd, file_size(fd), atol(b), !strcmp(kind, "mmapcow"));
            close(fd);
        } else if (!strcmp(kind, "copy")) {
            int in = open_or_die(a), out = open(b, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            long n = file_size(in);
            if (out < 0)
                die("open");
            if (!strcmp(c, "rw"))
                copy_rw(in, out, n);
            for (long left = n; strcmp(c, "rw") && left > 0;) {
                ssize_t moved = !strcmp(c, "sendfile") ? sendfile(out, in, NULL, left)
                                : copy_file_range(in, NULL, out, NULL, left, 0);
                if (moved <= 0)
                    die(c);
                left -= moved;
            }
            close(in);
            close(out);
        } else if (!strcmp(kind, "memfd") || !strcmp(kind, "memfdmap")) {
            long n;
            int fd = memfd_copy(a, &n);
            if (!strcmp(kind, "memfdmap"))
                mapped_passes(fd, n, atol(b), 0);
            for (long k = 0; !strcmp(kind, "memfd") && k < atol(b); k++)
                read_exact(fd, n, "pread");
            close(fd);
        } else if (!strcmp(kind, "pipe")) {
            int p[2];
            if (pipe(p))
                die("pipe");
            pid_t pid = fork();
            if (pid == 0) {
                close(p[0]);
                int in = open_or_die(a);
                long n = file_size(in);
                read_exact(in, n, "read");
                for (long k = 0; k < atol(b); k++)
                    for (long w = 0; w < n;) {
                        ssize_t put = write(p[1], buf + w, n - w);
                        if (put <= 0)
                            die("write");
                        w += put;
                    }
                _exit(0);
            }
            close(p[1]);
            while (read(p[0], buf, sizeof(buf)) > 0)
                ;
            close(p[0]);
            int status;
            waitpid(pid, &status, 0);
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                die("child");
        } else if (!strcmp(kind, "write")) {
            write_file(a, atol(b), c);
        } else if (!strcmp(kind, "fsops")) {
            fs_ops(a, atol(b));
        } else if (!strcmp(kind, "mapwrite") || !strcmp(kind, "mapread")) {
            map_file(a, b ? atol(b) : 0, !strcmp(kind, "mapwrite"));
        } else if (!strcmp(kind, "uringfs")) {
            uring_fs(a, atol(b));
        } else if (!strcmp(kind, "put")) {
            put(a, b);
        } else if (!strcmp(kind, "putother")) {
            put_other(a, b);
        } else if (!strcmp(kind, "meta")) {
            meta(a, b);
        } else {
            fprintf(stderr, "unknown step %s\n", kind);
            return 2;
        }
        free(step);
    }
    return 0;
}
