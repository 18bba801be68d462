/*
 * A test subject that operates: it signals processes and truncates files by every route, and
 * exactly as told. Steps run in argv order:
 *   child             fork a child that waits (pause) for signals; SIGUSR1 is caught (the
 *                     handler is set before the fork), anything fatal ends it; children are
 *                     numbered from 0 in the order made
 *   pgchild           the same, in a process group of its own
 *   kill:N:SIG        kill(child N, SIG)
 *   tkill:N:SIG       tkill(child N, SIG)
 *   tgkill:N:SIG      tgkill(child N, child N, SIG)
 *   pidfd:N:SIG       pidfd_send_signal(pidfd_open(child N), SIG)
 *   sigqueue:N:SIG    rt_sigqueueinfo(child N, SIG) with SI_QUEUE
 *   group0:SIG        kill(0, SIG): its own process group (itself and the children in it)
 *   pgrp:N:SIG        kill(-child N, SIG): child N's process group (a pgchild's)
 *   all:SIG           kill(-1, SIG): every process it may signal (run it in a pid namespace)
 *   wait:N            wait for child N to end
 *   selfexit:CODE     fork a child that exits by itself with CODE; wait for it
 *   sibling:SIG       fork a child that waits, and another that kills it with SIG and exits 0;
 *                     wait for both
 *   truncate:FILE:LEN, ftruncate:FILE:LEN, otrunc:FILE, punch:FILE:LEN
 *                     FILE truncated by truncate(2), by ftruncate(2), by open(O_WRONLY|O_TRUNC),
 *                     or a hole of LEN bytes punched at 0 (fallocate PUNCH_HOLE|KEEP_SIZE)
 *   uring-ftruncate:FILE:LEN, uring-otrunc:FILE, uring-punch:FILE:LEN
 *                     the same through io_uring (FTRUNCATE, OPENAT with O_TRUNC, FALLOCATE)
 *   hold:FILE         keep FILE open for writing, twice over (a descriptor and its dup)
 *   holdfar:FILE      keep FILE open for writing at descriptor 900 alone (its table grown to
 *                     1,024 slots)
 *   creat:FILE        open(O_WRONLY|O_CREAT|O_TRUNC) of a FILE that does not exist (truncates
 *                     nothing)
 * Exits 0 when every step did what it says (a refused call is a failure).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "uring.h"

static pid_t children[64];
static int nchildren;

static void caught(int sig) { (void)sig; }

static void fail(const char *what)
{
    perror(what);
    exit(1);
}

static pid_t waiter(int own_group)
{
    pid_t pid = fork();
    if (pid < 0)
        fail("fork");
    if (pid == 0) {
        if (own_group)
            setpgid(0, 0);
        for (;;)
            pause();
    }
    if (own_group)
        setpgid(pid, pid);   /* either may run first: both set it */
    return pid;
}

static void ok(long r, const char *what)
{
    if (r < 0)
        fail(what);
}

static void signal_step(const char *how, char *rest)
{
    int n = atoi(strtok(rest, ":"));
    char *s = strtok(NULL, ":");
    int sig = s ? atoi(s) : n;
    pid_t pid = children[n];
    if (!strcmp(how, "kill")) {
        ok(kill(pid, sig), "kill");
    } else if (!strcmp(how, "tkill")) {
        ok(syscall(SYS_tkill, pid, sig), "tkill");
    } else if (!strcmp(how, "tgkill")) {
        ok(syscall(SYS_tgkill, pid, pid, sig), "tgkill");
    } else if (!strcmp(how, "pidfd")) {
        int fd = syscall(SYS_pidfd_open, pid, 0);
        ok(fd, "pidfd_open");
        ok(syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0), "pidfd_send_signal");
        close(fd);
    } else if (!strcmp(how, "sigqueue")) {
        siginfo_t info;
        memset(&info, 0, sizeof(info));
        info.si_signo = sig;
        info.si_code = SI_QUEUE;
        info.si_pid = getpid();
        info.si_uid = getuid();
        ok(syscall(SYS_rt_sigqueueinfo, pid, sig, &info), "rt_sigqueueinfo");
    } else if (!strcmp(how, "pgrp")) {
        ok(kill(-pid, sig), "kill -pgid");
    }
}

