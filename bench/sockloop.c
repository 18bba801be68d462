/*
 * The bench's socket-heavy client, for the cost of evlab's cgroup socket hooks.
 *
 * Usage: bench-sockloop udp N PORT      N sendto() calls of 16 bytes, one unconnected UDP
 *                                       socket, to 127.0.0.1:PORT
 *        bench-sockloop send N PORT     one UDP socket connect()ed to 127.0.0.1:PORT, then N
 *                                       send() calls of 16 bytes
 *        bench-sockloop connect N PORT  N times socket() + SO_LINGER 0 + connect() + close()
 *                                       of a TCP socket to 127.0.0.1:PORT
 *        bench-sockloop accept FD       the server side of connect: accept() and close() on
 *                                       the listening socket FD (inherited) until killed
 *
 * The truth for udp is N sendmsg hook calls and N datagrams of 16 payload bytes; for send, one
 * connect hook call (UDP connect) and N datagrams, no sendmsg hook call (a connected socket's
 * sends carry no address, and the kernel runs that hook only on those that do). connect
 * closes with SO_LINGER {1, 0}: the close is a RST, so no TIME_WAIT socket holds a local port
 * (tens of thousands of connects a run would otherwise run the ephemeral ports dry), and a
 * connection is normally three packets out (SYN, ACK, RST). The bench runs `accept` outside the
 * client's cgroup: a server that falls behind lets the listen queue overflow, and each SYN the
 * kernel then drops costs the client a one-second retransmission.
 * On success prints the loop's own time in nanoseconds (CLOCK_MONOTONIC around the N calls,
 * process start-up and exit excluded) and exits 0; exits 1 at the first failing call (named on
 * stderr), 2 on a usage error.
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int udp(long n, const struct sockaddr_in *to, int connected, long long *loop_ns)
{
    char payload[16];
    memset(payload, 'x', sizeof payload);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) {
        perror("socket");
        return 1;
    }
    if (connected && connect(fd, (const struct sockaddr *)to, sizeof *to) != 0) {
        perror("connect");
        return 1;
    }
    long long started = now_ns();
    for (long i = 0; i < n; i++) {
        ssize_t sent = connected ? send(fd, payload, sizeof payload, 0)
                                 : sendto(fd, payload, sizeof payload, 0,
                                          (const struct sockaddr *)to, sizeof *to);
        if (sent != (ssize_t)sizeof payload) {
            fprintf(stderr, "%s %ld of %ld: ", connected ? "send" : "sendto", i + 1, n);
            perror(NULL);
            return 1;
        }
    }
    *loop_ns = now_ns() - started;
    close(fd);
    return 0;
}

static int tcp_connect(long n, const struct sockaddr_in *to, long long *loop_ns)
{
    const struct linger rst = { .l_onoff = 1, .l_linger = 0 };
    long long started = now_ns();
    for (long i = 0; i < n; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) {
            perror("socket");
            return 1;
        }
        if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &rst, sizeof rst) != 0) {
            perror("setsockopt SO_LINGER");
            return 1;
        }
        if (connect(fd, (const struct sockaddr *)to, sizeof *to) != 0) {
            fprintf(stderr, "connect %ld of %ld: ", i + 1, n);
            perror(NULL);
            return 1;
        }
        close(fd);
    }
    *loop_ns = now_ns() - started;
    return 0;
}

static int accept_loop(int listener)
{
    for (;;) {
        int fd = accept(listener, NULL, NULL);
        if (fd >= 0)
            close(fd);
        else if (errno != EINTR && errno != ECONNABORTED) {
            perror("accept");
            return 1;
        }
    }
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "accept") == 0)
        return accept_loop((int)strtol(argv[2], NULL, 10));
    const char *mode = argc == 4 ? argv[1] : "";
    if (strcmp(mode, "udp") != 0 && strcmp(mode, "send") != 0 && strcmp(mode, "connect") != 0) {
        fprintf(stderr, "usage: %s udp|send|connect N PORT | accept FD\n", argv[0]);
        return 2;
    }
    long n = strtol(argv[2], NULL, 10), port = strtol(argv[3], NULL, 10);
    if (n < 0 || port <= 0 || port > 65535) {
        fprintf(stderr, "N must be >= 0 and PORT 1..65535\n");
        return 2;
    }
    struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    long long loop_ns = 0;
    int failed = strcmp(mode, "connect") == 0 ? tcp_connect(n, &to, &loop_ns)
                                              : udp(n, &to, strcmp(mode, "send") == 0, &loop_ns);
    if (!failed)
        printf("%lld\n", loop_ns);
    return failed;
}
