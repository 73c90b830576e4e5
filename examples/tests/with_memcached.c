/* SPDX-License-Identifier: BSD-3-Clause */
/* with_memcached.c: test driver of the examples: starts N real memcached on loopback, runs a command against them, stops them.
 *
 * Usage: with_memcached [-n N] [-t SECONDS] [-l LOGDIR] [-e REGEX]... -- COMMAND [ARG...]
 *
 * Starts N (default 3) memcached processes on 127.0.0.1, on ports the
 * kernel picks (test/realserver.c), waits until each accepts connections,
 * then runs COMMAND with every "@SERVERS@" in its arguments replaced by
 * "127.0.0.1:P1,127.0.0.1:P2,...". The command also finds the list in
 * $MCR_EXAMPLE_SERVERS and the servers' process ids, in the same order, in
 * $MCR_EXAMPLE_PIDS (a test may SIGSTOP one to provoke a timeout).
 *
 * Each -e REGEX (POSIX extended; '.' also matches a newline) must match the
 * command's standard output, which is passed through as it comes; the test
 * fails (status 1) when one does not, even if the command exits 0. ctest's
 * PASS_REGULAR_EXPRESSION would instead ignore the exit status.
 *
 * The command runs in its own process group and gets SIGKILL (the whole
 * group) when it outlives SECONDS (default 25), or when this driver dies
 * (Linux). The memcached processes are stopped in every case.
 *
 * Exit status: the command's, 124 on timeout, 125 when the servers cannot be
 * started (or a usage error), 126 when the command cannot be run, 1 when
 * the command exits 0 but an expected output is missing; 125 too when there
 * is no memcached binary (a failure that says so, never a skip).
 */
#include <errno.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "realserver.h"
#include "testutil.h"

#define MAX_SERVERS 16
#define MAX_EXPECT 16
#define OUTPUT_MAX (4u << 20) /* output kept for the -e checks */
#define START_TIMEOUT_MS 5000
#define PLACEHOLDER "@SERVERS@"

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void usage(void)
{
    fprintf(stderr, "usage: with_memcached [-n N] [-t SECONDS] [-l LOGDIR] [-e REGEX]... -- "
                    "COMMAND [ARG...]\n");
    exit(125);
}

/* Replace every PLACEHOLDER of `arg` by `list` (a new string). */
static char *substitute(const char *arg, const char *list)
{
    size_t n = 0, pl = strlen(PLACEHOLDER), ll = strlen(list);
    for (const char *p = strstr(arg, PLACEHOLDER); p != NULL; p = strstr(p + pl, PLACEHOLDER))
        n++;
    char *out = malloc(strlen(arg) + n * ll + 1);
    if (out == NULL)
        return NULL;
    char *o = out;
    const char *p = arg;
    for (const char *q; (q = strstr(p, PLACEHOLDER)) != NULL; p = q + pl) {
        memcpy(o, p, (size_t)(q - p));
        o += q - p;
        memcpy(o, list, ll);
        o += ll;
    }
    strcpy(o, p);
    return out;
}

/* The command's standard output, kept for the -e checks. */
typedef struct output {
    char *buf;
    size_t len;
} output;

/* Copy what the pipe holds to stdout and to out. 0 at end of file. */
static int pump(int fd, output *out)
{
    char chunk[4096];
    ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n < 0)
        return errno == EINTR || errno == EAGAIN ? 1 : 0;
    if (n == 0)
        return 0;
    fwrite(chunk, 1, (size_t)n, stdout);
    fflush(stdout);
    if (out->len + (size_t)n <= OUTPUT_MAX) {
        memcpy(out->buf + out->len, chunk, (size_t)n);
        out->len += (size_t)n;
        out->buf[out->len] = '\0';
    }
    return 1;
}

/* Run argv in its own process group, its stdout into *out; its exit
 * status, 124 on timeout. */