static void truncate_step(const char *how, char *rest)
{
    char *file = strtok(rest, ":");
    char *len = strtok(NULL, ":");
    long n = len ? atol(len) : 0;
    if (!strncmp(how, "uring-", 6)) {
        struct ring r;
        if (ring_open(&r, 0, 0))
            fail("io_uring");
        int otrunc = !strcmp(how, "uring-otrunc");
        int fd = otrunc ? AT_FDCWD : open(file, O_RDWR);
        ok(fd == AT_FDCWD ? 0 : fd, "open");
        struct io_uring_sqe *sqe = ring_sqe(&r);
        sqe->fd = fd;
        if (otrunc) {
            sqe->opcode = IORING_OP_OPENAT;
            sqe->addr = (uint64_t)(uintptr_t)file;
            sqe->open_flags = O_WRONLY | O_TRUNC;
        } else if (!strcmp(how, "uring-ftruncate")) {
            sqe->opcode = IORING_OP_FTRUNCATE;
            sqe->off = (uint64_t)n;
        } else {
            sqe->opcode = IORING_OP_FALLOCATE;
            sqe->addr = (uint64_t)n;   /* its length, at offset 0 */
            sqe->len = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
        }
        int res = ring_submit(&r);
        ok(res, how);
        if (otrunc)
            close(res);
        else
            close(fd);
        ring_close(&r);
    } else if (!strcmp(how, "truncate")) {
        ok(truncate(file, n), "truncate");
    } else if (!strcmp(how, "otrunc") || !strcmp(how, "creat")) {
        int fd = open(file, O_WRONLY | O_TRUNC | (how[0] == 'c' ? O_CREAT | O_EXCL : 0), 0644);
        ok(fd, "open O_TRUNC");
        close(fd);
    } else if (!strcmp(how, "hold")) {
        int fd = open(file, O_WRONLY | O_APPEND);
        ok(fd, "open");
        ok(dup(fd), "dup");
    } else if (!strcmp(how, "holdfar")) {
        int fd = open(file, O_WRONLY | O_APPEND);
        ok(fd, "open");
        ok(dup2(fd, 900), "dup2");
        close(fd);
    } else {
        int fd = open(file, O_RDWR);
        ok(fd, "open");
        if (!strcmp(how, "ftruncate"))
            ok(ftruncate(fd, n), "ftruncate");
        else
            ok(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, n), "fallocate");
        close(fd);
    }
}

static void reap(pid_t pid, int want_status)
{
    int status;
    if (waitpid(pid, &status, 0) != pid)
        fail("waitpid");
    if (want_status >= 0 && status != want_status) {
        fprintf(stderr, "status %#x, not %#x\n", status, want_status);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    signal(SIGUSR1, caught);
    for (int i = 1; i < argc; i++) {
        char step[4096];
        snprintf(step, sizeof(step), "%s", argv[i]);
        char *colon = strchr(step, ':');
        char *rest = colon ? colon + 1 : step + strlen(step);
        if (colon)
            *colon = 0;
        if (!strcmp(step, "child") || !strcmp(step, "pgchild")) {
            children[nchildren++] = waiter(step[0] == 'p');
        } else if (!strcmp(step, "group0")) {
            ok(kill(0, atoi(rest)), "kill 0");
        } else if (!strcmp(step, "all")) {
            ok(kill(-1, atoi(rest)), "kill -1");
        } else if (!strcmp(step, "wait")) {
            reap(children[atoi(rest)], -1);
        } else if (!strcmp(step, "selfexit")) {
            pid_t pid = fork();
            if (pid == 0)
                _exit(atoi(rest));
            reap(pid, atoi(rest) << 8);
        } else if (!strcmp(step, "sibling")) {
            pid_t victim = waiter(0), killer = fork();
            if (killer == 0)
                _exit(kill(victim, atoi(rest)) ? 1 : 0);
            reap(killer, 0);
            reap(victim, atoi(rest));
        } else if (strstr("truncate ftruncate otrunc punch hold holdfar creat uring-ftruncate "
                          "uring-otrunc "
                          "uring-punch", step)) {
            truncate_step(step, rest);
        } else {
            signal_step(step, rest);
        }
    }
    return 0;
}
