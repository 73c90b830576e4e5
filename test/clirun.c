/* SPDX-License-Identifier: BSD-3-Clause */
/* clirun.c: run the built mcroute command as a real process, with a given standard input, and collect what it printed. */
#define _GNU_SOURCE /* posix_openpt, ptsname */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clirun.h"
#include "testutil.h"

/* The buffers of runs not yet given to run_free(): a failed assertion
 * leaves its test with them (CK_FORK=no: Check longjmps out), and
 * run_free_all() frees them from a teardown. */
#define RUNS_MAX 64
static char *g_live[RUNS_MAX];

static void live_add(char *p)
{
    for (int i = 0; i < RUNS_MAX; i++)
        if (g_live[i] == NULL) {
            g_live[i] = p;
            return;
        }
    /* more than RUNS_MAX unfreed runs: not tracked, freed by run_free only */
}

static void live_del(const char *p)
{
    for (int i = 0; p != NULL && i < RUNS_MAX; i++)
        if (g_live[i] == p)
            g_live[i] = NULL;
}

void run_free_all(void)
{
    for (int i = 0; i < RUNS_MAX; i++) {
        free(g_live[i]);
        g_live[i] = NULL;
    }
}

static char *slurp(int fd, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    ssize_t r;
    ck_assert_ptr_nonnull(buf);
    lseek(fd, 0, SEEK_SET);
    while ((r = read(fd, buf + n, cap - n)) > 0) {
        n += (size_t)r;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            ck_assert_ptr_nonnull(buf);
        }
    }
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

/* An unnamed file: made, opened, and unlinked at once. */
static int tmpfd(void)
{
    char *path = tu_temp_file("cli", NULL, 0);
    int fd = open(path, O_RDWR);
    ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
    tu_temp_file_free(path);
    return fd;
}

run run_cli_deadline(const char *in, size_t inlen, const char *const *argv, long deadline_ms)
{
    const char *exe = tu_cli_path();
    int fin = tmpfd(), fout = tmpfd(), ferr = tmpfd();
    if (inlen > 0)
        ck_assert_int_eq(write(fin, in, inlen), (ssize_t)inlen);
    lseek(fin, 0, SEEK_SET);
    int64_t t0;
    if (deadline_ms > 0 && deadline_ms < INT_MAX)
        deadline_ms = mcr_test_ms((int)deadline_ms); /* MCR_TEST_TIME_SCALE */
    t0 = mcr_test_now_ms();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(fin, 0);
        dup2(fout, 1);
        dup2(ferr, 2);
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    for (;;) {
        pid_t w = waitpid(pid, &st, deadline_ms > 0 ? WNOHANG : 0);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR)
            ck_abort_msg("waitpid: %s", strerror(errno));
        if (deadline_ms > 0 && mcr_test_now_ms() - t0 > deadline_ms) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            break;
        }
        if (w == 0) {
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
        }
    }
    run r;
    r.ms = (long)(mcr_test_now_ms() - t0);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = slurp(fout, &r.outlen);
    r.err = slurp(ferr, NULL);
    live_add(r.out);
    live_add(r.err);
    close(fin);
    close(fout);
    close(ferr);
    return r;
}

run run_cli(const char *in, size_t inlen, const char *const *argv)
{
    return run_cli_deadline(in, inlen, argv, 0);
}

void run_free(run *r)
{
    live_del(r->out);
    live_del(r->err);
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

void expect_usage_error(const char *const *argv, const char *needle)
{
    run r = run_cli(NULL, 0, argv);
    ck_assert_msg(r.status == 2, "%s %s: status %d, stderr %s", argv[1], argv[2] ? argv[2] : "",
                  r.status, r.err);
    ck_assert_msg(r.outlen == 0, "%s: stdout not empty: %s", argv[1], r.out);
    ck_assert_msg(strstr(r.err, needle) != NULL, "stderr \"%s\" lacks \"%s\"", r.err, needle);
    run_free(&r);
}

char *run_cli_pty(const char *const *argv, const char *stdin_path, int stdout_too, int *status)
{
    const char *exe = tu_cli_path();
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    ck_assert_int_ge(m, 0);
    ck_assert_int_eq(grantpt(m), 0);
    ck_assert_int_eq(unlockpt(m), 0);
    char *slave = strdup(ptsname(m));
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int s = open(slave, O_RDWR | O_NOCTTY);
        int in = open(stdin_path, O_RDONLY);
        int nul = open("/dev/null", O_WRONLY);
        if (s < 0 || in < 0 || nul < 0)
            _exit(126);
        dup2(in, 0);
        dup2(stdout_too ? s : nul, 1);
        dup2(s, 2);
        close(m);
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    free(slave);
    fcntl(m, F_SETFL, O_NONBLOCK);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    int exited = 0, st = 0;
    for (;;) {
        if (n + 4096 > cap)
            buf = realloc(buf, (cap *= 2) + 1);
        ssize_t r = read(m, buf + n, cap - n);
        if (r > 0) {
            n += (size_t)r;
            continue;
        }
        if (exited)
            break; /* drained: EAGAIN or EIO once the child is gone */
        if (waitpid(pid, &st, WNOHANG) == pid) {
            exited = 1;
            continue;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    close(m);
    buf[n] = '\0';
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return buf;
}

int run_cli_bg(const char *log, const char *const *argv)
{
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int in = open("/dev/null", O_RDONLY);
        int out = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (in < 0 || out < 0)
            _exit(126);
        dup2(in, 0);
        dup2(out, 1);
        dup2(out, 2);
        execv(tu_cli_path(), (char *const *)argv);
        _exit(127);
    }
    return (int)pid;
}