static int run(char **argv, int timeout_s, output *out)
{
    pid_t parent = getpid();
    int fds[2];
    if (pipe(fds) != 0) {
        perror("with_memcached: pipe");
        return 126;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("with_memcached: fork");
        return 126;
    }
    if (pid == 0) {
        setpgid(0, 0);
#ifdef __linux__
        prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
        if (getppid() != parent)
            _exit(126);
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execvp(argv[0], argv);
        fprintf(stderr, "with_memcached: %s: %s\n", argv[0], strerror(errno));
        _exit(126);
    }
    setpgid(pid, pid); /* also here: no race with the kill below */
    close(fds[1]);
    long long end = now_ms() + (long long)timeout_s * 1000;
    int open = 1, rc = -1;
    while (rc < 0) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            if (WIFEXITED(st)) {
                rc = WEXITSTATUS(st);
            } else {
                fprintf(stderr, "with_memcached: %s killed by signal %d\n", argv[0],
                        WTERMSIG(st));
                rc = 128 + WTERMSIG(st);
            }
        } else if (r < 0 && errno != EINTR) {
            perror("with_memcached: waitpid");
            rc = 126;
        } else if (now_ms() >= end) {
            fprintf(stderr, "with_memcached: %s still running after %d s: killed\n", argv[0],
                    timeout_s);
            kill(-pid, SIGKILL);
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
            }
            rc = 124;
        } else if (open) {
            struct pollfd p = {fds[0], POLLIN, 0};
            if (poll(&p, 1, 5) > 0)
                open = pump(fds[0], out);
        } else {
            struct timespec ts = {0, 5 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    /* What is left in the pipe; a process the command left behind that
     * still holds it open gets one second. */
    long long drain_end = now_ms() + 1000;
    while (open && now_ms() < drain_end) {
        struct pollfd p = {fds[0], POLLIN, 0};
        if (poll(&p, 1, 50) > 0)
            open = pump(fds[0], out);
        else if (rc != 124)
            break;
    }
    close(fds[0]);
    return rc;
}

int main(int argc, char **argv)
{
    int n = 3, timeout_s = 25, opt;
    const char *logdir = NULL, *expect[MAX_EXPECT];
    int nexpect = 0;
    while ((opt = getopt(argc, argv, "+n:t:l:e:")) != -1) {
        switch (opt) {
        case 'n':
            n = atoi(optarg);
            break;
        case 't':
            timeout_s = atoi(optarg);
            break;
        case 'l':
            logdir = optarg;
            break;
        case 'e':
            if (nexpect == MAX_EXPECT)
                usage();
            expect[nexpect++] = optarg;
            break;
        default:
            usage();
        }
    }
    if (optind >= argc || n < 1 || n > MAX_SERVERS || timeout_s < 1)
        usage();
    /* -t grows with MCR_TEST_TIME_SCALE (test/testutil.h), as ctest's
     * TIMEOUT does; the command sees the scale in its environment. */
    timeout_s = mcr_test_ms(timeout_s * 1000) / 1000 + 1;
    {
        char scale[32];
        snprintf(scale, sizeof(scale), "%.17g", mcr_test_time_scale());
        setenv("MCR_TEST_TIME_SCALE", scale, 1);
    }
    if (!rs_executable(rs_memcached_path())) {
        fprintf(stderr,
                "with_memcached: %s is not an executable (Debian package memcached, "
                "or set $MCR_MEMCACHED)\n",
                rs_memcached_path());
        return 125;
    }

    rs_proc procs[MAX_SERVERS];
    char list[MAX_SERVERS * 24] = "", pids[MAX_SERVERS * 12] = "";
    for (int i = 0; i < n; i++) {
        char log[4096];
        if (logdir != NULL)
            snprintf(log, sizeof(log), "%s/memcached.%d.log", logdir, i);
        if (rs_memcached_start(&procs[i], "127.0.0.1", 0, logdir != NULL ? log : NULL,
                               START_TIMEOUT_MS) != 0) {
            fprintf(stderr, "with_memcached: cannot start memcached %d of %d\n", i + 1, n);
            rs_stop_all();
            return 125;
        }
        size_t l = strlen(list), q = strlen(pids);
        snprintf(list + l, sizeof(list) - l, "%s127.0.0.1:%d", i ? "," : "", procs[i].port);
        snprintf(pids + q, sizeof(pids) - q, "%s%d", i ? "," : "", (int)procs[i].pid);
    }
    setenv("MCR_EXAMPLE_SERVERS", list, 1);
    setenv("MCR_EXAMPLE_PIDS", pids, 1);
    fprintf(stderr, "with_memcached: memcached on %s\n", list);

    int nargs = argc - optind;
    char **args = calloc((size_t)nargs + 1, sizeof(*args));
    int rc = args == NULL ? 126 : 0;
    for (int i = 0; i < nargs && rc == 0; i++)
        if ((args[i] = substitute(argv[optind + i], list)) == NULL)
            rc = 126;
    output out = {malloc(OUTPUT_MAX + 1), 0};
    if (out.buf == NULL)
        rc = 126;
    else
        out.buf[0] = '\0';
    if (rc == 0)
        rc = run(args, timeout_s, &out);
    for (int i = 0; args != NULL && i < nargs; i++)
        free(args[i]);
    free(args);
    rs_stop_all();
    for (int i = 0; i < nexpect && rc == 0; i++) {
        regex_t re;
        if (regcomp(&re, expect[i], REG_EXTENDED | REG_NOSUB) != 0) {
            fprintf(stderr, "with_memcached: bad regular expression \"%s\"\n", expect[i]);
            rc = 125;
            break;
        }
        if (regexec(&re, out.buf, 0, NULL, 0) != 0) {
            fprintf(stderr, "with_memcached: the output does not match \"%s\"\n", expect[i]);
            rc = 1;
        }
        regfree(&re);
    }
    free(out.buf);
    return rc;
}
