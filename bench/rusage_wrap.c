/*
 * Run a command and write its own resource usage to a file, so that a tracer wrapped around
 * this program (strace -f) can be told apart from the traced client.
 *
 * Usage: bench-rusage-wrap OUTFILE COMMAND [ARG...]
 *
 * OUTFILE receives one line: "utime_us stime_us maxrss_kb wait_status" of COMMAND (with any
 * children it reaped). Exits with COMMAND's exit status (128 + signal if it was killed).
 */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s OUTFILE COMMAND [ARG...]\n", argv[0]);
        return 2;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 2;
    }
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        perror(argv[2]);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0) {
        perror("wait4");
        return 2;
    }
    FILE *out = fopen(argv[1], "w");
    if (!out) {
        perror(argv[1]);
        return 2;
    }
    fprintf(out, "%ld %ld %ld %d\n",
            (long)ru.ru_utime.tv_sec * 1000000L + (long)ru.ru_utime.tv_usec,
            (long)ru.ru_stime.tv_sec * 1000000L + (long)ru.ru_stime.tv_usec,
            ru.ru_maxrss, status);
    fclose(out);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
